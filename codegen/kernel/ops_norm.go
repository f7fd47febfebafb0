package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Normalizations: statistics reduced over some axes (ops_reduce.go's
// layouts), then a map that applies them. The parameters ONNX resolves
// come from ir/ops (BatchNormSpec, LayerNormSpec, LRNSpec).

// perChannel is the view of a [N, C, D1, ...] buffer as [N, P, I]: P
// parameters (C, or with per-element parameters C·D1·...) over I
// elements each.
func perChannel(x *Buffer, spatial bool) (v *Buffer, p, i *Expr) {
	p, i = x.Dims[1], Product(x.Dims[2:])
	if !spatial {
		p, i = Product(x.Dims[1:]), C(1)
	}
	return view(x, []*Expr{x.Dims[0], p, i}), p, i
}

// output is the node's output i, or nil when it has none.
func output(c *Ctx, i int) *Buffer {
	if i < len(c.Out) {
		return c.Out[i]
	}
	return nil
}

// paramAt loads input i (P values) at p, in type t.
func paramAt(c *Ctx, i int, p *Expr, t ir.DType) *Expr {
	b := c.In[i]
	return CastTo(Load(view(b, []*Expr{b.Numel()}), p), t)
}

// defBatchNorm is y = x·a[p] + b[p] with a = scale/√(var+ε) and b = B -
// mean·a: folded at compile time when the parameters are known (the usual
// inference case), else two small kernels. In training mode the mean and
// variance are the batch's (over every axis but 1), and the running ones
// are updated when asked for.
func defBatchNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	spec, err := c.BatchNormSpec(x.Rank())
	if err != nil {
		if ue, ok := err.(*ops.UnsupportedError); ok {
			return ue
		}
		return c.Unsupported("%v", err)
	}
	t := ComputeType(x.DType)
	xv, np, ni := perChannel(x, spec.Spatial)
	for i := 1; i < 5; i++ {
		if !sameSize(c.In[i].Numel(), np) {
			return c.Unsupported("input %d has %s values, want %s", i, c.In[i].Numel(), np)
		}
	}
	pv := func(i int) *Expr { return paramAt(c, i, Var(0), t) }
	mean, variance := pv(3), pv(4)
	if spec.Training {
		l := &layout{in: xv, dims: xv.Dims, red: []bool{true, false, true}}
		n := CastTo(l.count(), t)
		bm := c.Temp(t, np)
		c.Emit(l.reduce(bm, SumOp, CastTo(l.x(), t), Div(Acc(t), n)))
		bmv := Load(bm, Var(0))
		bv := c.Temp(t, np)
		d := Sub(CastTo(l.x(), t), bmv)
		c.Emit(l.reduce(bv, SumOp, Mul(d, d), Div(Acc(t), n)))
		bvv := Load(bv, Var(0))
		mom := Const(t, spec.Momentum)
		for k, pair := range [][2]*Expr{{mean, bmv}, {variance, bvv}} {
			if o := output(c, 1+k); o != nil {
				run := Add(Mul(pair[0], mom), Mul(pair[1], Sub(Const(t, 1), mom)))
				c.Emit(&Kernel{Out: view(o, []*Expr{np}), Space: []*Expr{np}, Value: StoreAs(CastTo(run, ComputeType(o.DType)), o.DType)})
			}
		}
		mean, variance = bmv, bvv
	}
	var a, b *Expr // at parameter Var(1) of the map over [N, P, I]
	if k := constantAffine(c, spec, t); k != nil {
		a, b = Load(k[0], Var(1)), Load(k[1], Var(1))
	} else {
		scale := Div(pv(1), Sqrt(Add(variance, Const(t, spec.Epsilon))))
		at, bt := c.Temp(t, np), c.Temp(t, np)
		c.Emit(&Kernel{Out: at, Space: []*Expr{np}, Value: scale})
		c.Emit(&Kernel{Out: bt, Space: []*Expr{np}, Value: Sub(pv(2), Mul(mean, Load(at, Var(0))))})
		a, b = Load(at, Var(1)), Load(bt, Var(1))
	}
	y := Add(Mul(CastTo(Load(xv, Vars(3)...), t), a), b)
	c.Emit(&Kernel{Out: view(out, xv.Dims), Space: []*Expr{x.Dims[0], np, ni}, Value: StoreAs(y, out.DType)})
	return nil
}

