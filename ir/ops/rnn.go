package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// The recurrent family: RNN, GRU and LSTM. They share their inputs (X, W,
// R, B, sequence_lens, initial_h, and for LSTM initial_c and P), outputs
// (Y, Y_h, and for LSTM Y_c, all optional), attributes and the loop over
// directions, batch entries and time steps; they differ in the cell, the
// step that turns (x_t, H_t-1, C_t-1) into (H_t, C_t).
//
// Rows: opset 7 (output_sequence of opset 1 gone) and 14 (layout).

// rnnCell is what differs between the three ops.
type rnnCell struct {
	name  string
	gates int      // weight blocks per direction: RNN 1, GRU 3 (zrh), LSTM 4 (iofc)
	acts  []string // default activations of one direction
	lstm  bool     // carries a cell state, takes initial_c and P, outputs Y_c
	extra []AttrDef
	step  func(k *rnnKernel, d *rnnDirection, x, h, cell []float64)
}

var rnnCells = []*rnnCell{
	{name: "RNN", gates: 1, acts: []string{"Tanh"}, step: rnnStep},
	{name: "GRU", gates: 3, acts: []string{"Sigmoid", "Tanh"}, step: gruStep,
		extra: []AttrDef{defInt("linear_before_reset", 0)}},
	{name: "LSTM", gates: 4, acts: []string{"Sigmoid", "Tanh", "Tanh"}, step: lstmStep, lstm: true,
		extra: []AttrDef{defInt("input_forget", 0)}},
}

func rnnRows(cell *rnnCell) []*Schema {
	attrs := append([]AttrDef{
		{Name: "activation_alpha", Kind: ir.AttrFloats},
		{Name: "activation_beta", Kind: ir.AttrFloats},
		{Name: "activations", Kind: ir.AttrStrings},
		{Name: "clip", Kind: ir.AttrFloat},
		defString("direction", "forward"),
		{Name: "hidden_size", Kind: ir.AttrInt},
	}, cell.extra...)
	maxIn, maxOut := 6, 2
	if cell.lstm {
		maxIn, maxOut = 8, 3
	}
	row := func(since int64, attrs []AttrDef) *Schema {
		return &Schema{Name: cell.name, Since: since, MinInputs: 3, MaxInputs: maxIn, MinOutputs: 0, MaxOutputs: maxOut,
			Attrs: attrs, Types: floatTypes, Infer: inferRNN(cell), Run: runRNN(cell)}
	}
	return []*Schema{row(7, attrs), row(14, append(slices.Clone(attrs), defInt("layout", 0)))}
}

// RNNSpec is a recurrent node's attributes, resolved and checked once:
// inference, the reference kernel and every lowering read it, so that
// none accepts a value another refuses.
type RNNSpec struct {
	Op    string // RNN, GRU or LSTM
	Gates int    // weight blocks per direction: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c)
	// Direction is forward, reverse or bidirectional; Dirs is 1 or 2.
	Direction string
	Dirs      int
	// HiddenSize is the hidden_size attribute; 0 when the node does not
	// set it (R's last dim is the size).
	HiddenSize int64
	// Activations are each direction's, in the cell's order (RNN: f; GRU:
	// f, g; LSTM: f, g, h), with their parameters.
	Activations [][]RNNActivation
	// Clip bounds the gates' inputs to [-Clip, Clip]; +Inf when the node
	// does not clip.
	Clip float64
	// BatchMajor is layout = 1 (opset 14): X is [batch, seq, input], Y
	// [batch, seq, dirs, hidden], the states [batch, dirs, hidden].
	BatchMajor        bool
	LinearBeforeReset bool // GRU: apply R to H before the reset gate
	InputForget       bool // LSTM: couple the forget gate to the input gate (f = 1 - i)
}

// Reverse reports whether direction d runs from the last time step back.
func (s *RNNSpec) Reverse(d int) bool { return s.Direction == "reverse" || d == 1 }

// Hidden checks W and R against the spec and an input size: W is [dirs,
// gates·hidden, input] and R [dirs, gates·hidden, hidden], hidden being
// hidden_size when set; it returns the hidden size.
func (s *RNNSpec) Hidden(input int64, w, r []int64) (int64, error) {
	if len(w) != 3 || len(r) != 3 {
		return 0, fmt.Errorf("W and R must have rank 3, have shapes %v and %v", ir.FormatList(w), ir.FormatList(r))
	}
	hidden := r[2]
	if s.HiddenSize != 0 {
		hidden = s.HiddenSize
	}
	gh := int64(s.Gates) * hidden
	if !slices.Equal(w, []int64{int64(s.Dirs), gh, input}) || !slices.Equal(r, []int64{int64(s.Dirs), gh, hidden}) {
		return 0, fmt.Errorf("W %v and R %v do not fit %d direction(s), %d gates, hidden size %d and input size %d",
			ir.FormatList(w), ir.FormatList(r), s.Dirs, s.Gates, hidden, input)
	}
	return hidden, nil
}

