package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// rnnOracle runs one direction of one batch entry, written gate by gate
// from the ONNX equations: an independent check of the fused kernels.
type rnnOracle struct {
	op           string
	hidden       int
	w, r, wb, rb []float64 // this direction's
	p            []float64
	clip         float64
	lbr, forget  bool
	f, g, h      func(float64) float64
}

// gateOf returns block k of M v + b (rows k*hidden...).
func (o *rnnOracle) gateOf(m, v, b []float64, k int) []float64 {
	out := make([]float64, o.hidden)
	for j := range out {
		row := k*o.hidden + j
		out[j] = b[row]
		for i := range v {
			out[j] += m[row*len(v)+i] * v[i]
		}
	}
	return out
}

func (o *rnnOracle) act(f func(float64) float64, xs ...[]float64) []float64 {
	out := make([]float64, o.hidden)
	for j := range out {
		var s float64
		for _, x := range xs {
			s += x[j]
		}
		out[j] = f(math.Max(-o.clip, math.Min(o.clip, s)))
	}
	return out
}

func mul(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] * b[i]
	}
	return out
}

func (o *rnnOracle) step(x, h, c []float64) (hn, cn []float64) {
	wx := func(k int) []float64 { return o.gateOf(o.w, x, o.wb, k) }
	rh := func(k int) []float64 { return o.gateOf(o.r, h, o.rb, k) }
	switch o.op {
	case "RNN":
		return o.act(o.f, wx(0), rh(0)), nil
	case "GRU":
		z, r := o.act(o.f, wx(0), rh(0)), o.act(o.f, wx(1), rh(1))
		var hh []float64
		if o.lbr {
			hh = o.act(o.g, wx(2), mul(r, rh(2)))
		} else {
			hh = o.act(o.g, wx(2), o.gateOf(o.r, mul(r, h), o.rb, 2))
		}
		hn = make([]float64, o.hidden)
		for j := range hn {
			hn[j] = (1-z[j])*hh[j] + z[j]*h[j]
		}
		return hn, nil
	}
	n := o.hidden
	pi, po, pf := o.p[:n], o.p[n:2*n], o.p[2*n:]
	i := o.act(o.f, wx(0), rh(0), mul(pi, c))
	f := o.act(o.f, wx(2), rh(2), mul(pf, c))
	if o.forget {
		for j := range f {
			f[j] = 1 - i[j]
		}
	}
	ct := o.act(o.g, wx(3), rh(3))
	cn = make([]float64, n)
	for j := range cn {
		cn[j] = f[j]*c[j] + i[j]*ct[j]
	}
	out := o.act(o.f, wx(1), rh(1), mul(po, cn))
	hn = make([]float64, n)
	for j := range hn {
		hn[j] = out[j] * o.h(cn[j])
	}
	return hn, cn
}

