package ops

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
)

// Sequence ops: ONNX's ordered lists of tensors of one element type. The
// reference executor holds a sequence value as an ir.Tensor of Kind
// SequenceKind whose Elems are the tensors (ir.NewSequence); kernels never
// modify an input sequence, they build a new one sharing its tensors.

var sequenceOps = []*Schema{
	{Name: "SequenceEmpty", Since: 11, MinInputs: 0, MaxInputs: 0, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "dtype", Kind: ir.AttrInt}},
		Types: allTypes, Infer: inferSequenceEmpty, Run: runSequenceEmpty},
	{Name: "SequenceConstruct", Since: 11, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferSequenceConstruct, Run: runSequenceConstruct},
	{Name: "SequenceAt", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferSequenceAt, Run: runSequenceAt},
	{Name: "SequenceInsert", Since: 11, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferSequenceInsert, Run: runSequenceInsert},
	{Name: "SequenceErase", Since: 11, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferSequenceErase, Run: runSequenceErase},
	{Name: "SequenceLength", Since: 11, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferSequenceLength, Run: runSequenceLength},
	{Name: "SplitToSequence", Since: 11, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("axis", 0), defInt("keepdims", 1)},
		Types: allTypes, Infer: inferSplitToSequence, Run: runSplitToSequence},
	{Name: "ConcatFromSequence", Since: 11, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Required: true}, defInt("new_axis", 0)},
		Types: allTypes, Infer: inferConcatFromSequence, Run: runConcatFromSequence},
}

func init() { register(takingContainers(sequenceOps)) }

// SequenceType is the type of a sequence of elem.
func SequenceType(elem ir.Type) ir.Type {
	e := elem.Clone()
	return ir.Type{Kind: ir.SequenceKind, Inner: &e}
}

// seqElemType is the element type of input i, which must be a sequence
// where inference can tell; the zero Type when unknown.
func seqElemType(c *InferContext, i int) (ir.Type, error) {
	t := c.In(i)
	switch {
	case t.Kind == ir.UnknownKind:
		return ir.Type{}, nil
	case t.Kind != ir.SequenceKind:
		return ir.Type{}, c.Errorf("input %d is %s, want a sequence", i, t)
	case t.Inner == nil:
		return ir.Type{}, nil
	}
	return *t.Inner, nil
}

// inSequence returns kernel input i, which must be a sequence.
func inSequence(c *KernelContext, i int) (*ir.Tensor, error) {
	s := c.In(i)
	if s == nil || s.Kind != ir.SequenceKind {
		return nil, c.Errorf("input %d is not a sequence", i)
	}
	return s, nil
}

// checkPositionType refuses a position input that is not an int32 or int64
// scalar, where inference can tell.
func checkPositionType(c *InferContext, i int) error {
	if !c.HasInput(i) {
		return nil
	}
	t := c.In(i)
	if t.Kind == ir.TensorKind && t.Elem != ir.Undefined && t.Elem != ir.Int32 && t.Elem != ir.Int64 {
		return c.Errorf("position is %s, want int32 or int64", t)
	}
	// ONNX's own tests give a one-element 1-D position, which its runtimes
	// take.
	if n := t.Shape.NumElements(); t.Kind == ir.TensorKind && n >= 0 && n != 1 {
		return c.Errorf("position is %s, want a scalar", t)
	}
	return nil
}

// position reads a position input against a sequence of n elements: a
// negative one counts from the back; valid positions are [-n, n-1], or
// [-n, n] with end allowed (SequenceInsert).
func position(c *KernelContext, i int, n int, end bool) (int, error) {
	p := c.In(i)
	if p == nil {
		return 0, c.Errorf("position is missing")
	}
	if !p.IsTensor() || (p.DType != ir.Int32 && p.DType != ir.Int64) || p.Len() != 1 {
		return 0, c.Errorf("position is %s%v, want an int32 or int64 scalar", p.DType, ir.FormatList(p.Dims))
	}
	pos := p.Int64At(0)
	hi := int64(n) - 1
	if end {
		hi = int64(n)
	}
	if pos < -int64(n) || pos > hi {
		return 0, c.Errorf("position %d is out of range for a sequence of %d", pos, n)
	}
	if pos < 0 {
		pos += int64(n)
	}
	return int(pos), nil
}

func inferSequenceEmpty(c *InferContext) error {
	d := ir.Float32
	if c.Has("dtype") {
		d = ir.DType(c.Int("dtype"))
		if !d.Valid() || d == ir.Undefined {
			return c.Errorf("dtype is %d, not an element type", c.Int("dtype"))
		}
	}
	c.Set(0, SequenceType(ir.TensorType(d, ir.Shape{})))
	return nil
}

