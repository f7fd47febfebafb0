package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Indexing ops: slicing, gathering, scattering, padding, one-hot, Trilu,
// and Resize (an indexed gather with weights). As in shape.go, rows exist where a version
// changed the signature; kiln accepts negative axes and indices in every
// version.

var indexOps = []*Schema{
	{Name: "Slice", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axes", Kind: ir.AttrInts}, {Name: "starts", Kind: ir.AttrInts, Required: true}, {Name: "ends", Kind: ir.AttrInts, Required: true}},
		Types: allTypes, Infer: inferSlice, Run: runSlice},
	{Name: "Slice", Since: 10, MinInputs: 3, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferSlice, Run: runSlice},
	{Name: "Gather", Since: 1, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}},
		Types: allTypes, Infer: inferGather, Run: runGather},
	{Name: "GatherElements", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}},
		Types: allTypes, Infer: inferGatherElements, Run: runGatherElements},
	{Name: "GatherND", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferGatherND, Run: runGatherND},
	{Name: "GatherND", Since: 12, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "batch_dims", Kind: ir.AttrInt, Default: ir.AttrI("batch_dims", 0)}},
		Types: allTypes, Infer: inferGatherND, Run: runGatherND},
	// Scatter-9 is ScatterElements-11 under its old name; ONNX deprecated
	// it at 11.
	scatter9,
	deprecatedRow(scatter9, 11, "ScatterElements"),
	// Scatter reductions: none before 16, add/mul from 16, max/min from 18.
	{Name: "ScatterElements", Since: 11, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}},
		Types: allTypes, Infer: inferScatterElements, Run: runScatterElements},
	{Name: "ScatterElements", Since: 16, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}, reductionAttr},
		Types: allTypes, Infer: inferScatterElements, Run: runScatterElements},
	{Name: "ScatterElements", Since: 18, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}, reductionAttr},
		Types: allTypes, Infer: inferScatterElements, Run: runScatterElements},
	{Name: "ScatterND", Since: 11, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferScatterND, Run: runScatterND},
	{Name: "ScatterND", Since: 16, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{reductionAttr}, Types: allTypes, Infer: inferScatterND, Run: runScatterND},
	{Name: "ScatterND", Since: 18, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{reductionAttr}, Types: allTypes, Infer: inferScatterND, Run: runScatterND},
	{Name: "OneHot", Since: 9, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", -1)}},
		Types: numericTypes, Infer: inferOneHot, Run: runOneHot},
	{Name: "Trilu", Since: 14, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "upper", Kind: ir.AttrInt, Default: ir.AttrI("upper", 1)}},
		Types: allTypes, Infer: inferTrilu, Run: runTrilu},
	// Pad-1 names its attribute paddings, 2 pads; 11 makes pads and the
	// constant inputs, 18 adds the axes input and 19 the wrap mode.
	{Name: "Pad", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{padModeAttr, {Name: "paddings", Kind: ir.AttrInts, Required: true}, {Name: "value", Kind: ir.AttrFloat, Default: ir.AttrF("value", 0)}},
		Types: allTypes, Infer: inferPad, Run: runPad},
	{Name: "Pad", Since: 2, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{padModeAttr, {Name: "pads", Kind: ir.AttrInts, Required: true}, {Name: "value", Kind: ir.AttrFloat, Default: ir.AttrF("value", 0)}},
		Types: allTypes, Infer: inferPad, Run: runPad},
	{Name: "Pad", Since: 11, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{padModeAttr}, Types: allTypes, Infer: inferPad, Run: runPad},
	{Name: "Pad", Since: 18, MinInputs: 2, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{padModeAttr}, Types: allTypes, Infer: inferPad, Run: runPad},
	{Name: "Pad", Since: 19, MinInputs: 2, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{padModeAttr}, Types: allTypes, Infer: inferPad, Run: runPad},
	// Resize-10 takes only scales (input 1) and a mode; 11 adds roi and
	// sizes and the coordinate attributes; 13 makes roi and scales
	// optional; 18 adds antialias, axes and keep_aspect_ratio_policy; 19
	// the half_pixel_symmetric coordinate mode.
	{Name: "Resize", Since: 10, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "nearest")}},
		Types: numericTypes, Infer: inferResize, Run: runResize},
	{Name: "Resize", Since: 11, MinInputs: 3, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: resize11Attrs, Types: numericTypes, Infer: inferResize, Run: runResize},
	{Name: "Resize", Since: 13, MinInputs: 1, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: resize11Attrs, Types: numericTypes, Infer: inferResize, Run: runResize},
	{Name: "Resize", Since: 18, MinInputs: 1, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: resize18Attrs, Types: numericTypes, Infer: inferResize, Run: runResize},
	{Name: "Resize", Since: 19, MinInputs: 1, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: resize18Attrs, Types: numericTypes, Infer: inferResize, Run: runResize},
	// Upsample is Resize-10 by its old name (asymmetric coordinates,
	// nearest or linear), its scales at least 1: an attribute in v7, the
	// second input from v9. ONNX deprecated it at 10.
	{Name: "Upsample", Since: 7, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "nearest")}, {Name: "scales", Kind: ir.AttrFloats, Required: true}},
		Types: numericTypes, Infer: inferUpsample, Run: runUpsample},
	upsample9,
	deprecatedRow(upsample9, 10, "Resize"),
}

var (
	scatter9 = &Schema{Name: "Scatter", Since: 9, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt, Default: ir.AttrI("axis", 0)}},
		Types: allTypes, Infer: inferScatterElements, Run: runScatterElements}
	upsample9 = &Schema{Name: "Upsample", Since: 9, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "nearest")}},
		Types: numericTypes, Infer: inferUpsample, Run: runUpsample}
)

func init() { register(indexOps) }

// deprecatedRow is the version at which ONNX deprecated an op in favour of
// another: it keeps the previous row's signature (so that a node of it
// checks) and refuses to run, naming the replacement.
func deprecatedRow(prev *Schema, since int64, use string) *Schema {
	s := *prev
	s.Since = since
	refuse := func(n *ir.Node, opset int64) error {
		return &UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opset,
			Reason: fmt.Sprintf("deprecated since opset %d: use %s", since, use)}
	}
	s.Infer = func(c *InferContext) error { return refuse(c.Node, c.Opset) }
	s.Run = func(c *KernelContext) error { return refuse(c.Node, c.Opset) }
	return &s
}

var (
	reductionAttr = AttrDef{Name: "reduction", Kind: ir.AttrString, Default: ir.AttrS("reduction", "none")}
	padModeAttr   = AttrDef{Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "constant")}
)

// --- Slice --------------------------------------------------------------------

// sliceArgs are Slice's starts, ends, axes and steps, each with one entry
// per sliced axis.
type sliceArgs struct{ starts, ends, axes, steps []int64 }

// resolve fills in the default axes and steps and validates the lengths.
func (s *sliceArgs) resolve(rank int) ([]int, error) {
	n := len(s.starts)
	if len(s.ends) != n {
		return nil, fmt.Errorf("starts %v and ends %v differ in length", ir.FormatList(s.starts), ir.FormatList(s.ends))
	}
	if s.axes == nil {
		s.axes = make([]int64, n)
		for i := range s.axes {
			s.axes[i] = int64(i)
		}
	}
	if s.steps == nil {
		s.steps = make([]int64, n)
		for i := range s.steps {
			s.steps[i] = 1
		}
	}
	if len(s.axes) != n || len(s.steps) != n {
		return nil, fmt.Errorf("axes %v and steps %v must have %d entries like starts", ir.FormatList(s.axes), ir.FormatList(s.steps), n)
	}
	for _, st := range s.steps {
		if st == 0 {
			return nil, fmt.Errorf("steps %v has a 0", ir.FormatList(s.steps))
		}
	}
	return normAxes(s.axes, rank)
}

