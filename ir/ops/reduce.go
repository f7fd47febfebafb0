package ops

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The reduce family: ReduceX over a set of axes, ArgMax/ArgMin, TopK and
// CumSum. All of them (and the normalizations in norm.go) walk a tensor as
// groups of elements that share their coordinates on the kept axes: the
// reduction type of util_reduce.go.

// axisMask marks the given axes (possibly negative, no repeats) of a
// rank-rank tensor.
func axisMask(axes []int64, rank int) ([]bool, error) {
	norm, err := normAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	set := make([]bool, rank)
	for _, a := range norm {
		set[a] = true
	}
	return set, nil
}

// reducedDims is the shape after reducing the marked axes: 1 there with
// keepdims, else without them.
func reducedDims[D any](dims []D, reduced []bool, keep bool, one D) []D {
	out := make([]D, 0, len(dims))
	for i, d := range dims {
		switch {
		case !reduced[i]:
			out = append(out, d)
		case keep:
			out = append(out, one)
		}
	}
	return out
}

// orderKeys returns an integer tensor's elements as int64 whose signed order
// is the elements' order: uint64 values have their top bit flipped, since
// Int64s wraps those above MaxInt64 to negatives. fromOrderKeys undoes it.
func orderKeys(t *ir.Tensor) []int64 {
	v := Int64s(t)
	if t.DType == ir.Uint64 {
		for i := range v {
			v[i] ^= math.MinInt64
		}
	}
	return v
}

func fromOrderKeys(dtype ir.DType, dims []int64, v []int64) *ir.Tensor {
	if dtype == ir.Uint64 {
		for i := range v {
			v[i] ^= math.MinInt64
		}
	}
	return FromInt64s(dtype, dims, v)
}

// keyBounds is the least and greatest order key of an integer type (for
// empty ReduceMax/ReduceMin).
func keyBounds(d ir.DType) (lo, hi int64) {
	switch d {
	case ir.Bool:
		return 0, 1
	case ir.Int8:
		return math.MinInt8, math.MaxInt8
	case ir.Uint8:
		return 0, math.MaxUint8
	case ir.Int16:
		return math.MinInt16, math.MaxInt16
	case ir.Uint16:
		return 0, math.MaxUint16
	case ir.Int32:
		return math.MinInt32, math.MaxInt32
	case ir.Uint32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64 // int64, and uint64 in key form
}

// Element types: ReduceX take ONNX's "high-precision numeric" types;
// ReduceMax/ReduceMin add 8-bit integers (opset 12) and bool (opset 20).
var (
	reduceTypes       = concatTypes(floatTypes, []ir.DType{ir.Int32, ir.Int64, ir.Uint32, ir.Uint64})
	reduceMinMaxTypes = concatTypes(reduceTypes, []ir.DType{ir.Int8, ir.Uint8, ir.Bool})
)

// reduceOp is one ReduceX operator: how it folds a group computed in
// float64, and in int64 for integer types (nil: integers go through
// float64 too, for the ops with logarithms and roots). A fold sees an empty
// group for reductions over a zero-sized axis and returns the op's identity
// there, as ONNX specifies since opset 18.
type reduceOp struct {
	name string
	// axesInput is the opset from which axes is an input, not an attribute.
	axesInput int64
	types     []ir.DType
	viaFloat  func(xs []float64) float64
	// lo and hi are the type's least and greatest value (in order-key form),
	// the identities of max and min.
	viaInt func(xs []int64, lo, hi int64) int64
}

var reduceOps = []reduceOp{
	{"ReduceSum", 13, reduceTypes, sumF, func(xs []int64, _, _ int64) int64 { return sumI(xs) }},
	{"ReduceMean", 18, reduceTypes, func(xs []float64) float64 { return sumF(xs) / float64(len(xs)) },
		func(xs []int64, _, _ int64) int64 {
			if len(xs) == 0 {
				return 0
			}
			return sumI(xs) / int64(len(xs))
		}},
	{"ReduceProd", 18, reduceTypes, func(xs []float64) float64 {
		p := 1.0
		for _, x := range xs {
			p *= x
		}
		return p
	}, func(xs []int64, _, _ int64) int64 {
		p := int64(1)
		for _, x := range xs {
			p *= x
		}
		return p
	}},
	{"ReduceMax", 18, reduceMinMaxTypes, func(xs []float64) float64 {
		m := math.Inf(-1)
		for _, x := range xs {
			if x > m || math.IsNaN(x) {
				m = x
			}
		}
		return m
	}, func(xs []int64, lo, _ int64) int64 {
		for _, x := range xs {
			lo = max(lo, x)
		}
		return lo
	}},
	{"ReduceMin", 18, reduceMinMaxTypes, func(xs []float64) float64 {
		m := math.Inf(1)
		for _, x := range xs {
			if x < m || math.IsNaN(x) {
				m = x
			}
		}
		return m
	}, func(xs []int64, _, hi int64) int64 {
		for _, x := range xs {
			hi = min(hi, x)
		}
		return hi
	}},
	{"ReduceL1", 18, reduceTypes, func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += math.Abs(x)
		}
		return s
	}, func(xs []int64, _, _ int64) int64 {
		var s int64
		for _, x := range xs {
			s += max(x, -x)
		}
		return s
	}},
	{"ReduceL2", 18, reduceTypes, func(xs []float64) float64 { return math.Sqrt(sumSquareF(xs)) }, nil},
	{"ReduceSumSquare", 18, reduceTypes, sumSquareF, func(xs []int64, _, _ int64) int64 {
		var s int64
		for _, x := range xs {
			s += x * x
		}
		return s
	}},
	{"ReduceLogSum", 18, reduceTypes, func(xs []float64) float64 { return math.Log(sumF(xs)) }, nil},
	{"ReduceLogSumExp", 18, reduceTypes, logSumExp, nil},
}