func runSequenceEmpty(c *KernelContext) error {
	d := ir.Float32
	if c.Has("dtype") {
		d = ir.DType(c.Int("dtype"))
		if !d.Valid() || d == ir.Undefined {
			return c.Errorf("dtype is %d, not an element type", c.Int("dtype"))
		}
	}
	c.Set(0, ir.NewSequence(d, []*ir.Tensor{}))
	return nil
}

// joinElemTypes is the element type of a sequence holding tensors of types
// a and b (unknown when either is).
func joinElemTypes(c *InferContext, a, b ir.Type) (ir.Type, error) {
	if a.Kind == ir.UnknownKind {
		return b, nil
	}
	if b.Kind == ir.UnknownKind {
		return a, nil
	}
	u, err := unionTypes(a, b)
	if err != nil {
		return ir.Type{}, c.Errorf("%v", err)
	}
	return u, nil
}

func inferSequenceConstruct(c *InferContext) error {
	var elem ir.Type
	for i := range c.Inputs {
		t := c.In(i)
		if t.Kind != ir.TensorKind && t.Kind != ir.UnknownKind {
			return c.Errorf("input %d is %s, want a tensor", i, t)
		}
		var err error
		if elem, err = joinElemTypes(c, elem, t); err != nil {
			return err
		}
	}
	c.Set(0, SequenceType(elem))
	return nil
}

func runSequenceConstruct(c *KernelContext) error {
	elems := make([]*ir.Tensor, len(c.Inputs))
	for i, t := range c.Inputs {
		if t == nil || !t.IsTensor() {
			return c.Errorf("input %d is not a tensor", i)
		}
		if t.DType != c.Inputs[0].DType {
			return c.Errorf("input %d is %s, input 0 is %s", i, t.DType, c.Inputs[0].DType)
		}
		elems[i] = t
	}
	c.Set(0, ir.NewSequence(elems[0].DType, elems))
	return nil
}

func inferSequenceAt(c *InferContext) error {
	elem, err := seqElemType(c, 0)
	if err != nil {
		return err
	}
	if err := checkPositionType(c, 1); err != nil {
		return err
	}
	c.Set(0, elem)
	return nil
}

func runSequenceAt(c *KernelContext) error {
	s, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	i, err := position(c, 1, len(s.Elems), false)
	if err != nil {
		return err
	}
	c.Set(0, s.Elems[i])
	return nil
}

func inferSequenceInsert(c *InferContext) error {
	elem, err := seqElemType(c, 0)
	if err != nil {
		return err
	}
	t := c.In(1)
	if t.Kind != ir.TensorKind && t.Kind != ir.UnknownKind {
		return c.Errorf("input 1 is %s, want a tensor", t)
	}
	if t.Elem != ir.Undefined && elem.Elem != ir.Undefined && t.Elem != elem.Elem {
		return c.Errorf("inserts %s into a sequence of %s", t.Elem, elem.Elem)
	}
	if err := checkPositionType(c, 2); err != nil {
		return err
	}
	// An empty sequence's element type carries no shape to join.
	if elem, err = joinElemTypes(c, elem, t); err != nil {
		return err
	}
	c.Set(0, SequenceType(elem))
	return nil
}

func runSequenceInsert(c *KernelContext) error {
	s, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	t := c.In(1)
	if t == nil || !t.IsTensor() {
		return c.Errorf("input 1 is not a tensor")
	}
	if t.DType != s.DType {
		return c.Errorf("inserts %s into a sequence of %s", t.DType, s.DType)
	}
	at := len(s.Elems)
	if c.HasInput(2) {
		if at, err = position(c, 2, len(s.Elems), true); err != nil {
			return err
		}
	}
	elems := make([]*ir.Tensor, 0, len(s.Elems)+1)
	elems = append(append(append(elems, s.Elems[:at]...), t), s.Elems[at:]...)
	c.Set(0, ir.NewSequence(s.DType, elems))
	return nil
}

func inferSequenceErase(c *InferContext) error {
	if _, err := seqElemType(c, 0); err != nil {
		return err
	}
	if err := checkPositionType(c, 1); err != nil {
		return err
	}
	c.Set(0, c.In(0).Clone())
	return nil
}