// sliceRange clamps one axis' start and end as ONNX does and returns the
// first index read and the number of elements.
func sliceRange(dim, start, end, step int64) (first, count int64) {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	if step > 0 {
		start = min(max(start, 0), dim)
		end = min(max(end, 0), dim)
		if end > start {
			count = (end - start + step - 1) / step
		}
	} else {
		start = min(max(start, 0), dim-1)
		end = min(max(end, -1), dim-1)
		if start > end {
			count = (start - end - step - 1) / -step
		}
	}
	return start, count
}

func inferSlice(c *InferContext) error {
	x := c.In(0)
	var a sliceArgs
	var starts, ends []*dimexpr.Expr
	known := true
	if c.declares("starts") {
		a = sliceArgs{starts: c.Ints("starts"), ends: c.Ints("ends"), axes: c.Ints("axes")}
		starts, ends = exprsOf(a.starts), exprsOf(a.ends)
	} else {
		starts, ends = c.SymInts(1), c.SymInts(2)
		known = starts != nil && ends != nil
		for i, p := range []*[]int64{&a.axes, &a.steps} {
			if c.HasInput(3 + i) {
				*p = constInts(c, 3+i)
				known = known && *p != nil
			}
		}
		// resolve checks lengths and axes; the values are read below.
		a.starts, a.ends = make([]int64, len(starts)), make([]int64, len(ends))
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	if !known {
		c.Set(0, ir.TensorType(x.Elem, sliceUnknown(c, x.Shape)))
		return nil
	}
	axes, err := a.resolve(x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := x.Shape.Clone()
	for i, ax := range axes {
		d := out.Dims[ax]
		s, sok := starts[i].Value()
		e, eok := ends[i].Value()
		if d.IsStatic() && sok && eok {
			_, n := sliceRange(d.Value, s, e, a.steps[i])
			out.Dims[ax] = ir.D(n)
			continue
		}
		de, ok := ir.DimExpr(d)
		if !ok {
			out.Dims[ax] = ir.UnknownDim()
			continue
		}
		out.Dims[ax] = ir.DimOf(sliceCount(de, starts[i], ends[i], a.steps[i]))
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// sliceEndless is the magnitude from which a constant start or end of a
// slice of a symbolic dim means "the very end" (or, negative, "the very
// beginning"): exporters write INT64_MAX or INT32_MAX for x[a:]. This
// assumes symbolic dims stay below it.
const sliceEndless = 1<<31 - 1

// sliceCount is the length of a slice of a dim of size d from start to end
// by a constant step, when d, start and end are expressions (nil where
// unknown). It clamps as ONNX does (sliceRange), with min and max, which
// simplify where the symbols' being at least 1 decides them: x[1:] of N is
// N - 1, x[:-1] is N - 1, x[2:] is N - min(2, N), x[:S] of 512 is
// min(512, S). A start or end whose sign is not known gives nil.
func sliceCount(d, start, end *dimexpr.Expr, step int64) *dimexpr.Expr {
	const (
		finite = iota
		minusInf
		plusInf
	)
	dval, dconst := d.Value()
	adjust := func(v *dimexpr.Expr) (*dimexpr.Expr, int) {
		if c, ok := v.Value(); ok {
			switch {
			case c >= sliceEndless || dconst && c >= dval:
				return nil, plusInf
			case c <= -sliceEndless && !dconst:
				return nil, minusInf
			case c < 0:
				return d.AddConst(c), finite
			}
			return v, finite
		}
		switch {
		case v.NonNeg():
			return v, finite
		case v.Neg().AddConst(-1).NonNeg(): // v <= -1
			return d.Add(v), finite
		}
		return nil, finite
	}
	clamp := func(v *dimexpr.Expr, inf int, lo, hi *dimexpr.Expr) *dimexpr.Expr {
		switch inf {
		case plusInf:
			return hi
		case minusInf:
			return lo
		}
		return dimexpr.Min(dimexpr.Max(v, lo), hi)
	}
	if start == nil || end == nil || step == 0 {
		return nil
	}
	s, sinf := adjust(start)
	e, einf := adjust(end)
	if s == nil && sinf == finite || e == nil && einf == finite {
		return nil
	}
	zero := dimexpr.Const(0)
	var span *dimexpr.Expr
	if step > 0 {
		span = clamp(e, einf, zero, d).Sub(clamp(s, sinf, zero, d))
	} else {
		last := d.AddConst(-1)
		span = clamp(s, sinf, zero, last).Sub(clamp(e, einf, dimexpr.Const(-1), last))
		step = -step
	}
	n, err := span.CeilDiv(dimexpr.Const(step))
	if err != nil {
		return nil
	}
	return dimexpr.Max(n, zero)
}

// sliceUnknown is Slice-10's output shape when starts, ends or steps are
// not constant: the sliced axes become unknown, the others keep their
// dims. The sliced axes are the axes input, or the first len(starts).
func sliceUnknown(c *InferContext, in ir.Shape) ir.Shape {
	var axes []int64
	if c.HasInput(3) {
		axes = constInts(c, 3)
	} else if n := vectorLen(c.In(1)); n >= 0 {
		for i := range n {
			axes = append(axes, int64(i))
		}
	}
	norm, err := normAxes(axes, in.Rank())
	if axes == nil || err != nil {
		return unknownDims(in.Rank())
	}
	out := in.Clone()
	for _, a := range norm {
		out.Dims[a] = ir.UnknownDim()
	}
	return out
}

func runSlice(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	first, steps, dims, err := c.SliceWindow(x.Dims)
	if err != nil {
		return err
	}
	st := Strides(x.Dims)
	maps := make([][]int, len(dims))
	for ax := range dims {
		maps[ax] = strideMap(dims[ax], first[ax], steps[ax], st[ax])
	}
	c.Set(0, takeElems(x, dims, axisIndex(dims, maps), nil))
	return nil
}

// SliceAxis is one axis a Slice node slices, its arguments resolved
// (axes normalized, default steps filled in): the start and end before
// ONNX's clamping, which SliceRange applies against the axis' dim.
type SliceAxis struct {
	Axis             int
	Start, End, Step int64
	// EndUnknown: the ends are computed at run time (x[:, :y.size(1)]),
	// End is not set. The first index read does not depend on them, and
	// the count is the output's dim, which inference gives.
	EndUnknown bool
}

// SliceAxes resolves a Slice node's starts, ends, axes and steps for an
// input of rank dims: from the attributes (Slice-1) or from the inputs,
// which must then be known (c.In). A backend whose dims are known only at
// run time clamps them there; SliceWindow clamps them against static dims.
func (c *KernelContext) SliceAxes(rank int) ([]SliceAxis, error) {
	var a sliceArgs
	endUnknown := false
	if c.declares("starts") {
		a = sliceArgs{starts: c.Ints("starts"), ends: c.Ints("ends"), axes: c.Ints("axes")}
	} else {
		names := []string{"starts", "ends", "axes", "steps"}
		for i, p := range []*[]int64{&a.starts, &a.ends, &a.axes, &a.steps} {
			if !c.HasInput(1 + i) {
				continue
			}
			t := c.In(1 + i)
			if t == nil && i == 1 {
				endUnknown = true
				continue
			}
			if t == nil {
				return nil, c.Errorf("%s is not known", names[i])
			}
			v, err := indexValues(t, names[i])
			if err != nil {
				return nil, c.Errorf("%v", err)
			}
			*p = v
		}
	}
	if endUnknown {
		a.ends = make([]int64, len(a.starts)) // resolve checks their count only
	}
	axes, err := a.resolve(rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	out := make([]SliceAxis, len(axes))
	for i, ax := range axes {
		out[i] = SliceAxis{Axis: ax, Start: a.starts[i], End: a.ends[i], Step: a.steps[i], EndUnknown: endUnknown}
	}
	return out, nil
}

// SliceRange clamps one axis' start and end as ONNX does and returns the
// first index read and the number of elements.
func SliceRange(dim, start, end, step int64) (first, count int64) {
	return sliceRange(dim, start, end, step)
}

// SliceWindow resolves a Slice node against its input's dims, as every
// backend must: per axis, the first index read, the step and the number
// of elements (ONNX's clamping of starts and ends, negative steps and
// axes).
func (c *KernelContext) SliceWindow(dims []int64) (first, steps, counts []int64, err error) {
	axes, err := c.SliceAxes(len(dims))
	if err != nil {
		return nil, nil, nil, err
	}
	counts = append([]int64{}, dims...)
	first = make([]int64, len(dims))
	steps = make([]int64, len(dims))
	for i := range steps {
		steps[i] = 1
	}
	for _, a := range axes {
		if a.EndUnknown {
			return nil, nil, nil, c.Errorf("ends is not known")
		}
		first[a.Axis], counts[a.Axis] = sliceRange(dims[a.Axis], a.Start, a.End, a.Step)
		steps[a.Axis] = a.Step
	}
	return first, steps, counts, nil
}

// --- Gather, GatherElements, GatherND ------------------------------------------

// fixIndex resolves a possibly negative index into [0, dim).
func fixIndex(i, dim int64) (int64, error) {
	if i < 0 {
		i += dim
	}
	if i < 0 || i >= dim {
		return 0, fmt.Errorf("index %d is out of range for a dim of %d", i, dim)
	}
	return i, nil
}

func inferGather(c *InferContext) error {
	x, ind := c.In(0), c.In(1)
	if !x.Shape.Ranked || !ind.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	axis, err := NormAxis(c.Int("axis"), x.Shape.Rank())
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := append(append(append([]ir.Dim{}, x.Shape.Dims[:axis]...), ind.Shape.Dims...), x.Shape.Dims[axis+1:]...)
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(dims...)))
	return nil
}

func runGather(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	ind, err := indexValues(c.In(1), "indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dim := x.Dims[axis]
	outer, inner := ir.Product(x.Dims[:axis]), ir.Product(x.Dims[axis+1:])
	dims := append(append(append([]int64{}, x.Dims[:axis]...), c.In(1).Dims...), x.Dims[axis+1:]...)
	idx := make([]int, 0, ir.Product(dims))
	for o := int64(0); o < outer; o++ {
		for _, j := range ind {
			j, err := fixIndex(j, dim)
			if err != nil {
				return c.Errorf("%v", err)
			}
			for i := int64(0); i < inner; i++ {
				idx = append(idx, int((o*dim+j)*inner+i))
			}
		}
	}
	c.Set(0, takeElems(x, dims, idx, nil))
	return nil
}

// elementsShape checks GatherElements/ScatterElements ranks and returns the
// normalized axis.
func elementsAxis(a attrs, data, ind ir.Shape) (int, error) {
	if data.Ranked && ind.Ranked && data.Rank() != ind.Rank() {
		return 0, fmt.Errorf("indices have rank %d, data rank %d", ind.Rank(), data.Rank())
	}
	rank := max(data.Rank(), ind.Rank())
	if rank < 0 {
		return 0, nil
	}
	return NormAxis(a.Int("axis"), rank)
}

func inferGatherElements(c *InferContext) error {
	if _, err := elementsAxis(c.attrs, c.In(0).Shape, c.In(1).Shape); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(c.In(0).Elem, c.In(1).Shape.Clone()))
	return nil
}

// elementsIndex maps each element of indices to the flat offset in data
// that GatherElements reads and ScatterElements writes: its own coordinate
// with the axis coordinate replaced by the index.
func elementsIndex(data []int64, indDims []int64, ind []int64, axis int) ([]int, error) {
	if len(indDims) != len(data) {
		return nil, fmt.Errorf("indices have rank %d, data rank %d", len(indDims), len(data))
	}
	st := Strides(data)
	coord := make([]int64, len(indDims))
	out := make([]int, len(ind))
	for k, j := range ind {
		j, err := fixIndex(j, data[axis])
		if err != nil {
			return nil, err
		}
		var flat int64
		for a, x := range coord {
			if a == axis {
				x = j
			} else if x >= data[a] {
				return nil, fmt.Errorf("indices of shape %v exceed data of shape %v", ir.FormatList(indDims), ir.FormatList(data))
			}
			flat += x * st[a]
		}
		out[k] = int(flat)
		nextCoord(coord, indDims)
	}
	return out, nil
}

func runGatherElements(c *KernelContext) error {
	x, it := c.In(0), c.In(1)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	ind, err := indexValues(it, "indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	axis, err := elementsAxis(c.attrs, x.Shape(), it.Shape())
	if err != nil {
		return c.Errorf("%v", err)
	}
	idx, err := elementsIndex(x.Dims, it.Dims, ind, axis)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, takeElems(x, it.Dims, idx, nil))
	return nil
}

func batchDims(a attrs) int64 {
	if a.declares("batch_dims") {
		return a.Int("batch_dims")
	}
	return 0
}

func inferGatherND(c *InferContext) error {
	x, ind := c.In(0), c.In(1)
	b := batchDims(c.attrs)
	if !x.Shape.Ranked || !ind.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	r, q := int64(x.Shape.Rank()), int64(ind.Shape.Rank())
	if q < 1 || b < 0 || b >= min(r, q) {
		return c.Errorf("batch_dims %d is out of range for data rank %d and indices rank %d", b, r, q)
	}
	last := ind.Shape.Dims[q-1]
	if !last.IsStatic() {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	k := last.Value
	if k < 1 || b+k > r {
		return c.Errorf("index tuples of length %d do not fit data of rank %d with %d batch dims", k, r, b)
	}
	dims := append(append([]ir.Dim{}, ind.Shape.Dims[:q-1]...), x.Shape.Dims[b+k:]...)
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(dims...)))
	return nil
}

// ndIndex maps the index tuples of GatherND/ScatterND (indices [..., k])
// to the flat offset of the data slice each selects, with b leading batch
// dims shared by data and indices. It returns the offsets (one per tuple)
// and the slice length.
func ndIndex(data, indDims, ind []int64, b int64) (offsets []int, inner int64, err error) {
	r, q := int64(len(data)), int64(len(indDims))
	if q < 1 || b < 0 || b >= min(r, q) {
		return nil, 0, fmt.Errorf("batch_dims %d is out of range for data rank %d and indices rank %d", b, r, q)
	}
	k := indDims[q-1]
	if k < 1 || b+k > r {
		return nil, 0, fmt.Errorf("index tuples of length %d do not fit data of rank %d with %d batch dims", k, r, b)
	}
	for a := int64(0); a < b; a++ {
		if data[a] != indDims[a] {
			return nil, 0, fmt.Errorf("batch dims of data %v and indices %v differ", ir.FormatList(data), ir.FormatList(indDims))
		}
	}
	st := Strides(data)
	inner = ir.Product(data[b+k:])
	batchStride := ir.Product(data[b:])
	perBatch := ir.Product(indDims[b : q-1])
	offsets = make([]int, len(ind)/int(k))
	for t := range offsets {
		flat := int64(t) / max(perBatch, 1) * batchStride
		for a := int64(0); a < k; a++ {
			j, err := fixIndex(ind[int64(t)*k+a], data[b+a])
			if err != nil {
				return nil, 0, err
			}
			flat += j * st[b+a]
		}
		offsets[t] = int(flat)
	}
	return offsets, inner, nil
}

func runGatherND(c *KernelContext) error {
	x, it := c.In(0), c.In(1)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	ind, err := indexValues(it, "indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	b := batchDims(c.attrs)
	offsets, inner, err := ndIndex(x.Dims, it.Dims, ind, b)
	if err != nil {
		return c.Errorf("%v", err)
	}
	q := len(it.Dims)
	dims := append(append([]int64{}, it.Dims[:q-1]...), x.Dims[b+it.Dims[q-1]:]...)
	idx := make([]int, 0, int64(len(offsets))*inner)
	for _, off := range offsets {
		for i := 0; i < int(inner); i++ {
			idx = append(idx, off+i)
		}
	}
	c.Set(0, takeElems(x, dims, idx, nil))
	return nil
}

// --- ScatterElements, ScatterND ------------------------------------------------

// scatterReduction returns the node's reduction after checking that its
// opset allows it.
func scatterReduction(a attrs, opset int64) (string, error) {
	if !a.declares("reduction") {
		return "none", nil
	}
	r := a.String("reduction")
	switch {
	case r == "none", r == "add", r == "mul":
	case (r == "max" || r == "min") && opset >= 18:
	default:
		return "", fmt.Errorf("reduction %q is not supported at opset %d", r, opset)
	}
	return r, nil
}

func inferScatter(c *InferContext) error {
	if _, err := scatterReduction(c.attrs, c.Opset); err != nil {
		return c.Errorf("%v", err)
	}
	x, u := c.In(0), c.In(2)
	if u.Elem != ir.Undefined && x.Elem != ir.Undefined && u.Elem != x.Elem {
		return c.Errorf("updates are %s, data %s", u.Elem, x.Elem)
	}
	c.Set(0, x.Clone())
	return nil
}

func inferScatterElements(c *InferContext) error {
	ind, upd := c.In(1).Shape, c.In(2).Shape
	if ind.Ranked && upd.Ranked && !sameStaticDims(ind, upd) {
		return c.Errorf("indices %s and updates %s differ in shape", ind, upd)
	}
	if _, err := elementsAxis(c.attrs, c.In(0).Shape, ind); err != nil {
		return c.Errorf("%v", err)
	}
	return inferScatter(c)
}

func inferScatterND(c *InferContext) error {
	x, ind, upd := c.In(0).Shape, c.In(1).Shape, c.In(2).Shape
	if x.Ranked && ind.Ranked && upd.Ranked && ind.Rank() > 0 && ind.Dims[ind.Rank()-1].IsStatic() {
		q, k := ind.Rank(), int(ind.Dims[ind.Rank()-1].Value)
		if k < 1 || k > x.Rank() {
			return c.Errorf("index tuples of length %d do not fit data of rank %d", k, x.Rank())
		}
		want := ir.ShapeOf(append(append([]ir.Dim{}, ind.Dims[:q-1]...), x.Dims[k:]...)...)
		if !sameStaticDims(want, upd) {
			return c.Errorf("updates have shape %s, want %s", upd, want)
		}
	}
	return inferScatter(c)
}

// sameStaticDims reports whether two ranked shapes have the same rank and
// no two static dims that differ.
func sameStaticDims(a, b ir.Shape) bool {
	if a.Rank() != b.Rank() {
		return false
	}
	for i, d := range a.Dims {
		if e := b.Dims[i]; d.IsStatic() && e.IsStatic() && d.Value != e.Value {
			return false
		}
	}
	return true
}

// scatter returns a copy of data with data[targets[i]] combined with
// updates[i] by the reduction, in order (so later duplicates win for
// "none", as the ONNX reference does).
func scatter(c *KernelContext, data, updates *ir.Tensor, targets []int) error {
	if err := checkMovable(c, data); err != nil {
		return err
	}
	if updates.DType != data.DType || int(updates.Len()) != len(targets) {
		return c.Errorf("updates %s%v do not match the %d indexed elements of %s data", updates.DType, ir.FormatList(updates.Dims), len(targets), data.DType)
	}
	red, err := scatterReduction(c.attrs, c.Opset)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if red == "none" {
		// Index map over [data; updates]: each element reads the last
		// update aimed at it, or itself.
		n := int(data.Len())
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		for i, t := range targets {
			idx[t] = n + i
		}
		both := &ir.Tensor{DType: data.DType, Dims: []int64{int64(n + len(targets))}}
		if data.DType == ir.String {
			both.Strings = append(append([]string{}, data.Strings...), updates.Strings...)
		} else {
			both.Raw = append(append(ir.AlignedBytes(len(data.Raw) + len(updates.Raw))[:0], data.Raw...), updates.Raw...)
		}
		c.Set(0, takeElems(both, data.Dims, idx, nil))
		return nil
	}
	if data.DType == ir.String {
		return c.Errorf("reduction %q does not apply to strings", red)
	}
	if data.DType.IsFloat() {
		out, upd := Float64s(data), Float64s(updates)
		for i, t := range targets {
			out[t] = reduceScalar(red, out[t], upd[i])
		}
		c.Set(0, FromFloat64s(data.DType, data.Dims, out))
		return nil
	}
	out, upd := Int64s(data), Int64s(updates)
	for i, t := range targets {
		out[t] = reduceScalar(red, out[t], upd[i])
	}
	c.Set(0, FromInt64s(data.DType, data.Dims, out))
	return nil
}

func reduceScalar[T float64 | int64](red string, a, b T) T {
	switch red {
	case "add":
		return a + b
	case "mul":
		return a * b
	case "max":
		return max(a, b)
	case "min":
		return min(a, b)
	}
	return b
}

func runScatterElements(c *KernelContext) error {
	x, it, upd := c.In(0), c.In(1), c.In(2)
	ind, err := indexValues(it, "indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	axis, err := elementsAxis(c.attrs, x.Shape(), it.Shape())
	if err != nil {
		return c.Errorf("%v", err)
	}
	if !sameStaticDims(it.Shape(), upd.Shape()) {
		return c.Errorf("indices %v and updates %v differ in shape", ir.FormatList(it.Dims), ir.FormatList(upd.Dims))
	}
	targets, err := elementsIndex(x.Dims, it.Dims, ind, axis)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return scatter(c, x, upd, targets)
}

func runScatterND(c *KernelContext) error {
	x, it, upd := c.In(0), c.In(1), c.In(2)
	ind, err := indexValues(it, "indices")
	if err != nil {
		return c.Errorf("%v", err)
	}
	offsets, inner, err := ndIndex(x.Dims, it.Dims, ind, 0)
	if err != nil {
		return c.Errorf("%v", err)
	}
	q := len(it.Dims)
	want := append(append([]int64{}, it.Dims[:q-1]...), x.Dims[it.Dims[q-1]:]...)
	if !sameStaticDims(ir.S(want...), upd.Shape()) {
		return c.Errorf("updates have shape %v, want %v", ir.FormatList(upd.Dims), ir.FormatList(want))
	}
	targets := make([]int, 0, int64(len(offsets))*inner)
	for _, off := range offsets {
		for i := 0; i < int(inner); i++ {
			targets = append(targets, off+i)
		}
	}
	return scatter(c, x, upd, targets)
}

// --- OneHot, Trilu ---------------------------------------------------------------

func inferOneHot(c *InferContext) error {
	ind, vals := c.In(0), c.In(2)
	if vals.Shape.Ranked && vals.Shape.NumElements() >= 0 && vals.Shape.NumElements() != 2 {
		return c.Errorf("values has shape %s, want 2 elements", vals.Shape)
	}
	if !ind.Shape.Ranked {
		c.Set(0, ir.TensorType(vals.Elem, ir.Shape{}))
		return nil
	}
	r := ind.Shape.Rank()
	axis, err := NormAxis(c.Int("axis"), r+1)
	if err != nil {
		return c.Errorf("%v", err)
	}
	depth := ir.UnknownDim()
	if t := c.Const(1); t != nil && t.Len() == 1 && t.DType != ir.String {
		depth = ir.D(int64(t.Float64At(0)))
	}
	dims := append(append(append([]ir.Dim{}, ind.Shape.Dims[:axis]...), depth), ind.Shape.Dims[axis:]...)
	c.Set(0, ir.TensorType(vals.Elem, ir.ShapeOf(dims...)))
	return nil
}

func runOneHot(c *KernelContext) error {
	it, dt, vals := c.In(0), c.In(1), c.In(2)
	if err := checkMovable(c, vals); err != nil {
		return err
	}
	if vals.Len() != 2 {
		return c.Errorf("values has %d elements, want 2 (off, on)", vals.Len())
	}
	if dt.Len() != 1 || dt.DType == ir.String || it.DType == ir.String {
		return c.Errorf("depth must be one number and indices numeric")
	}
	depth := int64(dt.Float64At(0))
	if depth < 1 {
		return c.Errorf("depth %d must be positive", depth)
	}
	axis, err := NormAxis(c.Int("axis"), len(it.Dims)+1)
	if err != nil {
		return c.Errorf("%v", err)
	}
	ind := Int64s(it)
	outer, inner := ir.Product(it.Dims[:axis]), ir.Product(it.Dims[axis:])
	dims := append(append(append([]int64{}, it.Dims[:axis]...), depth), it.Dims[axis:]...)
	// Each output element reads values[0] (off) or values[1] (on).
	idx := make([]int, ir.Product(dims))
	for o := int64(0); o < outer; o++ {
		for i := int64(0); i < inner; i++ {
			j := ind[o*inner+i]
			if j < 0 {
				j += depth
			}
			if j >= 0 && j < depth {
				idx[(o*depth+j)*inner+i] = 1
			}
		}
	}
	c.Set(0, takeElems(vals, dims, idx, nil))
	return nil
}

func inferTrilu(c *InferContext) error {
	x := c.In(0)
	if x.Shape.Ranked && x.Shape.Rank() < 2 {
		return c.Errorf("input has rank %d, want at least 2", x.Shape.Rank())
	}
	if k := c.In(1); c.HasInput(1) && k.Shape.Ranked && k.Shape.NumElements() != 1 && k.Shape.IsStatic() {
		return c.Errorf("k has shape %s, want a scalar", k.Shape)
	}
	c.Set(0, x.Clone())
	return nil
}

func runTrilu(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	r := len(x.Dims)
	if r < 2 {
		return c.Errorf("input has rank %d, want at least 2", r)
	}
	var k int64
	if t := c.In(1); t != nil {
		v, err := indexValues(t, "k")
		if err != nil || len(v) != 1 {
			return c.Errorf("k must be one integer")
		}
		k = v[0]
	}
	upper := c.Int("upper") != 0
	rows, cols := x.Dims[r-2], x.Dims[r-1]
	idx := make([]int, x.Len())
	for p := range idx {
		i, j := int64(p)/cols%rows, int64(p)%cols
		// Upper keeps j-i >= k, lower keeps j-i <= k; the rest is zero.
		if keep := j-i >= k; upper && keep || !upper && j-i <= k {
			idx[p] = p
		} else {
			idx[p] = -1
		}
	}
	c.Set(0, takeElems(x, x.Dims, idx, nil))
	return nil
}

// --- Pad ---------------------------------------------------------------------

// padArgs returns the begin and end pads per axis of a rank-r input from
// pads (all begins, then all ends) over axes (all axes when nil).
func padArgs(rank int, pads, axes []int64) (begin, end []int64, err error) {
	if axes == nil {
		axes = make([]int64, rank)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, nil, fmt.Errorf("pads %v has %d entries for %d axes", ir.FormatList(pads), len(pads), len(axes))
	}
	norm, err := normAxes(axes, rank)
	if err != nil {
		return nil, nil, err
	}
	begin, end = make([]int64, rank), make([]int64, rank)
	for i, ax := range norm {
		begin[ax], end[ax] = pads[i], pads[len(axes)+i]
	}
	return begin, end, nil
}

func padMode(a attrs, opset int64) (string, error) {
	m := a.String("mode")
	switch {
	case m == "constant", m == "reflect", m == "edge":
	case m == "wrap" && opset >= 19:
	default:
		return "", fmt.Errorf("mode %q is not supported at opset %d", m, opset)
	}
	return m, nil
}

// padsAttr returns Pad-1's paddings or Pad-2's pads, or nil from Pad-11 on.
func padsAttr(a attrs) ([]int64, bool) {
	switch {
	case a.declares("pads"):
		return a.Ints("pads"), true
	case a.declares("paddings"):
		return a.Ints("paddings"), true
	}
	return nil, false
}

func inferPad(c *InferContext) error {
	x := c.In(0)
	if _, err := padMode(c.attrs, c.Opset); err != nil {
		return c.Errorf("%v", err)
	}
	var pads []*dimexpr.Expr
	if p, ok := padsAttr(c.attrs); ok {
		pads = exprsOf(p)
	} else {
		pads = c.SymInts(1)
	}
	var axes []int64
	if c.HasInput(3) {
		if axes = constInts(c, 3); axes == nil {
			pads = nil
		}
	}
	if !x.Shape.Ranked || pads == nil {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(x.Shape.Rank())))
		return nil
	}
	rank := x.Shape.Rank()
	if axes == nil {
		axes = make([]int64, rank)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(pads) != 2*len(axes) {
		return c.Errorf("pads %s has %d entries for %d axes", exprList(pads), len(pads), len(axes))
	}
	norm, err := normAxes(axes, rank)
	if err != nil {
		return c.Errorf("%v", err)
	}
	begin, end := make([]*dimexpr.Expr, rank), make([]*dimexpr.Expr, rank)
	for i := range begin {
		begin[i], end[i] = dimexpr.Const(0), dimexpr.Const(0)
	}
	for i, ax := range norm {
		begin[ax], end[ax] = pads[i], pads[len(axes)+i]
	}
	out := x.Shape.Clone()
	for i, d := range out.Dims {
		b, e := begin[i], end[i]
		if isZero(b) && isZero(e) {
			continue
		}
		de, ok := ir.DimExpr(d)
		n := de.Add(b).Add(e)
		if v, isConst := n.Value(); ok && isConst && v < 0 {
			return c.Errorf("pads %s crop dim %d of %s below zero", exprList(pads), i, d)
		}
		if !ok {
			out.Dims[i] = ir.UnknownDim()
			continue
		}
		out.Dims[i] = symDim(n)
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// padMap is the axisIndex map of one padded axis: output position i reads
// input position i-begin, mapped back inside by the mode, or -1 (the
// constant) outside in constant mode.
func padMap(mode string, dim, begin, out, stride int64) ([]int, error) {
	m := make([]int, out)
	if dim == 0 && mode != "constant" && out > 0 {
		return nil, fmt.Errorf("cannot pad an empty axis in %s mode", mode)
	}
	for i := range m {
		src := int64(i) - begin
		switch mode {
		case "constant":
			if src < 0 || src >= dim {
				m[i] = -1
				continue
			}
		case "edge":
			src = min(max(src, 0), dim-1)
		case "wrap":
			src = (src%dim + dim) % dim
		case "reflect":
			if dim == 1 {
				src = 0
				break
			}
			// Reflection without repeating the edge has period 2(dim-1).
			period := 2 * (dim - 1)
			src = (src%period + period) % period
			if src >= dim {
				src = period - src
			}
		}
		m[i] = int(src * stride)
	}
	return m, nil
}

func runPad(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	pad, err := c.PadSpec(x.DType, x.Dims)
	if err != nil {
		return err
	}
	st := Strides(x.Dims)
	dims := make([]int64, len(x.Dims))
	maps := make([][]int, len(x.Dims))
	for a, d := range x.Dims {
		dims[a] = d + pad.Begin[a] + pad.End[a]
		if maps[a], err = padMap(pad.Mode, d, pad.Begin[a], dims[a], st[a]); err != nil {
			return c.Errorf("%v", err)
		}
	}
	c.Set(0, takeElems(x, dims, axisIndex(dims, maps), pad.Fill))
	return nil
}

// Pad is a Pad node resolved against its input: the mode, the pads before
// and after each axis, and the constant (nil: zero of the data type).
type Pad struct {
	Mode       string
	Begin, End []int64
	Fill       *ir.Tensor
}

// PadSpec resolves a Pad node for data of type d and dims, as every
// backend must: its pads come from the attribute (Pad-1, -2) or the
// inputs (which must then be known, c.In), over the axes input (Pad-18).
func (c *KernelContext) PadSpec(d ir.DType, dims []int64) (*Pad, error) {
	mode, err := padMode(c.attrs, c.Opset)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	pads, ok := padsAttr(c.attrs)
	if !ok {
		if c.In(1) == nil {
			return nil, c.Errorf("pads is not known")
		}
		if pads, err = indexValues(c.In(1), "pads"); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	var axes []int64
	if c.HasInput(3) {
		if c.In(3) == nil {
			return nil, c.Errorf("axes is not known")
		}
		if axes, err = indexValues(c.In(3), "axes"); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	begin, end, err := padArgs(len(dims), pads, axes)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	for a, n := range dims {
		if n < 0 {
			continue // a dim known only at run time (-1): nothing to check here
		}
		if n+begin[a]+end[a] < 0 {
			return nil, c.Errorf("pads %v crop dim %d of %d below zero", ir.FormatList(pads), a, n)
		}
		if n == 0 && mode != "constant" && n+begin[a]+end[a] > 0 {
			return nil, c.Errorf("cannot pad an empty axis in %s mode", mode)
		}
	}
	p := &Pad{Mode: mode, Begin: begin, End: end}
	// The constant: Pad-1/2's float attribute, or the optional third input.
	switch {
	case c.declares("value"):
		if d != ir.String {
			p.Fill = FromFloat64s(d, nil, []float64{float64(c.Float("value"))})
		}
	case c.In(2) != nil: // a backend may read it at run time instead
		p.Fill = c.In(2)
		if p.Fill.DType != d || p.Fill.Len() != 1 {
			return nil, c.Errorf("constant_value is %s%v, want one %s", p.Fill.DType, ir.FormatList(p.Fill.Dims), d)
		}
	}
	return p, nil
}

// --- Resize --------------------------------------------------------------------

var (
	resize11Attrs = []AttrDef{
		{Name: "coordinate_transformation_mode", Kind: ir.AttrString, Default: ir.AttrS("coordinate_transformation_mode", "half_pixel")},
		{Name: "cubic_coeff_a", Kind: ir.AttrFloat, Default: ir.AttrF("cubic_coeff_a", -0.75)},
		{Name: "exclude_outside", Kind: ir.AttrInt, Default: ir.AttrI("exclude_outside", 0)},
		{Name: "extrapolation_value", Kind: ir.AttrFloat, Default: ir.AttrF("extrapolation_value", 0)},
		{Name: "mode", Kind: ir.AttrString, Default: ir.AttrS("mode", "nearest")},
		{Name: "nearest_mode", Kind: ir.AttrString, Default: ir.AttrS("nearest_mode", "round_prefer_floor")},
	}
	resize18Attrs = append(append([]AttrDef{}, resize11Attrs...),
		AttrDef{Name: "antialias", Kind: ir.AttrInt, Default: ir.AttrI("antialias", 0)},
		AttrDef{Name: "axes", Kind: ir.AttrInts},
		AttrDef{Name: "keep_aspect_ratio_policy", Kind: ir.AttrString, Default: ir.AttrS("keep_aspect_ratio_policy", "stretch")},
	)
)

// resizeAttrs are Resize's attributes with the defaults of the node's
// version applied. Resize-10 behaves like Upsample: asymmetric
// coordinates and, for nearest, floor when upsampling and ceil when
// downsampling ("simple", as ONNX Runtime does).
type resizeAttrs struct {
	mode, coord, nearest, policy string
	cubicA, extrapolation        float64
	exclude, antialias           bool
	axes                         []int64 // nil: every axis
}

func resizeAttrsOf(a attrs, opset int64) (resizeAttrs, error) {
	r := resizeAttrs{mode: a.String("mode"), coord: "asymmetric", nearest: "simple", policy: "stretch"}
	if a.declares("coordinate_transformation_mode") {
		r.coord, r.nearest = a.String("coordinate_transformation_mode"), a.String("nearest_mode")
		r.cubicA, r.extrapolation = float64(a.Float("cubic_coeff_a")), float64(a.Float("extrapolation_value"))
		r.exclude = a.Int("exclude_outside") != 0
	}
	if a.declares("antialias") {
		r.antialias = a.Int("antialias") != 0
		r.axes = a.Ints("axes")
		r.policy = a.String("keep_aspect_ratio_policy")
	}
	switch {
	case r.mode == "nearest", r.mode == "linear":
	case r.mode == "cubic" && opset >= 11:
	default:
		return r, fmt.Errorf("mode %q is not supported at opset %d", r.mode, opset)
	}
	switch c := r.coord; {
	case c == "half_pixel", c == "pytorch_half_pixel", c == "align_corners", c == "asymmetric", c == "tf_crop_and_resize":
	case c == "tf_half_pixel_for_nn" && opset < 13:
	case c == "half_pixel_symmetric" && opset >= 19:
	default:
		return r, fmt.Errorf("coordinate_transformation_mode %q is not supported at opset %d", c, opset)
	}
	switch r.nearest {
	case "simple", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil":
	default:
		return r, fmt.Errorf("unknown nearest_mode %q", r.nearest)
	}
	switch r.policy {
	case "stretch", "not_larger", "not_smaller":
	default:
		return r, fmt.Errorf("unknown keep_aspect_ratio_policy %q", r.policy)
	}
	return r, nil
}

// resizeInputs numbers Resize's optional inputs by version: Resize-10 has
// scales at 1 and nothing else (as Upsample-9; Upsample-7 has none).
func resizeInputs(a attrs) (roi, scales, sizes int) {
	switch {
	case a.declares("scales"):
		return -1, -1, -1
	case !a.declares("coordinate_transformation_mode"):
		return -1, 1, -1
	}
	return 1, 2, 3
}

// upsampleScales is Upsample-7's scales attribute as a tensor, or nil for
// the rows that take scales as an input.
func upsampleScales(a attrs) *ir.Tensor {
	if !a.declares("scales") {
		return nil
	}
	s := a.Floats("scales")
	return ir.FromSlice(ir.Float32, []int64{int64(len(s))}, append([]float32{}, s...))
}

// checkUpsampleScales refuses scales below 1: Upsample only enlarges
// (Resize downsamples).
func checkUpsampleScales(scales *ir.Tensor) error {
	if scales == nil || !scales.DType.IsFloat() {
		return nil // planResize names a missing or mistyped scales
	}
	for _, s := range Float64s(scales) {
		if !(s >= 1) {
			return fmt.Errorf("scale %v is below 1: Upsample only enlarges (use Resize to shrink)", s)
		}
	}
	return nil
}

func inferUpsample(c *InferContext) error {
	scales := upsampleScales(c.attrs)
	if scales == nil {
		scales = c.Const(1)
	}
	if err := checkUpsampleScales(scales); err != nil {
		return c.Errorf("%v", err)
	}
	return inferResize(c)
}

func runUpsample(c *KernelContext) error {
	scales := upsampleScales(c.attrs)
	if scales == nil {
		scales = c.In(1)
	}
	if err := checkUpsampleScales(scales); err != nil {
		return c.Errorf("%v", err)
	}
	return runResize(c)
}

// resizePlan is the geometry of one Resize: per input axis, the output
// length, the scale, and the resized length as a real number (scale times
// the input length, which the coordinate formulas use, as ONNX's reference
// does), and the region of interest.
type resizePlan struct {
	out      []ir.Dim
	scales   []float64
	lengths  []float64
	roiStart []float64
	roiEnd   []float64
}

// planResize resolves the output shape from scales or sizes (exactly one
// non-nil) over the attribute's axes. Output dims it cannot know from a
// symbolic input are unknown.
func planResize(r resizeAttrs, in ir.Shape, scalesT, sizesT *ir.Tensor) (*resizePlan, error) {
	rank := in.Rank()
	axes := make([]int, rank)
	for i := range axes {
		axes[i] = i
	}
	if r.axes != nil {
		var err error
		if axes, err = normAxes(r.axes, rank); err != nil {
			return nil, err
		}
	}
	p := &resizePlan{out: in.Clone().Dims, scales: make([]float64, rank), lengths: make([]float64, rank)}
	for i := range p.scales {
		p.scales[i] = 1
		p.lengths[i] = -1
		if d := in.Dims[i]; d.IsStatic() {
			p.lengths[i] = float64(d.Value)
		}
	}
	switch {
	case scalesT != nil && sizesT != nil:
		return nil, fmt.Errorf("only one of scales and sizes may be given")
	case scalesT != nil:
		if !scalesT.DType.IsFloat() || scalesT.Len() != int64(len(axes)) {
			return nil, fmt.Errorf("scales is %s%v, want %d floats", scalesT.DType, ir.FormatList(scalesT.Dims), len(axes))
		}
		for i, s := range Float64s(scalesT) {
			ax := axes[i]
			if !(s > 0) {
				return nil, fmt.Errorf("scale %v must be positive", s)
			}
			p.scales[ax] = s
			if d := in.Dims[ax]; d.IsStatic() {
				p.lengths[ax] = s * float64(d.Value)
				p.out[ax] = ir.D(int64(math.Floor(p.lengths[ax])))
			} else if s != 1 {
				p.out[ax] = scaledDim(d, s)
			}
		}
		return p, nil
	case sizesT != nil:
		sizes, err := indexValues(sizesT, "sizes")
		if err != nil {
			return nil, err
		}
		if len(sizes) != len(axes) {
			return nil, fmt.Errorf("sizes %v has %d entries for %d axes", ir.FormatList(sizes), len(sizes), len(axes))
		}
		// keep_aspect_ratio_policy replaces the sizes by one common scale,
		// the smallest (not_larger) or largest (not_smaller) of them.
		common := -1.0
		for i, sz := range sizes {
			d := in.Dims[axes[i]]
			if sz < 0 {
				return nil, fmt.Errorf("sizes %v has a negative entry", ir.FormatList(sizes))
			}
			if !d.IsStatic() {
				common = math.NaN()
				continue
			}
			s := float64(sz) / float64(d.Value)
			switch {
			case r.policy == "not_larger" && (common < 0 || s < common):
				common = s
			case r.policy == "not_smaller" && s > common:
				common = s
			}
		}
		for i, sz := range sizes {
			ax := axes[i]
			d := in.Dims[ax]
			switch {
			case r.policy == "stretch":
				p.out[ax] = ir.D(sz)
				if d.IsStatic() {
					p.scales[ax], p.lengths[ax] = float64(sz)/float64(d.Value), float64(sz)
				}
			case math.IsNaN(common):
				p.out[ax] = ir.UnknownDim()
			default:
				p.scales[ax], p.lengths[ax] = common, common*float64(d.Value)
				p.out[ax] = ir.D(int64(p.lengths[ax] + 0.5))
			}
		}
		return p, nil
	}
	return nil, fmt.Errorf("one of scales and sizes is required")
}

// scaledDim is floor(d * s) for a symbolic d, as an expression when s,
// a binary fraction p/2^k like every float scale, makes d * s exact in
// float64 (the kernels' arithmetic) for dims below 2^31: 2.0 gives 2*H,
// 0.5 gives H//2.
func scaledDim(d ir.Dim, s float64) ir.Dim {
	frac, exp := math.Frexp(s) // s = frac * 2^exp, frac in [0.5, 1)
	num, shift := frac, exp
	for num != math.Trunc(num) && shift > -40 {
		num, shift = num*2, shift-1
	}
	if num != math.Trunc(num) || num > 1<<22 {
		return ir.UnknownDim()
	}
	x, ok := ir.DimExpr(d)
	if !ok {
		return ir.UnknownDim()
	}
	n := int64(num)
	if shift >= 0 {
		if shift > 20 {
			return ir.UnknownDim()
		}
		return ir.DimOf(x.MulConst(n << shift))
	}
	q, _ := x.MulConst(n).FloorDiv(dimexpr.Const(1 << -shift))
	return ir.DimOf(q)
}

// resizeSymSizes is Resize's output when its sizes are known as
// expressions (from a shape subgraph): those sizes on the resized axes,
// under the default "stretch" policy; false otherwise.
func resizeSymSizes(r resizeAttrs, in ir.Shape, sizes []*dimexpr.Expr) (ir.Shape, bool) {
	axes := make([]int, in.Rank())
	for i := range axes {
		axes[i] = i
	}
	if r.axes != nil {
		var err error
		if axes, err = normAxes(r.axes, in.Rank()); err != nil {
			return ir.Shape{}, false
		}
	}
	if r.policy != "stretch" || len(sizes) != len(axes) {
		return ir.Shape{}, false
	}
	out := in.Clone()
	for i, ax := range axes {
		out.Dims[ax] = symDim(sizes[i])
	}
	return out, true
}

// resizeArg returns a Resize input for inference: absent (or empty, the
// pre-13 way of omitting it), present with a known value, or present but
// unknown.
func resizeArg(c *InferContext, i int) (t *ir.Tensor, known bool) {
	if i < 0 || !c.HasInput(i) || vectorLen(c.In(i)) == 0 {
		return nil, true
	}
	if t = c.Const(i); t == nil {
		return nil, false
	}
	if t.Len() == 0 {
		return nil, true
	}
	return t, true
}

func inferResize(c *InferContext) error {
	x := c.In(0)
	r, err := resizeAttrsOf(c.attrs, c.Opset)
	if err != nil {
		return c.Errorf("%v", err)
	}
	_, si, zi := resizeInputs(c.attrs)
	scales, ok1 := resizeArg(c, si)
	sizes, ok2 := resizeArg(c, zi)
	if t := upsampleScales(c.attrs); t != nil {
		scales, ok1 = t, true
	}
	if x.Shape.Ranked && ok1 && scales == nil && !ok2 {
		if out, ok := resizeSymSizes(r, x.Shape, c.SymInts(zi)); ok {
			c.Set(0, ir.TensorType(x.Elem, out))
			return nil
		}
	}
	if !x.Shape.Ranked || !ok1 || !ok2 {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(x.Shape.Rank())))
		return nil
	}
	p, err := planResize(r, x.Shape, scales, sizes)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(p.out...)))
	return nil
}

// resizeTap is one input sample of an output position along an axis.
type resizeTap struct {
	I int
	W float64
}

// resizeTaps computes, for each output position along one axis, its input
// samples and weights (ResizeTaps over Go values); nil marks a position
// outside the crop region (tf_crop_and_resize), which takes the
// extrapolation value.
func resizeTaps(r resizeAttrs, p *resizePlan, ax int, in, out int64) [][]resizeTap {
	var a goArith
	rule := newResizeRule(r, p.scales[ax])
	g := ResizeAxis[uint64]{In: bt(float64(in)), Out: bt(float64(out)), Scale: bt(p.scales[ax]), Length: bt(p.lengths[ax]),
		RoiStart: bt(p.roiStart[ax]), RoiEnd: bt(p.roiEnd[ax])}
	taps := make([][]resizeTap, out)
	for x := range taps {
		index, weight, inside := ResizeTaps[uint64](a, rule, g, bt(float64(x)))
		if fl(inside) == 0 {
			continue
		}
		for j, w := range weight {
			if fl(w) != 0 {
				taps[x] = append(taps[x], resizeTap{I: int(fl(index[j])), W: fl(w)})
			}
		}
	}
	return taps
}

// isIdentity reports whether taps copy an axis unchanged.
func isIdentity(taps [][]resizeTap) bool {
	for x, t := range taps {
		if len(t) != 1 || t[0].I != x || t[0].W != 1 {
			return false
		}
	}
	return true
}

// resizeAxis interpolates data (shape dims) along axis ax. Resize's
// interpolation is separable, so resizing one axis after another equals
// ONNX's n-dimensional formula; a position outside the crop region on any
// axis ends up at the extrapolation value either way.
func resizeAxis(data []float64, dims []int64, ax int, taps [][]resizeTap, extrapolation float64) ([]float64, []int64) {
	in, out := dims[ax], int64(len(taps))
	outer, inner := ir.Product(dims[:ax]), ir.Product(dims[ax+1:])
	res := make([]float64, outer*out*inner)
	for o := int64(0); o < outer; o++ {
		for x, ts := range taps {
			dst := res[(o*out+int64(x))*inner : (o*out+int64(x)+1)*inner]
			if ts == nil {
				for i := range dst {
					dst[i] = extrapolation
				}
				continue
			}
			for _, t := range ts {
				src := data[(o*in+int64(t.I))*inner : (o*in+int64(t.I)+1)*inner]
				for i, v := range src {
					dst[i] += t.W * v
				}
			}
		}
	}
	nd := append([]int64{}, dims...)
	nd[ax] = out
	return res, nd
}

func runResize(c *KernelContext) error {
	x := c.In(0)
	if !x.DType.IsFloat() && !x.DType.IsInt() {
		return c.Unsupported(x.DType)
	}
	rs, err := c.ResizeSpec(x.Dims)
	if err != nil {
		return err
	}
	data, dims := Float64s(x), append([]int64{}, x.Dims...)
	for ax, taps := range rs.Taps {
		if taps == nil {
			continue
		}
		data, dims = resizeAxis(data, dims, ax, taps, rs.Extrapolation)
	}
	if x.DType.IsInt() {
		for i, v := range data {
			data[i] = RoundSaturate(v, x.DType)
		}
	}
	c.Set(0, FromFloat64s(x.DType, dims, data))
	return nil
}

// RoundSaturate is how Resize stores an interpolated integer: rounded to
// nearest (half away from zero) and saturated to type d.
func RoundSaturate(v float64, d ir.DType) float64 {
	bits := 8 * d.Size()
	lo, hi := 0.0, math.Exp2(float64(bits))-1
	if d.IsSigned() {
		lo, hi = -math.Exp2(float64(bits-1)), math.Exp2(float64(bits-1))-1
	}
	return min(max(math.Round(v), lo), hi)
}

// ResizeTap is one input sample of an output position along an axis.
type ResizeTap = resizeTap

// Resize is a Resize node resolved against its input's dims: per axis,
// for each output position its input samples and weights (a nil entry
// takes Extrapolation), or nil for an axis left as it is. Resize is
// separable: the output is the product of the axes' taps.
type Resize struct {
	Taps          [][][]ResizeTap
	Extrapolation float64
}

// ResizeSpec resolves a Resize node, as every backend must: modes,
// coordinate transformations, scales or sizes (which must be known, c.In)
// and the region of interest.
func (c *KernelContext) ResizeSpec(dims []int64) (*Resize, error) {
	r, err := resizeAttrsOf(c.attrs, c.Opset)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	ri, si, zi := resizeInputs(c.attrs)
	arg := func(i int) *ir.Tensor {
		if i < 0 || c.In(i) == nil || c.In(i).Len() == 0 {
			return nil
		}
		return c.In(i)
	}
	for _, i := range []int{si, zi} {
		if i >= 0 && c.HasInput(i) && c.In(i) == nil {
			return nil, c.Errorf("input %d (scales or sizes) is not known", i)
		}
	}
	scales := arg(si)
	if t := upsampleScales(c.attrs); t != nil {
		scales = t
	}
	p, err := planResize(r, ir.S(dims...), scales, arg(zi))
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	rank := len(dims)
	p.roiStart, p.roiEnd = make([]float64, rank), make([]float64, rank)
	for i := range p.roiEnd {
		p.roiEnd[i] = 1
	}
	if roi := arg(ri); roi != nil && r.coord == "tf_crop_and_resize" {
		axes := r.axes
		if axes == nil {
			for i := 0; i < rank; i++ {
				axes = append(axes, int64(i))
			}
		}
		if !roi.DType.IsFloat() || roi.Len() != 2*int64(len(axes)) {
			return nil, c.Errorf("roi is %s%v, want %d floats", roi.DType, ir.FormatList(roi.Dims), 2*len(axes))
		}
		v := Float64s(roi)
		norm, err := normAxes(axes, rank)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		for i, ax := range norm {
			p.roiStart[ax], p.roiEnd[ax] = v[i], v[len(norm)+i]
		}
	} else if ri >= 0 && c.HasInput(ri) && c.In(ri) == nil && r.coord == "tf_crop_and_resize" {
		return nil, c.Errorf("roi is not known")
	}
	rs := &Resize{Taps: make([][][]ResizeTap, rank), Extrapolation: r.extrapolation}
	for ax := range dims {
		out := p.out[ax].Value
		if dims[ax] == 0 && out > 0 {
			return nil, c.Errorf("cannot resize an empty axis %d to %d", ax, out)
		}
		taps := resizeTaps(r, p, ax, dims[ax], out)
		if int64(len(taps)) == dims[ax] && isIdentity(taps) {
			continue
		}
		rs.Taps[ax] = taps
	}
	return rs, nil
}
