package ops

import (
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Symbolic values: what inference knows of the small integer tensors that
// shape subgraphs compute from a model's dims. PyTorch exports
// x.view(x.size(0), -1) as Shape → Gather → Unsqueeze → Concat → Reshape;
// with the batch symbolic, the Concat's value is [N, -1], and Reshape reads
// it to give [N, C*H*W]. Each element is a dimexpr expression over the
// model's input symbols, or nil where it depends on data (or on something
// inference does not follow).

// SymTensor is a small tensor (a shape, a dim, a list of sizes or pads)
// whose elements are known as expressions over the model's symbols.
type SymTensor struct {
	DType ir.DType
	Dims  []int64         // its own shape, static
	Elems []*dimexpr.Expr // row-major; nil where unknown
}

// maxSymElements bounds the tensors followed: shapes are short.
const maxSymElements = 1024

// SymOf returns a constant integer or bool tensor as a SymTensor (nil for
// other types, for floats that are not whole numbers, and for large ones).
func SymOf(t *ir.Tensor) *SymTensor {
	if t == nil || t.Len() > maxSymElements || !(t.DType.IsInt() || t.DType == ir.Bool || t.DType.IsFloat()) {
		return nil
	}
	s := &SymTensor{DType: t.DType, Dims: append([]int64{}, t.Dims...), Elems: make([]*dimexpr.Expr, t.Len())}
	if t.DType.IsFloat() {
		for i, v := range Float64s(t) {
			if v == float64(int64(v)) && v >= -(1<<53) && v <= 1<<53 {
				s.Elems[i] = dimexpr.Const(int64(v))
			}
		}
		return s
	}
	if t.DType == ir.Uint64 {
		for i, v := range Int64s(t) {
			if v >= 0 { // above MaxInt64 is not a dim
				s.Elems[i] = dimexpr.Const(v)
			}
		}
		return s
	}
	for i, v := range Int64s(t) {
		s.Elems[i] = dimexpr.Const(v)
	}
	return s
}

// Len is the element count.
func (s *SymTensor) Len() int { return len(s.Elems) }

// Known reports whether any element is known.
func (s *SymTensor) Known() bool {
	for _, e := range s.Elems {
		if e != nil {
			return true
		}
	}
	return false
}

// Const returns the tensor when every element is a constant, else nil.
func (s *SymTensor) Const() *ir.Tensor {
	v := make([]int64, len(s.Elems))
	for i, e := range s.Elems {
		c, ok := e.Value()
		if !ok {
			return nil
		}
		v[i] = c
	}
	switch {
	case s.DType.IsInt():
		return FromInt64s(s.DType, s.Dims, v)
	case s.DType == ir.Bool:
		b := make([]bool, len(v))
		for i, x := range v {
			b[i] = x != 0
		}
		return FromBools(s.Dims, b)
	case s.DType.IsFloat():
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = float64(x)
		}
		return FromFloat64s(s.DType, s.Dims, f)
	}
	return nil
}

// String prints "int64[2] {N, -1}".
func (s *SymTensor) String() string {
	parts := make([]string, len(s.Elems))
	for i, e := range s.Elems {
		parts[i] = e.String()
	}
	return fmt.Sprintf("%s%v {%s}", s.DType, s.Dims, strings.Join(parts, ", "))
}

// SymIn returns input i's symbolic value: the one the driver propagated,
// or the constant's; nil when neither is known.
func (c *InferContext) SymIn(i int) *SymTensor {
	if i < len(c.SymInputs) && c.SymInputs[i] != nil {
		return c.SymInputs[i]
	}
	return SymOf(c.Const(i))
}

// SetSym records output i's symbolic value.
func (c *InferContext) SetSym(i int, s *SymTensor) {
	if i < len(c.SymValues) {
		c.SymValues[i] = s
	}
}