func sumF(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func sumI(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func sumSquareF(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x * x
	}
	return s
}

// logSumExp is log(sum(exp(x))), shifted by the maximum so large inputs do
// not overflow; -Inf for an empty group (log of an empty sum).
func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// reduceRows makes the two rows of a ReduceX op: axes as an attribute
// from opset 1 (negative axes from 11, which the first row accepts), and
// as an optional input with noop_with_empty_axes from op.axesInput.
func reduceRows(op reduceOp) []*Schema {
	keepdims := defInt("keepdims", 1)
	return []*Schema{{
		Name: op.name, Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("axes"), keepdims},
		Types: op.types, Infer: inferReduce(false), Run: runReduce(op, false),
	}, {
		Name: op.name, Since: op.axesInput, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{keepdims, defInt("noop_with_empty_axes", 0)},
		Types: op.types, Infer: inferReduce(true), Run: runReduce(op, true),
	}}
}

// reduceAxes is the axes a ReduceX node names: from the attribute, or from
// input 1 (axesTensor, nil when absent). noop reports that the node is the
// identity (no axes and noop_with_empty_axes); otherwise no axes means all.
func reduceAxes(a attrs, axesInput bool, axesTensor *ir.Tensor) (axes []int64, noop bool) {
	if !axesInput {
		return a.Ints("axes"), false
	}
	if axesTensor != nil {
		axes = Int64s(axesTensor)
	}
	return axes, len(axes) == 0 && a.Int("noop_with_empty_axes") != 0
}