// constantAffine returns BatchNormalization's a and b as tables of type t
// when scale, B, mean and var are known at compile time, else nil.
func constantAffine(c *Ctx, spec *ops.BatchNorm, t ir.DType) []*Buffer {
	if spec.Training {
		return nil
	}
	var p [4][]float64
	for i := range p {
		v := c.Const(1 + i)
		if v == nil {
			return nil
		}
		p[i] = ops.Float64s(v)
	}
	n := len(p[0])
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		a[i] = p[0][i] / math.Sqrt(p[3][i]+spec.Epsilon)
		b[i] = p[1][i] - p[2][i]*a[i]
	}
	dims := []int64{int64(n)}
	return []*Buffer{c.Table(ops.FromFloat64s(t, dims, a)), c.Table(ops.FromFloat64s(t, dims, b))}
}

// defInstanceNorm normalizes each [n, c] plane: the mean, then a =
// scale[c]/√(var+ε) and b = B[c] - mean·a, then y = x·a + b.
func defInstanceNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	if x.Rank() < 3 {
		return c.Unsupported("input of rank %d, want N x C x D1 x ...", x.Rank())
	}
	for i := 1; i < 3; i++ {
		if !sameSize(c.In[i].Numel(), x.Dims[1]) {
			return c.Unsupported("input %d has %s values, want %s", i, c.In[i].Numel(), x.Dims[1])
		}
	}
	t := ComputeType(x.DType)
	xv, _, _ := perChannel(x, true)
	l := &layout{in: xv, dims: xv.Dims, red: []bool{false, false, true}}
	space, ch := l.kept(), Var(1)
	n := CastTo(l.count(), t)
	eps := Const(t, float64(c.Float("epsilon")))
	x0 := CastTo(l.x(), t)
	mean := c.Temp(t, space...)
	c.Emit(l.reduce(mean, SumOp, x0, Div(Acc(t), n)))
	mv := Load(mean, Vars(len(space))...)
	a := c.Temp(t, space...)
	d := Sub(x0, mv)
	c.Emit(l.reduce(a, SumOp, Mul(d, d), Div(paramAt(c, 1, ch, t), Sqrt(Add(Div(Acc(t), n), eps)))))
	b := c.Temp(t, space...)
	c.Emit(&Kernel{Out: b, Space: space, Value: Sub(paramAt(c, 2, ch, t), Mul(mv, Load(a, Vars(len(space))...)))})
	c.Emit(l.each(out, func(idx []*Expr) *Expr {
		k := l.keptOf(idx)
		return Add(Mul(CastTo(Load(l.in, idx...), t), Load(a, k...)), Load(b, k...))
	}))
	return nil
}

// defLayerNorm normalizes each block of the axes from axis on: Mean, then
// InvStdDev = 1/√(var+ε) (both in the stash type's precision, at least the
// data's), then y = (x - mean)·inv·Scale + B, with Scale and B broadcast
// to the block.
func defLayerNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	spec, err := c.LayerNormSpec(x.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	t := ComputeType(x.DType)
	s := statType(t, spec.Stash)
	block := x.Dims[spec.Axis:]
	for i := 1; i < 3; i++ {
		if p := c.Input(i); p != nil && !broadcastsTo(p, block) {
			return c.Unsupported("input %d of shape %s does not broadcast to the normalized shape %s", i, p.Dims, block)
		}
	}
	outer, inner := Product(x.Dims[:spec.Axis]), Product(block)
	xv := view(x, []*Expr{outer, inner})
	l := &layout{in: xv, dims: xv.Dims, red: []bool{false, true}}
	// stat returns where a statistic goes: output i when it holds type s,
	// else scratch (copied to the output after, when there is one).
	var copies []*Kernel
	stat := func(i int) *Buffer {
		o := output(c, i)
		if o != nil && o.DType == s {
			return view(o, []*Expr{outer})
		}
		tmp := c.Temp(s, outer)
		if o != nil {
			copies = append(copies, &Kernel{Out: view(o, []*Expr{outer}), Space: []*Expr{outer},
				Value: StoreAs(CastTo(Load(tmp, Var(0)), ComputeType(o.DType)), o.DType)})
		}
		return tmp
	}
	n := CastTo(inner, s)
	x0 := CastTo(l.x(), s)
	mean := stat(1)
	c.Emit(l.reduce(mean, SumOp, x0, Div(Acc(s), n)))
	mv := Load(mean, Var(0))
	inv := stat(2)
	d := Sub(x0, mv)
	c.Emit(l.reduce(inv, SumOp, Mul(d, d), Div(Const(s, 1), Sqrt(Add(Div(Acc(s), n), Const(s, spec.Epsilon))))))
	y := Mul(Sub(CastTo(Load(xv, Vars(2)...), s), mv), Load(inv, Var(0)))
	y = Mul(y, CastTo(Load(flatView(c.In[1]), blockIndex(c.In[1], block, Var(1))), s))
	if bias := c.Input(2); bias != nil {
		y = Add(y, CastTo(Load(flatView(bias), blockIndex(bias, block, Var(1))), s))
	}
	c.Emit(&Kernel{Out: view(out, xv.Dims), Space: xv.Dims, Value: StoreAs(CastTo(y, t), out.DType)})
	c.Emit(copies...)
	return nil
}

