package ops

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Shape and tensor-manipulation ops. Their inference is what gives real
// models static shapes: Shape and Size publish their value when the input
// shape is known, and Reshape, Expand, Tile, ConstantOfShape, Split, ...
// read constant shape inputs to give static outputs.
//
// Rows exist where a version changed the signature (an attribute became an
// input, an attribute was added). Versions that only widened the type list
// or allowed negative axes share a row: kiln accepts negative axes in the
// older versions too, which no valid model can notice.

var shapeOps = []*Schema{
	{Name: "Shape", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferShapeOf, Run: runShapeOf},
	{Name: "Shape", Since: 15, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "start", Kind: ir.AttrInt, Default: ir.AttrI("start", 0)}, {Name: "end", Kind: ir.AttrInt}},
		Types: allTypes, Infer: inferShapeOf, Run: runShapeOf},
	{Name: "Size", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferSize, Run: runSize},

	{Name: "Reshape", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "shape", Kind: ir.AttrInts, Required: true}, {Name: "consumed_inputs", Kind: ir.AttrInts}},
		Types: allTypes, Infer: inferReshape, Run: runReshape},
	{Name: "Reshape", Since: 5, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferReshape, Run: runReshape},
	{Name: "Reshape", Since: 14, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "allowzero", Kind: ir.AttrInt, Default: ir.AttrI("allowzero", 0)}},
		Types: allTypes, Infer: inferReshape, Run: runReshape},
	{Name: "Flatten", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 1)}},
		Types: allTypes, Infer: inferFlatten, Run: runFlatten},
	{Name: "Squeeze", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axes", Kind: ir.AttrInts}},
		Types: allTypes, Infer: inferSqueeze, Run: runSqueeze},
	{Name: "Squeeze", Since: 13, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferSqueeze, Run: runSqueeze},
	{Name: "Unsqueeze", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axes", Kind: ir.AttrInts, Required: true}},
		Types: allTypes, Infer: inferUnsqueeze, Run: runUnsqueeze},
	{Name: "Unsqueeze", Since: 13, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferUnsqueeze, Run: runUnsqueeze},
	{Name: "Expand", Since: 8, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferExpand, Run: runExpand},
	{Name: "Transpose", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "perm", Kind: ir.AttrInts}},
		Types: allTypes, Infer: inferTranspose, Run: runTranspose},
	// Concat-1 defaults axis to 1; from 4 it is required.
	{Name: "Concat", Since: 1, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 1)}},
		Types: allTypes, Infer: inferConcat, Run: runConcat},
	{Name: "Concat", Since: 4, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Required: true}},
		Types: allTypes, Infer: inferConcat, Run: runConcat},
	// Split-1 takes the sizes as an optional input or attribute, 2 only as
	// an attribute, 13 only as an input; 18 adds num_outputs, which allows
	// a smaller last chunk.
	{Name: "Split", Since: 1, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}, {Name: "split", Kind: ir.AttrInts}},
		Types: allTypes, Infer: inferSplit, Run: runSplit},
	{Name: "Split", Since: 2, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}, {Name: "split", Kind: ir.AttrInts}},
		Types: allTypes, Infer: inferSplit, Run: runSplit},
	{Name: "Split", Since: 13, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}},
		Types: allTypes, Infer: inferSplit, Run: runSplit},
	{Name: "Split", Since: 18, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}, {Name: "num_outputs", Kind: ir.AttrInt}},
		Types: allTypes, Infer: inferSplit, Run: runSplit},
	{Name: "Tile", Since: 6, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferTile, Run: runTile},
	{Name: "ConstantOfShape", Since: 9, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "value", Kind: ir.AttrTensor}},
		Types: []ir.DType{ir.Int64}, Infer: inferConstantOfShape, Run: runConstantOfShape},
	{Name: "Constant", Since: 1, MinInputs: 0, MaxInputs: 0, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "value", Kind: ir.AttrTensor, Required: true}},
		Types: allTypes, Infer: inferConstant, Run: runConstant},
	{Name: "Constant", Since: 11, MinInputs: 0, MaxInputs: 0, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "value", Kind: ir.AttrTensor}, {Name: "sparse_value", Kind: ir.AttrSparseTensor}},
		Types: allTypes, Infer: inferConstant, Run: runConstant},
	{Name: "Constant", Since: 12, MinInputs: 0, MaxInputs: 0, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{
			{Name: "value", Kind: ir.AttrTensor}, {Name: "sparse_value", Kind: ir.AttrSparseTensor},
			{Name: "value_float", Kind: ir.AttrFloat}, {Name: "value_floats", Kind: ir.AttrFloats},
			{Name: "value_int", Kind: ir.AttrInt}, {Name: "value_ints", Kind: ir.AttrInts},
			{Name: "value_string", Kind: ir.AttrString}, {Name: "value_strings", Kind: ir.AttrStrings},
		},
		Types: allTypes, Infer: inferConstant, Run: runConstant},
	{Name: "Range", Since: 11, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Types: []ir.DType{ir.Float32, ir.Float64, ir.Int16, ir.Int32, ir.Int64}, Infer: inferRange, Run: runRange},
	{Name: "EyeLike", Since: 9, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "dtype", Kind: ir.AttrInt}, {Name: "k", Kind: ir.AttrInt, Default: ir.AttrI("k", 0)}},
		Types: concatTypes(numericTypes, []ir.DType{ir.Bool}), Infer: inferEyeLike, Run: runEyeLike},
	{Name: "DepthToSpace", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "blocksize", Kind: ir.AttrInt, Required: true}},
		Types: allTypes, Infer: inferDepthToSpace, Run: runDepthToSpace},
	{Name: "DepthToSpace", Since: 11, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "blocksize", Kind: ir.AttrInt, Required: true}, {Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "DCR")}},
		Types: allTypes, Infer: inferDepthToSpace, Run: runDepthToSpace},
	{Name: "SpaceToDepth", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "blocksize", Kind: ir.AttrInt, Required: true}},
		Types: allTypes, Infer: inferSpaceToDepth, Run: runSpaceToDepth},
}