// RNNSpecOf resolves a recurrent node's spec; an unsupported value is an
// error naming the node and the attribute.
func RNNSpecOf(c *KernelContext) (*RNNSpec, error) {
	s, err := rnnSpecOf(c.attrs, c.Node.OpType)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return s, nil
}

func rnnSpecOf(a attrs, op string) (*RNNSpec, error) {
	i := slices.IndexFunc(rnnCells, func(c *rnnCell) bool { return c.name == op })
	if i < 0 {
		return nil, fmt.Errorf("%s is not a recurrent op", op)
	}
	cell := rnnCells[i]
	s := &RNNSpec{Op: op, Gates: cell.gates, Direction: a.String("direction"), Clip: math.Inf(1)}
	switch s.Direction {
	case "forward", "reverse":
		s.Dirs = 1
	case "bidirectional":
		s.Dirs = 2
	default:
		return nil, fmt.Errorf("direction %q is not forward, reverse or bidirectional", s.Direction)
	}
	if a.Has("hidden_size") {
		if s.HiddenSize = a.Int("hidden_size"); s.HiddenSize <= 0 {
			return nil, fmt.Errorf("hidden_size %d is not positive", s.HiddenSize)
		}
	}
	if a.Has("clip") {
		// A threshold bounds from both sides; ONNX Runtime refuses one
		// that is not positive too.
		if s.Clip = float64(a.Float("clip")); !(s.Clip > 0) {
			return nil, fmt.Errorf("clip %g is not a positive threshold", s.Clip)
		}
	}
	if a.declares("layout") {
		switch l := a.Int("layout"); l {
		case 0, 1:
			s.BatchMajor = l == 1
		default:
			return nil, fmt.Errorf("layout %d is not 0 (time-major) or 1 (batch-major)", l)
		}
	}
	s.LinearBeforeReset = a.declares("linear_before_reset") && a.Int("linear_before_reset") != 0
	s.InputForget = a.declares("input_forget") && a.Int("input_forget") != 0
	var err error
	if s.Activations, err = resolveRNNActivations(a, cell, s.Dirs); err != nil {
		return nil, err
	}
	return s, nil
}

func inferRNN(cell *rnnCell) func(c *InferContext) error {
	return func(c *InferContext) error {
		spec, err := rnnSpecOf(c.attrs, cell.name)
		if err != nil {
			return c.Errorf("%v", err)
		}
		dirs := spec.Dirs
		dim := func(i, axis int) ir.Dim {
			if t := c.In(i); t.Shape.Ranked {
				return t.Shape.Dims[axis]
			}
			return ir.UnknownDim()
		}
		for i, name := range []string{"X", "W", "R"} {
			if s := c.In(i).Shape; s.Ranked && len(s.Dims) != 3 {
				return c.Errorf("%s must have rank 3, has shape %s", name, s)
			}
		}
		hidden := dim(2, 2)
		if spec.HiddenSize != 0 {
			hidden = ir.D(spec.HiddenSize)
		}
		if d := dim(1, 0); d.IsStatic() && d.Value != int64(dirs) {
			return c.Errorf("W has %d directions, direction %q needs %d", d.Value, spec.Direction, dirs)
		}
		for i, name := range []string{"W", "R"} {
			if d := dim(1+i, 1); d.IsStatic() && hidden.IsStatic() && d.Value != int64(cell.gates)*hidden.Value {
				return c.Errorf("%s has %d rows, want %d gates x hidden size %d", name, d.Value, cell.gates, hidden.Value)
			}
		}
		seq, batch := dim(0, 0), dim(0, 1)
		y := []ir.Dim{seq, ir.D(int64(dirs)), batch, hidden}
		state := []ir.Dim{ir.D(int64(dirs)), batch, hidden}
		if spec.BatchMajor {
			seq, batch = batch, seq
			y = []ir.Dim{batch, seq, ir.D(int64(dirs)), hidden}
			state = []ir.Dim{batch, ir.D(int64(dirs)), hidden}
		}
		elem := c.In(0).Elem
		c.Set(0, ir.TensorType(elem, ir.ShapeOf(y...)))
		c.Set(1, ir.TensorType(elem, ir.ShapeOf(state...)))
		c.Set(2, ir.TensorType(elem, ir.ShapeOf(state...)))
		return nil
	}
}

