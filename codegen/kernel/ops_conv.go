package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Convolutions: each output element is its window's sum of products with
// the weights, plus the bias. The window's geometry (auto_pad, pads,
// strides, dilations, output_padding, output_shape) is ir/ops'
// (KernelContext.Window, TransposeWindow). These are the direct forms, for
// every rank, group, type and for weights known only at run time; a
// target's hand-tuned convolutions take the forms they are built for.

// staticButBatch returns b's dims when all but the first (a batch, which
// kernels take from Dims; -1 here when dynamic) are static.
func staticButBatch(b *Buffer) ([]int64, bool) {
	if b.Rank() == 0 {
		return nil, true
	}
	d, ok := StaticInts(b.Dims[1:])
	if !ok {
		return nil, false
	}
	n, ok := b.Dims[0].IntValue()
	if !ok {
		n = -1
	}
	return append([]int64{n}, d...), true
}

// convShapes returns the dims of a convolution's input, weights and
// output: static, but for the batch.
func convShapes(c *Ctx) (xd, wd, yd []int64, err error) {
	x, w, y := c.In[0], c.In[1], c.Out[0]
	var ok1, ok2, ok3 bool
	xd, ok1 = staticButBatch(x)
	wd, ok2 = w.Static()
	yd, ok3 = staticButBatch(y)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, c.Unsupported("a convolution of dynamic dims other than the batch")
	}
	if len(xd) < 3 || len(wd) != len(xd) || len(yd) != len(xd) {
		return nil, nil, nil, c.Unsupported("input %v, weights %v: want [N, C, spatial...] and weights of the same rank", xd, wd)
	}
	return xd, wd, yd, nil
}

// inRange is 0 <= pos < n, or true when the caller knows it holds.
func inRange(pos *Expr, n int64, always bool) *Expr {
	return inExtent(pos, C(n), always)
}

// inExtent is inRange for an extent that may be an expression (a dynamic
// dim).
func inExtent(pos, n *Expr, always bool) *Expr {
	if always {
		return Bool(true)
	}
	return And(Ge(pos, C(0)), Lt(pos, n))
}

// spatialExtent is a window op's input size on spatial axis a (dims
// index 2+a): a constant when known, else the buffer's expression.
func spatialExtent(b *Buffer, known []int64, a int) *Expr {
	if known[2+a] >= 0 {
		return C(known[2+a])
	}
	return b.Dims[2+a]
}

// padBegin is spatial axis a's begin pad over an input of size in: the
// window's, or, where it varies with the size (byRem, from
// ops.DynamicWindow), the one of in's remainder mod the stride.
func padBegin(win ops.Window, byRem [][]int64, a int, in *Expr) *Expr {
	pads := byRem[a]
	if pads == nil {
		return C(win.PadBegin[a])
	}
	rem := Rem(in, C(win.Strides[a]))
	pb := C(pads[len(pads)-1])
	for r := len(pads) - 2; r >= 0; r-- {
		pb = Select(Eq(rem, C(int64(r))), C(pads[r]), pb)
	}
	return pb
}

// windowInside reports whether every tap of spatial axis a lands inside
// an input of size in (known when compiling) for the window's outputs.
func windowInside(win ops.Window, a int, in int64) bool {
	s, d, pb, k, out := win.Strides[a], win.Dilations[a], win.PadBegin[a], win.Kernel[a], win.Out[a]
	return in >= 0 && out >= 0 && pb == 0 && (out-1)*s+(k-1)*d-pb < in
}

// biasPost adds input 2 (a per-output-channel bias), when present, to a
// reduction's result.
func biasPost(c *Ctx, t ir.DType) *Expr {
	if b := c.Input(2); b != nil {
		return Add(Acc(t), Load(b, Var(1)))
	}
	return nil
}