func runSequenceErase(c *KernelContext) error {
	s, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	if len(s.Elems) == 0 {
		return c.Errorf("erases from an empty sequence")
	}
	at := len(s.Elems) - 1
	if c.HasInput(1) {
		if at, err = position(c, 1, len(s.Elems), false); err != nil {
			return err
		}
	}
	elems := make([]*ir.Tensor, 0, len(s.Elems)-1)
	elems = append(append(elems, s.Elems[:at]...), s.Elems[at+1:]...)
	c.Set(0, ir.NewSequence(s.DType, elems))
	return nil
}

func inferSequenceLength(c *InferContext) error {
	if _, err := seqElemType(c, 0); err != nil {
		return err
	}
	c.Set(0, scalarType(ir.Int64))
	return nil
}

func runSequenceLength(c *KernelContext) error {
	s, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	c.Set(0, ir.Scalar(ir.Int64, int64(len(s.Elems))))
	return nil
}

// splitToSequenceSizes resolves SplitToSequence's chunk sizes along an
// axis of size dim: split absent gives chunks of 1; a scalar split, chunks
// of that size with a smaller last one; a 1-D split, the sizes it lists,
// which must sum to dim.
func splitToSequenceSizes(split *ir.Tensor, dim int64) ([]int64, error) {
	if split == nil {
		sizes := make([]int64, dim)
		for i := range sizes {
			sizes[i] = 1
		}
		return sizes, nil
	}
	if len(split.Dims) > 1 {
		return nil, fmt.Errorf("split has shape %v, want a scalar or a 1-D tensor", ir.FormatList(split.Dims))
	}
	vals, err := indexValues(split, "split")
	if err != nil {
		return nil, err
	}
	if len(split.Dims) == 0 {
		chunk := vals[0]
		if chunk <= 0 {
			return nil, fmt.Errorf("split is %d, want a positive chunk size", chunk)
		}
		var sizes []int64
		for rest := dim; rest > 0; rest -= chunk {
			sizes = append(sizes, min(chunk, rest))
		}
		return sizes, nil
	}
	sum := int64(0)
	for _, s := range vals {
		if s < 0 {
			return nil, fmt.Errorf("split %v has a negative size", ir.FormatList(vals))
		}
		sum += s
	}
	if sum != dim {
		return nil, fmt.Errorf("split %v sums to %d, the axis has %d", ir.FormatList(vals), sum, dim)
	}
	return vals, nil
}

