package kernel

import (
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Reductions, arg-reductions, scans and selections: each output element
// combines the input elements that share its coordinates on the kept
// axes. The axes, keepdims and the other parameters ONNX resolves come
// from ir/ops (ReduceSpec, ArgSpec, TopKSpec, CumSumSpec, SoftmaxSpan).
//
// A definition views its input through a layout: kept axes of extent 1
// dropped and adjacent axes of the same kind merged (a view is the same
// memory under other dims), so that a reduction over a contiguous block
// is one axis, which a schedule can put in vector lanes.

// layout is a reduction's view of its input: groups of adjacent axes, each
// kept or reduced.
type layout struct {
	in   *Buffer
	dims []*Expr
	red  []bool
}

// newLayout views in with the marked axes reduced.
func newLayout(in *Buffer, reduced []bool) *layout {
	l := &layout{}
	for a, d := range in.Dims {
		if n, ok := d.IntValue(); ok && n == 1 && !reduced[a] {
			continue
		}
		if k := len(l.dims); k > 0 && l.red[k-1] == reduced[a] {
			l.dims[k-1] = Mul(l.dims[k-1], d)
			continue
		}
		l.dims = append(l.dims, d)
		l.red = append(l.red, reduced[a])
	}
	l.in = view(in, l.dims)
	return l
}

// view is b under dims (of the same number of elements, row-major): b
// itself when they are its dims. Only a node's inputs and outputs are
// viewed, never its temporaries (a host places those by identity).
func view(b *Buffer, dims []*Expr) *Buffer {
	if len(dims) == b.Rank() {
		same := true
		for i, d := range dims {
			same = same && sameExtent(d, b.Dims[i])
		}
		if same {
			return b
		}
	}
	v := *b
	v.Dims = dims
	return &v
}

func (l *layout) pick(red bool) []*Expr {
	var out []*Expr
	for g, d := range l.dims {
		if l.red[g] == red {
			out = append(out, d)
		}
	}
	return out
}

// kept and reduced are the dims of the kept and of the reduced groups.
func (l *layout) kept() []*Expr    { return l.pick(false) }
func (l *layout) reduced() []*Expr { return l.pick(true) }

// count is the number of elements each output combines.
func (l *layout) count() *Expr { return Product(l.reduced()) }

// at is the view's index in a reduction kernel: the kept groups are the
// space's coordinates, the reduced ones the reduction's.
func (l *layout) at() []*Expr {
	idx := make([]*Expr, len(l.dims))
	k, r := 0, 0
	for g := range l.dims {
		if l.red[g] {
			idx[g], r = RVar(r), r+1
		} else {
			idx[g], k = Var(k), k+1
		}
	}
	return idx
}

// keptOf is the kept groups' part of an index of the whole view.
func (l *layout) keptOf(idx []*Expr) []*Expr {
	var out []*Expr
	for g, x := range idx {
		if !l.red[g] {
			out = append(out, x)
		}
	}
	return out
}

// x is the input's element in a reduction kernel.
func (l *layout) x() *Expr { return Load(l.in, l.at()...) }

// reduce is the kernel storing, at each kept point, post (nil: the
// accumulator) over op of value (an expression of at()) into out viewed
// with the kept dims.
func (l *layout) reduce(out *Buffer, op ReduceOp, value, post *Expr) *Kernel {
	return &Kernel{Out: view(out, l.kept()), Space: l.kept(), Value: value,
		Reduce: &Reduce{Op: op, Extents: l.reduced(), Post: post}}
}

// each is the map kernel storing f(point) into out viewed as the whole
// layout, where point is the view's index.
func (l *layout) each(out *Buffer, f func(idx []*Expr) *Expr) *Kernel {
	idx := Vars(len(l.dims))
	return &Kernel{Out: view(out, l.dims), Space: l.dims, Value: StoreAs(f(idx), out.DType)}
}

// staticOr is b's dims with -1 for those known only at run time.
func staticOr(b *Buffer) []int64 {
	out := make([]int64, b.Rank())
	for i, d := range b.Dims {
		v, ok := d.IntValue()
		if !ok {
			v = -1
		}
		out[i] = v
	}
	return out
}

// reduceFn is a ReduceX op: the value each element contributes, how they
// combine, and the result from the combination and the count.
type reduceFn struct {
	op    ReduceOp
	value func(x *Expr) *Expr          // nil: x
	post  func(acc, count *Expr) *Expr // nil: acc
	// viaFloat: integers are computed in float64 (logarithms and roots);
	// wide: in int64 (uint64 for uint64), so that a mean divides the
	// whole sum as the reference does. Other integer reductions wrap in
	// the data's own type, which gives the reference's int64 result
	// wrapped.
	viaFloat, wide bool
}

func (r reduceFn) accType(d ir.DType) ir.DType {
	switch {
	case d.IsFloat():
		return ComputeType(d)
	case r.viaFloat:
		return ir.Float64
	case r.wide && d != ir.Uint64:
		return ir.Int64
	}
	return d
}

var reduceFns = map[string]reduceFn{
	"ReduceSum":       {op: SumOp},
	"ReduceMean":      {op: SumOp, post: Div, wide: true},
	"ReduceProd":      {op: ProdOp},
	"ReduceMax":       {op: MaxOp},
	"ReduceMin":       {op: MinOp},
	"ReduceSumSquare": {op: SumOp, value: func(x *Expr) *Expr { return Mul(x, x) }},
	"ReduceL1":        {op: SumOp, value: Abs},
	"ReduceL2": {op: SumOp, value: func(x *Expr) *Expr { return Mul(x, x) },
		post: func(acc, _ *Expr) *Expr { return Sqrt(acc) }, viaFloat: true},
	"ReduceLogSum": {op: SumOp, post: func(acc, _ *Expr) *Expr { return Log(acc) }, viaFloat: true},
	// ReduceLogSumExp is two kernels (defLogSumExp).
	"ReduceLogSumExp": {op: SumOp, viaFloat: true},
}

func defReduce(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	spec, err := c.ReduceSpec(in.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if spec.Noop {
		c.Emit(copyOf(out, Load(in, Vars(in.Rank())...)))
		return nil
	}
	l := newLayout(in, spec.Axes)
	fn := reduceFns[c.Node.OpType]
	t := fn.accType(in.DType)
	x := CastTo(l.x(), t)
	if c.Node.OpType == "ReduceLogSumExp" {
		return defLogSumExp(c, l, x)
	}
	v := x
	if fn.value != nil {
		v = fn.value(x)
	}
	post := Acc(t)
	if fn.post != nil {
		post = fn.post(post, CastTo(l.count(), t))
	}
	post = StoreAs(CastTo(post, ComputeType(out.DType)), out.DType)
	if post.Op == OpAcc {
		post = nil
	}
	c.Emit(l.reduce(out, fn.op, v, post))
	return nil
}

// defLogSumExp is log(sum(exp(x))) computed stably: the maximum first, then
// m + log(sum(exp(x - m))); an infinite (or empty) maximum is the result.
func defLogSumExp(c *Ctx, l *layout, x *Expr) error {
	out := c.Out[0]
	m := c.Temp(x.Type, l.kept()...)
	c.Emit(l.reduce(m, MaxOp, x, nil))
	mv := Load(m, Vars(len(l.kept()))...)
	inf := Eq(Abs(mv), Const(x.Type, math.Inf(1)))
	post := Select(inf, mv, Add(mv, Log(Acc(x.Type))))
	c.Emit(l.reduce(out, SumOp, Exp(Sub(x, mv)), StoreAs(CastTo(post, ComputeType(out.DType)), out.DType)))
	return nil
}

func defArg(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	spec, err := c.ArgSpec(staticOr(in))
	if err != nil {
		return c.Unsupported("%v", err)
	}
	reduced := make([]bool, in.Rank())
	reduced[spec.Axis] = true
	l := newLayout(in, reduced)
	op := ArgMaxOp
	if c.Node.OpType == "ArgMin" {
		op = ArgMinOp
	}
	k := l.reduce(out, op, l.x(), nil)
	k.Reduce.Last = spec.Last
	c.Emit(k)
	return nil
}

func defTopK(c *Ctx) error {
	in, vals, idx := c.In[0], c.Out[0], c.Out[1]
	spec, err := c.TopKSpec(staticOr(in))
	if err != nil {
		// A K known only as an expression of the model's dims (argsort's
		// x.size(1)): the output's dim, which inference gives, is K.
		axis, largest, oerr := c.TopKOrder(in.Rank())
		if oerr != nil || vals == nil || axis >= vals.Rank() || vals.Dims[axis].Op == OpConst {
			return c.Unsupported("%v", err)
		}
		spec = &ops.TopK{Axis: axis, Largest: largest}
	}
	if idx == nil { // the indices are computed with the values
		idx = c.Temp(ir.Int64, vals.Dims...)
	}
	c.Emit(&Kernel{Out: vals, Space: vals.Dims, Value: Load(in, Vars(in.Rank())...),
		TopK: &TopK{Axis: spec.Axis, N: in.Dims[spec.Axis], Largest: spec.Largest, Indices: idx}})
	return nil
}

// defCumSum is CumSum's running sum, or CumProd's running product: the
// same axis, exclusive and reverse (CumSumSpec resolves both).
func defCumSum(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	spec, err := c.CumSumSpec(in.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	reduced := make([]bool, in.Rank())
	reduced[spec.Axis] = true
	l := newLayout(in, reduced)
	axis := slices.Index(l.red, true)
	op := SumOp
	if c.Node.OpType == "CumProd" {
		op = ProdOp
	}
	c.Emit(&Kernel{Out: view(out, l.dims), Space: l.dims, Value: Load(l.in, Vars(len(l.dims))...),
		Scan: &Scan{Axis: axis, Op: op, Exclusive: spec.Exclusive, Reverse: spec.Reverse}})
	return nil
}

// softmaxLayout is the layout of a Softmax, LogSoftmax or Hardmax node:
// its line reduced.
func softmaxLayout(c *Ctx) (*layout, error) {
	in := c.In[0]
	lo, hi, err := c.SoftmaxSpan(in.Rank())
	if err != nil {
		return nil, c.Unsupported("%v", err)
	}
	reduced := make([]bool, in.Rank())
	for a := lo; a < hi; a++ {
		reduced[a] = true
	}
	return newLayout(in, reduced), nil
}

// defSoftmax is exp(x - max) / sum(exp(x - max)) over each line, in four
// kernels: the maximum, the exponentials (stored in the output when it
// holds the compute type, else in scratch), the reciprocal of their sum,
// and the scaling; one exponential per element.
func defSoftmax(c *Ctx) error {
	out := c.Out[0]
	l, err := softmaxLayout(c)
	if err != nil {
		return err
	}
	t := ComputeType(out.DType)
	m := c.Temp(t, l.kept()...)
	c.Emit(l.reduce(m, MaxOp, l.x(), nil))
	e := out
	if out.DType != t {
		e = c.Temp(t, l.dims...)
	}
	c.Emit(l.each(e, func(idx []*Expr) *Expr {
		return Exp(Sub(Load(l.in, idx...), Load(m, l.keptOf(idx)...)))
	}))
	ev := view(e, l.dims)
	r := c.Temp(t, l.kept()...)
	c.Emit(l.reduce(r, SumOp, Load(ev, l.at()...), Div(Const(t, 1), Acc(t))))
	c.Emit(l.each(out, func(idx []*Expr) *Expr {
		return Mul(Load(ev, idx...), Load(r, l.keptOf(idx)...))
	}))
	return nil
}

// defLogSoftmax is x - (max + log(sum(exp(x - max)))) over each line.
func defLogSoftmax(c *Ctx) error {
	out := c.Out[0]
	l, err := softmaxLayout(c)
	if err != nil {
		return err
	}
	t := ComputeType(out.DType)
	nk := len(l.kept())
	m := c.Temp(t, l.kept()...)
	c.Emit(l.reduce(m, MaxOp, l.x(), nil))
	mv := Load(m, Vars(nk)...)
	lse := c.Temp(t, l.kept()...)
	c.Emit(l.reduce(lse, SumOp, Exp(Sub(l.x(), mv)), Add(mv, Log(Acc(t)))))
	c.Emit(l.each(out, func(idx []*Expr) *Expr {
		return Sub(Load(l.in, idx...), Load(lse, l.keptOf(idx)...))
	}))
	return nil
}

// defHardmax is 1 at the line's first maximum (a NaN counts as one, as
// the reference's argmax) and 0 elsewhere.
func defHardmax(c *Ctx) error {
	out := c.Out[0]
	l, err := softmaxLayout(c)
	if err != nil {
		return err
	}
	line := slices.Index(l.red, true)
	if n, ok := l.dims[line].IntValue(); ok && n == 0 {
		return nil // no elements, nothing to store
	}
	t := ComputeType(out.DType)
	best := c.Temp(ir.Int64, l.kept()...)
	c.Emit(l.reduce(best, ArgMaxOp, l.x(), nil))
	c.Emit(l.each(out, func(idx []*Expr) *Expr {
		return Select(Eq(idx[line], Load(best, l.keptOf(idx)...)), Const(t, 1), Const(t, 0))
	}))
	return nil
}

// defGlobalPool averages or takes the maximum of each [N, C] plane.
func defGlobalPool(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	if in.Rank() < 2 {
		return c.Unsupported("input of rank %d, want [N, C, spatial...]", in.Rank())
	}
	reduced := make([]bool, in.Rank())
	for a := 2; a < in.Rank(); a++ {
		reduced[a] = true
	}
	l := newLayout(in, reduced)
	t := ComputeType(in.DType)
	if c.Node.OpType == "GlobalMaxPool" {
		c.Emit(l.reduce(out, MaxOp, l.x(), nil))
		return nil
	}
	c.Emit(l.reduce(out, SumOp, l.x(), Div(Acc(t), CastTo(l.count(), t))))
	return nil
}

// registryTypes is the union of the element types the registry's rows of
// op accept: a definition takes every type the reference runs.
func registryTypes(op string) []ir.DType {
	var out []ir.DType
	for _, s := range ops.All() {
		if s.Domain != "" || s.Name != op {
			continue
		}
		for _, t := range s.Types {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

func init() {
	rows := map[string]*OpDef{}
	for name := range reduceFns {
		rows[name] = &OpDef{Build: defReduce}
	}
	for name, build := range map[string]func(*Ctx) error{
		"ArgMax": defArg, "ArgMin": defArg, "TopK": defTopK, "CumSum": defCumSum, "CumProd": defCumSum,
		"Softmax": defSoftmax, "LogSoftmax": defLogSoftmax, "Hardmax": defHardmax,
		"GlobalAveragePool": defGlobalPool, "GlobalMaxPool": defGlobalPool,
	} {
		rows[name] = &OpDef{Build: build}
	}
	for name, d := range rows {
		d.Types = registryTypes(name)
	}
	define(rows)
}
