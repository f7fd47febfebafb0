package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// Ops that select or reorder elements by a data-dependent mask or length:
// NonZero, Compress and ReverseSequence.

var selectOps = []*Schema{
	// NonZero-13 only added bfloat16.
	{Name: "NonZero", Since: 9, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferNonZero, Run: runNonZero},
	{Name: "NonZero", Since: 13, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferNonZero, Run: runNonZero},
	// Compress-11 allows a negative axis.
	{Name: "Compress", Since: 9, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt}}, Types: allTypes, Infer: inferCompress, Run: runCompress},
	{Name: "Compress", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt}}, Types: allTypes, Infer: inferCompress, Run: runCompress},
	{Name: "ReverseSequence", Since: 10, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("batch_axis", 1), defInt("time_axis", 0)},
		Types: allTypes, Infer: inferReverseSequence, Run: runReverseSequence},
}

func init() { register(selectOps) }

// --- NonZero -------------------------------------------------------------------

// nonZeroRank is the number of coordinates NonZero gives per element: a
// scalar counts as a one-element vector (numpy's nonzero on a 0-d array,
// ONNX's reference, and ONNX Runtime).
func nonZeroRank(rank int) int { return max(rank, 1) }

func inferNonZero(c *InferContext) error {
	x := c.In(0)
	rows := ir.UnknownDim()
	if x.Shape.Ranked {
		rows = ir.D(int64(nonZeroRank(x.Shape.Rank())))
	}
	count := dataDim(c, 0)
	if n := x.Shape.NumElements(); n == 0 {
		count = ir.D(0)
	}
	if t := c.Const(0); t != nil {
		count = ir.D(int64(trueCount(isNonZero(t))))
	}
	c.Set(0, ir.TensorType(ir.Int64, ir.ShapeOf(rows, count)))
	return nil
}

// isNonZero reports whether each element is nonzero: a nonzero number,
// true, or a non-empty string (numpy's truth of each).
func isNonZero(t *ir.Tensor) []bool {
	out := make([]bool, t.Len())
	if t.DType == ir.String {
		for i, s := range t.Strings {
			out[i] = s != ""
		}
		return out
	}
	for i, v := range Float64s(t) {
		out[i] = v != 0 // NaN is nonzero
	}
	return out
}

// runNonZero lists the coordinates of the nonzero elements, one column
// each, in row-major order.
func runNonZero(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	nz := isNonZero(x)
	var count int64
	for _, b := range nz {
		if b {
			count++
		}
	}
	rank := nonZeroRank(len(x.Dims))
	dims := x.Dims
	if len(dims) == 0 {
		dims = []int64{1}
	}
	out := ir.NewTensor(ir.Int64, int64(rank), count)
	d := out.Int64s()
	coord := make([]int64, rank)
	col := int64(0)
	for _, b := range nz {
		if b {
			for a, v := range coord {
				d[int64(a)*count+col] = v
			}
			col++
		}
		for a := rank - 1; a >= 0; a-- {
			if coord[a]++; coord[a] < dims[a] {
				break
			}
			coord[a] = 0
		}
	}
	c.Set(0, out)
	return nil
}

// --- Compress ------------------------------------------------------------------

// compressAxis resolves Compress's axis against rank: -1 when absent
// (the input is flattened), negative values from the back from v11.
// CompressAxis is a Compress node's axis for an input of rank rank, as
// the reference resolves it: -1 when absent (x flattened); a negative axis
// needs Compress-11.
func (c *KernelContext) CompressAxis(rank int) (int, error) {
	axis, err := compressAxis(c.attrs, c.Opset, rank)
	if err != nil {
		return 0, c.Errorf("%v", err)
	}
	return axis, nil
}

func compressAxis(a attrs, opset int64, rank int) (int, error) {
	if !a.Has("axis") {
		return -1, nil
	}
	axis := a.Int("axis")
	if axis < 0 && opset < 11 {
		return 0, fmt.Errorf("axis %d: a negative axis needs Compress-11", axis)
	}
	return NormAxis(axis, rank)
}

func inferCompress(c *InferContext) error {
	x, cond := c.In(0), c.In(1)
	if cond.Elem != ir.Undefined && cond.Elem != ir.Bool {
		return c.Errorf("condition is %s, want bool", cond.Elem)
	}
	if cond.Shape.Ranked && cond.Shape.Rank() != 1 {
		return c.Errorf("condition has shape %s, want one dimension", cond.Shape)
	}
	count := dataDim(c, 0)
	if t := c.Const(1); t != nil && t.DType == ir.Bool {
		count = ir.D(int64(trueCount(Bools(t))))
	}
	if !x.Shape.Ranked {
		if c.Has("axis") {
			c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
			return nil
		}
		c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(count)))
		return nil
	}
	axis, err := compressAxis(c.attrs, c.Opset, x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	if axis < 0 {
		c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(count)))
		return nil
	}
	out := x.Shape.Clone()
	out.Dims[axis] = count
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