// defConv: y[n, m, o...] = b[m] + Σ over the group's channels ci and the
// taps k of x[n, g·cg + ci, o·s + k·d - pad] · w[m, ci, k], where g is m's
// group; taps in the padding read 0.
func defConv(c *Ctx) error {
	x, w, y := c.In[0], c.In[1], c.Out[0]
	xd := knownDims(x)
	wd, ok := w.Static()
	if !ok {
		return c.Unsupported("a convolution of weights of dynamic dims")
	}
	if len(xd) < 3 || len(wd) != len(xd) || y.Rank() != len(xd) {
		return c.Unsupported("input %v, weights %v: want [N, C, spatial...] and weights of the same rank", x.Dims, wd)
	}
	win, byRem, err := c.DynamicWindow(wd[2:], xd[2:])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	group := c.Int("group")
	cg, mg := wd[1], wd[0]/max(group, 1)
	ci := Add(Mul(Div(Var(1), C(mg)), C(cg)), RVar(0))
	if group <= 1 {
		ci = RVar(0) // the same channels for every output channel
	}
	xIdx := []*Expr{Var(0), ci}
	inside := Bool(true)
	extents := []*Expr{C(cg)}
	for a := range len(xd) - 2 {
		s, d, k, in := win.Strides[a], win.Dilations[a], wd[2+a], spatialExtent(x, xd, a)
		pos := Sub(Add(Mul(Var(2+a), C(s)), Mul(RVar(1+a), C(d))), padBegin(win, byRem, a, in))
		inside = And(inside, inExtent(pos, in, windowInside(win, a, xd[2+a])))
		xIdx = append(xIdx, pos)
		extents = append(extents, C(k))
	}
	t := ComputeType(y.DType)
	wIdx := append([]*Expr{Var(1)}, RVars(len(wd)-1)...)
	src := x
	if xp, idx, ok := stridePhases(c, x, xd, win, byRem, xIdx); ok {
		src, xIdx = xp, idx
	}
	xv := Load(src, xIdx...)
	if inside.Op != OpConst {
		xv = LoadOr(inside, src, Const(t, 0), xIdx...)
	}
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: Mul(xv, Load(w, wIdx...)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: biasPost(c, t)}})
	return nil
}

// stridePhases splits a strided convolution's innermost input axis, of a
// size known only at run time, by phase: xp[..., r, j] = x[..., j·s + r].
// Tap k of output o reads position o·s + t (t = k·d - pad), which is
// xp[..., t mod s, o + t div s]: contiguous along o, so the convolution's
// lanes run along its output width (reading x directly, they would step
// by s and the kernel would be scalar). It returns the buffer and the
// convolution's indices into it (xIdx are those into x), or false where
// the axis is static (the CPU's own kernels take those), unstrided, or
// padded by its size.
func stridePhases(c *Ctx, x *Buffer, xd []int64, win ops.Window, byRem [][]int64, xIdx []*Expr) (*Buffer, []*Expr, bool) {
	last := len(xd) - 1
	a := last - 2 // the spatial axis
	s, pad := win.Strides[a], win.PadBegin[a]
	if xd[last] >= 0 || s < 2 || byRem[a] != nil || pad < 0 {
		return nil, nil, false
	}
	in := x.Dims[last]
	dims := append(append([]*Expr{}, x.Dims[:last]...), C(s), Div(Add(in, C(s-1)), C(s)))
	xp := c.Temp(x.DType, dims...)
	at := Vars(len(dims))
	pos := Add(Mul(at[last+1], C(s)), at[last])
	c.Emit(copyOf(xp, LoadOr(Lt(pos, in), x, Const(ComputeType(x.DType), 0), append(at[:last:last], pos)...)))
	// t + lift is never negative, so its remainder and quotient floor.
	lift := (pad + s - 1) / s * s
	tap := Add(Mul(RVar(1+a), C(win.Dilations[a])), C(lift-pad))
	idx := append(append([]*Expr{}, xIdx[:last]...), Rem(tap, C(s)), Add(Var(last), Sub(Div(tap, C(s)), C(lift/s))))
	return xp, idx, true
}

