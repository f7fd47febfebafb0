package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The recurrent ops (RNN, GRU, LSTM) as kernels: the input projection of
// every time step at once, then per time step (unrolled: the sequence
// length is static) the recurrent product and the cell update of every
// direction and batch entry, each step's hidden state kept in scratch, and
// Y written from them at the end. The attributes are ir/ops' RNNSpec, the
// reference's; the cells follow ir/ops/rnn.go:
//
//	RNN:  H = f(Wx + RH + Wb + Rb)
//	GRU:  z = f(Wz x + Rz H + b), r = f(Wr x + Rr H + b),
//	      h = g(Wh x + Rh (r·H) + Rbh + Wbh)      (linear_before_reset = 0)
//	      h = g(Wh x + r·(Rh H + Rbh) + Wbh)      (linear_before_reset = 1)
//	      H = (1 - z)·h + z·H
//	LSTM: i, o, f, c gates; C = f·C + i·g(c); H = o·h(C), peepholes on
//	      i, f (old C) and o (new C); f = 1 - i with input_forget
//
// A batch entry past its sequence_lens keeps its state and gets zeros in
// Y; a reverse direction runs from its last valid step back.

// rnnAct returns activation a applied to x.
func rnnAct(a ops.RNNActivation, x *Expr) *Expr {
	alpha, beta := num(x, a.Alpha), num(x, a.Beta)
	switch a.Name {
	case "relu":
		return Relu(x)
	case "tanh":
		return Tanh(x)
	case "sigmoid":
		return Sigmoid(x)
	case "affine":
		return Add(Mul(alpha, x), beta)
	case "leakyrelu":
		return Select(Ge(x, num(x, 0)), x, Mul(alpha, x))
	case "thresholdedrelu":
		return Select(Ge(x, alpha), x, num(x, 0))
	case "scaledtanh":
		return Mul(alpha, Tanh(Mul(beta, x)))
	case "hardsigmoid":
		return Clamp(Add(Mul(alpha, x), beta), num(x, 0), num(x, 1))
	case "elu":
		return Select(Ge(x, num(x, 0)), x, Mul(alpha, Expm1(x)))
	case "softsign":
		return Div(x, Add(num(x, 1), Abs(x)))
	case "softplus":
		return Softplus(x)
	}
	panic("kernel: activation " + a.Name)
}

// rnn is one recurrent node's sizes, settings and buffers.
type rnn struct {
	c                         *Ctx
	op                        string
	gates                     int64
	seq, in, hidden           int64
	batchDim                  *Expr
	dirs                      int64
	major                     bool // layout = 1
	reverse                   bool // a unidirectional node running backwards
	t                         ir.DType
	clip                      *Expr // nil: no clipping
	acts                      [][]ops.RNNActivation
	linearBeforeReset, forget bool
	x, w, r, b, lens, h0, c0  *Buffer
	p                         *Buffer
}

func defRNN(c *Ctx) error {
	x, w, r := c.In[0], c.In[1], c.In[2]
	wd, ok2 := w.Static()
	rd, ok3 := r.Static()
	if x.Rank() != 3 || len(wd) != 3 || len(rd) != 3 {
		return c.Unsupported("X, W and R must have rank 3")
	}
	spec, err := ops.RNNSpecOf(c.KernelContext)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	n := &rnn{c: c, op: spec.Op, t: ComputeType(x.DType), b: c.Input(3), lens: c.Input(4), h0: c.Input(5), c0: c.Input(6), p: c.Input(7), x: x, w: w, r: r}
	n.gates, n.major, n.dirs, n.acts = int64(spec.Gates), spec.BatchMajor, int64(spec.Dirs), spec.Activations
	n.reverse = spec.Direction == "reverse"
	seqAxis := 0
	if n.major {
		seqAxis = 1
	}
	// The time steps are unrolled: the sequence length must be static;
	// the batch may be known only at run time.
	seq, ok1 := x.Dims[seqAxis].IntValue()
	in, ok4 := x.Dims[2].IntValue()
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return c.Unsupported("a recurrence of dynamic dims other than the batch")
	}
	n.seq, n.batchDim, n.in = seq, x.Dims[1-seqAxis], in
	if n.hidden, err = spec.Hidden(in, wd, rd); err != nil {
		return c.Unsupported("%v", err)
	}
	if !math.IsInf(spec.Clip, 1) {
		n.clip = Const(n.t, spec.Clip)
	}
	n.linearBeforeReset, n.forget = spec.LinearBeforeReset, spec.InputForget
	n.emit()
	return nil
}

// clipped applies the node's clip.
func (n *rnn) clipped(x *Expr) *Expr {
	if n.clip == nil {
		return x
	}
	return Clamp(x, Neg(n.clip), n.clip)
}

// act is direction d's activation i (d an expression: bidirectional
// nodes may differ per direction) of the clipped x.
func (n *rnn) act(d *Expr, i int, x *Expr, clip bool) *Expr {
	if clip {
		x = n.clipped(x)
	}
	v := rnnAct(n.acts[0][i], x)
	if n.dirs == 2 && n.acts[1][i] != n.acts[0][i] {
		v = Select(Eq(d, C(1)), rnnAct(n.acts[1][i], x), v)
	}
	return v
}