func logistic(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

type rnnCase struct {
	op, direction string
	attrs         []*ir.Attribute
	lbr, forget   bool
	peepholes     bool
	lens          []int32
	f, g, h       func(float64) float64
	clip          float64
}

func TestRecurrentAgainstOracle(t *testing.T) {
	hs := func(x float64) float64 { return math.Max(0, math.Min(1, 0.3*x+0.4)) }
	leaky := func(x float64) float64 {
		if x < 0 {
			return 0.2 * x
		}
		return x
	}
	cases := []rnnCase{
		{op: "RNN", direction: "forward", f: math.Tanh},
		{op: "RNN", direction: "bidirectional", f: math.Tanh, lens: []int32{3, 1}},
		{op: "RNN", direction: "reverse", f: leaky, attrs: []*ir.Attribute{ir.AttrSs("activations", "LeakyRelu"), ir.AttrFs("activation_alpha", 0.2)}},
		{op: "GRU", direction: "forward", f: logistic, g: math.Tanh},
		{op: "GRU", direction: "forward", f: logistic, g: math.Tanh, lbr: true, attrs: []*ir.Attribute{ir.AttrI("linear_before_reset", 1)}},
		{op: "GRU", direction: "bidirectional", f: logistic, g: math.Tanh, lens: []int32{2, 3}, clip: 0.5, attrs: []*ir.Attribute{ir.AttrF("clip", 0.5)}},
		{op: "LSTM", direction: "forward", f: logistic, g: math.Tanh, h: math.Tanh},
		{op: "LSTM", direction: "forward", f: logistic, g: math.Tanh, h: math.Tanh, peepholes: true},
		{op: "LSTM", direction: "reverse", f: logistic, g: math.Tanh, h: math.Tanh, peepholes: true, forget: true, lens: []int32{1, 2},
			attrs: []*ir.Attribute{ir.AttrI("input_forget", 1)}},
		{op: "LSTM", direction: "bidirectional", f: hs, g: leaky, h: math.Tanh, peepholes: true, clip: 1.5,
			attrs: []*ir.Attribute{
				ir.AttrSs("activations", "HardSigmoid", "LeakyRelu", "Tanh", "hardsigmoid", "leakyrelu", "tanh"),
				ir.AttrFs("activation_alpha", 0.3, 0.2, 0.3, 0.2), ir.AttrFs("activation_beta", 0.4, 0.4), ir.AttrF("clip", 1.5),
			}},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	const seq, batch, input, hidden = 3, 2, 3, 2
	for _, c := range cases {
		name := fmt.Sprintf("%s %s %v", c.op, c.direction, c.attrs)
		gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[c.op]
		dirs := 1
		if c.direction == "bidirectional" {
			dirs = 2
		}
		if c.clip == 0 {
			c.clip = math.Inf(1)
		}
		x := randTensor(rng, ir.Float32, seq, batch, input)
		w := randTensor(rng, ir.Float32, int64(dirs), int64(gates*hidden), input)
		r := randTensor(rng, ir.Float32, int64(dirs), int64(gates*hidden), hidden)
		b := randTensor(rng, ir.Float32, int64(dirs), int64(2*gates*hidden))
		h0 := randTensor(rng, ir.Float32, int64(dirs), batch, hidden)
		ins := []*ir.Tensor{x, w, r, b, nil, h0}
		if c.lens != nil {
			ins[4] = ir.FromSlice(ir.Int32, []int64{batch}, c.lens)
		}
		var c0, p *ir.Tensor
		nOut := 2
		if c.op == "LSTM" {
			c0 = randTensor(rng, ir.Float32, int64(dirs), batch, hidden)
			p = FromFloat64s(ir.Float32, []int64{int64(dirs), 3 * hidden}, make([]float64, dirs*3*hidden))
			if c.peepholes {
				p = randTensor(rng, ir.Float32, int64(dirs), 3*hidden)
			}
			ins = append(ins, c0, p)
			nOut = 3
		}
		attrs := append([]*ir.Attribute{ir.AttrS("direction", c.direction), ir.AttrI("hidden_size", hidden)}, c.attrs...)
		out, err := callKernel(t, c.op, 14, ins, nOut, attrs...)
		require.NoError(t, err, name)

		xv, wv, rv, bv, h0v := Float64s(x), Float64s(w), Float64s(r), Float64s(b), Float64s(h0)
		y := make([]float64, seq*dirs*batch*hidden)
		yh := make([]float64, dirs*batch*hidden)
		yc := make([]float64, len(yh))
		gh := gates * hidden
		for d := range dirs {
			o := &rnnOracle{op: c.op, hidden: hidden, clip: c.clip, lbr: c.lbr, forget: c.forget, f: c.f, g: c.g, h: c.h,
				w: wv[d*gh*input : (d+1)*gh*input], r: rv[d*gh*hidden : (d+1)*gh*hidden],
				wb: bv[2*d*gh : (2*d+1)*gh], rb: bv[(2*d+1)*gh : (2*d+2)*gh]}
			if p != nil {
				o.p = Float64s(p)[d*3*hidden : (d+1)*3*hidden]
			}
			for bi := range batch {
				st := (d*batch + bi) * hidden
				h := h0v[st : st+hidden]
				var cs []float64
				if c0 != nil {
					cs = Float64s(c0)[st : st+hidden]
				}
				n := seq
				if c.lens != nil {
					n = int(c.lens[bi])
				}
				for i := range n {
					ti := i
					if c.direction == "reverse" || d == 1 {
						ti = n - 1 - i
					}
					h, cs = o.step(xv[(ti*batch+bi)*input:(ti*batch+bi+1)*input], h, cs)
					copy(y[((ti*dirs+d)*batch+bi)*hidden:], h)
				}
				copy(yh[st:], h)
				copy(yc[st:], cs)
			}
		}
		assertClose(t, y, Float64s(out[0]), 1e-5, 1e-6, name, " Y")
		assertClose(t, yh, Float64s(out[1]), 1e-5, 1e-6, name, " Y_h")
		if c.op == "LSTM" {
			assertClose(t, yc, Float64s(out[2]), 1e-5, 1e-6, name, " Y_c")
		}

		// layout=1 is the same computation on batch-major tensors.
		perm := func(t *ir.Tensor, p ...int) *ir.Tensor {
			dims, idx := permuteIndex(t.Dims, p)
			v, o := Float64s(t), make([]float64, len(idx))
			for i, j := range idx {
				o[i] = v[j]
			}
			return FromFloat64s(t.DType, dims, o)
		}
		insBM := append([]*ir.Tensor{perm(x, 1, 0, 2)}, ins[1:]...)
		insBM[5] = perm(h0, 1, 0, 2)
		if c.op == "LSTM" {
			insBM[6] = perm(c0, 1, 0, 2)
		}
		outBM, err := callKernel(t, c.op, 14, insBM, nOut, append(attrs, ir.AttrI("layout", 1))...)
		require.NoError(t, err, name)
		assertClose(t, Float64s(perm(out[0], 2, 0, 1, 3)), Float64s(outBM[0]), 1e-6, 1e-7, name, " layout 1 Y")
		for i := 1; i < nOut; i++ {
			assertClose(t, Float64s(perm(out[i], 1, 0, 2)), Float64s(outBM[i]), 1e-6, 1e-7, name, " layout 1 states")
		}
	}
}

func TestRecurrentDefaults(t *testing.T) {
	// Without B, initial_h and hidden_size, an RNN step from a zero state
	// is f(W x): check one step by hand with an identity-like W.
	x := f32([]int64{1, 1, 2}, 0.5, -1)
	w := f32([]int64{1, 2, 2}, 1, 0, 0, 2)
	r := f32([]int64{1, 2, 2}, 3, 3, 3, 3)
	out, err := callKernel(t, "RNN", 7, []*ir.Tensor{x, w, r}, 2)
	require.NoError(t, err)
	assertClose(t, []float64{math.Tanh(0.5), math.Tanh(-2)}, Float64s(out[1]), 1e-6, 0)
	// Only Y_h asked for.
	out, err = callKernel(t, "GRU", 14, []*ir.Tensor{x, randTensor(rand.New(rand.NewPCG(1, 1)), ir.Float32, 1, 6, 2), randTensor(rand.New(rand.NewPCG(1, 1)), ir.Float32, 1, 6, 2)}, 2)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1, 1, 2}, out[0].Dims)

	_, err = callKernel(t, "RNN", 14, []*ir.Tensor{x, w, r}, 2, ir.AttrS("direction", "sideways"))
	assert.ErrorContains(t, err, "sideways")
	_, err = callKernel(t, "RNN", 14, []*ir.Tensor{x, w, r}, 2, ir.AttrSs("activations", "Swish"))
	assert.ErrorContains(t, err, "unknown activation")
	_, err = callKernel(t, "RNN", 14, []*ir.Tensor{x, w, r}, 2, ir.AttrI("hidden_size", 3))
	assert.ErrorContains(t, err, "do not fit")
	_, err = callKernel(t, "LSTM", 14, []*ir.Tensor{x, w, r}, 3)
	assert.ErrorContains(t, err, "do not fit")
	_, err = callKernel(t, "RNN", 14, []*ir.Tensor{x, w, r, nil, ir.FromSlice(ir.Int32, []int64{1}, []int32{2})}, 2)
	assert.ErrorContains(t, err, "outside")
	_, err = callKernel(t, "RNN", 7, []*ir.Tensor{x, w, r}, 2, ir.AttrI("layout", 1))
	assert.ErrorContains(t, err, "unknown attribute")
}