// SymInts returns the elements of input i, an integer scalar or vector
// (a shape, sizes, pads, a bound), as expressions with nil where unknown;
// nil when nothing is known of them.
func (c *InferContext) SymInts(i int) []*dimexpr.Expr {
	s := c.SymIn(i)
	if s == nil || len(s.Dims) > 1 || !s.DType.IsInt() || len(s.Elems) > 0 && !s.Known() {
		return nil
	}
	return s.Elems // empty, not nil, for an empty vector
}

// symDim returns a value that is a dim: an expression, or unknown for nil
// and for what may be negative.
func symDim(e *dimexpr.Expr) ir.Dim {
	if e == nil || !e.NonNeg() {
		return ir.UnknownDim()
	}
	return ir.DimOf(e)
}

// --- the rules ---------------------------------------------------------------

// symRules compute symbolic output values, per ONNX op. They run after the
// op's inference (so the output types are set) when the outputs are not
// constant.
var symRules = map[string]func(c *InferContext){
	"Shape":     symShape,
	"Size":      symSize,
	"Identity":  symSame,
	"Cast":      symCast,
	"CastLike":  symCast,
	"Floor":     symSame, // a whole number stays itself
	"Ceil":      symSame,
	"Round":     symSame,
	"Reshape":   symSame,
	"Flatten":   symSame,
	"Squeeze":   symSame,
	"Unsqueeze": symSame,
	"Gather":    symGather,
	"Slice":     symSlice,
	"Concat":    symConcat,
	"Expand":    symExpand,
	"Add":       symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return a.Add(b) }),
	"Sub":       symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return a.Sub(b) }),
	"Mul":       symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return a.Mul(b) }),
	"Div":       symBinary(symDiv),
	"Mod":       symMod,
	"Neg":       symUnary(func(a *dimexpr.Expr) *dimexpr.Expr { return a.Neg() }),
	"Abs":       symUnary(symAbs),
	"Max":       symVariadic(dimexpr.Max),
	"Min":       symVariadic(dimexpr.Min),
	"Sum": symVariadic(func(es ...*dimexpr.Expr) *dimexpr.Expr {
		s := dimexpr.Const(0)
		for _, e := range es {
			s = s.Add(e)
		}
		return s
	}),
	"Equal":          symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return truth(a.Equal(b), differ(a, b)) }),
	"Less":           symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return truth(lt(a, b), a.GE(b)) }),
	"LessOrEqual":    symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return truth(b.GE(a), lt(b, a)) }),
	"Greater":        symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return truth(lt(b, a), b.GE(a)) }),
	"GreaterOrEqual": symBinary(func(a, b *dimexpr.Expr, _ bool) *dimexpr.Expr { return truth(a.GE(b), lt(a, b)) }),
	"Not":            symUnary(func(a *dimexpr.Expr) *dimexpr.Expr { return dimexpr.Const(1).Sub(a) }),
	"Where":          symWhere,
	"ReduceProd":     symReduce(func(a, b *dimexpr.Expr) *dimexpr.Expr { return a.Mul(b) }),
	"ReduceSum":      symReduce(func(a, b *dimexpr.Expr) *dimexpr.Expr { return a.Add(b) }),
	"ReduceMax":      symReduce(func(a, b *dimexpr.Expr) *dimexpr.Expr { return dimexpr.Max(a, b) }),
	"ReduceMin":      symReduce(func(a, b *dimexpr.Expr) *dimexpr.Expr { return dimexpr.Min(a, b) }),
}

// outSym returns an empty SymTensor for output i when its type is a small
// static tensor, else nil.
func outSym(c *InferContext, i int) *SymTensor {
	if i >= len(c.Outputs) {
		return nil
	}
	t := c.Outputs[i]
	dims, ok := t.Shape.Ints()
	if t.Kind != ir.TensorKind || !ok {
		return nil
	}
	n, err := ir.ElementCount(dims)
	if err != nil || n > maxSymElements {
		return nil
	}
	return &SymTensor{DType: t.Elem, Dims: dims, Elems: make([]*dimexpr.Expr, n)}
}