func init() { register(shapeOps) }

// checkMovable rejects the packed 4-bit and complex types, which kiln's
// element-moving kernels do not copy.
func checkMovable(c *KernelContext, t *ir.Tensor) error {
	if !movable(t.DType) {
		return c.Unsupported(t.DType)
	}
	return nil
}

// withDims returns a copy of t with new dims and the same elements.
func withDims(t *ir.Tensor, dims []int64) *ir.Tensor {
	out := t.Clone()
	out.Name = ""
	out.Dims = append([]int64{}, dims...)
	return out
}

// --- Shape, Size -------------------------------------------------------------

// ShapeBounds is the range of dims [lo, hi) a Shape node reports of an
// input of rank dims (Shape-15's start and end, clamped).
func (c *KernelContext) ShapeBounds(rank int) (lo, hi int) { return shapeBounds(c.attrs, rank) }

// shapeBounds resolves Shape-15's start and end against rank: negative
// values count from the back, and both clamp to [0, rank].
func shapeBounds(a attrs, rank int) (lo, hi int) {
	if !a.declares("start") {
		return 0, rank
	}
	clamp := func(v int64) int {
		if v < 0 {
			v += int64(rank)
		}
		return int(min(max(v, 0), int64(rank)))
	}
	lo, hi = clamp(a.Int("start")), rank
	if a.Has("end") {
		hi = clamp(a.Int("end"))
	}
	return lo, max(lo, hi)
}

func inferShapeOf(c *InferContext) error {
	in := c.In(0).Shape
	if !in.Ranked {
		c.Set(0, ir.TensorType(ir.Int64, unknownDims(1)))
		return nil
	}
	lo, hi := shapeBounds(c.attrs, len(in.Dims))
	dims := in.Dims[lo:hi]
	c.Set(0, ir.TensorType(ir.Int64, ir.S(int64(len(dims)))))
	vals := make([]int64, len(dims))
	for i, d := range dims {
		if !d.IsStatic() {
			return nil
		}
		vals[i] = d.Value
	}
	c.SetValue(0, ir.FromSlice(ir.Int64, []int64{int64(len(vals))}, vals))
	return nil
}

func runShapeOf(c *KernelContext) error {
	x := c.In(0)
	lo, hi := shapeBounds(c.attrs, len(x.Dims))
	vals := append([]int64{}, x.Dims[lo:hi]...)
	c.Set(0, ir.FromSlice(ir.Int64, []int64{int64(len(vals))}, vals))
	return nil
}

func inferSize(c *InferContext) error {
	c.Set(0, ir.TensorType(ir.Int64, ir.S()))
	if n := c.In(0).Shape.NumElements(); n >= 0 {
		c.SetValue(0, ir.Scalar(ir.Int64, n))
	}
	return nil
}

func runSize(c *KernelContext) error {
	c.Set(0, ir.Scalar(ir.Int64, c.In(0).Len()))
	return nil
}

// --- Reshape, Flatten, Squeeze, Unsqueeze -------------------------------------

// reshapeShape applies a Reshape target to a possibly symbolic shape: 0
// copies the input dim (unless allowzero), one -1 takes what is left. The
// target's elements are expressions (a shape subgraph's [N, -1]), nil
// where unknown. The -1 is the input's element count divided by the other
// dims' product when that divides exactly ([N,S,512] to [0,0,8,-1] gives
// [N,S,8,64]; [N,12] to [0,-1] gives [N,12]). A symbolic element that might
// be 0 or -1 at run time makes its dim, and the -1's, unknown.
func reshapeShape(in ir.Shape, target []*dimexpr.Expr, allowzero bool) (ir.Shape, error) {
	out := make([]ir.Dim, len(target))
	infer, hasZero, uncertain := -1, false, false
	for i, e := range target {
		v, isConst := e.Value()
		switch {
		case e == nil:
			out[i], uncertain = ir.UnknownDim(), true
		case !isConst:
			// A run-time value is that dim unless it may be -1 (infer) or
			// 0 (copy the input's dim): a value never below 0 that is 0
			// only where the input's dim is the same expression (W//2 of
			// the input's W//2) is that dim too.
			copies := allowzero
			if !allowzero && in.Ranked && i < len(in.Dims) {
				d, ok := ir.DimExpr(in.Dims[i])
				copies = ok && d.Equal(e)
			}
			if !e.GE(dimexpr.Const(1)) && !(e.NonNeg() && copies) {
				out[i], uncertain = ir.UnknownDim(), true
				continue
			}
			out[i] = ir.DimOf(e)
		case v == -1:
			if infer >= 0 {
				return ir.Shape{}, fmt.Errorf("shape %s has more than one -1", exprList(target))
			}
			infer = i
			out[i] = ir.UnknownDim()
		case v < -1:
			return ir.Shape{}, fmt.Errorf("shape %s has a negative dim", exprList(target))
		case v == 0 && !allowzero:
			switch {
			case !in.Ranked:
				out[i] = ir.UnknownDim()
			case i >= len(in.Dims):
				return ir.Shape{}, fmt.Errorf("shape %s copies dim %d of a rank-%d input", exprList(target), i, len(in.Dims))
			default:
				out[i] = in.Dims[i]
			}
		default:
			hasZero = hasZero || v == 0
			out[i] = ir.D(v)
		}
	}
	if allowzero && hasZero && infer >= 0 {
		return ir.Shape{}, fmt.Errorf("shape %s has both 0 and -1 with allowzero", exprList(target))
	}
	if !in.Ranked || uncertain {
		return ir.ShapeOf(out...), nil
	}
	rest := make([]ir.Dim, 0, len(out))
	for i, d := range out {
		if i != infer {
			rest = append(rest, d)
		}
	}
	total, have := ir.DimProduct(in.Dims...), ir.DimProduct(rest...)
	if total.IsStatic() && have.IsStatic() {
		if infer >= 0 {
			if have.Value == 0 || total.Value%have.Value != 0 {
				return ir.Shape{}, fmt.Errorf("cannot reshape %s to %s", in, exprList(target))
			}
			out[infer] = ir.D(total.Value / have.Value)
		} else if total.Value != have.Value {
			return ir.Shape{}, fmt.Errorf("cannot reshape %s (%d elements) to %s", in, total.Value, exprList(target))
		}
		return ir.ShapeOf(out...), nil
	}
	if infer >= 0 {
		out[infer] = ir.DimExactDiv(total, have)
		if have.IsStatic() && have.Value > 0 && !out[infer].IsSymbolic() {
			// A model that runs has the count divisible: [N,6] to [-1,4]
			// is floor(6*N/4), printed N + N//2.
			out[infer] = ir.DimFloorDiv(total, have)
		}
	}
	return ir.ShapeOf(out...), nil
}

