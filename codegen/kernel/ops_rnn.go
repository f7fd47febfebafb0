package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The recurrent ops (RNN, GRU, LSTM) as kernels: the input projection of
// every time step at once, then per time step the recurrent product and
// the cell update of every direction and batch entry, each step's hidden
// state kept in scratch, and Y written from them at the end. A static
// sequence length unrolls the steps; a dynamic one runs them as one
// serial kernel over (step, direction, batch, column) whose columns are
// the step's phases in order (the products, then the cell, then H), each
// phase reading what the earlier ones stored (emitSerial). The attributes are ir/ops' RNNSpec, the
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
	seq, in, hidden           int64 // seq: -1 when known only at run time
	seqDim, batchDim          *Expr
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
	// The sequence length and the batch may be known only at run time;
	// the input and hidden sizes are the weights'.
	seq, ok1 := x.Dims[seqAxis].IntValue()
	in, ok4 := x.Dims[2].IntValue()
	if !ok2 || !ok3 || !ok4 {
		return c.Unsupported("a recurrence of dynamic input or hidden size")
	}
	if !ok1 {
		seq = -1
	}
	n.seq, n.seqDim, n.batchDim, n.in = seq, x.Dims[seqAxis], x.Dims[1-seqAxis], in
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

// steps is the sequence length as an expression.
func (n *rnn) steps() *Expr {
	if n.seq < 0 {
		return n.seqDim
	}
	return C(n.seq)
}

// projection is the input projection, every time step: gx[s, d, b, j] =
// W x + the biases that add to it (all but GRU's Rbh with
// linear_before_reset).
func (n *rnn) projection() *Buffer {
	c, t := n.c, n.t
	gx := c.Temp(t, n.steps(), C(n.dirs), n.batchDim, C(n.gates*n.hidden))
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
	return gx
}

// length is batch entry b's sequence length.
func (n *rnn) length(b *Expr) *Expr {
	if n.lens == nil {
		return n.steps()
	}
	return Clamp(CastTo(Load(n.lens, b), ir.Int64), C(0), n.steps())
}

// timeOf is the time step direction d processes at step i (clamped into
// X where the step is past the entry's length).
func (n *rnn) timeOf(i, d, b *Expr) *Expr {
	back := Sub(Sub(n.length(b), C(1)), i)
	var time *Expr = i
	switch {
	case n.reverse:
		time = back
	case n.dirs == 2:
		time = Select(Eq(d, C(1)), back, i)
	}
	if n.lens != nil {
		time = Select(Lt(i, n.length(b)), time, C(0))
	}
	return time
}

// initFrom is state (d, b, j) read from src (initial_h, initial_c), or 0.
func (n *rnn) initFrom(src *Buffer, d, b, j *Expr) *Expr {
	if src == nil {
		return Const(n.t, 0)
	}
	return Load(src, n.stateIdx(d, b, j)...)
}

func (n *rnn) emit() {
	gx := n.projection()
	if n.seq < 0 {
		n.emitSerial(gx)
		return
	}
	c, t := n.c, n.t
	D, B, H, gh := C(n.dirs), n.batchDim, C(n.hidden), C(n.gates*n.hidden)
	d, b, j := Var(0), Var(1), Var(2)

	// The hidden state before step i is h[i] (h[0] the initial state):
	// Y is written from it once the steps are done. The cell state is
	// double-buffered: c[i%2] before step i.
	h := c.Temp(t, C(n.seq+1), D, B, H)
	var cell *Buffer
	zero := Const(t, 0)
	state := []*Expr{D, B, H}
	c.Emit(&Kernel{Name: n.op + ".h0", Out: h, Space: state, Store: []*Expr{C(0), d, b, j}, Value: n.initFrom(n.h0, d, b, j)})
	if n.op == "LSTM" {
		cell = c.Temp(t, C(2), D, B, H)
		c.Emit(&Kernel{Name: n.op + ".c0", Out: cell, Space: state, Store: []*Expr{C(0), d, b, j}, Value: n.initFrom(n.c0, d, b, j)})
	}
	length, timeOf := n.length, n.timeOf
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
	n.emitOutputs(func(i, d, b, j *Expr) *Expr { return Load(h, i, d, b, j) },
		func(d, b, j *Expr) *Expr { return Load(cell, C(n.seq%2), d, b, j) })
}