// rnnKernel is one node's run: sizes, settings and scratch space.
type rnnKernel struct {
	hidden, input                  int
	clip                           float64 // +Inf when the node does not clip
	linearBeforeReset, inputForget bool
	gx, gh, tmp                    []float64 // scratch: W x + Wb, R h + Rb, one gate
}

// rnnDirection is one direction's parameters.
type rnnDirection struct {
	w, r   []float64 // [gates*hidden, input], [gates*hidden, hidden]
	wb, rb []float64 // [gates*hidden], zero when B is absent
	p      []float64 // LSTM peepholes [3*hidden] (i, o, f), zero when absent
	f      []func(float64) float64
}

func runRNN(cell *rnnCell) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x, w, r := c.In(0), c.In(1), c.In(2)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		spec, err := RNNSpecOf(c)
		if err != nil {
			return err
		}
		dirs := spec.Dirs
		if len(x.Dims) != 3 {
			return c.Errorf("X must have rank 3, has shape %v", ir.FormatList(x.Dims))
		}
		seq, batch, input := int(x.Dims[0]), int(x.Dims[1]), int(x.Dims[2])
		major := spec.BatchMajor
		if major {
			seq, batch = batch, seq
		}
		h, err := spec.Hidden(int64(input), w.Dims, r.Dims)
		if err != nil {
			return c.Errorf("%v", err)
		}
		hidden := int(h)
		gh := cell.gates * hidden
		// Optional inputs, each checked for its size: B, initial_h,
		// initial_c, P (sequence_lens is read below).
		opt := func(i int, n int) ([]float64, error) {
			t := c.In(i)
			if t == nil {
				return make([]float64, n), nil
			}
			if t.Len() != int64(n) {
				return nil, c.Errorf("input %d has shape %v, want %d values", i, ir.FormatList(t.Dims), n)
			}
			return Float64s(t), nil
		}
		bias, err := opt(3, dirs*2*gh)
		if err != nil {
			return err
		}
		h0, err := opt(5, dirs*batch*hidden)
		if err != nil {
			return err
		}
		var c0, peep []float64
		if cell.lstm {
			if c0, err = opt(6, dirs*batch*hidden); err != nil {
				return err
			}
			if peep, err = opt(7, dirs*3*hidden); err != nil {
				return err
			}
		}
		lens := make([]int64, batch)
		for b := range lens {
			lens[b] = int64(seq)
		}
		if t := c.In(4); t != nil {
			if t.Len() != int64(batch) || !t.DType.IsInt() {
				return c.Errorf("sequence_lens must hold %d integers, is %s%v", batch, t.DType, ir.FormatList(t.Dims))
			}
			lens = Int64s(t)
			for _, n := range lens {
				if n < 0 || n > int64(seq) {
					return c.Errorf("sequence length %d is outside [0, %d]", n, seq)
				}
			}
		}
		acts := rnnFuncs(spec.Activations)
		k := &rnnKernel{hidden: hidden, input: input, clip: spec.Clip, linearBeforeReset: spec.LinearBeforeReset, inputForget: spec.InputForget,
			gx: make([]float64, gh), gh: make([]float64, gh), tmp: make([]float64, hidden)}

		// Flat indices of X[t, b, 0], Y[t, d, b, 0] and state[d, b, 0].
		xAt := func(t, b int) int { return (t*batch + b) * input }
		yAt := func(t, d, b int) int { return ((t*dirs+d)*batch + b) * hidden }
		stateAt := func(d, b int) int { return (d*batch + b) * hidden }
		if major {
			xAt = func(t, b int) int { return (b*seq + t) * input }
			yAt = func(t, d, b int) int { return ((b*seq+t)*dirs + d) * hidden }
			stateAt = func(d, b int) int { return (b*dirs + d) * hidden }
		}
		xs, ws, rs := Float64s(x), Float64s(w), Float64s(r)
		y := make([]float64, seq*dirs*batch*hidden)
		yh := make([]float64, dirs*batch*hidden)
		yc := make([]float64, len(yh))
		for d := range dirs {
			dir := &rnnDirection{
				w: ws[d*gh*input : (d+1)*gh*input], r: rs[d*gh*hidden : (d+1)*gh*hidden],
				wb: bias[2*d*gh : (2*d+1)*gh], rb: bias[(2*d+1)*gh : (2*d+2)*gh], f: acts[d],
			}
			if cell.lstm {
				dir.p = peep[d*3*hidden : (d+1)*3*hidden]
			}
			reverse := spec.Reverse(d)
			for b := range batch {
				s := stateAt(d, b)
				h, cs := yh[s:s+hidden], yc[s:s+hidden]
				copy(h, h0[s:s+hidden])
				if cell.lstm {
					copy(cs, c0[s:s+hidden])
				}
				n := int(lens[b])
				for i := range n {
					t := i
					if reverse {
						t = n - 1 - i
					}
					cell.step(k, dir, xs[xAt(t, b):xAt(t, b)+input], h, cs)
					copy(y[yAt(t, d, b):], h)
				}
			}
		}
		yDims := []int64{int64(seq), int64(dirs), int64(batch), int64(hidden)}
		stateDims := []int64{int64(dirs), int64(batch), int64(hidden)}
		if major {
			yDims = []int64{int64(batch), int64(seq), int64(dirs), int64(hidden)}
			stateDims = []int64{int64(batch), int64(dirs), int64(hidden)}
		}
		c.Set(0, FromFloat64s(x.DType, yDims, y))
		c.Set(1, FromFloat64s(x.DType, stateDims, yh))
		if cell.lstm {
			c.Set(2, FromFloat64s(x.DType, stateDims, yc))
		}
		return nil
	}
}