// exprList prints a target as [N, -1] (plain numbers when static).
func exprList(es []*dimexpr.Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// exprsOf turns int64s into constant expressions.
func exprsOf(v []int64) []*dimexpr.Expr {
	out := make([]*dimexpr.Expr, len(v))
	for i, x := range v {
		out[i] = dimexpr.Const(x)
	}
	return out
}

func inferReshape(c *InferContext) error {
	x := c.In(0)
	var target []*dimexpr.Expr
	if c.declares("shape") {
		target = exprsOf(c.Ints("shape"))
	} else if target = c.SymInts(1); target == nil {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(vectorLen(c.In(1)))))
		return nil
	}
	s, err := reshapeShape(x.Shape, target, c.declares("allowzero") && c.Int("allowzero") != 0)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, s))
	return nil
}

func runReshape(c *KernelContext) error {
	x := c.In(0)
	var target []int64
	if c.declares("shape") {
		target = c.Ints("shape")
	} else {
		var err error
		if target, err = indexValues(c.In(1), "shape"); err != nil {
			return c.Errorf("%v", err)
		}
	}
	s, err := reshapeShape(x.Shape(), exprsOf(target), c.declares("allowzero") && c.Int("allowzero") != 0)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, _ := s.Ints()
	c.Set(0, withDims(x, dims))
	return nil
}

func flattenShape(in ir.Shape, axis int64) (ir.Shape, error) {
	if !in.Ranked {
		return unknownDims(2), nil
	}
	r := int64(len(in.Dims))
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis > r {
		return ir.Shape{}, fmt.Errorf("axis %d is out of range for rank %d", axis, r)
	}
	return ir.ShapeOf(mulDims(in.Dims[:axis]), mulDims(in.Dims[axis:])), nil
}

func inferFlatten(c *InferContext) error {
	s, err := flattenShape(c.In(0).Shape, c.Int("axis"))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(c.In(0).Elem, s))
	return nil
}

func runFlatten(c *KernelContext) error {
	x := c.In(0)
	s, err := flattenShape(x.Shape(), c.Int("axis"))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, _ := s.Ints()
	c.Set(0, withDims(x, dims))
	return nil
}

// squeezeShape removes the given axes (all static 1s when axes is empty).
// It returns an unranked shape when a dim that might be 1 is not known.
func squeezeShape(in ir.Shape, axes []int64) (ir.Shape, error) {
	if !in.Ranked {
		return ir.Shape{}, nil
	}
	drop := make([]bool, len(in.Dims))
	if len(axes) == 0 {
		for i, d := range in.Dims {
			if !d.IsStatic() {
				return ir.Shape{}, nil
			}
			drop[i] = d.Value == 1
		}
	} else {
		norm, err := normAxes(axes, len(in.Dims))
		if err != nil {
			return ir.Shape{}, err
		}
		for _, a := range norm {
			if d := in.Dims[a]; d.IsStatic() && d.Value != 1 {
				return ir.Shape{}, fmt.Errorf("cannot squeeze axis %d of size %d", a, d.Value)
			}
			drop[a] = true
		}
	}
	out := ir.Shape{Ranked: true, Dims: []ir.Dim{}}
	for i, d := range in.Dims {
		if !drop[i] {
			out.Dims = append(out.Dims, d)
		}
	}
	return out, nil
}

// unsqueezeShape inserts 1s at axes of the output rank.
func unsqueezeShape(in ir.Shape, axes []int64) (ir.Shape, error) {
	if !in.Ranked {
		return ir.Shape{}, nil
	}
	rank := len(in.Dims) + len(axes)
	norm, err := normAxes(axes, rank)
	if err != nil {
		return ir.Shape{}, err
	}
	ones := make([]bool, rank)
	for _, a := range norm {
		ones[a] = true
	}
	out := ir.Shape{Ranked: true, Dims: make([]ir.Dim, rank)}
	j := 0
	for i := range out.Dims {
		if ones[i] {
			out.Dims[i] = ir.D(1)
		} else {
			out.Dims[i] = in.Dims[j]
			j++
		}
	}
	return out, nil
}

// axesArg returns the axes of Squeeze/Unsqueeze, from the attribute before
// opset 13 and the optional second input from 13. known is false when the
// input is present but not a compile-time constant.
func axesArg(c *InferContext) (axes []int64, known bool) {
	if c.declares("axes") {
		return c.Ints("axes"), true
	}
	if !c.HasInput(1) {
		return nil, true
	}
	axes = constInts(c, 1)
	return axes, axes != nil
}

func kernelAxes(c *KernelContext) ([]int64, error) {
	if c.declares("axes") {
		return c.Ints("axes"), nil
	}
	if c.In(1) == nil {
		return nil, nil
	}
	return indexValues(c.In(1), "axes")
}

