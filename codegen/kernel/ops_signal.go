package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Signal processing: the window functions (tables of ir/ops' values) and
// the discrete Fourier transforms, direct sums over a table of twiddles
// (ops.DFTTwiddles) for the lengths and axes ir/ops resolves (DFTSpec,
// STFTSpec). Transforms accumulate in float64, as the reference does.

// defWindow writes a window function's samples (ir/ops computes them for
// the output's length) as a table.
func defWindow(c *Ctx) error {
	out := c.Out[0]
	dims, ok := out.Static()
	if !ok {
		return c.Unsupported("a window of a size known only at run time")
	}
	v, err := c.WindowValues(dims[0])
	if err != nil {
		return c.Unsupported("%v", err)
	}
	c.Emit(copyOf(out, Load(c.Table(ops.FromFloat64s(out.DType, dims, v)), Var(0))))
	return nil
}

// transform is one DFT kernel: bin is the output point's frequency,
// channel its (re, im) coordinate (nil: the output is real), sample the
// complex sample j of its line (im nil for a real signal).
type transform struct {
	n       int64
	inverse bool
	bin     *Expr
	channel *Expr
	sample  func(j *Expr) (re, im *Expr)
}

// kernel is out = Σ_j x_j · e^(∓2πi·bin·j/n), divided by n when inverse.
func (t transform) kernel(c *Ctx, out *Buffer) *Kernel {
	f := ir.Float64
	cosv, sinv := ops.DFTTwiddles(t.n)
	if !t.inverse {
		for i := range sinv {
			sinv[i] = -sinv[i]
		}
	}
	j := RVar(0)
	w := Rem(Mul(t.bin, j), C(t.n))
	cs := Load(c.Table(ops.FromFloat64s(f, []int64{t.n}, cosv)), w)
	sn := Load(c.Table(ops.FromFloat64s(f, []int64{t.n}, sinv)), w)
	a, b := t.sample(j)
	re, im := Mul(a, cs), Mul(a, sn)
	if b != nil {
		re, im = Sub(re, Mul(b, sn)), Add(im, Mul(b, cs))
	}
	v := re
	if t.channel != nil {
		v = Select(Eq(t.channel, C(0)), re, im)
	}
	post := Acc(f)
	if t.inverse {
		post = Div(post, Const(f, float64(t.n)))
	}
	return &Kernel{Out: out, Space: out.Dims, Value: v,
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(t.n)}, Post: StoreAs(CastTo(post, ComputeType(out.DType)), out.DType)}}
}

// defDFT transforms each line along the axis, zero-padded or truncated to
// the length; an inverse one-sided transform (irfft) reads the bins up to
// n/2 and their conjugates mirrored above, and writes the real part.
func defDFT(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	dims, ok := x.Static()
	if !ok {
		return c.Unsupported("a DFT of dynamic dims")
	}
	s, err := c.DFTSpec(dims)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	rank := len(dims)
	complexIn := dims[rank-1] == 2
	irfft := s.Inverse && s.Onesided
	f := ir.Float64
	t := transform{n: s.Length, inverse: s.Inverse, bin: Var(s.Axis)}
	if s.OutChannels() == 2 {
		t.channel = Var(rank - 1)
	}
	t.sample = func(j *Expr) (re, im *Expr) {
		src, conj := j, Bool(false)
		if irfft { // bin n-j is the conjugate of bin j
			conj = Gt(j, C(s.Length/2))
			src = Select(conj, Sub(C(s.Length), j), j)
		}
		valid := Lt(src, C(dims[s.Axis]))
		at := func(ch int64) *Expr {
			idx := Vars(rank)
			idx[s.Axis], idx[rank-1] = src, C(ch)
			return CastTo(LoadOr(valid, x, Const(ComputeType(x.DType), 0), idx...), f)
		}
		re = at(0)
		if complexIn {
			im = at(1)
			if irfft {
				im = Select(conj, Neg(im), im)
			}
		}
		return re, im
	}
	c.Emit(t.kernel(c, out))
	return nil
}

// defSTFT transforms each frame of the signal ([batch, length, 1 or 2]),
// frame_step apart and weighted by the window (read at run time when it
// is not a constant), into [batch, frames, bins, 2].
func defSTFT(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	dims, ok := x.Static()
	if !ok {
		return c.Unsupported("an STFT of dynamic dims")
	}
	s, err := c.STFTSpec(dims)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	f := ir.Float64
	win := c.Input(2)
	if win != nil && (win.Rank() != 1 || !sameSize(win.Dims[0], C(s.FrameLen))) {
		return c.Unsupported("a window of dims %s for frames of %d", win.Dims, s.FrameLen)
	}
	t := transform{n: s.FrameLen, bin: Var(2), channel: Var(3)}
	t.sample = func(j *Expr) (re, im *Expr) {
		pos := Add(Mul(Var(1), C(s.Step)), j)
		w := Const(f, 1)
		if win != nil {
			w = CastTo(Load(win, j), f)
		}
		re = Mul(CastTo(Load(x, Var(0), pos, C(0)), f), w)
		if dims[2] == 2 {
			im = Mul(CastTo(Load(x, Var(0), pos, C(1)), f), w)
		}
		return re, im
	}
	c.Emit(t.kernel(c, out))
	return nil
}

// defMelWeightMatrix computes each filter's edges (ops.MelScale, MelEdge)
// and its weight at each bin (ops.MelWeight) from the inputs read at run
// time, in the reference's arithmetic (ops.Arith), so the engine's edges
// are the reference's bit for bit. An engine does not check the edges:
// a filter past the spectrogram's bins, which the reference refuses,
// has the weights of the bins it covers.
func defMelWeightMatrix(c *Ctx) error {
	var a exprArith
	f := ir.Float64
	in := func(i int) *Expr {
		x := c.In[i]
		at := make([]*Expr, x.Rank())
		for k := range at {
			at[k] = C(0)
		}
		return CastTo(Load(x, at...), f)
	}
	low, step := ops.MelScale[*Expr](a, in(0), in(3), in(4))
	edge := func(k *Expr) *Expr { return ops.MelEdge[*Expr](a, CastTo(k, f), low, step, in(1), in(2)) }
	filter := Var(1)
	v := ops.MelWeight[*Expr](a, CastTo(Var(0), f), edge(filter), edge(Add(filter, C(1))), edge(Add(filter, C(2))))
	out := c.Out[0]
	if out.DType == ir.Float16 || out.DType == ir.BFloat16 {
		v = CastTo(v, ir.Float32) // as ops.FromFloat64s rounds them
	}
	c.Emit(copyOf(out, StoreAs(v, out.DType)))
	return nil
}

func init() {
	sizes := []ir.DType{ir.Int32, ir.Int64}
	define(map[string]*OpDef{
		"HannWindow":      {Types: sizes, Build: defWindow},
		"HammingWindow":   {Types: sizes, Build: defWindow},
		"BlackmanWindow":  {Types: sizes, Build: defWindow},
		"DFT":             {Types: registryTypes("DFT"), Build: defDFT},
		"STFT":            {Types: registryTypes("STFT"), Build: defSTFT},
		"MelWeightMatrix": {Types: sizes, Build: defMelWeightMatrix},
	})
}