// affine sets dst[j] = bias[j] + m[j, :] . v for an m of len(dst) rows.
func affine(dst, m, v, bias []float64) {
	n := len(v)
	for j := range dst {
		s := bias[j]
		for i, row := range m[j*n : (j+1)*n] {
			s += row * v[i]
		}
		dst[j] = s
	}
}

func (k *rnnKernel) clipped(x float64) float64 { return max(-k.clip, min(k.clip, x)) }

// rnnStep: H = f(W x + R H + Wb + Rb).
func rnnStep(k *rnnKernel, d *rnnDirection, x, h, _ []float64) {
	affine(k.gx, d.w, x, d.wb)
	affine(k.gh, d.r, h, d.rb)
	for j := range h {
		h[j] = d.f[0](k.clipped(k.gx[j] + k.gh[j]))
	}
}

// gruStep, with gates z, r, h in that order:
//
//	z = f(Wz x + Rz H + Wbz + Rbz), r = f(Wr x + Rr H + Wbr + Rbr)
//	h = g(Wh x + Rh (r . H) + Rbh + Wbh)      linear_before_reset = 0
//	h = g(Wh x + r . (Rh H + Rbh) + Wbh)      linear_before_reset = 1
//	H = (1 - z) . h + z . H
func gruStep(k *rnnKernel, d *rnnDirection, x, h, _ []float64) {
	n := k.hidden
	affine(k.gx, d.w, x, d.wb)
	affine(k.gh, d.r, h, d.rb)
	z, r := k.gx[:n], k.gx[n:2*n] // overwritten with the gates' values
	for j := range n {
		z[j] = d.f[0](k.clipped(z[j] + k.gh[j]))
		r[j] = d.f[0](k.clipped(r[j] + k.gh[n+j]))
	}
	hh := k.tmp
	if k.linearBeforeReset {
		for j := range n {
			hh[j] = r[j] * k.gh[2*n+j]
		}
	} else {
		rh := k.gh[:n] // the z and r parts of R H are spent
		for j := range n {
			rh[j] = r[j] * h[j]
		}
		affine(hh, d.r[2*n*n:], rh, d.rb[2*n:])
	}
	for j := range n {
		v := d.f[1](k.clipped(k.gx[2*n+j] + hh[j]))
		h[j] = (1-z[j])*v + z[j]*h[j]
	}
}

// lstmStep, with gates i, o, f, c in that order and peepholes P = (i, o, f):
//
//	i = f(Wi x + Ri H + Pi . C + Wbi + Rbi)
//	f = f(Wf x + Rf H + Pf . C + Wbf + Rbf)   (1 - i with input_forget)
//	c = g(Wc x + Rc H + Wbc + Rbc)
//	C = f . C + i . c
//	o = f(Wo x + Ro H + Po . C + Wbo + Rbo)
//	H = o . h(C)
func lstmStep(k *rnnKernel, d *rnnDirection, x, h, cell []float64) {
	n := k.hidden
	affine(k.gx, d.w, x, d.wb)
	affine(k.gh, d.r, h, d.rb)
	pre := k.gx
	for j := range pre {
		pre[j] += k.gh[j]
	}
	for j := range n {
		in := d.f[0](k.clipped(pre[j] + d.p[j]*cell[j]))
		forget := 1 - in
		if !k.inputForget {
			forget = d.f[0](k.clipped(pre[2*n+j] + d.p[2*n+j]*cell[j]))
		}
		cell[j] = forget*cell[j] + in*d.f[1](k.clipped(pre[3*n+j]))
		out := d.f[0](k.clipped(pre[n+j] + d.p[n+j]*cell[j]))
		h[j] = out * d.f[2](cell[j])
	}
}