// Squeeze and Unsqueeze differ only in how the axes reshape the input.
var (
	inferSqueeze   = inferAxesReshape(squeezeShape, false)
	runSqueeze     = runAxesReshape(squeezeShape)
	inferUnsqueeze = inferAxesReshape(unsqueezeShape, true)
	runUnsqueeze   = runAxesReshape(unsqueezeShape)
)

// inferAxesReshape infers an op whose output shape is reshape(input shape,
// axes). When the axes are unknown but their count is, an inserting op
// (Unsqueeze) still knows the output rank.
func inferAxesReshape(reshape func(ir.Shape, []int64) (ir.Shape, error), inserts bool) func(*InferContext) error {
	return func(c *InferContext) error {
		x := c.In(0)
		axes, known := axesArg(c)
		if !known {
			if n := vectorLen(c.In(1)); inserts && n >= 0 && x.Shape.Ranked {
				c.Set(0, ir.TensorType(x.Elem, unknownDims(x.Shape.Rank()+n)))
			} else {
				c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
			}
			return nil
		}
		s, err := reshape(x.Shape, axes)
		if err != nil {
			return c.Errorf("%v", err)
		}
		c.Set(0, ir.TensorType(x.Elem, s))
		return nil
	}
}

func runAxesReshape(reshape func(ir.Shape, []int64) (ir.Shape, error)) func(*KernelContext) error {
	return func(c *KernelContext) error {
		axes, err := kernelAxes(c)
		if err != nil {
			return c.Errorf("%v", err)
		}
		s, err := reshape(c.In(0).Shape(), axes)
		if err != nil {
			return c.Errorf("%v", err)
		}
		dims, _ := s.Ints()
		c.Set(0, withDims(c.In(0), dims))
		return nil
	}
}

// --- Expand, Transpose, Concat, Split, Tile ----------------------------------

func inferExpand(c *InferContext) error {
	x := c.In(0)
	shape := c.SymInts(1)
	if shape == nil {
		if n := vectorLen(c.In(1)); n >= 0 && x.Shape.Ranked {
			c.Set(0, ir.TensorType(x.Elem, unknownDims(max(n, x.Shape.Rank()))))
		} else {
			c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		}
		return nil
	}
	target := ir.Shape{Ranked: true, Dims: make([]ir.Dim, len(shape))}
	for i, d := range shape {
		if v, ok := d.Value(); ok && v < 0 {
			return c.Errorf("shape %s has a negative dim", exprList(shape))
		}
		target.Dims[i] = symDim(d)
	}
	s, err := BroadcastShape(x.Shape, target)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, s))
	return nil
}

func runExpand(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	shape, err := indexValues(c.In(1), "shape")
	if err != nil {
		return c.Errorf("%v", err)
	}
	for _, d := range shape {
		if d < 0 {
			return c.Errorf("shape %v has a negative dim", ir.FormatList(shape))
		}
	}
	dims, err := BroadcastDims(x.Dims, shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, takeElems(x, dims, BroadcastIndex(x.Dims, dims), nil))
	return nil
}

// transposePerm returns the permutation (reversed axes by default) after
// checking it against rank.
func transposePerm(a attrs, rank int) ([]int, error) {
	perm := make([]int, rank)
	if !a.Has("perm") {
		for i := range perm {
			perm[i] = rank - 1 - i
		}
		return perm, nil
	}
	p := a.Ints("perm")
	if len(p) != rank {
		return nil, fmt.Errorf("perm %v has %d entries for rank %d", ir.FormatList(p), len(p), rank)
	}
	seen := make([]bool, rank)
	for i, v := range p {
		if v < 0 || v >= int64(rank) || seen[v] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", ir.FormatList(p), rank-1)
		}
		seen[v] = true
		perm[i] = int(v)
	}
	return perm, nil
}