func trueCount(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// runCompress keeps the slices along axis (or the elements of the
// flattened input) whose condition is true. A condition shorter than the
// axis drops the rest, as numpy.compress does; one longer must be false
// past the axis' end.
func runCompress(c *KernelContext) error {
	x, cond := c.In(0), c.In(1)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	if cond.DType != ir.Bool || len(cond.Dims) != 1 {
		return c.Errorf("condition is %s%v, want a 1-D bool tensor", cond.DType, ir.FormatList(cond.Dims))
	}
	axis, err := compressAxis(c.attrs, c.Opset, len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := x.Dims
	if axis < 0 {
		dims, axis = []int64{x.Len()}, 0
	}
	var keep []int64
	for i, b := range Bools(cond) {
		if !b {
			continue
		}
		if int64(i) >= dims[axis] {
			return c.Errorf("condition selects index %d of an axis of length %d", i, dims[axis])
		}
		keep = append(keep, int64(i))
	}
	outer, inner := ir.Product(dims[:axis]), ir.Product(dims[axis+1:])
	idx := make([]int, 0, outer*int64(len(keep))*inner)
	for o := int64(0); o < outer; o++ {
		for _, k := range keep {
			base := (o*dims[axis] + k) * inner
			for i := int64(0); i < inner; i++ {
				idx = append(idx, int(base+i))
			}
		}
	}
	out := append([]int64{}, dims...)
	out[axis] = int64(len(keep))
	c.Set(0, takeElems(x, out, idx, nil))
	return nil
}

// --- ReverseSequence -----------------------------------------------------------

// reverseAxes are ReverseSequence's batch and time axes, each 0 or 1 and
// distinct.
func reverseAxes(a attrs) (batch, time int, err error) {
	b, t := a.Int("batch_axis"), a.Int("time_axis")
	if b < 0 || b > 1 || t < 0 || t > 1 || b == t {
		return 0, 0, fmt.Errorf("batch_axis %d and time_axis %d must be 0 and 1, in either order", b, t)
	}
	return int(b), int(t), nil
}

func inferReverseSequence(c *InferContext) error {
	x, lens := c.In(0), c.In(1)
	b, _, err := reverseAxes(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if lens.Elem != ir.Undefined && lens.Elem != ir.Int64 {
		return c.Errorf("sequence_lens is %s, want int64", lens.Elem)
	}
	if x.Shape.Ranked && x.Shape.Rank() < 2 {
		return c.Errorf("input has shape %s, want rank 2 or more", x.Shape)
	}
	if n := vectorLen(lens); x.Shape.Ranked && n >= 0 && x.Shape.Dims[b].IsStatic() && int64(n) != x.Shape.Dims[b].Value {
		return c.Errorf("sequence_lens has %d entries for a batch of %d", n, x.Shape.Dims[b].Value)
	}
	c.Set(0, x.Clone())
	return nil
}

// runReverseSequence reverses, for each batch entry b, the first
// sequence_lens[b] steps along the time axis and keeps the rest.
func runReverseSequence(c *KernelContext) error {
	x, lt := c.In(0), c.In(1)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	b, t, err := reverseAxes(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(x.Dims) < 2 {
		return c.Errorf("input has shape %v, want rank 2 or more", ir.FormatList(x.Dims))
	}
	if lt.DType != ir.Int64 || len(lt.Dims) != 1 || lt.Dims[0] != x.Dims[b] {
		return c.Errorf("sequence_lens is %s%v, want int64[%d] (one per batch entry)", lt.DType, ir.FormatList(lt.Dims), x.Dims[b])
	}
	lens := lt.Int64s()
	steps := x.Dims[t]
	for i, l := range lens {
		if l < 0 || l > steps {
			return c.Errorf("sequence_lens[%d] is %d, outside [0, %d]", i, l, steps)
		}
	}
	st := Strides(x.Dims)
	inner := ir.Product(x.Dims[2:])
	idx := make([]int, x.Len())
	for k := range idx {
		idx[k] = k
	}
	for bi, l := range lens {
		for s := int64(0); s < l; s++ {
			dst, src := int64(bi)*st[b]+s*st[t], int64(bi)*st[b]+(l-1-s)*st[t]
			for i := int64(0); i < inner; i++ {
				idx[dst+i] = int(src + i)
			}
		}
	}
	c.Set(0, takeElems(x, x.Dims, idx, nil))
	return nil
}