// rnnActivation is an activation function of the recurrent ops; alpha and
// beta hold its defaults, and uses says how many of them it takes.
type rnnActivation struct {
	uses        int
	alpha, beta float64
	f           func(x, alpha, beta float64) float64
}

var rnnActivationFuncs = map[string]rnnActivation{
	"relu":    {f: func(x, _, _ float64) float64 { return max(0, x) }},
	"tanh":    {f: func(x, _, _ float64) float64 { return math.Tanh(x) }},
	"sigmoid": {f: func(x, _, _ float64) float64 { return 1 / (1 + math.Exp(-x)) }},
	"affine":  {uses: 2, alpha: 1, f: func(x, a, b float64) float64 { return a*x + b }},
	"leakyrelu": {uses: 1, alpha: 0.01, f: func(x, a, _ float64) float64 {
		if x >= 0 {
			return x
		}
		return a * x
	}},
	"thresholdedrelu": {uses: 1, alpha: 1, f: func(x, a, _ float64) float64 {
		if x >= a {
			return x
		}
		return 0
	}},
	"scaledtanh":  {uses: 2, alpha: 1, beta: 1, f: func(x, a, b float64) float64 { return a * math.Tanh(b*x) }},
	"hardsigmoid": {uses: 2, alpha: 0.2, beta: 0.5, f: func(x, a, b float64) float64 { return min(max(a*x+b, 0), 1) }},
	"elu": {uses: 1, alpha: 1, f: func(x, a, _ float64) float64 {
		if x >= 0 {
			return x
		}
		return a * (math.Exp(x) - 1)
	}},
	"softsign": {f: func(x, _, _ float64) float64 { return x / (1 + math.Abs(x)) }},
	"softplus": {f: func(x, _, _ float64) float64 { return math.Log1p(math.Exp(x)) }},
}

// RNNActivation is one resolved activation of a recurrent op: its name in
// lower case (relu, tanh, sigmoid, affine, leakyrelu, thresholdedrelu,
// scaledtanh, hardsigmoid, elu, softsign, softplus) and its parameters.
type RNNActivation struct {
	Name        string
	Alpha, Beta float64
}

// resolveRNNActivations resolves the node's activations per direction
// (dirs of them), each direction's in the cell's order. Names are
// case-insensitive; a unidirectional list serves both directions of a
// bidirectional node. activation_alpha and activation_beta are consumed
// in order by the functions that take them; the rest keep their defaults.
func resolveRNNActivations(a attrs, cell *rnnCell, dirs int) ([][]RNNActivation, error) {
	names := a.Strings("activations")
	switch len(names) {
	case 0:
		names = cell.acts
		fallthrough
	case len(cell.acts):
		if dirs == 2 {
			names = append(slices.Clone(names), names...)
		}
	case len(cell.acts) * dirs:
	default:
		return nil, fmt.Errorf("activations: %d functions, %s takes %d per direction", len(names), cell.name, len(cell.acts))
	}
	alphas, betas := a.Floats("activation_alpha"), a.Floats("activation_beta")
	out := make([][]RNNActivation, dirs)
	for i, name := range names {
		lower := strings.ToLower(name)
		act, ok := rnnActivationFuncs[lower]
		if !ok {
			return nil, fmt.Errorf("unknown activation %q in activations", name)
		}
		alpha, beta := act.alpha, act.beta
		if act.uses >= 1 && len(alphas) > 0 {
			alpha, alphas = float64(alphas[0]), alphas[1:]
		}
		if act.uses >= 2 && len(betas) > 0 {
			beta, betas = float64(betas[0]), betas[1:]
		}
		d := i / len(cell.acts)
		out[d] = append(out[d], RNNActivation{Name: lower, Alpha: alpha, Beta: beta})
	}
	return out, nil
}

// rnnFuncs are resolved activations as functions.
func rnnFuncs(acts [][]RNNActivation) [][]func(float64) float64 {
	out := make([][]func(float64) float64, len(acts))
	for d, list := range acts {
		for _, ra := range list {
			f, alpha, beta := rnnActivationFuncs[ra.Name].f, ra.Alpha, ra.Beta
			out[d] = append(out[d], func(x float64) float64 { return f(x, alpha, beta) })
		}
	}
	return out
}

func init() {
	var rows []*Schema
	for _, cell := range rnnCells {
		rows = append(rows, rnnRows(cell)...)
	}
	register(rows)
}