// RVars returns RVar(0) ... RVar(n-1).
func RVars(n int) []*Expr {
	out := make([]*Expr, n)
	for i := range out {
		out[i] = RVar(i)
	}
	return out
}

// defConvTranspose: input i reaches output i·s + k·d - pad through tap k,
// so y[n, m, o...] = b[m] + Σ x[n, c, i...] · w[c, m', k...] over the
// group's channels c (m' is m within its group) and the (i, k) that reach
// o. Outputs of one phase (o mod s on every axis) are reached by the same
// taps, each from the input at o div s minus a fixed offset: one kernel
// per phase computes its outputs q (o = q·s + phase) reading the input
// contiguously along q, the taps in the reduction. Strides whose phases
// would be too many kernels gather per output instead.
func defConvTranspose(c *Ctx) error {
	ct, err := newConvT(c)
	if err != nil {
		return err
	}
	x, w := c.In[0], c.In[1]
	group := max(c.Int("group"), 1)
	cg, mg := ct.xd[1]/group, ct.wd[1]
	ch := Add(Mul(Div(Var(1), C(mg)), C(cg)), RVar(0)) // the input channel, in m's group
	wm := Rem(Var(1), C(mg))                           // m within its group
	ct.channels = []*Expr{C(cg)}
	ct.term = func(taps, pos []*Expr, inside *Expr) *Expr {
		xIdx := append([]*Expr{Var(0), ch}, pos...)
		wIdx := append([]*Expr{ch, wm}, taps...)
		if inside.Op == OpConst {
			return Mul(Load(x, xIdx...), Load(w, wIdx...))
		}
		zero := Const(ct.t, 0)
		return Mul(LoadOr(inside, x, zero, xIdx...), LoadOr(inside, w, zero, wIdx...))
	}
	ct.emit()
	return nil
}

// ConvTransposeFromProducts appends to c (a ConvTranspose's context) the
// kernels that compute its output from col, the products of each input
// position with each tap summed over the input channels,
// col[n, m, k..., i...] = Σ_c w[c, m, k...] · x[n, c, i...] (a GEMM of
// the weights' transpose with the input gives it, for one group): each
// output sums the entries that reach it, plus the bias.
func ConvTransposeFromProducts(c *Ctx, col *Buffer) error {
	ct, err := newConvT(c)
	if err != nil {
		return err
	}
	if max(c.Int("group"), 1) != 1 {
		return c.Unsupported("products of a grouped ConvTranspose")
	}
	ct.term = func(taps, pos []*Expr, inside *Expr) *Expr {
		idx := append(append([]*Expr{Var(0), Var(1)}, taps...), pos...)
		if inside.Op == OpConst {
			return Load(col, idx...)
		}
		return LoadOr(inside, col, Const(ct.t, 0), idx...)
	}
	ct.emit()
	return nil
}

// maxPhases bounds the kernels a ConvTranspose runs as phases.
const maxPhases = 64

// convT is a ConvTranspose being defined: its geometry, and what it sums
// at each input position and tap (term, reducing over channels too when
// set: their extents come first in the reduction).
type convT struct {
	c          *Ctx
	xd, wd, yd []int64
	win        ops.Window
	t          ir.DType
	channels   []*Expr
	// term is the summand for the taps and input positions given (one
	// per spatial axis), read only where inside holds.
	term func(taps, pos []*Expr, inside *Expr) *Expr
	// dynamic: some spatial sizes are known only at run time (-1 in xd
	// and yd; the buffers' dims hold them), so every output gathers.
	dynamic bool
}