// statType is the precision a normalization's statistics compute in: the
// stash type's, at least the data's (float32 for the narrow floats).
func statType(t, stash ir.DType) ir.DType {
	if t == ir.Float64 || stash == ir.Float64 {
		return ir.Float64
	}
	return ir.Float32
}

// defRMSNorm divides each block of the axes from axis on by its root mean
// square, √(mean(x²) + ε), then multiplies by scale broadcast to the block
// (axis, ε and stash_type resolved as LayerNormalization's).
func defRMSNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	spec, err := c.LayerNormSpec(x.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	block := x.Dims[spec.Axis:]
	if !broadcastsTo(c.In[1], block) {
		return c.Unsupported("scale of shape %s does not broadcast to the normalized shape %s", c.In[1].Dims, block)
	}
	t := ComputeType(x.DType)
	s := statType(t, spec.Stash)
	outer, inner := Product(x.Dims[:spec.Axis]), Product(block)
	xv := view(x, []*Expr{outer, inner})
	l := &layout{in: xv, dims: xv.Dims, red: []bool{false, true}}
	x0 := CastTo(l.x(), s)
	inv := c.Temp(s, outer)
	c.Emit(l.reduce(inv, SumOp, Mul(x0, x0), Div(Const(s, 1), Sqrt(Add(Div(Acc(s), CastTo(inner, s)), Const(s, spec.Epsilon))))))
	scale := CastTo(Load(flatView(c.In[1]), blockIndex(c.In[1], block, Var(1))), s)
	y := Mul(CastTo(Load(xv, Vars(2)...), s), Mul(Load(inv, Var(0)), scale))
	c.Emit(&Kernel{Out: view(out, xv.Dims), Space: xv.Dims, Value: StoreAs(CastTo(y, t), out.DType)})
	return nil
}

// defLpNorm divides each line along axis by its L1 or L2 norm.
func defLpNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), x.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	p := c.Int("p")
	if p != 1 && p != 2 {
		return c.Unsupported("p = %d, want 1 or 2", p)
	}
	reduced := make([]bool, x.Rank())
	reduced[axis] = true
	l := newLayout(x, reduced)
	t := ComputeType(x.DType)
	xr := l.x()
	v, post := Abs(xr), (*Expr)(nil)
	if p == 2 {
		v, post = Mul(xr, xr), Sqrt(Acc(t))
	}
	norm := c.Temp(t, l.kept()...)
	c.Emit(l.reduce(norm, SumOp, v, post))
	c.Emit(l.each(out, func(idx []*Expr) *Expr { return Div(Load(l.in, idx...), Load(norm, l.keptOf(idx)...)) }))
	return nil
}

// defGroupNorm normalizes each (sample, group of channels) over its
// channels and spatial axes: the mean, then a = 1/√(var+ε), then y =
// (x - mean)·a·scale + bias, scale and bias per group or per channel as
// GroupNormSpec says.
func defGroupNorm(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	dims, ok := x.Static()
	if !ok || len(dims) < 2 {
		return c.Unsupported("input of dims %s, want static N x C x D1 x ...", x.Dims)
	}
	spec, err := c.GroupNormSpec(dims[1])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	params := spec.Groups
	if spec.PerChannel {
		params = dims[1]
	}
	for i := 1; i < 3; i++ {
		if !sameSize(c.In[i].Numel(), C(params)) {
			return c.Unsupported("input %d has %s values, want %d", i, c.In[i].Numel(), params)
		}
	}
	t := ComputeType(x.DType)
	s := statType(t, ir.Float32)
	g, per, inner := C(spec.Groups), C(dims[1]/spec.Groups), C(ir.Product(dims[2:]))
	xg := view(x, []*Expr{x.Dims[0], g, Mul(per, inner)})
	l := &layout{in: xg, dims: xg.Dims, red: []bool{false, false, true}}
	n := CastTo(l.count(), s)
	x0 := CastTo(l.x(), s)
	mean := c.Temp(s, l.kept()...)
	c.Emit(l.reduce(mean, SumOp, x0, Div(Acc(s), n)))
	mv := Load(mean, Vars(2)...)
	inv := c.Temp(s, l.kept()...)
	d := Sub(x0, mv)
	c.Emit(l.reduce(inv, SumOp, Mul(d, d), Div(Const(s, 1), Sqrt(Add(Div(Acc(s), n), Const(s, spec.Epsilon))))))
	// The map runs over [N, G, C/G, inner]; p is the parameter's index.
	space := []*Expr{x.Dims[0], g, per, inner}
	xv := view(x, space)
	p := Var(1)
	if spec.PerChannel {
		p = Add(Mul(Var(1), per), Var(2))
	}
	y := Mul(Sub(CastTo(Load(xv, Vars(4)...), s), Load(mean, Var(0), Var(1))), Load(inv, Var(0), Var(1)))
	y = Add(Mul(y, paramAt(c, 1, p, s)), paramAt(c, 2, p, s))
	c.Emit(&Kernel{Out: view(out, space), Space: space, Value: StoreAs(CastTo(y, t), out.DType)})
	return nil
}