func inferSplitToSequence(c *InferContext) error {
	x := c.In(0)
	if c.HasInput(1) {
		if t := c.In(1); t.Kind == ir.TensorKind && t.Elem != ir.Undefined && t.Elem != ir.Int32 && t.Elem != ir.Int64 {
			return c.Errorf("split is %s, want int32 or int64", t)
		}
	}
	if !x.Shape.Ranked {
		c.Set(0, SequenceType(ir.TensorType(x.Elem, ir.Shape{})))
		return nil
	}
	axis, err := NormAxis(c.Int("axis"), x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	s := x.Shape.Clone()
	chunk := ir.UnknownDim()
	if split := c.Const(1); !c.HasInput(1) {
		chunk = ir.D(1)
	} else if split != nil && len(split.Dims) == 0 && split.DType.IsInt() {
		// Every chunk has the split size when it divides the axis.
		if d := s.Dims[axis]; d.IsStatic() && split.Int64At(0) > 0 && d.Value%split.Int64At(0) == 0 {
			chunk = ir.D(split.Int64At(0))
		}
	}
	s.Dims[axis] = chunk
	if !c.HasInput(1) && c.Int("keepdims") == 0 {
		s.Dims = append(s.Dims[:axis], s.Dims[axis+1:]...)
	}
	c.Set(0, SequenceType(ir.TensorType(x.Elem, s)))
	return nil
}

func runSplitToSequence(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkSequenceLength(c, chunkCount(c.In(1), x.Dims[axis])); err != nil {
		return err
	}
	sizes, err := splitToSequenceSizes(c.In(1), x.Dims[axis])
	if err != nil {
		return c.Errorf("%v", err)
	}
	squeeze := c.In(1) == nil && c.Int("keepdims") == 0
	elems := make([]*ir.Tensor, len(sizes))
	start := int64(0)
	for i, sz := range sizes {
		e := sliceAxis(x, axis, start, sz)
		if squeeze {
			e.Dims = append(e.Dims[:axis], e.Dims[axis+1:]...)
		}
		elems[i] = e
		start += sz
	}
	c.Set(0, ir.NewSequence(x.DType, elems))
	return nil
}

// chunkCount is how many elements SplitToSequence makes of an axis of
// size dim, before the split is checked: an empty tensor may have a huge
// axis, which split into ones would allocate a header per chunk.
func chunkCount(split *ir.Tensor, dim int64) int64 {
	switch {
	case split == nil:
		return dim
	case len(split.Dims) == 0 && split.DType.IsInt() && split.Len() == 1 && split.Int64At(0) > 0:
		return (dim + split.Int64At(0) - 1) / split.Int64At(0)
	}
	return split.Len()
}

// checkSequenceLength bounds a sequence of n elements by the executor's
// tensor limit: each element costs a tensor header even when it is empty.
func checkSequenceLength(c *KernelContext, n int64) error {
	header := int64(unsafe.Sizeof(ir.Tensor{}))
	if n > math.MaxInt64/header {
		n = math.MaxInt64 / header
	}
	_, err := c.Limits.CheckTensor(fmt.Sprintf("%s: a sequence of %d elements", c.Node, n), ir.Uint8, []int64{n * header})
	return err
}

// sliceAxis copies n slices of x along axis from start.
func sliceAxis(x *ir.Tensor, axis int, start, n int64) *ir.Tensor {
	st := Strides(x.Dims)
	dims := append([]int64{}, x.Dims...)
	dims[axis] = n
	maps := make([][]int, len(dims))
	for a := range dims {
		from := int64(0)
		if a == axis {
			from = start
		}
		maps[a] = strideMap(dims[a], from, 1, st[a])
	}
	return takeElems(x, dims, axisIndex(dims, maps), nil)
}

func inferConcatFromSequence(c *InferContext) error {
	elem, err := seqElemType(c, 0)
	if err != nil {
		return err
	}
	newAxis := c.Int("new_axis")
	if newAxis != 0 && newAxis != 1 {
		return c.Errorf("new_axis is %d, want 0 or 1", newAxis)
	}
	if elem.Kind != ir.TensorKind || !elem.Shape.Ranked {
		c.Set(0, ir.TensorType(elem.Elem, ir.Shape{}))
		return nil
	}
	s := elem.Shape.Clone()
	axis, err := NormAxis(c.Int("axis"), s.Rank()+int(newAxis))
	if err != nil {
		return c.Errorf("%v", err)
	}
	if newAxis == 1 {
		s.Dims = append(s.Dims[:axis], append([]ir.Dim{ir.UnknownDim()}, s.Dims[axis:]...)...)
	}
	// The sequence's length, and so the axis's size, is known only at
	// run time.
	s.Dims[axis] = ir.UnknownDim()
	c.Set(0, ir.TensorType(elem.Elem, s))
	return nil
}

func runConcatFromSequence(c *KernelContext) error {
	s, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	if len(s.Elems) == 0 {
		return c.Errorf("concatenates an empty sequence")
	}
	newAxis := c.Int("new_axis")
	if newAxis != 0 && newAxis != 1 {
		return c.Errorf("new_axis is %d, want 0 or 1", newAxis)
	}
	elems := s.Elems
	if newAxis == 1 {
		axis, err := NormAxis(c.Int("axis"), len(s.Elems[0].Dims)+1)
		if err != nil {
			return c.Errorf("%v", err)
		}
		elems = make([]*ir.Tensor, len(s.Elems))
		for i, e := range s.Elems {
			if axis > len(e.Dims) {
				return c.Errorf("element %d has rank %d, element 0 has %d", i, len(e.Dims), len(s.Elems[0].Dims))
			}
			dims := append(append(append([]int64{}, e.Dims[:axis]...), 1), e.Dims[axis:]...)
			elems[i] = &ir.Tensor{DType: e.DType, Dims: dims, Raw: e.Raw, Strings: e.Strings}
		}
	}
	// Elements may share storage (one tensor inserted many times), so the
	// output may far exceed the memory the sequence holds: check its size
	// before Concat allocates it.
	total := int64(0)
	for _, e := range elems {
		total = ir.AddSizes(total, e.Len())
	}
	if _, err := c.Limits.CheckTensor(fmt.Sprintf("%s: output", c.Node), elems[0].DType, []int64{total}); err != nil {
		return err
	}
	// Concat's kernel over the elements, reading this node's axis: with
	// new_axis the elements have the output's rank, which it counts in.
	concat, err := Lookup("", "Concat", 13)
	if err != nil {
		return err
	}
	sub := &KernelContext{attrs: attrs{c.Node, concat}, Node: c.Node, Opset: 13, Inputs: elems, Outputs: make([]*ir.Tensor, 1)}
	if err := concat.Run(sub); err != nil {
		return err
	}
	c.Set(0, sub.Outputs[0])
	return nil
}