func newConvT(c *Ctx) (*convT, error) {
	xd, wd, yd, err := convShapes(c)
	if err == nil {
		win, err := c.TransposeWindow(wd[2:], xd[2:])
		if err != nil {
			return nil, c.Unsupported("%v", err)
		}
		return &convT{c: c, xd: xd, wd: wd, yd: yd, win: win, t: ComputeType(c.Out[0].DType)}, nil
	}
	// Dynamic spatial dims: the window's pads are the attributes', and
	// the outputs gather their taps (convT.dynamic).
	x, w, y := c.In[0], c.In[1], c.Out[0]
	xd, yd = knownDims(x), knownDims(y)
	wd, ok := w.Static()
	if !ok || len(xd) < 3 || len(wd) != len(xd) || len(yd) != len(xd) || xd[1] < 0 || yd[1] < 0 {
		return nil, err
	}
	win, werr := c.DynamicTransposeWindow(wd[2:], xd[2:])
	if werr != nil {
		return nil, c.Unsupported("%v", werr)
	}
	return &convT{c: c, xd: xd, wd: wd, yd: yd, win: win, t: ComputeType(y.DType), dynamic: true}, nil
}

// emit emits the kernels: one per phase, or one gathering.
func (ct *convT) emit() {
	r := len(ct.xd) - 2
	phases := int64(1)
	for _, s := range ct.win.Strides {
		phases *= s
	}
	if phases > maxPhases || ct.dynamic {
		ct.gather()
		return
	}
	ph := make([]int64, r)
	for {
		ct.phase(ph)
		a := r - 1
		for a >= 0 && ph[a] == ct.win.Strides[a]-1 {
			ph[a] = 0
			a--
		}
		if a < 0 {
			return
		}
		ph[a]++
	}
}

func (ct *convT) bias() *Expr {
	if b := ct.c.Input(2); b != nil {
		return Load(b, Var(1))
	}
	return nil
}

// reduce emits the kernel summing v over extents into y, with the bias.
func (ct *convT) reduce(k *Kernel, v *Expr, extents []*Expr) {
	k.Value = v
	k.Reduce = &Reduce{Op: SumOp, Extents: extents}
	if b := ct.bias(); b != nil {
		k.Reduce.Post = Add(Acc(ct.t), b)
	}
	ct.c.Emit(k)
}

// phase emits the kernel of the outputs o ≡ ph (mod s) on every axis. On
// an axis, tap k reaches them when k·d ≡ ph + pad (mod s): the taps
// k0 + j·s/g (g = gcd(d, s)), each from input q + base - j·d/g.
func (ct *convT) phase(ph []int64) {
	c, y := ct.c, ct.c.Out[0]
	r := len(ph)
	space := []*Expr{y.Dims[0], y.Dims[1]}
	store := []*Expr{Var(0), Var(1)}
	var taps, pos []*Expr
	extents := append([]*Expr{}, ct.channels...)
	inside := Bool(true)
	empty := false
	for a := range r {
		s, d, pb, K, in, out := ct.win.Strides[a], ct.win.Dilations[a], ct.win.PadBegin[a], ct.wd[2+a], ct.xd[2+a], ct.yd[2+a]
		if ph[a] >= out {
			return // no output of this phase
		}
		q := Var(2 + a)
		space = append(space, C((out-ph[a]+s-1)/s))
		store = append(store, Add(Mul(q, C(s)), C(ph[a])))
		g := gcd(d, s)
		k0 := int64(-1)
		for k := int64(0); k < s/g && k < K; k++ {
			if (k*d-ph[a]-pb)%s == 0 {
				k0 = k
				break
			}
		}
		if k0 < 0 {
			empty = true
			continue
		}
		step := s / g
		J := (K - k0 + step - 1) / step
		base := dimexpr.FloorDiv(ph[a]+pb-k0*d, s)
		j := RVar(len(ct.channels) + len(taps))
		i := Sub(Add(q, C(base)), Mul(j, C(d/g)))
		extents = append(extents, C(J))
		taps, pos = append(taps, Add(C(k0), Mul(j, C(step)))), append(pos, i)
		// i stays in range for every q and j when base - (J-1)·d/g >= 0
		// and (Q-1) + base < in.
		qn := (out - ph[a] + s - 1) / s
		inside = And(inside, inRange(i, in, base-(J-1)*(d/g) >= 0 && qn-1+base < in))
	}
	k := &Kernel{Name: "ConvTranspose", Out: y, Space: space, Store: store}
	if empty {
		// No tap reaches these outputs: the bias alone.
		k.Value = Const(ct.t, 0)
		if b := ct.bias(); b != nil {
			k.Value = b
		}
		c.Emit(k)
		return
	}
	ct.reduce(k, ct.term(taps, pos, inside), extents)
}