func TestRecurrentShapes(t *testing.T) {
	f := ir.Float32
	x := sym(f, "S", "B", 16)
	cases := []shapeCase{
		{op: "RNN", opset: 14, ins: []ir.Type{x, tt(f, 1, 8, 16), tt(f, 1, 8, 8)}, nOut: 2},
		{op: "RNN", opset: 14, ins: []ir.Type{x, tt(f, 2, 8, 16), tt(f, 2, 8, 8)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrS("direction", "bidirectional"), ir.AttrI("layout", 1)}},
		{op: "GRU", opset: 7, ins: []ir.Type{x, tt(f, 1, 24, 16), tt(f, 1, 24, 8)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("hidden_size", 8)}},
		{op: "GRU", opset: 14, ins: []ir.Type{x, tt(f, 1, 24, 16), tt(f, 1, 24, 8)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("hidden_size", 6)}},
		{op: "LSTM", opset: 14, ins: []ir.Type{x, tt(f, 1, 32, 16), tt(f, 1, 32, 8)}, nOut: 3},
		{op: "LSTM", opset: 14, ins: []ir.Type{sym(ir.Float64, 32, 1, 64), sym(ir.Float64, 1, 512, 64), sym(ir.Float64, 1, 512, "H")}, nOut: 3, attrs: []*ir.Attribute{ir.AttrI("hidden_size", 128)}},
		{op: "LSTM", opset: 14, ins: []ir.Type{x, tt(f, 1, 32, 16), tt(f, 1, 32, 8)}, nOut: 3, attrs: []*ir.Attribute{ir.AttrS("direction", "bidirectional")}},
		{op: "LSTM", opset: 14, ins: []ir.Type{sym(f, "S", 16), tt(f, 1, 32, 16), tt(f, 1, 32, 8)}, nOut: 3},
		{op: "LSTM", opset: 14, ins: []ir.Type{ir.TensorType(f, ir.Shape{}), ir.TensorType(f, ir.Shape{}), ir.TensorType(f, ir.Shape{})}, nOut: 3},
	}
	checkShapeGolden(t, "rnn", cases)
}