// setIfKnown records out when any element is known.
func setIfKnown(c *InferContext, i int, out *SymTensor) {
	if out != nil && out.Known() {
		c.SetSym(i, out)
	}
}

func symShape(c *InferContext) {
	in := c.In(0).Shape
	out := outSym(c, 0)
	if !in.Ranked || out == nil {
		return
	}
	lo, hi := shapeBounds(c.attrs, len(in.Dims))
	if hi-lo != out.Len() {
		return
	}
	for i, d := range in.Dims[lo:hi] {
		out.Elems[i] = d.Expr()
	}
	setIfKnown(c, 0, out)
}

func symSize(c *InferContext) {
	in := c.In(0).Shape
	out := outSym(c, 0)
	if !in.Ranked || out == nil || out.Len() != 1 {
		return
	}
	out.Elems[0] = ir.DimProduct(in.Dims...).Expr()
	setIfKnown(c, 0, out)
}

// symSame copies input 0's elements into output 0's shape (the ops that
// only reshape, and rounding of whole numbers).
func symSame(c *InferContext) {
	in, out := c.SymIn(0), outSym(c, 0)
	if in == nil || out == nil || in.Len() != out.Len() {
		return
	}
	copy(out.Elems, in.Elems)
	setIfKnown(c, 0, out)
}

func symCast(c *InferContext) {
	in, out := c.SymIn(0), outSym(c, 0)
	if in == nil || out == nil || in.Len() != out.Len() {
		return
	}
	for i, e := range in.Elems {
		switch {
		case out.DType == ir.Bool:
			out.Elems[i] = truth(e.GE(dimexpr.Const(1)) || e.Neg().GE(dimexpr.Const(1)), isZero(e))
		case out.DType.IsInt() || out.DType.IsFloat():
			out.Elems[i] = e
		}
	}
	setIfKnown(c, 0, out)
}

func isZero(e *dimexpr.Expr) bool {
	v, ok := e.Value()
	return ok && v == 0
}

// truth is 1 when yes is proven, 0 when no is, else unknown.
func truth(yes, no bool) *dimexpr.Expr {
	switch {
	case yes:
		return dimexpr.Const(1)
	case no:
		return dimexpr.Const(0)
	}
	return nil
}

// lt reports a < b provably.
func lt(a, b *dimexpr.Expr) bool { return b.AddConst(-1).GE(a) }

// differ reports a != b provably.
func differ(a, b *dimexpr.Expr) bool { return lt(a, b) || lt(b, a) }

// symElementwise broadcasts the inputs' symbolic values (all must be
// known tensors) to output 0 and combines them element by element.
func symElementwise(c *InferContext, inputs []int, f func(xs []*dimexpr.Expr) *dimexpr.Expr) {
	out := outSym(c, 0)
	if out == nil {
		return
	}
	ins := make([]*SymTensor, len(inputs))
	idx := make([][]int, len(inputs))
	for k, i := range inputs {
		if ins[k] = c.SymIn(i); ins[k] == nil {
			return
		}
		if _, err := BroadcastDims(ins[k].Dims, out.Dims); err != nil {
			return
		}
		idx[k] = BroadcastIndex(ins[k].Dims, out.Dims)
	}
	xs := make([]*dimexpr.Expr, len(ins))
	for j := range out.Elems {
		ok := true
		for k, in := range ins {
			xs[k] = in.Elems[idx[k][j]]
			ok = ok && xs[k] != nil
		}
		if ok {
			out.Elems[j] = f(xs)
		}
	}
	setIfKnown(c, 0, out)
}

func symUnary(f func(*dimexpr.Expr) *dimexpr.Expr) func(*InferContext) {
	return func(c *InferContext) {
		symElementwise(c, []int{0}, func(xs []*dimexpr.Expr) *dimexpr.Expr { return f(xs[0]) })
	}
}