// gather emits one kernel in which each output sums over every tap the
// inputs that reach it through that tap.
func (ct *convT) gather() {
	y := ct.c.Out[0]
	var taps, pos []*Expr
	valid := Bool(true)
	extents := append([]*Expr{}, ct.channels...)
	for a := range len(ct.xd) - 2 {
		s, d, pb, K := ct.win.Strides[a], ct.win.Dilations[a], ct.win.PadBegin[a], ct.wd[2+a]
		in := spatialExtent(ct.c.In[0], ct.xd, a)
		j := RVar(len(extents))
		qk := Sub(Add(Var(2+a), C(pb)), Mul(j, C(d))) // i·s
		i := Div(qk, C(s))
		valid = And(valid, And(And(Ge(qk, C(0)), Eq(Rem(qk, C(s)), C(0))), Lt(i, in)))
		taps, pos = append(taps, j), append(pos, i)
		extents = append(extents, C(K))
	}
	ct.reduce(&Kernel{Name: "ConvTranspose", Out: y, Space: y.Dims}, ct.term(taps, pos, valid), extents)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// defCol2Im sums into each image element the columns' values that land
// on it: block element b of block position l lands at l·s - pad + b·d
// (Col2ImSpec), so along each axis image position o gathers, for every
// b, the l = (o + pad - b·d)/s that is whole and in range (a reduction
// over the block's elements).
func defCol2Im(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	image, _, err := c.ConstInts(1)
	if err != nil {
		return err
	}
	block, _, err := c.ConstInts(2)
	if err != nil {
		return err
	}
	g, err := c.Col2ImSpec(image, block)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	k := len(image)
	if x.Rank() != 3 || out.Rank() != k+2 {
		return c.Unsupported("input of rank %d for a %d-D image", x.Rank(), k)
	}
	valid := Bool(true)
	col, pos := Mul(Var(1), C(ir.Product(block))), C(0) // the column's row and its block position
	for a := range k {
		t := Sub(Add(Var(2+a), C(g.Pads[a])), Mul(RVar(a), C(g.Dilations[a])))
		l := Div(t, C(g.Strides[a]))
		valid = And(valid, And(And(Ge(t, C(0)), Eq(Rem(t, C(g.Strides[a])), C(0))), Lt(l, C(g.Blocks[a]))))
		col = Add(col, Mul(RVar(a), C(ir.Product(block[a+1:]))))
		pos = Add(Mul(pos, C(g.Blocks[a])), l)
	}
	t := accType(x.DType)
	v := CastTo(LoadOr(valid, x, Const(ComputeType(x.DType), 0), Var(0), col, pos), t)
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: v,
		Reduce: &Reduce{Op: SumOp, Extents: Ints(block...), Post: StoreAs(CastTo(Acc(t), ComputeType(out.DType)), out.DType)}})
	return nil
}

