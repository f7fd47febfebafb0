package kernel

import (
	"github.com/kiln-ml/kiln/ir"
)

// Convolutions: each output element is its window's sum of products with
// the weights, plus the bias. The window's geometry (auto_pad, pads,
// strides, dilations, output_padding, output_shape) is ir/ops'
// (KernelContext.Window, TransposeWindow). These are the direct forms, for
// every rank, group, type and for weights known only at run time; a
// target's hand-tuned convolutions take the forms they are built for.

// convShapes returns the static dims of a convolution's input, weights
// and output.
func convShapes(c *Ctx) (xd, wd, yd []int64, err error) {
	x, w, y := c.In[0], c.In[1], c.Out[0]
	var ok1, ok2, ok3 bool
	xd, ok1 = x.Static()
	wd, ok2 = w.Static()
	yd, ok3 = y.Static()
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, c.Unsupported("a convolution of dynamic dims")
	}
	if len(xd) < 3 || len(wd) != len(xd) || len(yd) != len(xd) {
		return nil, nil, nil, c.Unsupported("input %v, weights %v: want [N, C, spatial...] and weights of the same rank", xd, wd)
	}
	return xd, wd, yd, nil
}

// inRange is 0 <= pos < n, or true when the caller knows it holds.
func inRange(pos *Expr, n int64, always bool) *Expr {
	if always {
		return Bool(true)
	}
	return And(Ge(pos, C(0)), Lt(pos, C(n)))
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
	xd, wd, _, err := convShapes(c)
	if err != nil {
		return err
	}
	x, w, y := c.In[0], c.In[1], c.Out[0]
	win, err := c.Window(wd[2:], xd[2:])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	group := c.Int("group")
	cg, mg := wd[1], wd[0]/max(group, 1)
	ci := Add(Mul(Div(Var(1), C(mg)), C(cg)), RVar(0))
	xIdx := []*Expr{Var(0), ci}
	inside := Bool(true)
	extents := []*Expr{C(cg)}
	for a := range len(xd) - 2 {
		s, d, pb, k, in, out := win.Strides[a], win.Dilations[a], win.PadBegin[a], wd[2+a], xd[2+a], win.Out[a]
		pos := Sub(Add(Mul(Var(2+a), C(s)), Mul(RVar(1+a), C(d))), C(pb))
		inside = And(inside, inRange(pos, in, pb == 0 && (out-1)*s+(k-1)*d-pb < in))
		xIdx = append(xIdx, pos)
		extents = append(extents, C(k))
	}
	t := computeType(y.DType)
	wIdx := append([]*Expr{Var(1)}, RVars(len(wd)-1)...)
	xv := Load(x, xIdx...)
	if inside.Op != OpConst {
		xv = LoadOr(inside, x, Const(t, 0), xIdx...)
	}
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: Mul(xv, Load(w, wIdx...)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: biasPost(c, t)}})
	return nil
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
// o. Where taps never overlap ((K-1)·d < s on every axis), each input
// position and tap writes one output: a scatter over the input, whose rows
// are contiguous; elsewhere each output gathers its (i, k), the taps
// stepping by s when d is 1 (only those of o's phase reach it).
func defConvTranspose(c *Ctx) error {
	xd, wd, yd, err := convShapes(c)
	if err != nil {
		return err
	}
	x, w, y := c.In[0], c.In[1], c.Out[0]
	r := len(xd) - 2
	win, err := c.TransposeWindow(wd[2:], xd[2:])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	group := max(c.Int("group"), 1)
	cg, mg := xd[1]/group, wd[1]
	t := computeType(y.DType)
	ch := Add(Mul(Div(Var(1), C(mg)), C(cg)), RVar(0)) // the input channel
	wm := Rem(Var(1), C(mg))
	scatter, covered := true, true
	for a := range r {
		s, d, k := win.Strides[a], win.Dilations[a], wd[2+a]
		scatter = scatter && (k-1)*d < s
		covered = covered && coversAxis(xd[2+a], k, s, d, win.PadBegin[a], yd[2+a])
	}
	if scatter {
		// Space [n, m, k..., i...]: the input's last axis innermost.
		xIdx, wIdx := []*Expr{Var(0), ch}, []*Expr{ch, wm}
		store := []*Expr{Var(0), Var(1)}
		when := Bool(true)
		space := []*Expr{y.Dims[0], y.Dims[1]}
		for a := range r {
			space = append(space, C(wd[2+a]))
		}
		for a := range r {
			space = append(space, C(xd[2+a]))
			ka, ia := Var(2+a), Var(2+r+a)
			xIdx, wIdx = append(xIdx, ia), append(wIdx, ka)
			s, d, pb, out := win.Strides[a], win.Dilations[a], win.PadBegin[a], yd[2+a]
			pos := Sub(Add(Mul(ia, C(s)), Mul(ka, C(d))), C(pb))
			store = append(store, pos)
			when = And(when, inRange(pos, out, pb == 0 && (xd[2+a]-1)*s+(wd[2+a]-1)*d < out))
		}
		if !covered {
			var fill *Expr = Const(t, 0)
			if b := c.Input(2); b != nil {
				fill = Load(b, Var(1))
			}
			c.Emit(&Kernel{Out: y, Space: y.Dims, Value: fill})
		}
		k := &Kernel{Out: y, Space: space, Store: store, Value: Mul(Load(x, xIdx...), Load(w, wIdx...)),
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(cg)}}}
		if b := c.Input(2); b != nil {
			k.Reduce.Post = Add(Acc(t), Load(b, Var(1)))
		}
		if when.Op != OpConst {
			k.When = when
		}
		c.Emit(k)
		return nil
	}
	xIdx, wIdx := []*Expr{Var(0), ch}, []*Expr{ch, wm}
	valid := Bool(true)
	extents := []*Expr{C(cg)}
	for a := range r {
		s, d, pb, k, in := win.Strides[a], win.Dilations[a], win.PadBegin[a], wd[2+a], xd[2+a]
		j := RVar(1 + a)
		q := Add(Var(2+a), C(pb)) // o + pad = i·s + k·d
		var tap, i *Expr
		if d == 1 {
			// Only taps k ≡ q (mod s) reach o: k = q mod s + j·s.
			tap = Add(Rem(q, C(s)), Mul(j, C(s)))
			i = Sub(Div(q, C(s)), j)
			valid = And(valid, And(Lt(tap, C(k)), And(Ge(i, C(0)), Lt(i, C(in)))))
			extents = append(extents, C((k+s-1)/s))
		} else {
			tap = j
			qk := Sub(q, Mul(j, C(d)))
			i = Div(qk, C(s))
			valid = And(valid, And(And(Ge(qk, C(0)), Eq(Rem(qk, C(s)), C(0))), Lt(i, C(in))))
			extents = append(extents, C(k))
		}
		xIdx, wIdx = append(xIdx, i), append(wIdx, tap)
	}
	zero := Const(t, 0)
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: Mul(LoadOr(valid, x, zero, xIdx...), LoadOr(valid, w, zero, wIdx...)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: biasPost(c, t)}})
	return nil
}

// coversAxis reports whether every output position 0 <= o < out is
// reached by some input i in [0, in) through some tap k in [0, K).
func coversAxis(in, K, s, d, pb, out int64) bool {
	hit := make([]bool, out)
	for i := range in {
		for k := range K {
			if o := i*s + k*d - pb; o >= 0 && o < out {
				hit[o] = true
			}
		}
	}
	for _, h := range hit {
		if !h {
			return false
		}
	}
	return true
}

func init() {
	convTypes := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	define(map[string]*OpDef{
		"Conv":          {Types: convTypes, Build: defConv},
		"ConvTranspose": {Types: convTypes, Build: defConvTranspose},
	})
}