// symBinary combines inputs 0 and 1; f learns whether the values are
// floats.
func symBinary(f func(a, b *dimexpr.Expr, float bool) *dimexpr.Expr) func(*InferContext) {
	return func(c *InferContext) {
		float := c.In(0).Elem.IsFloat()
		symElementwise(c, []int{0, 1}, func(xs []*dimexpr.Expr) *dimexpr.Expr { return f(xs[0], xs[1], float) })
	}
}

func symVariadic(f func(...*dimexpr.Expr) *dimexpr.Expr) func(*InferContext) {
	return func(c *InferContext) {
		ins := make([]int, len(c.Inputs))
		for i := range ins {
			ins[i] = i
		}
		symElementwise(c, ins, func(xs []*dimexpr.Expr) *dimexpr.Expr { return f(xs...) })
	}
}

// symDiv is Div: exact quotients for every type; integer Div truncates,
// which is floor division when both sides are non-negative. A float
// quotient that is not whole is not followed.
func symDiv(a, b *dimexpr.Expr, float bool) *dimexpr.Expr {
	if q := a.ExactDiv(b); q != nil {
		return q
	}
	if v, ok := b.Value(); ok && v > 0 && !float && a.NonNeg() {
		q, _ := a.FloorDiv(b)
		return q
	}
	return nil
}

// symMod is Mod for a positive constant divisor: Python's % for fmod=0,
// and C's fmod (the same on a non-negative dividend) for fmod=1.
func symMod(c *InferContext) {
	fmod := c.Int("fmod") != 0
	symElementwise(c, []int{0, 1}, func(xs []*dimexpr.Expr) *dimexpr.Expr {
		v, ok := xs[1].Value()
		if !ok || v <= 0 || fmod && !xs[0].NonNeg() {
			return nil
		}
		m, _ := xs[0].Mod(xs[1])
		return m
	})
}

func symAbs(a *dimexpr.Expr) *dimexpr.Expr {
	switch {
	case a.NonNeg():
		return a
	case a.Neg().NonNeg():
		return a.Neg()
	}
	return nil
}

func symWhere(c *InferContext) {
	symElementwise(c, []int{0, 1, 2}, func(xs []*dimexpr.Expr) *dimexpr.Expr {
		v, ok := xs[0].Value()
		switch {
		case !ok:
			if xs[1].Equal(xs[2]) {
				return xs[1]
			}
			return nil
		case v != 0:
			return xs[1]
		}
		return xs[2]
	})
}

// symReduce reduces a vector to one element (ReduceProd of a shape is the
// element count); other reductions are not followed.
func symReduce(f func(a, b *dimexpr.Expr) *dimexpr.Expr) func(*InferContext) {
	return func(c *InferContext) {
		in, out := c.SymIn(0), outSym(c, 0)
		if in == nil || out == nil || len(in.Dims) != 1 || out.Len() != 1 || in.Len() == 0 {
			return
		}
		if c.HasInput(1) || c.declares("axes") && c.Has("axes") {
			axes, known := reduceAxesOf(c)
			if !known || len(axes) > 1 || len(axes) == 1 && axes[0] != 0 && axes[0] != -1 {
				return
			}
		}
		acc := in.Elems[0]
		for _, e := range in.Elems[1:] {
			if acc == nil || e == nil {
				return
			}
			acc = f(acc, e)
		}
		out.Elems[0] = acc
		setIfKnown(c, 0, out)
	}
}

// reduceAxesOf reads a reduction's axes from the attribute or input 1.
func reduceAxesOf(c *InferContext) ([]int64, bool) {
	if c.declares("axes") && c.Has("axes") {
		return c.Ints("axes"), true
	}
	if !c.HasInput(1) {
		return nil, true
	}
	v := constInts(c, 1)
	return v, v != nil
}