// emitOutputs writes Y, Y_h and Y_c from hidden(i, d, b, j), the hidden
// state before step i, and finalCell(d, b, j), the last cell state.
func (n *rnn) emitOutputs(hidden func(i, d, b, j *Expr) *Expr, finalCell func(d, b, j *Expr) *Expr) {
	c, zero := n.c, Const(n.t, 0)
	D, B, S, H := C(n.dirs), n.batchDim, n.steps(), C(n.hidden)
	state := []*Expr{D, B, H}
	y, yh, yc := c.Output(0), c.Output(1), c.Output(2)
	if n.op != "LSTM" {
		yc = nil
	}
	if y != nil {
		// Y[time] is the state after the step that processed it; steps
		// past an entry's length leave zeros.
		if n.lens != nil {
			c.Emit(&Kernel{Name: n.op + ".y0", Out: y, Space: y.Dims, Value: zero})
		}
		i, d, b, j := Var(0), Var(1), Var(2), Var(3)
		time := n.timeOf(i, d, b)
		at := []*Expr{time, d, b, j}
		if n.major {
			at = []*Expr{b, time, d, j}
		}
		k := &Kernel{Name: n.op + ".y", Out: y, Space: []*Expr{S, D, B, H}, Store: at,
			Value: StoreAs(hidden(Add(i, C(1)), d, b, j), y.DType)}
		if n.lens != nil {
			k.When = Lt(i, n.length(b))
		}
		c.Emit(k)
	}
	d, b, j := Var(0), Var(1), Var(2)
	if yh != nil {
		c.Emit(&Kernel{Name: n.op + ".state", Out: yh, Space: state, Store: n.stateIdx(d, b, j),
			Value: StoreAs(hidden(S, d, b, j), yh.DType)})
	}
	if yc != nil {
		c.Emit(&Kernel{Name: n.op + ".state", Out: yc, Space: state, Store: n.stateIdx(d, b, j),
			Value: StoreAs(finalCell(d, b, j), yc.DType)})
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

// phase is a run of columns of the serial step kernel: the product
// Σ_k src(k)·R[d, row(j), k] (src nil: none) and, from it (Acc), the
// value stored at the phase's column j.
type phase struct {
	width int64
	src   func(k *Expr) *Expr
	row   func(j *Expr) *Expr
	post  func(j *Expr) *Expr
}

// emitSerial runs the steps of a sequence known only at run time as one
// serial kernel over (s, d, b, q) into st[s+1, d, b, q], whose columns q
// are the step's phases in order: the recurrent products, then (LSTM)
// the cell state, then H; a phase reads the columns the earlier ones
// stored at row s+1 and the state before the step at row s.
func (n *rnn) emitSerial(gx *Buffer) {
	c, t, hid := n.c, n.t, n.hidden
	D, B, S, H := C(n.dirs), n.batchDim, n.steps(), C(hid)
	s, d, b, q := Var(0), Var(1), Var(2), Var(3)
	zero := Const(t, 0)
	var phases []phase
	var hCol, cCol int64
	var st *Buffer // assigned below, read by the phases' closures
	prev := func(col int64, j *Expr) *Expr { return Load(st, s, d, b, Add(C(col), j)) }
	now := func(col int64, j *Expr) *Expr { return Load(st, Add(s, C(1)), d, b, Add(C(col), j)) }
	time := n.timeOf(s, d, b)
	in := func(gate int64, j *Expr) *Expr { return Load(gx, time, d, b, Add(C(gate*hid), j)) }
	keep := func(v, old *Expr) *Expr { // a step past the entry's length keeps the state
		if n.lens == nil {
			return v
		}
		return Select(Lt(s, n.length(b)), v, old)
	}
	same := func(j *Expr) *Expr { return j }
	rec := func(rows int64, post func(j *Expr) *Expr) phase { // R h(s) on rows [0, rows)
		return phase{width: rows, src: func(k *Expr) *Expr { return prev(hCol, k) }, row: same, post: post}
	}
	acc := func(*Expr) *Expr { return Acc(t) }
	switch {
	case n.op == "RNN":
		phases = []phase{rec(hid, func(j *Expr) *Expr { return keep(n.act(d, 0, Add(in(0, j), Acc(t)), true), prev(hCol, j)) })}
	case n.op == "GRU" && n.linearBeforeReset:
		hCol = 3 * hid
		phases = []phase{
			rec(3*hid, func(j *Expr) *Expr { return Add(Acc(t), Select(Ge(j, C(2*hid)), n.bias(d, 1, j), zero)) }),
			{width: hid, post: func(j *Expr) *Expr {
				z := n.act(d, 0, Add(in(0, j), now(0, j)), true)
				r := n.act(d, 0, Add(in(1, j), now(hid, j)), true)
				hh := n.act(d, 1, Add(in(2, j), Mul(r, now(2*hid, j))), true)
				return keep(Add(Mul(Sub(num(z, 1), z), hh), Mul(z, prev(hCol, j))), prev(hCol, j))
			}},
		}
	case n.op == "GRU":
		hCol = 3 * hid
		phases = []phase{
			rec(2*hid, acc),
			{width: hid, post: func(j *Expr) *Expr { // r·h
				return Mul(n.act(d, 0, Add(in(1, j), now(hid, j)), true), prev(hCol, j))
			}},
			{width: hid, src: func(k *Expr) *Expr { return now(2*hid, k) }, row: func(j *Expr) *Expr { return Add(C(2*hid), j) },
				post: func(j *Expr) *Expr {
					z := n.act(d, 0, Add(in(0, j), now(0, j)), true)
					hh := n.act(d, 1, Add(in(2, j), Acc(t)), true)
					return keep(Add(Mul(Sub(num(z, 1), z), hh), Mul(z, prev(hCol, j))), prev(hCol, j))
				}},
		}
	default: // LSTM
		cCol, hCol = 4*hid, 5*hid
		peep := func(part int64, j, cv *Expr) *Expr {
			if n.p == nil {
				return zero
			}
			return Mul(Load(n.p, d, Add(C(part*hid), j)), cv)
		}
		gate := func(g int64, j *Expr) *Expr { return Add(in(g, j), now(g*hid, j)) }
		phases = []phase{
			rec(4*hid, acc),
			{width: hid, post: func(j *Expr) *Expr {
				cc := prev(cCol, j)
				ig := n.act(d, 0, Add(gate(0, j), peep(0, j, cc)), true)
				fg := Sub(num(ig, 1), ig)
				if !n.forget {
					fg = n.act(d, 0, Add(gate(2, j), peep(2, j, cc)), true)
				}
				return keep(Add(Mul(fg, cc), Mul(ig, n.act(d, 1, gate(3, j), true))), cc)
			}},
			{width: hid, post: func(j *Expr) *Expr {
				cnew := now(cCol, j)
				og := n.act(d, 0, Add(gate(1, j), peep(1, j, cnew)), true)
				return keep(Mul(og, n.act(d, 2, cnew, false)), prev(hCol, j))
			}},
		}
	}
	width := int64(0)
	for _, p := range phases {
		width += p.width
	}
	st = c.Temp(t, Add(S, C(1)), D, B, C(width))
	state := []*Expr{D, B, H}
	j := Var(2)
	c.Emit(&Kernel{Name: n.op + ".h0", Out: st, Space: state, Store: []*Expr{C(0), Var(0), Var(1), Add(C(hCol), j)},
		Value: n.initFrom(n.h0, Var(0), Var(1), j)})
	if n.op == "LSTM" {
		c.Emit(&Kernel{Name: n.op + ".c0", Out: st, Space: state, Store: []*Expr{C(0), Var(0), Var(1), Add(C(cCol), j)},
			Value: n.initFrom(n.c0, Var(0), Var(1), j)})
	}
	// Column q's phase, innermost last: the value and the post of the
	// phase q falls in, at its column clamped into the phase (every load
	// stays inside its buffer whichever branch is taken).
	var value, post *Expr
	start := width
	for i := len(phases) - 1; i >= 0; i-- {
		p := phases[i]
		start -= p.width
		at := Clamp(Sub(q, C(start)), C(0), C(p.width-1))
		v := zero
		if p.src != nil {
			v = Mul(p.src(RVar(0)), Load(n.r, d, p.row(at), RVar(0)))
		}
		pv := p.post(at)
		if value == nil {
			value, post = v, pv
			continue
		}
		end := C(start + p.width)
		value, post = Select(Lt(q, end), v, value), Select(Lt(q, end), pv, post)
	}
	c.Emit(&Kernel{Name: n.op + ".steps", Out: st, Space: []*Expr{S, D, B, C(width)}, Store: []*Expr{Add(s, C(1)), d, b, q},
		Value: value, Reduce: &Reduce{Op: SumOp, Extents: []*Expr{H}, Post: post}, Serial: true})
	n.emitOutputs(func(i, d, b, j *Expr) *Expr { return Load(st, i, d, b, Add(C(hCol), j)) },
		func(d, b, j *Expr) *Expr { return Load(st, S, d, b, Add(C(cCol), j)) })
}