func inferReduce(axesInput bool) func(c *InferContext) error {
	return func(c *InferContext) error {
		x := c.In(0)
		keep := c.Int("keepdims") != 0
		if axesInput && c.HasInput(1) && c.Const(1) == nil {
			// The axes are only known at run time: so are the output dims.
			// The rank is known with keepdims, or from the axes' length.
			axesLen := int64(-1)
			if n, ok := c.In(1).Shape.Ints(); ok && len(n) == 1 {
				axesLen = n[0]
			}
			if axesLen == 0 {
				return inferReduceAxes(c, x, nil, keep, c.Int("noop_with_empty_axes") != 0)
			}
			out := ir.TensorType(x.Elem, ir.Shape{})
			if x.Shape.Ranked && (keep || axesLen > 0) {
				rank := len(x.Shape.Dims)
				if !keep {
					rank -= int(axesLen)
				}
				if rank < 0 {
					return c.Errorf("reduces %d axes of a rank-%d input", axesLen, len(x.Shape.Dims))
				}
				out.Shape = ir.Shape{Ranked: true, Dims: make([]ir.Dim, rank)}
				for i := range out.Shape.Dims {
					out.Shape.Dims[i] = ir.UnknownDim()
					if d := x.Shape.Dims[i]; keep && d.IsStatic() && d.Value == 1 {
						out.Shape.Dims[i] = ir.D(1)
					}
				}
			}
			c.Set(0, out)
			return nil
		}
		axes, noop := reduceAxes(c.attrs, axesInput, c.Const(1))
		return inferReduceAxes(c, x, axes, keep, noop)
	}
}

func inferReduceAxes(c *InferContext, x ir.Type, axes []int64, keep, noop bool) error {
	if noop || !x.Shape.Ranked {
		c.Set(0, x.Clone())
		return nil
	}
	reduced, err := reduceMask(axes, len(x.Shape.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(reducedDims(x.Shape.Dims, reduced, keep, ir.D(1))...)))
	return nil
}

// reduceMask is axisMask where no axes means every axis.
func reduceMask(axes []int64, rank int) ([]bool, error) {
	if len(axes) == 0 {
		all := make([]bool, rank)
		for i := range all {
			all[i] = true
		}
		return all, nil
	}
	return axisMask(axes, rank)
}

func runReduce(op reduceOp, axesInput bool) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		var axesTensor *ir.Tensor
		if axesInput {
			axesTensor = c.In(1)
		}
		axes, noop := reduceAxes(c.attrs, axesInput, axesTensor)
		if noop {
			c.Set(0, x.Clone())
			return nil
		}
		reduced, err := reduceMask(axes, len(x.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		r := newReduction(x.Dims, reduced)
		dims := reducedDims(x.Dims, reduced, c.Int("keepdims") != 0, 1)
		if x.DType.IsFloat() || op.viaInt == nil {
			c.Set(0, FromFloat64s(x.DType, dims, foldGroups(r, Float64s(x), op.viaFloat)))
			return nil
		}
		lo, hi := keyBounds(x.DType)
		out := foldGroups(r, orderKeys(x), func(xs []int64) int64 { return op.viaInt(xs, lo, hi) })
		c.Set(0, fromOrderKeys(x.DType, dims, out))
		return nil
	}
}

// ArgMax and ArgMin: the index of the first (or, with select_last_index
// from opset 12, the last) extreme element along one axis, as int64.

// argRows makes ArgMax (sign +1) or ArgMin (sign -1).
func argRows(name string, sign int) []*Schema {
	attrs := []AttrDef{defInt("axis", 0), defInt("keepdims", 1)}
	row := func(since int64, attrs []AttrDef) *Schema {
		return &Schema{Name: name, Since: since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
			Attrs: attrs, Types: numericTypes, Infer: inferArg, Run: runArg(sign)}
	}
	return []*Schema{
		row(1, attrs),
		row(12, append(slices.Clone(attrs), defInt("select_last_index", 0))),
	}
}

func inferArg(c *InferContext) error {
	x := c.In(0)
	out := ir.TensorType(ir.Int64, ir.Shape{})
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		reduced := make([]bool, len(x.Shape.Dims))
		reduced[axis] = true
		out.Shape = ir.ShapeOf(reducedDims(x.Shape.Dims, reduced, c.Int("keepdims") != 0, ir.D(1))...)
	}
	c.Set(0, out)
	return nil
}