func symGather(c *InferContext) {
	data, out := c.SymIn(0), outSym(c, 0)
	ind := c.Const(1)
	if data == nil || out == nil || ind == nil || !ind.DType.IsInt() {
		return
	}
	axis, err := NormAxis(c.Int("axis"), len(data.Dims))
	if err != nil {
		return
	}
	outer := ir.Product(data.Dims[:axis])
	inner := ir.Product(data.Dims[axis+1:])
	n := data.Dims[axis]
	idx := Int64s(ind)
	if outer*int64(len(idx))*inner != int64(out.Len()) {
		return
	}
	k := 0
	for o := int64(0); o < outer; o++ {
		for _, j := range idx {
			j, err := fixIndex(j, n)
			if err != nil {
				return
			}
			for i := int64(0); i < inner; i++ {
				out.Elems[k] = data.Elems[(o*n+j)*inner+i]
				k++
			}
		}
	}
	setIfKnown(c, 0, out)
}

func symSlice(c *InferContext) {
	data, out := c.SymIn(0), outSym(c, 0)
	if data == nil || out == nil {
		return
	}
	var a sliceArgs
	if c.declares("starts") {
		a = sliceArgs{starts: c.Ints("starts"), ends: c.Ints("ends"), axes: c.Ints("axes")}
	} else {
		a.starts, a.ends = constInts(c, 1), constInts(c, 2)
		if a.starts == nil || a.ends == nil {
			return
		}
		for i, p := range []*[]int64{&a.axes, &a.steps} {
			if c.HasInput(3 + i) {
				if *p = constInts(c, 3+i); *p == nil {
					return
				}
			}
		}
	}
	axes, err := a.resolve(len(data.Dims))
	if err != nil {
		return
	}
	dims := append([]int64{}, data.Dims...)
	first := make([]int64, len(dims))
	steps := make([]int64, len(dims))
	for i := range steps {
		steps[i] = 1
	}
	for i, ax := range axes {
		first[ax], dims[ax] = sliceRange(data.Dims[ax], a.starts[i], a.ends[i], a.steps[i])
		steps[ax] = a.steps[i]
	}
	if ir.Product(dims) != int64(out.Len()) {
		return
	}
	st := Strides(data.Dims)
	maps := make([][]int, len(dims))
	for ax := range dims {
		maps[ax] = strideMap(dims[ax], first[ax], steps[ax], st[ax])
	}
	for k, j := range axisIndex(dims, maps) {
		out.Elems[k] = data.Elems[j]
	}
	setIfKnown(c, 0, out)
}

func symConcat(c *InferContext) {
	out := outSym(c, 0)
	if out == nil || len(out.Dims) == 0 {
		return
	}
	axis, err := NormAxis(c.Int("axis"), len(out.Dims))
	if err != nil {
		return
	}
	ins := make([]*SymTensor, len(c.Inputs))
	for i := range ins {
		if ins[i] = c.SymIn(i); ins[i] == nil || len(ins[i].Dims) != len(out.Dims) {
			return
		}
	}
	outer := ir.Product(out.Dims[:axis])
	inner := ir.Product(out.Dims[axis+1:])
	k := 0
	for o := int64(0); o < outer; o++ {
		for _, in := range ins {
			n := in.Dims[axis] * inner
			if k+int(n) > out.Len() || int((o+1)*n) > in.Len() {
				return
			}
			copy(out.Elems[k:], in.Elems[o*n:(o+1)*n])
			k += int(n)
		}
	}
	if k != out.Len() {
		return
	}
	setIfKnown(c, 0, out)
}

func symExpand(c *InferContext) {
	in, out := c.SymIn(0), outSym(c, 0)
	if in == nil || out == nil {
		return
	}
	if _, err := BroadcastDims(in.Dims, out.Dims); err != nil {
		return
	}
	for k, j := range BroadcastIndex(in.Dims, out.Dims) {
		out.Elems[k] = in.Elems[j]
	}
	setIfKnown(c, 0, out)
}