// defDeformConv is two kernels: the sampled columns [N, C, taps,
// out...], each input channel read at each tap's offset position
// (DeformConvSpec) bilinearly, zero outside, times the mask (a reduction
// over the sample's 2^k corners); then the grouped convolution of the
// columns with the weights, plus the bias.
func defDeformConv(c *Ctx) error {
	x, wt, off, out := c.In[0], c.In[1], c.In[2], c.Out[0]
	xd, ok := x.Static()
	wd, ok2 := wt.Static()
	if !ok || !ok2 {
		return c.Unsupported("a DeformConv of dynamic dims")
	}
	spec, err := c.DeformConvSpec(xd, wd)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	k := len(spec.Kernel)
	taps := ir.Product(spec.Kernel)
	f := ComputeType(x.DType)
	// Columns at (b, ic, t, o...) = Vars; corner axis i is RVar(i).
	cols := c.Temp(f, append(Ints(xd[0], xd[1], taps), Ints(spec.Out...)...)...)
	b, ic, t := Var(0), Var(1), Var(2)
	o := Vars(k + 3)[3:]
	g := Div(ic, C(xd[1]/spec.OffsetGroups))
	weight := Const(f, 1)
	inside := Bool(true)
	idx := []*Expr{b, ic}
	rest := t
	tap := make([]*Expr, k)
	for i := k - 1; i >= 0; i-- {
		tap[i], rest = Rem(rest, C(spec.Kernel[i])), Div(rest, C(spec.Kernel[i]))
	}
	for i := range k {
		start := Add(Sub(Mul(o[i], C(spec.Strides[i])), C(spec.PadBegin[i])), Mul(tap[i], C(spec.Dilations[i])))
		ch := Add(Mul(Add(Mul(g, C(taps)), t), C(int64(k))), C(int64(i)))
		pos := Add(CastTo(start, f), CastTo(Load(off, append([]*Expr{b, ch}, o...)...), f))
		x0 := Floor(pos)
		frac := Sub(pos, x0)
		p := Add(CastTo(x0, ir.Int64), RVar(i))
		weight = Mul(weight, Select(Eq(RVar(i), C(0)), Sub(Const(f, 1), frac), frac))
		inside = And(inside, inRange(p, xd[2+i], false))
		idx = append(idx, p)
	}
	v := Mul(weight, CastTo(LoadOr(inside, x, Const(f, 0), idx...), f))
	var post *Expr
	if m := c.Input(4); m != nil {
		post = Mul(Acc(f), CastTo(Load(m, append([]*Expr{b, Add(Mul(g, C(taps)), t)}, o...)...), f))
	}
	corners := make([]*Expr, k)
	for i := range corners {
		corners[i] = C(2)
	}
	c.Emit(&Kernel{Out: cols, Space: cols.Dims, Value: v, Reduce: &Reduce{Op: SumOp, Extents: corners, Post: post}})

	// out (b, oc, o...) = Σ over the group's input channels and the taps.
	perIn, perOut := xd[1]/spec.Groups, wd[0]/spec.Groups
	oc := Var(1)
	inCh := Add(Mul(Div(oc, C(perOut)), C(perIn)), RVar(0))
	wv := Load(view(wt, Ints(wd[0], perIn, taps)), oc, RVar(0), RVar(1))
	colv := Load(cols, append([]*Expr{Var(0), inCh, RVar(1)}, Vars(k + 2)[2:]...)...)
	acc := Acc(f)
	if bias := c.Input(3); bias != nil {
		acc = Add(acc, CastTo(Load(bias, oc), f))
	}
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: Mul(colv, CastTo(wv, f)),
		Reduce: &Reduce{Op: SumOp, Extents: Ints(perIn, taps), Post: StoreAs(acc, out.DType)}})
	return nil
}

func init() {
	convTypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	define(map[string]*OpDef{
		"Conv":          {Types: convTypes, Build: defConv},
		"ConvTranspose": {Types: convTypes, Build: defConvTranspose},
		"Col2Im":        {Types: registryTypes("Col2Im"), Build: defCol2Im},
		"DeformConv":    {Types: registryTypes("DeformConv"), Build: defDeformConv},
	})
}