func runArg(sign int) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		axis, err := NormAxis(c.Int("axis"), len(x.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		if x.Dims[axis] == 0 {
			return c.Errorf("%s over the empty axis %d", c.Node.OpType, axis)
		}
		last := c.declares("select_last_index") && c.Int("select_last_index") != 0
		reduced := make([]bool, len(x.Dims))
		reduced[axis] = true
		r := newReduction(x.Dims, reduced)
		var idx []int64
		if x.DType.IsFloat() {
			idx = foldGroups(r, Float64s(x), func(xs []float64) int64 { return argBest(xs, sign, last) })
		} else {
			idx = foldGroups(r, orderKeys(x), func(xs []int64) int64 { return argBest(xs, sign, last) })
		}
		c.Set(0, FromInt64s(ir.Int64, reducedDims(x.Dims, reduced, c.Int("keepdims") != 0, 1), idx))
		return nil
	}
}

// argBest returns the index of the greatest (sign +1) or least (sign -1)
// element of a non-empty line: the first among equals, or with last the
// last. A NaN wins over every number, as numpy's argmax/argmin have it.
func argBest[T cmp.Ordered](xs []T, sign int, last bool) int64 {
	best := 0
	for i := 1; i < len(xs); i++ {
		if isNaN(xs[best]) {
			break
		}
		c := cmp.Compare(xs[i], xs[best]) * sign
		if c > 0 || last && c == 0 || isNaN(xs[i]) {
			best = i
		}
	}
	return int64(best)
}

func isNaN[T cmp.Ordered](x T) bool { return x != x }

// TopK: the k greatest (or, with largest=0 from opset 11, least) elements
// along an axis, sorted, with their indices; equal elements keep their
// index order. k is an attribute before opset 10 and an input from it.

var topKRows = []*Schema{{
	Name: "TopK", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{defInt("axis", -1), {Name: "k", Kind: ir.AttrInt, Required: true}},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}, {
	Name: "TopK", Since: 10, MinInputs: 2, MaxInputs: 2, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{defInt("axis", -1)},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}, {
	Name: "TopK", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{
		defInt("axis", -1),
		defInt("largest", 1),
		defInt("sorted", 1),
	},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}}

// topKCount reads k from the attribute (before opset 10) or from the
// input's value; known is false when that value is not available.
func topKCount(a attrs, kTensor *ir.Tensor) (k int64, known bool, err error) {
	if a.declares("k") {
		k = a.Int("k")
	} else {
		if kTensor == nil {
			return 0, false, nil
		}
		if kTensor.Len() != 1 {
			return 0, false, fmt.Errorf("K must hold one value, has shape %v", kTensor.Dims)
		}
		k = Int64s(kTensor)[0]
	}
	if k < 0 {
		return 0, false, fmt.Errorf("k is negative (%d)", k)
	}
	return k, true, nil
}

func inferTopK(c *InferContext) error {
	x := c.In(0)
	out := ir.TensorType(x.Elem, ir.Shape{})
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		k, known, err := topKCount(c.attrs, c.Const(1))
		if err != nil {
			return c.Errorf("%v", err)
		}
		out.Shape = x.Shape.Clone()
		d := &out.Shape.Dims[axis]
		switch {
		case !known:
			*d = ir.UnknownDim()
		case d.IsStatic() && k > d.Value:
			return c.Errorf("k = %d exceeds the axis size %d", k, d.Value)
		default:
			*d = ir.D(k)
		}
	}
	c.Set(0, out)
	c.Set(1, ir.TensorType(ir.Int64, out.Shape.Clone()))
	return nil
}