// TestRNNSpec: the one parse of the recurrent attributes, which the
// reference, inference and both lowerings read. Each unsupported value is
// an error naming its attribute, from the kernel and from inference.
func TestRNNSpec(t *testing.T) {
	spec := func(op string, opset int64, attrs ...*ir.Attribute) (*RNNSpec, error) {
		s, err := Lookup("", op, opset)
		require.NoError(t, err)
		return RNNSpecOf(NewKernelContext(s, &ir.Node{OpType: op, Attrs: attrs}, opset, nil))
	}
	s, err := spec("LSTM", 14)
	require.NoError(t, err)
	assert.Equal(t, &RNNSpec{Op: "LSTM", Gates: 4, Direction: "forward", Dirs: 1, Clip: math.Inf(1),
		Activations: [][]RNNActivation{{{Name: "sigmoid"}, {Name: "tanh"}, {Name: "tanh"}}}}, s)
	assert.False(t, s.Reverse(0))

	s, err = spec("GRU", 14, ir.AttrS("direction", "bidirectional"), ir.AttrI("hidden_size", 5), ir.AttrF("clip", 2.5),
		ir.AttrI("layout", 1), ir.AttrI("linear_before_reset", 1), ir.AttrSs("activations", "HardSigmoid", "Tanh"),
		ir.AttrFs("activation_alpha", 0.3), ir.AttrFs("activation_beta", 0.4))
	require.NoError(t, err)
	assert.Equal(t, 2, s.Dirs)
	assert.Equal(t, int64(5), s.HiddenSize)
	assert.Equal(t, 2.5, s.Clip)
	assert.True(t, s.BatchMajor && s.LinearBeforeReset && !s.InputForget)
	assert.False(t, s.Reverse(0))
	assert.True(t, s.Reverse(1))
	hs := RNNActivation{Name: "hardsigmoid", Alpha: float64(float32(0.3)), Beta: float64(float32(0.4))}
	// One direction's list serves both; the parameters are consumed in
	// order along the repeated list, so the second
	// direction's HardSigmoid keeps its defaults.
	assert.Equal(t, [][]RNNActivation{{hs, {Name: "tanh"}}, {{Name: "hardsigmoid", Alpha: 0.2, Beta: 0.5}, {Name: "tanh"}}}, s.Activations)
	h, err := s.Hidden(7, []int64{2, 15, 7}, []int64{2, 15, 5})
	require.NoError(t, err)
	assert.Equal(t, int64(5), h)
	_, err = s.Hidden(7, []int64{1, 15, 7}, []int64{1, 15, 5})
	assert.ErrorContains(t, err, "do not fit 2 direction(s)")
	_, err = s.Hidden(7, []int64{2, 18, 7}, []int64{2, 18, 6})
	assert.ErrorContains(t, err, "hidden size 5", "hidden_size against R")

	s, err = spec("LSTM", 7, ir.AttrS("direction", "reverse"), ir.AttrI("input_forget", 1))
	require.NoError(t, err)
	assert.True(t, s.InputForget && s.Reverse(0) && !s.BatchMajor)

	for _, c := range []struct {
		op   string
		attr *ir.Attribute
		want string
	}{
		{"RNN", ir.AttrS("direction", "sideways"), `direction "sideways"`},
		{"RNN", ir.AttrS("direction", ""), `direction ""`},
		{"GRU", ir.AttrI("hidden_size", 0), "hidden_size 0"},
		{"LSTM", ir.AttrF("clip", -1), "clip -1"},
		{"LSTM", ir.AttrF("clip", float32(math.NaN())), "clip NaN"},
		{"RNN", ir.AttrI("layout", 2), "layout 2"},
		{"GRU", ir.AttrSs("activations", "Sigmoid"), "activations: 1 functions, GRU takes 2"},
		{"LSTM", ir.AttrSs("activations", "Sigmoid", "Swish", "Tanh"), `unknown activation "Swish" in activations`},
	} {
		_, err := spec(c.op, 14, c.attr)
		assert.ErrorContains(t, err, c.want, "%s %s", c.op, c.attr.Name)
		_, err = callInfer(c.op, 14, []ir.Type{tt(ir.Float32, 2, 1, 3), tt(ir.Float32, 1, 12, 3), tt(ir.Float32, 1, 12, 3)}, nil, 2, c.attr)
		assert.ErrorContains(t, err, c.want, "inference: %s %s", c.op, c.attr.Name)
	}
}