// stateIdx is the index of state (d, b, j) in initial_h, Y_h and the like.
func (n *rnn) stateIdx(d, b, j *Expr) []*Expr {
	if n.major {
		return []*Expr{b, d, j}
	}
	return []*Expr{d, b, j}
}

// bias returns B's element (d, part·G·H + j) (part 0: Wb, 1: Rb), or 0.
func (n *rnn) bias(d *Expr, part int64, j *Expr) *Expr {
	if n.b == nil {
		return Const(n.t, 0)
	}
	return Load(n.b, d, Add(C(part*n.gates*n.hidden), j))
}

func (n *rnn) emit() {
	c, t := n.c, n.t
	D, B, S, H, gh := C(n.dirs), n.batchDim, C(n.seq), C(n.hidden), C(n.gates*n.hidden)
	d, b, j := Var(0), Var(1), Var(2)
	y, yh, yc := c.Output(0), c.Output(1), c.Output(2)
	if n.op != "LSTM" {
		yc = nil
	}

	// The input projection, every time step: gx[s, d, b, j] = W x + the
	// biases that add to it (all but GRU's Rbh with linear_before_reset).
	gx := c.Temp(t, S, D, B, gh)
	{
		s, d, b, j := Var(0), Var(1), Var(2), Var(3)
		xIdx := []*Expr{s, b, RVar(0)}
		if n.major {
			xIdx = []*Expr{b, s, RVar(0)}
		}
		post := Add(Acc(t), n.bias(d, 0, j))
		rb := n.bias(d, 1, j)
		if n.linearBeforeReset {
			rb = Select(Lt(j, C(2*n.hidden)), rb, Const(t, 0))
		}
		post = Add(post, rb)
		c.Emit(&Kernel{Name: n.op + ".input", Out: gx, Space: gx.Dims, Value: Mul(Load(n.x, xIdx...), Load(n.w, d, j, RVar(0))),
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(n.in)}, Post: post}})
	}

	// The hidden state before step i is h[i] (h[0] the initial state):
	// Y is written from it once the steps are done. The cell state is
	// double-buffered: c[i%2] before step i.
	h := c.Temp(t, C(n.seq+1), D, B, H)
	var cell *Buffer
	zero := Const(t, 0)
	state := []*Expr{D, B, H}
	initFrom := func(src *Buffer) *Expr {
		if src == nil {
			return zero
		}
		return Load(src, n.stateIdx(d, b, j)...)
	}
	c.Emit(&Kernel{Name: n.op + ".h0", Out: h, Space: state, Store: []*Expr{C(0), d, b, j}, Value: initFrom(n.h0)})
	if n.op == "LSTM" {
		cell = c.Temp(t, C(2), D, B, H)
		c.Emit(&Kernel{Name: n.op + ".c0", Out: cell, Space: state, Store: []*Expr{C(0), d, b, j}, Value: initFrom(n.c0)})
	}
	length := func(b *Expr) *Expr { // batch entry b's sequence length
		if n.lens == nil {
			return S
		}
		return Clamp(CastTo(Load(n.lens, b), ir.Int64), C(0), S)
	}
	// timeOf is the time step direction d processes at step i (clamped
	// into X where the step is past the entry's length).
	timeOf := func(i, d, b *Expr) *Expr {
		back := Sub(Sub(length(b), C(1)), i)
		var time *Expr = i
		switch {
		case n.reverse:
			time = back
		case n.dirs == 2:
			time = Select(Eq(d, C(1)), back, i)
		}
		if n.lens != nil {
			time = Select(Lt(i, length(b)), time, C(0))
		}
		return time
	}
	gr := c.Temp(t, D, B, gh) // R H (+ Rbh) per step
	var rh *Buffer
	if n.op == "GRU" && !n.linearBeforeReset {
		rh = c.Temp(t, D, B, H)
	}
	for i := int64(0); i < n.seq; i++ {
		cur, nxt := C(i), C(i+1)
		step := C(i)
		valid := Lt(step, length(b))
		time := timeOf(step, d, b)
		hc := Load(h, cur, d, b, j)
		in := func(gate int64) *Expr { return Load(gx, time, d, b, Add(C(gate*n.hidden), j)) }
		rec := func(gate int64) *Expr { return Load(gr, d, b, Add(C(gate*n.hidden), j)) }
		keep := func(v, old *Expr) *Expr { // a step past the entry's length keeps the state
			if n.lens == nil {
				return v
			}
			return Select(valid, v, old)
		}
		// matvec is Σ_k from[d, b, k]·R[d, row0 + j, k] with Post.
		matvec := func(name string, out *Buffer, rows int64, from *Expr, row0 int64, post *Expr) *Kernel {
			return &Kernel{Name: n.op + "." + name, Out: out, Space: []*Expr{D, B, C(rows)},
				Value:  Mul(from, Load(n.r, d, Add(C(row0), j), RVar(0))),
				Reduce: &Reduce{Op: SumOp, Extents: []*Expr{H}, Post: post}}
		}
		hPrev := Load(h, cur, d, b, RVar(0))
		switch n.op {
		case "RNN":
			// One kernel: the product and the cell in its Post.
			k := matvec("step", h, n.hidden, hPrev, 0, keep(n.act(d, 0, Add(in(0), Acc(t)), true), hc))
			k.Store = []*Expr{nxt, d, b, j}
			c.Emit(k)
			continue
		case "GRU":
			if rh == nil {
				// gr = R h with Rbh on the h rows; then the cell.
				c.Emit(matvec("rec", gr, n.gates*n.hidden, hPrev, 0,
					Add(Acc(t), Select(Ge(j, C(2*n.hidden)), n.bias(d, 1, j), zero))))
				z := n.act(d, 0, Add(in(0), rec(0)), true)
				r := n.act(d, 0, Add(in(1), rec(1)), true)
				hh := n.act(d, 1, Add(in(2), Mul(r, rec(2))), true)
				c.Emit(&Kernel{Name: n.op + ".h", Out: h, Space: state, Store: []*Expr{nxt, d, b, j},
					Value: keep(Add(Mul(Sub(num(z, 1), z), hh), Mul(z, hc)), hc)})
				continue
			}
			// gr = R h on the z and r rows; rh = r·h; then Rh (r·h) and
			// the cell in its Post.
			c.Emit(matvec("rec", gr, 2*n.hidden, hPrev, 0, nil))
			r := n.act(d, 0, Add(in(1), rec(1)), true)
			c.Emit(&Kernel{Name: n.op + ".rh", Out: rh, Space: state, Value: Mul(r, hc)})
			z := n.act(d, 0, Add(in(0), rec(0)), true)
			hh := n.act(d, 1, Add(in(2), Acc(t)), true)
			k := matvec("h", h, n.hidden, Load(rh, d, b, RVar(0)), 2*n.hidden, keep(Add(Mul(Sub(num(z, 1), z), hh), Mul(z, hc)), hc))
			k.Store = []*Expr{nxt, d, b, j}
			c.Emit(k)
		case "LSTM":
			c.Emit(matvec("rec", gr, n.gates*n.hidden, hPrev, 0, nil))
			cp, cn := C(i%2), C(1-i%2)
			cc := Load(cell, cp, d, b, j)
			peep := func(q int64, cv *Expr) *Expr {
				if n.p == nil {
					return zero
				}
				return Mul(Load(n.p, d, Add(C(q*n.hidden), j)), cv)
			}
			ig := n.act(d, 0, Add(Add(in(0), rec(0)), peep(0, cc)), true)
			fg := Sub(num(ig, 1), ig)
			if !n.forget {
				fg = n.act(d, 0, Add(Add(in(2), rec(2)), peep(2, cc)), true)
			}
			cv := Add(Mul(fg, cc), Mul(ig, n.act(d, 1, Add(in(3), rec(3)), true)))
			c.Emit(&Kernel{Name: n.op + ".c", Out: cell, Space: state, Store: []*Expr{cn, d, b, j}, Value: keep(cv, cc)})
			cnew := Load(cell, cn, d, b, j)
			og := n.act(d, 0, Add(Add(in(1), rec(1)), peep(1, cnew)), true)
			c.Emit(&Kernel{Name: n.op + ".h", Out: h, Space: state, Store: []*Expr{nxt, d, b, j},
				Value: keep(Mul(og, n.act(d, 2, cnew, false)), hc)})
		}
	}
	if y != nil {
		// Y[time] is the state after the step that processed it; steps
		// past an entry's length leave zeros.
		if n.lens != nil {
			c.Emit(&Kernel{Name: n.op + ".y0", Out: y, Space: y.Dims, Value: zero})
		}
		i, d, b, j := Var(0), Var(1), Var(2), Var(3)
		time := timeOf(i, d, b)
		at := []*Expr{time, d, b, j}
		if n.major {
			at = []*Expr{b, time, d, j}
		}
		k := &Kernel{Name: n.op + ".y", Out: y, Space: []*Expr{S, D, B, H}, Store: at,
			Value: StoreAs(Load(h, Add(i, C(1)), d, b, j), y.DType)}
		if n.lens != nil {
			k.When = Lt(i, length(b))
		}
		c.Emit(k)
	}
	if yh != nil {
		c.Emit(&Kernel{Name: n.op + ".state", Out: yh, Space: state, Store: n.stateIdx(d, b, j),
			Value: StoreAs(Load(h, S, d, b, j), yh.DType)})
	}
	if yc != nil {
		c.Emit(&Kernel{Name: n.op + ".state", Out: yc, Space: state, Store: n.stateIdx(d, b, j),
			Value: StoreAs(Load(cell, C(n.seq%2), d, b, j), yc.DType)})
	}
}

func init() {
	floats := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	define(map[string]*OpDef{
		"RNN":  {Types: floats, Build: defRNN},
		"GRU":  {Types: floats, Build: defRNN},
		"LSTM": {Types: floats, Build: defRNN},
	})
}