func runTopK(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	k, _, err := topKCount(c.attrs, c.In(1))
	if err != nil {
		return c.Errorf("%v", err)
	}
	if k > x.Dims[axis] {
		return c.Errorf("k = %d exceeds the axis size %d", k, x.Dims[axis])
	}
	largest := !c.declares("largest") || c.Int("largest") != 0
	outDims := slices.Clone(x.Dims)
	outDims[axis] = k
	in, out := alongAxis(x.Dims, axis), alongAxis(outDims, axis)
	var idx []int64
	if x.DType.IsFloat() {
		var vals []float64
		vals, idx = topK(in, out, Float64s(x), int(k), largest)
		c.Set(0, FromFloat64s(x.DType, outDims, vals))
	} else {
		var vals []int64
		vals, idx = topK(in, out, orderKeys(x), int(k), largest)
		c.Set(0, fromOrderKeys(x.DType, outDims, vals))
	}
	c.Set(1, FromInt64s(ir.Int64, outDims, idx))
	return nil
}

// topK selects along the lines of in into the (k-long) lines of out.
func topK[T cmp.Ordered](in, out reduction, xs []T, k int, largest bool) ([]T, []int64) {
	vals := make([]T, len(out.base)*k)
	idx := make([]int64, len(vals))
	order := make([]int, len(in.offs))
	for g, b := range in.base {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int {
			c := cmp.Compare(xs[b+in.offs[i]], xs[b+in.offs[j]])
			if largest {
				return -c
			}
			return c
		})
		for j, i := range order[:k] {
			o := out.base[g] + out.offs[j]
			vals[o], idx[o] = xs[b+in.offs[i]], int64(i)
		}
	}
	return vals, idx
}

// CumSum: running sums along an axis given as input 1, optionally
// exclusive (each sum omits its own element) and reversed.

var cumSumRows = []*Schema{{
	Name: "CumSum", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{
		defInt("exclusive", 0),
		defInt("reverse", 0),
	},
	Types: reduceTypes, Infer: inferCumSum, Run: runCumSum,
}}

func inferCumSum(c *InferContext) error {
	if a := c.In(1); a.Shape.Ranked && a.Shape.Rank() > 1 || a.Elem != ir.Undefined && a.Elem != ir.Int32 && a.Elem != ir.Int64 {
		return c.Errorf("axis must be an int32 or int64 scalar, is %s", a)
	}
	if x, t := c.In(0), c.Const(1); x.Shape.Ranked && t != nil {
		if _, err := cumSumAxis(t, len(x.Shape.Dims)); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return SameAsInput(c)
}

func cumSumAxis(t *ir.Tensor, rank int) (int, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("axis must hold one value, has shape %v", t.Dims)
	}
	return NormAxis(Int64s(t)[0], rank)
}

func runCumSum(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	axis, err := cumSumAxis(c.In(1), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	r := alongAxis(x.Dims, axis)
	exclusive, reverse := c.Int("exclusive") != 0, c.Int("reverse") != 0
	if x.DType.IsFloat() {
		v := Float64s(x)
		mapGroups(r, v, func(line []float64) { cumSum(line, exclusive, reverse) })
		c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	} else {
		v := Int64s(x)
		mapGroups(r, v, func(line []int64) { cumSum(line, exclusive, reverse) })
		c.Set(0, FromInt64s(x.DType, x.Dims, v))
	}
	return nil
}

func cumSum[T float64 | int64](line []T, exclusive, reverse bool) {
	var acc T
	for j := range line {
		i := j
		if reverse {
			i = len(line) - 1 - j
		}
		x := line[i]
		if !exclusive {
			acc += x
		}
		line[i] = acc
		if exclusive {
			acc += x
		}
	}
}

func init() {
	var rows []*Schema
	for _, op := range reduceOps {
		rows = append(rows, reduceRows(op)...)
	}
	rows = append(rows, argRows("ArgMax", 1)...)
	rows = append(rows, argRows("ArgMin", -1)...)
	rows = append(rows, topKRows...)
	rows = append(rows, cumSumRows...)
	register(rows)
}