// sameSize reports whether two extents can be equal: provably, or not
// provably different (one known only at run time).
func sameSize(a, b *Expr) bool {
	x, ok1 := a.IntValue()
	y, ok2 := b.IntValue()
	return !ok1 || !ok2 || x == y
}

// broadcastsTo reports whether b broadcasts to dims (numpy rules): no
// static dim of b differs from its counterpart unless it is 1.
func broadcastsTo(b *Buffer, dims []*Expr) bool {
	off := len(dims) - b.Rank()
	if off < 0 {
		return false
	}
	for i, d := range b.Dims {
		if n, ok := d.IntValue(); ok && n != 1 && !sameSize(d, dims[off+i]) {
			return false
		}
	}
	return true
}

// flatView is b viewed as one axis.
func flatView(b *Buffer) *Buffer { return view(b, []*Expr{b.Numel()}) }

// blockIndex is the flat index into b, broadcast (numpy rules) to a block
// of shape dims, of the block's element at flat index v.
func blockIndex(b *Buffer, dims []*Expr, v *Expr) *Expr {
	off := len(dims) - b.Rank()
	full := true
	for i, d := range b.Dims {
		full = full && sameExtent(d, dims[off+i])
	}
	if full { // b repeats along the block's leading axes
		if sameExtent(b.Numel(), Product(dims)) {
			return v
		}
		return Rem(v, b.Numel())
	}
	// Coordinates of v in the block, then b's index from them.
	coord := make([]*Expr, len(dims))
	rest := v
	for a := len(dims) - 1; a >= 0; a-- {
		coord[a] = Rem(rest, dims[a])
		rest = Div(rest, dims[a])
	}
	idx := Broadcast(b, dims)
	for i := range idx {
		idx[i] = Subst(idx[i], coord)
	}
	return Offset(b, idx)
}

// defLRN divides each element by (bias + α/size · the sum of squares over
// its channel window)^β: a reduction over the window, read as 0 outside
// the channels.
func defLRN(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	spec, err := c.LRNSpec(x.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	t := ComputeType(x.DType)
	xv, nc, _ := perChannel(x, true)
	ch := Add(Sub(Var(1), C(spec.Below)), RVar(0))
	inside := And(Ge(ch, C(0)), Lt(ch, nc))
	v := LoadOr(inside, xv, Const(t, 0), Var(0), ch, Var(2))
	scale := Add(Const(t, spec.Bias), Mul(Const(t, spec.Alpha/float64(spec.Size)), Acc(t)))
	post := Div(Load(xv, Vars(3)...), Pow(scale, Const(t, spec.Beta)))
	c.Emit(&Kernel{Out: view(out, xv.Dims), Space: xv.Dims, Value: Mul(v, v),
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(spec.Size)}, Post: StoreAs(post, out.DType)}})
	return nil
}

func init() {
	rows := map[string]*OpDef{
		"BatchNormalization":    {Build: defBatchNorm},
		"InstanceNormalization": {Build: defInstanceNorm},
		"LayerNormalization":    {Build: defLayerNorm},
		"LRN":                   {Build: defLRN},
		"RMSNormalization":      {Build: defRMSNorm},
		"LpNormalization":       {Build: defLpNorm},
		"GroupNormalization":    {Build: defGroupNorm},
	}
	for name, d := range rows {
		d.Types = registryTypes(name)
	}
	define(rows)
}