func inferTranspose(c *InferContext) error {
	x := c.In(0)
	if !x.Shape.Ranked {
		if c.Has("perm") {
			c.Set(0, ir.TensorType(x.Elem, unknownDims(len(c.Ints("perm")))))
		} else {
			c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		}
		return nil
	}
	perm, err := transposePerm(c.attrs, x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := ir.Shape{Ranked: true, Dims: make([]ir.Dim, len(perm))}
	for i, p := range perm {
		out.Dims[i] = x.Shape.Dims[p]
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

func runTranspose(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	perm, err := transposePerm(c.attrs, len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, idx := permuteIndex(x.Dims, perm)
	c.Set(0, takeElems(x, dims, idx, nil))
	return nil
}

func inferConcat(c *InferContext) error {
	elem := ir.Undefined
	var out ir.Shape
	for i := range c.Inputs {
		t := c.In(i)
		if elem == ir.Undefined {
			elem = t.Elem
		} else if t.Elem != ir.Undefined && t.Elem != elem {
			return c.Errorf("input %d is %s, input 0 is %s", i, t.Elem, elem)
		}
		if !t.Shape.Ranked {
			continue
		}
		if !out.Ranked {
			out = t.Shape.Clone()
			continue
		}
		if t.Shape.Rank() != out.Rank() {
			return c.Errorf("input %d has rank %d, another has rank %d", i, t.Shape.Rank(), out.Rank())
		}
	}
	if !out.Ranked {
		c.Set(0, ir.TensorType(elem, out))
		return nil
	}
	axis, err := NormAxis(c.Int("axis"), out.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	sum := ir.D(0)
	for i := range c.Inputs {
		s := c.In(i).Shape
		if !s.Ranked {
			sum = ir.UnknownDim()
			continue
		}
		for a, d := range s.Dims {
			o := &out.Dims[a]
			switch {
			case a == axis:
				sum = ir.DimAdd(sum, d)
			case d.IsStatic() && o.IsStatic() && d.Value != o.Value:
				return c.Errorf("input %d has shape %s, which differs from %s off axis %d", i, s, out, axis)
			case d.IsStatic() || !o.IsStatic() && d.IsSymbolic():
				*o = d
			}
		}
	}
	out.Dims[axis] = sum
	c.Set(0, ir.TensorType(elem, out))
	return nil
}

func runConcat(c *KernelContext) error {
	first := c.In(0)
	if err := checkMovable(c, first); err != nil {
		return err
	}
	axis, err := NormAxis(c.Int("axis"), len(first.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := append([]int64{}, first.Dims...)
	dims[axis] = 0
	for i, t := range c.Inputs {
		if t == nil {
			return c.Errorf("input %d is missing", i)
		}
		if t.DType != first.DType || len(t.Dims) != len(first.Dims) {
			return c.Errorf("input %d is %s%v, input 0 is %s%v", i, t.DType, ir.FormatList(t.Dims), first.DType, ir.FormatList(first.Dims))
		}
		for a := range dims {
			if a != axis && t.Dims[a] != first.Dims[a] {
				return c.Errorf("input %d has shape %v, input 0 has %v", i, ir.FormatList(t.Dims), ir.FormatList(first.Dims))
			}
		}
		dims[axis] += t.Dims[axis]
	}
	out := ir.NewTensor(first.DType, dims...)
	outer := int(ir.Product(dims[:axis]))
	inner := int(ir.Product(dims[axis+1:]))
	size := first.DType.Size()
	pos := 0
	for o := 0; o < outer; o++ {
		for _, t := range c.Inputs {
			n := int(t.Dims[axis]) * inner
			if t.DType == ir.String {
				copy(out.Strings[pos:pos+n], t.Strings[o*n:(o+1)*n])
			} else {
				copy(out.Raw[pos*size:(pos+n)*size], t.Raw[o*n*size:(o+1)*n*size])
			}
			pos += n
		}
	}
	c.Set(0, out)
	return nil
}

// splitSizes resolves the chunk sizes of Split along a dim of size dim
// (-1 when unknown). sizes is the explicit split (nil when absent); it
// returns nil with no error when the sizes depend on an unknown dim.
func splitSizes(a attrs, sizes []int64, dim int64, nOut int) ([]int64, error) {
	if sizes != nil {
		if len(sizes) != nOut {
			return nil, fmt.Errorf("split %v has %d entries for %d outputs", ir.FormatList(sizes), len(sizes), nOut)
		}
		sum := int64(0)
		for _, s := range sizes {
			if s < 0 {
				return nil, fmt.Errorf("split %v has a negative size", ir.FormatList(sizes))
			}
			sum += s
		}
		if dim >= 0 && sum != dim {
			return nil, fmt.Errorf("split %v sums to %d, the axis has %d", ir.FormatList(sizes), sum, dim)
		}
		return sizes, nil
	}
	// Split-18 allows a smaller last chunk, with or without num_outputs.
	uneven := a.declares("num_outputs")
	if uneven && a.Has("num_outputs") && a.Int("num_outputs") != int64(nOut) {
		return nil, fmt.Errorf("num_outputs is %d but the node has %d outputs", a.Int("num_outputs"), nOut)
	}
	if dim < 0 {
		return nil, nil
	}
	n := int64(nOut)
	chunk := dim / n
	if uneven {
		chunk = (dim + n - 1) / n
	}
	out := make([]int64, nOut)
	for i := range out {
		out[i] = chunk
	}
	out[nOut-1] = dim - chunk*(n-1)
	if out[nOut-1] < 0 || !uneven && dim%n != 0 {
		return nil, fmt.Errorf("cannot split an axis of %d into %d outputs", dim, nOut)
	}
	return out, nil
}

func inferSplit(c *InferContext) error {
	x := c.In(0)
	n := len(c.Outputs)
	unknown := func() error {
		for i := 0; i < n; i++ {
			if x.Shape.Ranked {
				s := x.Shape.Clone()
				if axis, err := NormAxis(c.Int("axis"), s.Rank()); err == nil {
					s.Dims[axis] = ir.UnknownDim()
				}
				c.Set(i, ir.TensorType(x.Elem, s))
			} else {
				c.Set(i, ir.TensorType(x.Elem, ir.Shape{}))
			}
		}
		return nil
	}
	var sizes []int64
	switch {
	case c.declares("split") && c.Has("split"):
		sizes = c.Ints("split")
	case c.HasInput(1):
		if sizes = constInts(c, 1); sizes == nil {
			if sym := c.SymInts(1); sym != nil && x.Shape.Ranked && len(sym) == n {
				return splitSym(c, sym)
			}
			return unknown()
		}
	}
	if !x.Shape.Ranked {
		return unknown()
	}
	axis, err := NormAxis(c.Int("axis"), x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	dim := int64(-1)
	if d := x.Shape.Dims[axis]; d.IsStatic() {
		dim = d.Value
	}
	sizes, err = splitSizes(c.attrs, sizes, dim, n)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if sizes == nil {
		if e, ok := ir.DimExpr(x.Shape.Dims[axis]); ok {
			return splitSym(c, splitEven(c.attrs, e, n))
		}
		return unknown()
	}
	for i, sz := range sizes {
		s := x.Shape.Clone()
		s.Dims[axis] = ir.D(sz)
		c.Set(i, ir.TensorType(x.Elem, s))
	}
	return nil
}

// splitEven is the chunk sizes of a symbolic dim d split into n outputs
// without explicit sizes: d/n each (a model that runs has d divisible by
// n), or from Split-18 on ceil(d/n) each and the rest last.
func splitEven(a attrs, d *dimexpr.Expr, n int) []*dimexpr.Expr {
	out := make([]*dimexpr.Expr, n)
	chunk, _ := d.FloorDiv(dimexpr.Const(int64(n)))
	if a.declares("num_outputs") {
		chunk, _ = d.CeilDiv(dimexpr.Const(int64(n)))
	}
	for i := range out {
		out[i] = chunk
	}
	if a.declares("num_outputs") {
		out[n-1] = d.Sub(chunk.MulConst(int64(n - 1)))
	}
	return out
}

// splitSym sets Split's outputs from chunk sizes known as expressions.
func splitSym(c *InferContext, sizes []*dimexpr.Expr) error {
	x := c.In(0)
	axis, err := NormAxis(c.Int("axis"), x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	for i, sz := range sizes {
		s := x.Shape.Clone()
		s.Dims[axis] = symDim(sz)
		c.Set(i, ir.TensorType(x.Elem, s))
	}
	return nil
}

func runSplit(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	var sizes []int64
	switch {
	case c.declares("split") && c.Has("split"):
		sizes = c.Ints("split")
	case c.In(1) != nil:
		if sizes, err = indexValues(c.In(1), "split"); err != nil {
			return c.Errorf("%v", err)
		}
	}
	sizes, err = splitSizes(c.attrs, sizes, x.Dims[axis], len(c.Outputs))
	if err != nil {
		return c.Errorf("%v", err)
	}
	st := Strides(x.Dims)
	start := int64(0)
	for i, sz := range sizes {
		dims := append([]int64{}, x.Dims...)
		dims[axis] = sz
		maps := make([][]int, len(dims))
		for a := range dims {
			from := int64(0)
			if a == axis {
				from = start
			}
			maps[a] = strideMap(dims[a], from, 1, st[a])
		}
		c.Set(i, takeElems(x, dims, axisIndex(dims, maps), nil))
		start += sz
	}
	return nil
}

func inferTile(c *InferContext) error {
	x := c.In(0)
	reps := c.SymInts(1)
	if !x.Shape.Ranked || reps == nil {
		if x.Shape.Ranked {
			c.Set(0, ir.TensorType(x.Elem, unknownDims(x.Shape.Rank())))
		} else {
			c.Set(0, ir.TensorType(x.Elem, unknownDims(vectorLen(c.In(1)))))
		}
		return nil
	}
	if len(reps) != x.Shape.Rank() {
		return c.Errorf("repeats %s has %d entries for rank %d", exprList(reps), len(reps), x.Shape.Rank())
	}
	out := x.Shape.Clone()
	for i, r := range reps {
		if v, ok := r.Value(); ok && v < 0 {
			return c.Errorf("repeats %s has a negative entry", exprList(reps))
		}
		out.Dims[i] = mulDims([]ir.Dim{out.Dims[i], symDim(r)})
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

func runTile(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	reps, err := indexValues(c.In(1), "repeats")
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(reps) != len(x.Dims) {
		return c.Errorf("repeats %v has %d entries for rank %d", ir.FormatList(reps), len(reps), len(x.Dims))
	}
	st := Strides(x.Dims)
	dims := make([]int64, len(reps))
	maps := make([][]int, len(reps))
	for a, r := range reps {
		if r < 0 {
			return c.Errorf("repeats %v has a negative entry", ir.FormatList(reps))
		}
		dims[a] = x.Dims[a] * r
		maps[a] = make([]int, dims[a])
		for i := range maps[a] {
			maps[a][i] = int(int64(i) % x.Dims[a] * st[a])
		}
	}
	c.Set(0, takeElems(x, dims, axisIndex(dims, maps), nil))
	return nil
}

// --- ConstantOfShape, Constant, Range, EyeLike ------------------------------

// fillValue is ConstantOfShape's value: a one-element tensor, float 0 by
// default.
func fillValue(a attrs, opset int64) (*ir.Tensor, error) {
	v := a.Tensor("value")
	if v == nil {
		return ir.Scalar(ir.Float32, float32(0)), nil
	}
	if v.Len() != 1 {
		return nil, fmt.Errorf("%s: value has %d elements, want 1", a.node, v.Len())
	}
	if !movable(v.DType) { // the sub-byte types
		return nil, &UnsupportedError{Domain: a.node.Domain, Op: a.node.OpType, Opset: opset, DType: v.DType}
	}
	return v, nil
}

func inferConstantOfShape(c *InferContext) error {
	v, err := fillValue(c.attrs, c.Opset)
	if err != nil {
		return err
	}
	dims := c.SymInts(0)
	if dims == nil {
		c.Set(0, ir.TensorType(v.DType, unknownDims(vectorLen(c.In(0)))))
		return nil
	}
	out := ir.Shape{Ranked: true, Dims: make([]ir.Dim, len(dims))}
	for i, d := range dims {
		if v, ok := d.Value(); ok && v < 0 {
			return c.Errorf("shape %s has a negative dim", exprList(dims))
		}
		out.Dims[i] = symDim(d)
	}
	c.Set(0, ir.TensorType(v.DType, out))
	return nil
}

func runConstantOfShape(c *KernelContext) error {
	v, err := fillValue(c.attrs, c.Opset)
	if err != nil {
		return err
	}
	dims, err := indexValues(c.In(0), "shape")
	if err != nil {
		return c.Errorf("%v", err)
	}
	for _, d := range dims {
		if d < 0 {
			return c.Errorf("shape %v has a negative dim", ir.FormatList(dims))
		}
	}
	// Every element reads the value's only element.
	c.Set(0, takeElems(v, dims, make([]int, ir.Product(dims)), nil))
	return nil
}

// constantValue builds Constant's output from whichever one of its value
// attributes the node sets.
func constantValue(a attrs) (*ir.Tensor, error) {
	var out *ir.Tensor
	n := 0
	for _, name := range []string{"value", "sparse_value", "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings"} {
		if !a.declares(name) || !a.Has(name) {
			continue
		}
		n++
		at := a.Attr(name)
		switch name {
		case "value":
			out = at.T
		case "sparse_value":
			t, err := densify(at.Sparse)
			if err != nil {
				return nil, err
			}
			out = t
		case "value_float":
			out = ir.Scalar(ir.Float32, at.F)
		case "value_floats":
			out = ir.FromSlice(ir.Float32, []int64{int64(len(at.Floats))}, append([]float32{}, at.Floats...))
		case "value_int":
			out = ir.Scalar(ir.Int64, at.I)
		case "value_ints":
			out = ir.FromSlice(ir.Int64, []int64{int64(len(at.Ints))}, append([]int64{}, at.Ints...))
		case "value_string":
			out = ir.NewTensor(ir.String)
			out.Strings[0] = at.S
		case "value_strings":
			out = ir.NewTensor(ir.String, int64(len(at.Strings)))
			copy(out.Strings, at.Strings)
		}
	}
	if n != 1 || out == nil {
		return nil, fmt.Errorf("exactly one value attribute must be set, found %d", n)
	}
	return out, nil
}

// densify expands a COO sparse tensor (linear or per-axis indices).
func densify(s *ir.SparseTensor) (*ir.Tensor, error) {
	if s == nil || s.Values == nil || !movable(s.Values.DType) {
		return nil, fmt.Errorf("sparse_value is missing or of an unsupported type")
	}
	nnz := s.Values.Len()
	idx := make([]int, ir.Product(s.Dims))
	for i := range idx {
		idx[i] = -1
	}
	var ind []int64
	if s.Indices != nil && nnz > 0 {
		var err error
		if ind, err = indexValues(s.Indices, "sparse indices"); err != nil {
			return nil, err
		}
	}
	st := Strides(s.Dims)
	rank := int64(len(s.Dims))
	for k := int64(0); k < nnz; k++ {
		var flat int64
		switch int64(len(ind)) {
		case nnz:
			flat = ind[k]
		case nnz * rank:
			for a := int64(0); a < rank; a++ {
				v := ind[k*rank+a]
				if v < 0 || v >= s.Dims[a] {
					return nil, fmt.Errorf("sparse index %v is out of range for %v", ir.FormatList(ind[k*rank:(k+1)*rank]), ir.FormatList(s.Dims))
				}
				flat += v * st[a]
			}
		default:
			return nil, fmt.Errorf("sparse indices have %d entries for %d values of rank %d", len(ind), nnz, rank)
		}
		if flat < 0 || flat >= int64(len(idx)) {
			return nil, fmt.Errorf("sparse index %d is out of range for %v", flat, ir.FormatList(s.Dims))
		}
		idx[flat] = int(k)
	}
	return takeElems(s.Values, s.Dims, idx, nil), nil
}

func inferConstant(c *InferContext) error {
	t, err := constantValue(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, t.Type())
	if t.Len() <= maxFoldElements {
		c.SetValue(0, t)
	}
	return nil
}

func runConstant(c *KernelContext) error {
	t, err := constantValue(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, t)
	return nil
}

// maxRangeLen bounds Range's output so a bad delta cannot ask for
// petabytes.
const maxRangeLen = 1 << 32

// rangeLen is Range's element count, ceil((limit-start)/delta) clamped at
// 0, computed in the inputs' own arithmetic (float64 or int64).
func rangeLen(start, limit, delta *ir.Tensor) (int64, error) {
	for i, t := range []*ir.Tensor{start, limit, delta} {
		if t.Len() != 1 || t.DType != start.DType || !t.DType.IsFloat() && !t.DType.IsInt() {
			return 0, fmt.Errorf("input %d is %s%v, want a scalar %s", i, t.DType, ir.FormatList(t.Dims), start.DType)
		}
	}
	var n int64
	if start.DType.IsFloat() {
		s, l, d := start.Float64At(0), limit.Float64At(0), delta.Float64At(0)
		if d == 0 || math.IsNaN(s+l+d) || math.IsInf(s+l+d, 0) {
			return 0, fmt.Errorf("cannot make a range from %v to %v by %v", s, l, d)
		}
		f := max(math.Ceil((l-s)/d), 0)
		if f > maxRangeLen {
			return 0, fmt.Errorf("range from %v to %v by %v has %v elements", s, l, d, f)
		}
		n = int64(f)
	} else {
		s, l, d := start.Int64At(0), limit.Int64At(0), delta.Int64At(0)
		switch span := l - s; {
		case d == 0:
			return 0, fmt.Errorf("delta is 0")
		case d > 0 && span > 0:
			n = (span + d - 1) / d
		case d < 0 && span < 0:
			n = (-span - d - 1) / -d
		}
		if n > maxRangeLen {
			return 0, fmt.Errorf("range from %d to %d by %d has %d elements", s, l, d, n)
		}
	}
	return n, nil
}

func inferRange(c *InferContext) error {
	elem := c.In(0).Elem
	for i := 1; i < 3; i++ {
		if e := c.In(i).Elem; e != ir.Undefined && elem != ir.Undefined && e != elem {
			return c.Errorf("input %d is %s, input 0 is %s", i, e, elem)
		}
	}
	n := ir.UnknownDim()
	if s, l, d := c.Const(0), c.Const(1), c.Const(2); s != nil && l != nil && d != nil {
		v, err := rangeLen(s, l, d)
		if err != nil {
			return c.Errorf("%v", err)
		}
		n = ir.D(v)
	} else {
		n = symRangeLen(c)
	}
	c.Set(0, ir.TensorType(elem, ir.ShapeOf(n)))
	return nil
}

// symRangeLen is Range's length when start and limit are known as
// expressions (arange(S) from a Shape) and delta is a constant:
// max(ceil((limit - start) / delta), 0).
func symRangeLen(c *InferContext) ir.Dim {
	var v [3]*dimexpr.Expr
	for i := range v {
		s := c.SymIn(i)
		if s == nil || s.Len() != 1 {
			return ir.UnknownDim()
		}
		v[i] = s.Elems[0]
	}
	delta, ok := v[2].Value()
	if !ok || delta == 0 {
		return ir.UnknownDim()
	}
	span := v[1].Sub(v[0])
	if delta < 0 {
		span, delta = span.Neg(), -delta
	}
	q, err := span.CeilDiv(dimexpr.Const(delta))
	if err != nil {
		return ir.UnknownDim()
	}
	return ir.DimOf(dimexpr.Max(q, dimexpr.Const(0)))
}

func runRange(c *KernelContext) error {
	start, delta := c.In(0), c.In(2)
	n, err := rangeLen(start, c.In(1), delta)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if start.DType.IsFloat() {
		s, d := start.Float64At(0), delta.Float64At(0)
		v := make([]float64, n)
		for i := range v {
			v[i] = s + float64(i)*d
		}
		c.Set(0, FromFloat64s(start.DType, []int64{n}, v))
		return nil
	}
	s, d := start.Int64At(0), delta.Int64At(0)
	v := make([]int64, n)
	for i := range v {
		v[i] = s + int64(i)*d
	}
	c.Set(0, FromInt64s(start.DType, []int64{n}, v))
	return nil
}

func eyeLikeType(a attrs, in ir.DType) ir.DType {
	if a.Has("dtype") {
		return ir.DType(a.Int("dtype"))
	}
	return in
}

// eyeLikeOK reports whether EyeLike can make a tensor of dtype d: a
// number or bool.
func eyeLikeOK(d ir.DType) bool { return d.IsFloat() || d.IsInt() || d == ir.Bool }

func inferEyeLike(c *InferContext) error {
	x := c.In(0)
	if dt := eyeLikeType(c.attrs, x.Elem); c.Has("dtype") && !eyeLikeOK(dt) {
		return c.Errorf("dtype %s is not a numeric or bool type", dt)
	}
	if x.Shape.Ranked && x.Shape.Rank() != 2 {
		return c.Errorf("input has rank %d, want 2", x.Shape.Rank())
	}
	s := x.Shape.Clone()
	if !s.Ranked {
		s = unknownDims(2)
	}
	c.Set(0, ir.TensorType(eyeLikeType(c.attrs, x.Elem), s))
	return nil
}

func runEyeLike(c *KernelContext) error {
	x := c.In(0)
	dt := eyeLikeType(c.attrs, x.DType)
	if !eyeLikeOK(dt) {
		return c.Unsupported(dt)
	}
	if len(x.Dims) != 2 {
		return c.Errorf("input has rank %d, want 2", len(x.Dims))
	}
	rows, cols, k := x.Dims[0], x.Dims[1], c.Int("k")
	v := make([]float64, rows*cols)
	for i := int64(0); i < rows; i++ {
		if j := i + k; j >= 0 && j < cols {
			v[i*cols+j] = 1
		}
	}
	c.Set(0, FromFloat64s(dt, x.Dims, v))
	return nil
}

// --- DepthToSpace, SpaceToDepth ---------------------------------------------

// blockShape checks the blocksize and input rank of DepthToSpace and
// SpaceToDepth.
func blockShape(a attrs, in ir.Shape) (int64, error) {
	bs := a.Int("blocksize")
	if bs <= 0 {
		return 0, fmt.Errorf("blocksize %d must be positive", bs)
	}
	if in.Ranked && in.Rank() != 4 {
		return 0, fmt.Errorf("input has rank %d, want 4", in.Rank())
	}
	return bs, nil
}

func inferDepthToSpace(c *InferContext) error {
	x := c.In(0)
	bs, err := blockShape(c.attrs, x.Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(4)))
		return nil
	}
	d := x.Shape.Dims
	if d[1].IsStatic() && d[1].Value%(bs*bs) != 0 {
		return c.Errorf("%d channels do not divide by blocksize² = %d", d[1].Value, bs*bs)
	}
	// A model that runs has channels divisible by blocksize².
	ch := ir.DimFloorDiv(d[1], ir.D(bs*bs))
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(d[0], ch, mulDims([]ir.Dim{d[2], ir.D(bs)}), mulDims([]ir.Dim{d[3], ir.D(bs)}))))
	return nil
}

func runDepthToSpace(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	bs, err := blockShape(c.attrs, x.Shape())
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, ch, h, w := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	if ch%(bs*bs) != 0 {
		return c.Errorf("%d channels do not divide by blocksize² = %d", ch, bs*bs)
	}
	oc := ch / (bs * bs)
	// DCR splits channels as (block row, block col, channel), CRD as
	// (channel, block row, block col); both interleave the blocks into
	// the rows and columns.
	split, perm := []int64{n, bs, bs, oc, h, w}, []int{0, 3, 4, 1, 5, 2}
	if c.declares("mode") && c.String("mode") == "CRD" {
		split, perm = []int64{n, oc, bs, bs, h, w}, []int{0, 1, 4, 2, 5, 3}
	} else if c.declares("mode") && c.String("mode") != "DCR" {
		return c.Errorf("unknown mode %q", c.String("mode"))
	}
	_, idx := permuteIndex(split, perm)
	c.Set(0, takeElems(x, []int64{n, oc, h * bs, w * bs}, idx, nil))
	return nil
}

func inferSpaceToDepth(c *InferContext) error {
	x := c.In(0)
	bs, err := blockShape(c.attrs, x.Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(4)))
		return nil
	}
	d := x.Shape.Dims
	out := []ir.Dim{d[0], mulDims([]ir.Dim{d[1], ir.D(bs * bs)}), ir.UnknownDim(), ir.UnknownDim()}
	for i := 2; i < 4; i++ {
		if d[i].IsStatic() && d[i].Value%bs != 0 {
			return c.Errorf("spatial dim %d does not divide by blocksize %d", d[i].Value, bs)
		}
		out[i] = ir.DimFloorDiv(d[i], ir.D(bs)) // divisible in a model that runs
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(out...)))
	return nil
}

func runSpaceToDepth(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	bs, err := blockShape(c.attrs, x.Shape())
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, ch, h, w := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	if h%bs != 0 || w%bs != 0 {
		return c.Errorf("spatial dims %dx%d do not divide by blocksize %d", h, w, bs)
	}
	_, idx := permuteIndex([]int64{n, ch, h / bs, bs, w / bs, bs}, []int{0, 3, 5, 1, 2, 4})
	c.Set(0, takeElems(x, []int64{n, ch * bs * bs, h / bs, w / bs}, idx, nil))
	return nil
}
