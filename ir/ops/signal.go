package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Signal processing (opset 17 on): the window functions, DFT, STFT and
// MelWeightMatrix. Complex tensors are real ones with a trailing dim of 2
// (re, im); a trailing dim of 1 is a real signal. The kernels compute in
// float64 with a direct O(n²) transform: they are the oracle, not the
// fast path.

var signalRows = concatRows(
	windowRows("HannWindow", hann),
	windowRows("HammingWindow", hamming),
	windowRows("BlackmanWindow", blackman),
	[]*Schema{{
		Name: "DFT", Since: 17, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("axis", 1), defInt("inverse", 0), defInt("onesided", 0)},
		Types: floatTypes, Infer: inferDFT, Run: runDFT,
	}, {
		// DFT-20 made the axis input 2, counted as in every other op.
		Name: "DFT", Since: 20, MinInputs: 1, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("inverse", 0), defInt("onesided", 0)},
		Types: floatTypes, Infer: inferDFT, Run: runDFT,
	}, {
		Name: "STFT", Since: 17, MinInputs: 2, MaxInputs: 4, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("onesided", 1)},
		Types: floatTypes, Infer: inferSTFT, Run: runSTFT,
	}, {
		Name: "MelWeightMatrix", Since: 17, MinInputs: 5, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("output_datatype", int64(ir.Float32))},
		Types: []ir.DType{ir.Int32, ir.Int64}, Infer: inferMelWeightMatrix, Run: runMelWeightMatrix,
	}},
)

func init() { register(signalRows) }

// --- window functions -------------------------------------------------------

// A window's value at n of a period of p samples (p = size when periodic,
// size - 1 when symmetric).
type windowFunc func(n, p float64) float64

func hann(n, p float64) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*n/p) }

func hamming(n, p float64) float64 { return 25.0/46 - 21.0/46*math.Cos(2*math.Pi*n/p) }

func blackman(n, p float64) float64 {
	return 0.42 - 0.5*math.Cos(2*math.Pi*n/p) + 0.08*math.Cos(4*math.Pi*n/p)
}

func windowRows(name string, f windowFunc) []*Schema {
	return []*Schema{{
		Name: name, Since: 17, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("output_datatype", int64(ir.Float32)), defInt("periodic", 1)},
		Types: []ir.DType{ir.Int32, ir.Int64}, Infer: inferWindow, Run: func(c *KernelContext) error { return runWindow(c, f) },
	}}
}

// signalOutType is output_datatype: any numeric type.
func signalOutType(a attrs) (ir.DType, error) {
	dt := ir.DType(a.Int("output_datatype"))
	if !slices.Contains(numericTypes, dt) {
		return dt, fmt.Errorf("output_datatype %d is not a numeric type", a.Int("output_datatype"))
	}
	return dt, nil
}

// checkIntScalar refuses an input i that is not an int32 or int64 scalar
// (or one-element vector, which ONNX's tests also pass).
func checkIntScalar(c *InferContext, i int, what string) error {
	t := c.In(i)
	if t.Elem != ir.Undefined && t.Elem != ir.Int32 && t.Elem != ir.Int64 || t.Shape.Ranked && t.Shape.Rank() > 1 {
		return c.Errorf("%s must be an int32 or int64 scalar, is %s", what, t)
	}
	return nil
}

func inferWindow(c *InferContext) error {
	dt, err := signalOutType(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkIntScalar(c, 0, "size"); err != nil {
		return err
	}
	size := ir.UnknownDim()
	if e := c.SymInts(0); len(e) == 1 {
		size = symDim(e[0])
	}
	c.Set(0, ir.TensorType(dt, ir.ShapeOf(size)))
	return nil
}

// kernelScalar reads input i as one integer.
func kernelScalar(c *KernelContext, i int, what string) (int64, error) {
	t := c.In(i)
	if t == nil || t.Len() != 1 || !t.DType.IsInt() {
		return 0, c.Errorf("%s must be one integer", what)
	}
	return t.Int64At(0), nil
}

func runWindow(c *KernelContext, f windowFunc) error {
	if err := checkType(c, c.In(0).DType); err != nil {
		return err
	}
	dt, err := signalOutType(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	size, err := kernelScalar(c, 0, "size")
	if err != nil {
		return err
	}
	if size < 0 || size > math.MaxInt32 {
		return c.Errorf("size %d is out of range", size)
	}
	c.Set(0, FromFloat64s(dt, []int64{size}, windowValues(f, size, c.Int("periodic") != 0)))
	return nil
}

// --- DFT --------------------------------------------------------------------

// DFTSpec is a DFT node resolved against its input's shape.
type DFTSpec struct {
	Axis     int   // the signal axis, never the trailing (re, im) one
	Length   int64 // the transform's length n
	Inverse  bool
	Onesided bool
}

// OutLen is the output's length along the axis: n, or n/2+1 for a
// forward one-sided transform. An inverse one-sided transform (irfft)
// reads n/2+1 bins and writes n real samples.
func (s *DFTSpec) OutLen() int64 {
	if s.Onesided && !s.Inverse {
		return s.Length/2 + 1
	}
	return s.Length
}

// OutChannels is the output's trailing dim: 1 for irfft's real output.
func (s *DFTSpec) OutChannels() int64 {
	if s.Onesided && s.Inverse {
		return 1
	}
	return 2
}

// dftAxisInput is the input that holds the axis (DFT-20), or -1 where
// the axis is an attribute.
func dftAxisInput(a attrs) int {
	if a.declares("axis") {
		return -1
	}
	return 2
}

// dftAxis normalizes the axis against the input's rank (with its
// trailing channel dim); it may not be that dim.
func dftAxis(axis int64, rank int) (int, error) {
	if rank < 2 {
		return 0, fmt.Errorf("input has rank %d, want at least 2 (a trailing dim of 1 or 2)", rank)
	}
	a, err := NormAxis(axis, rank)
	if err == nil && a == rank-1 {
		err = fmt.Errorf("axis %d is the trailing (re, im) dim", axis)
	}
	return a, err
}

func inferDFT(c *InferContext) error {
	x := c.In(0)
	if c.HasInput(1) {
		if err := checkIntScalar(c, 1, "dft_length"); err != nil {
			return err
		}
	}
	if i := dftAxisInput(c.attrs); i > 0 && c.HasInput(i) {
		if err := checkIntScalar(c, i, "axis"); err != nil {
			return err
		}
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	rank := x.Shape.Rank()
	if rank < 2 {
		return c.Errorf("input has rank %d, want at least 2 (a trailing dim of 1 or 2)", rank)
	}
	if last := x.Shape.Dims[rank-1]; last.IsStatic() && last.Value != 1 && last.Value != 2 {
		return c.Errorf("trailing dim is %d, want 1 (real) or 2 (complex)", last.Value)
	}
	out := unknownDims(rank)
	if axis, known := dftAxisOf(c.attrs, c.HasInput(2), c.Const(2)); known {
		a, err := dftAxis(axis, rank)
		if err != nil {
			return c.Errorf("%v", err)
		}
		copy(out.Dims, x.Shape.Dims)
		if out.Dims[a], err = dftOutDim(c, x.Shape.Dims[a]); err != nil {
			return c.Errorf("%v", err)
		}
	}
	out.Dims[rank-1] = ir.D(2)
	if c.Int("inverse") != 0 && c.Int("onesided") != 0 {
		out.Dims[rank-1] = ir.D(1)
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// dftAxisOf is the axis: the attribute (DFT-17), else input 2 when
// present (t its value, nil when unknown), else -2; known false when t
// does not tell.
func dftAxisOf(a attrs, present bool, t *ir.Tensor) (axis int64, known bool) {
	switch {
	case dftAxisInput(a) < 0:
		return a.Int("axis"), true
	case !present:
		return -2, true
	case t == nil || t.Len() != 1 || !t.DType.IsInt():
		return 0, false
	}
	return t.Int64At(0), true
}

// dftOutDim is the output's dim along the axis for an input dim d.
func dftOutDim(c *InferContext, d ir.Dim) (ir.Dim, error) {
	inverse, onesided := c.Int("inverse") != 0, c.Int("onesided") != 0
	n := d
	if c.HasInput(1) {
		t := c.Const(1)
		if t == nil || t.Len() != 1 {
			return ir.UnknownDim(), nil
		}
		if v := t.Int64At(0); v < 1 {
			return n, fmt.Errorf("dft_length %d is not positive", v)
		}
		n = ir.D(t.Int64At(0))
	} else if inverse && onesided {
		n = ir.DimMul(ir.DimSub(d, ir.D(1)), ir.D(2))
	}
	if onesided && !inverse {
		return ir.DimAdd(ir.DimFloorDiv(n, ir.D(2)), ir.D(1)), nil
	}
	return n, nil
}

// DFTSpec resolves a DFT node for an input of shape dims, as every
// backend must: dft_length (input 1) and, from opset 20, the axis
// (input 2) must be known.
func (c *KernelContext) DFTSpec(dims []int64) (*DFTSpec, error) {
	rank := len(dims)
	if rank < 2 || dims[rank-1] != 1 && dims[rank-1] != 2 {
		return nil, c.Errorf("input shape %v: want a trailing dim of 1 (real) or 2 (complex)", ir.FormatList(dims))
	}
	axis, ok := dftAxisOf(c.attrs, c.HasInput(2), c.In(2))
	if !ok {
		return nil, c.Errorf("axis (input 2) must be one integer")
	}
	a, err := dftAxis(axis, rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	s := &DFTSpec{Axis: a, Inverse: c.Int("inverse") != 0, Onesided: c.Int("onesided") != 0, Length: dims[a]}
	if s.Inverse && s.Onesided {
		s.Length = 2 * (dims[a] - 1)
	}
	if c.HasInput(1) {
		if s.Length, err = kernelScalar(c, 1, "dft_length"); err != nil {
			return nil, err
		}
	}
	if s.Length < 1 || s.Length > math.MaxInt32 {
		return nil, c.Errorf("dft_length %d is out of range", s.Length)
	}
	return s, nil
}

func runDFT(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	s, err := c.DFTSpec(x.Dims)
	if err != nil {
		return err
	}
	rank := len(x.Dims)
	outDims := slices.Clone(x.Dims)
	outDims[s.Axis], outDims[rank-1] = s.OutLen(), s.OutChannels()
	if _, err := c.Limits.CheckTensor("output", x.DType, outDims); err != nil {
		return c.Errorf("%v", err)
	}
	in := complexLines(x, s.Axis)
	out := make([]float64, ir.Product(outDims))
	outLines := complexLineIndex(outDims, s.Axis)
	t := newDFT(s.Length)
	for g := range in.lines {
		re, im := in.line(g)
		var yr, yi []float64
		if s.Inverse && s.Onesided {
			hr, hi := hermitian(re, im, s.Length)
			yr, yi = t.transform(hr, hi, true)
		} else {
			yr, yi = t.transform(fit(re, s.Length), fit(im, s.Length), s.Inverse)
		}
		outLines.store(out, g, yr[:s.OutLen()], yi)
	}
	c.Set(0, FromFloat64s(x.DType, outDims, out))
	return nil
}

// fit truncates or zero-pads a line to n samples (nil stays nil: zeros).
func fit(v []float64, n int64) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, n)
	copy(out, v)
	return out
}

// hermitian extends the bins 0..n/2 of a real signal's spectrum (what
// irfft reads; missing bins are 0) to all n: X[n-k] = conj(X[k]). The
// real part of its inverse transform is irfft's result, which ignores
// the imaginary parts of bins 0 and n/2 as numpy does.
func hermitian(re, im []float64, n int64) (fullRe, fullIm []float64) {
	fullRe, fullIm = make([]float64, n), make([]float64, n)
	for k := int64(0); k <= n/2 && k < int64(len(re)); k++ {
		fullRe[k] = re[k]
		if im != nil {
			fullIm[k] = im[k]
		}
		if k > 0 && n-k != k {
			fullRe[n-k], fullIm[n-k] = fullRe[k], -fullIm[k]
		}
	}
	return fullRe, fullIm
}

// dft holds the twiddles of one transform length.
type dft struct {
	n        int64
	cos, sin []float64
}

func newDFT(n int64) *dft {
	t := &dft{n: n, cos: make([]float64, n), sin: make([]float64, n)}
	for k := range t.cos {
		a := 2 * math.Pi * float64(k) / float64(n)
		t.cos[k], t.sin[k] = math.Cos(a), math.Sin(a)
	}
	return t
}

// transform is the direct DFT of n samples (xi nil for a real signal);
// inverse conjugates the twiddles and divides by n.
func (t *dft) transform(xr, xi []float64, inverse bool) (yr, yi []float64) {
	n := t.n
	sign := -1.0
	if inverse {
		sign = 1
	}
	yr, yi = make([]float64, n), make([]float64, n)
	for k := int64(0); k < n; k++ {
		var sr, si float64
		for j := int64(0); j < n; j++ {
			w := k * j % n // exact: the twiddle's angle reduced before cos and sin
			c, s := t.cos[w], sign*t.sin[w]
			a, b := xr[j], 0.0
			if xi != nil {
				b = xi[j]
			}
			sr += a*c - b*s
			si += a*s + b*c
		}
		if inverse {
			sr, si = sr/float64(n), si/float64(n)
		}
		yr[k], yi[k] = sr, si
	}
	return yr, yi
}

// complexLineSet reads a (…, C) tensor as complex lines along an axis.
type complexLineSet struct {
	v     []float64
	lines []int // the flat offset of each line's first element
	step  int   // flat distance between a line's elements
	n     int   // elements per line
	chans int   // 1 or 2
}

func complexLines(x *ir.Tensor, axis int) complexLineSet {
	s := complexLineIndex(x.Dims, axis)
	s.v = Float64s(x)
	return s
}

func complexLineIndex(dims []int64, axis int) complexLineSet {
	rank := len(dims)
	chans := int(dims[rank-1])
	step := int(ir.Product(dims[axis+1:]))
	s := complexLineSet{step: step, n: int(dims[axis]), chans: chans}
	outer, inner := int(ir.Product(dims[:axis])), step/chans
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			s.lines = append(s.lines, o*s.n*step+i*chans)
		}
	}
	return s
}

// line returns line g's real and imaginary parts (im nil when real).
func (s complexLineSet) line(g int) (re, im []float64) {
	re = make([]float64, s.n)
	if s.chans == 2 {
		im = make([]float64, s.n)
	}
	for j := range re {
		o := s.lines[g] + j*s.step
		re[j] = s.v[o]
		if im != nil {
			im[j] = s.v[o+1]
		}
	}
	return re, im
}

// store writes line g of out; the imaginary part only where out has two
// channels.
func (s complexLineSet) store(out []float64, g int, re, im []float64) {
	for j := range re {
		o := s.lines[g] + j*s.step
		out[o] = re[j]
		if s.chans == 2 {
			out[o+1] = im[j]
		}
	}
}

// --- STFT -------------------------------------------------------------------

// STFT: the DFTs of frames of a [batch, length, C] signal, frame_step
// apart, each weighted by the window: output [batch, frames, bins, 2].

func inferSTFT(c *InferContext) error {
	x, win := c.In(0), c.In(2)
	if x.Shape.Ranked && x.Shape.Rank() != 3 {
		return c.Errorf("signal has rank %d, want 3 ([batch, length, 1 or 2])", x.Shape.Rank())
	}
	if err := checkIntScalar(c, 1, "frame_step"); err != nil {
		return err
	}
	if c.HasInput(3) {
		if err := checkIntScalar(c, 3, "frame_length"); err != nil {
			return err
		}
	}
	if c.HasInput(2) && (win.Shape.Ranked && win.Shape.Rank() != 1 || win.Elem != ir.Undefined && x.Elem != ir.Undefined && win.Elem != x.Elem) {
		return c.Errorf("window must be a vector of the signal's type, is %s", win)
	}
	out := unknownDims(4)
	out.Dims[3] = ir.D(2)
	if x.Shape.Ranked {
		out.Dims[0] = x.Shape.Dims[0]
		if last := x.Shape.Dims[2]; last.IsStatic() && last.Value != 1 && last.Value != 2 {
			return c.Errorf("signal's trailing dim is %d, want 1 (real) or 2 (complex)", last.Value)
		}
	}
	frameLen := ir.UnknownDim()
	if c.HasInput(3) {
		if e := c.SymInts(3); len(e) == 1 {
			frameLen = symDim(e[0])
		}
	} else if c.HasInput(2) && win.Shape.Ranked {
		frameLen = win.Shape.Dims[0]
	}
	if frameLen.IsStatic() || frameLen.IsSymbolic() {
		out.Dims[2] = frameLen
		if c.Int("onesided") != 0 {
			out.Dims[2] = ir.DimAdd(ir.DimFloorDiv(frameLen, ir.D(2)), ir.D(1))
		}
		if t := c.Const(1); t != nil && t.Len() == 1 && t.Int64At(0) > 0 && x.Shape.Ranked {
			span := ir.DimSub(x.Shape.Dims[1], frameLen)
			out.Dims[1] = ir.DimAdd(ir.DimFloorDiv(span, ir.D(t.Int64At(0))), ir.D(1))
		}
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// STFTSpec is an STFT node resolved against its signal.
type STFTSpec struct {
	Step, FrameLen, Frames, Bins int64
	Window                       []float64 // nil: all ones, or not known yet
}

// STFTSpec resolves an STFT node for a signal of shape dims: the frame
// length is input 3, else the window's length.
func (c *KernelContext) STFTSpec(dims []int64) (*STFTSpec, error) {
	if len(dims) != 3 || dims[2] != 1 && dims[2] != 2 {
		return nil, c.Errorf("signal shape %v: want [batch, length, 1 or 2]", ir.FormatList(dims))
	}
	step, err := kernelScalar(c, 1, "frame_step")
	if err != nil {
		return nil, err
	}
	s := &STFTSpec{Step: step, FrameLen: -1}
	if w := c.In(2); w != nil {
		if len(w.Dims) != 1 {
			return nil, c.Errorf("window has shape %v, want a vector", ir.FormatList(w.Dims))
		}
		s.Window, s.FrameLen = Float64s(w), w.Dims[0]
	} else if c.HasInput(2) {
		// A window known only at run time (a compiler's): its length.
		if wd, ok := c.Node.Inputs[2].Type.Shape.Ints(); ok && len(wd) == 1 {
			s.FrameLen = wd[0]
		}
	}
	if c.HasInput(3) {
		n, err := kernelScalar(c, 3, "frame_length")
		if err != nil {
			return nil, err
		}
		if s.Window != nil && n != s.FrameLen {
			return nil, c.Errorf("frame_length %d differs from the window's length %d", n, s.FrameLen)
		}
		s.FrameLen = n
	}
	switch {
	case s.FrameLen < 0:
		return nil, c.Errorf("needs a window or a frame_length")
	case s.FrameLen < 1 || s.FrameLen > dims[1]:
		return nil, c.Errorf("frame length %d is not in [1, %d], the signal's length", s.FrameLen, dims[1])
	case step < 1:
		return nil, c.Errorf("frame_step %d is not positive", step)
	}
	s.Frames = 1 + (dims[1]-s.FrameLen)/step
	s.Bins = s.FrameLen
	if c.Int("onesided") != 0 {
		s.Bins = s.FrameLen/2 + 1
	}
	return s, nil
}

func runSTFT(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if w := c.In(2); w != nil && w.DType != x.DType {
		return c.Errorf("window is %s, signal is %s", w.DType, x.DType)
	}
	s, err := c.STFTSpec(x.Dims)
	if err != nil {
		return err
	}
	batch, length, chans := x.Dims[0], x.Dims[1], x.Dims[2]
	outDims := []int64{batch, s.Frames, s.Bins, 2}
	if _, err := c.Limits.CheckTensor("output", x.DType, outDims); err != nil {
		return c.Errorf("%v", err)
	}
	v := Float64s(x)
	out := make([]float64, ir.Product(outDims))
	t := newDFT(s.FrameLen)
	for b := int64(0); b < batch; b++ {
		for f := int64(0); f < s.Frames; f++ {
			re, im := stftFrame(v, s, chans, b*length+f*s.Step)
			yr, yi := t.transform(re, im, false)
			o := (b*s.Frames + f) * s.Bins * 2
			for k := int64(0); k < s.Bins; k++ {
				out[o+2*k], out[o+2*k+1] = yr[k], yi[k]
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, outDims, out))
	return nil
}

// stftFrame is the windowed frame starting at sample start (a flat
// sample index; each sample has chans values).
func stftFrame(v []float64, s *STFTSpec, chans, start int64) (re, im []float64) {
	re = make([]float64, s.FrameLen)
	if chans == 2 {
		im = make([]float64, s.FrameLen)
	}
	for j := range re {
		w := 1.0
		if s.Window != nil {
			w = s.Window[j]
		}
		o := (start + int64(j)) * chans
		re[j] = v[o] * w
		if im != nil {
			im[j] = v[o+1] * w
		}
	}
	return re, im
}

// --- MelWeightMatrix --------------------------------------------------------

// MelWeightMatrix: [dft_length/2+1, num_mel_bins] triangular filters
// evenly spaced on the mel scale between the edge frequencies, as ONNX's
// reference computes them (mel step over num_mel_bins+2 points; bins
// floor((dft_length+1)·f / sample_rate)).

func inferMelWeightMatrix(c *InferContext) error {
	dt, err := signalOutType(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	for i, what := range []string{"num_mel_bins", "dft_length", "sample_rate"} {
		if err := checkIntScalar(c, i, what); err != nil {
			return err
		}
	}
	for i, what := range []string{3: "lower_edge_hertz", 4: "upper_edge_hertz"} {
		if t := c.In(i); i >= 3 && (t.Elem != ir.Undefined && !t.Elem.IsFloat() || t.Shape.Ranked && t.Shape.Rank() > 1) {
			return c.Errorf("%s must be a float scalar, is %s", what, t)
		}
	}
	out := unknownDims(2)
	if e := c.SymInts(1); len(e) == 1 && e[0] != nil && e[0].NonNeg() {
		out.Dims[0] = ir.DimAdd(ir.DimFloorDiv(ir.DimOf(e[0]), ir.D(2)), ir.D(1))
	}
	if e := c.SymInts(0); len(e) == 1 {
		out.Dims[1] = symDim(e[0])
	}
	c.Set(0, ir.TensorType(dt, out))
	return nil
}

func runMelWeightMatrix(c *KernelContext) error {
	if err := checkType(c, c.In(0).DType); err != nil {
		return err
	}
	dt, err := signalOutType(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	var n [3]int64
	for i, what := range []string{"num_mel_bins", "dft_length", "sample_rate"} {
		if n[i], err = kernelScalar(c, i, what); err != nil {
			return err
		}
	}
	mels, dftLen, rate := n[0], n[1], n[2]
	if mels < 1 || dftLen < 1 || rate < 1 || mels > 1<<16 || dftLen > 1<<24 {
		return c.Errorf("num_mel_bins %d, dft_length %d and sample_rate %d must be positive (and not huge)", mels, dftLen, rate)
	}
	var edge [2]float64
	for i := range edge {
		t := c.In(3 + i)
		if t == nil || t.Len() != 1 || !t.DType.IsFloat() {
			return c.Errorf("the edge frequencies (inputs 3 and 4) must be float scalars")
		}
		edge[i] = t.Float64At(0)
	}
	bins := dftLen/2 + 1
	var a goArith
	low, step := MelScale[uint64](a, a.ToFloat(a.Uint(uint64(mels))), bt(edge[0]), bt(edge[1]))
	point := func(k int64) uint64 {
		return MelEdge[uint64](a, a.ToFloat(a.Uint(uint64(k))), low, step, a.ToFloat(a.Uint(uint64(dftLen))), a.ToFloat(a.Uint(uint64(rate))))
	}
	out := make([]float64, bins*mels)
	for i := int64(0); i < mels; i++ {
		lo, mid, hi := point(i), point(i+1), point(i+2)
		if !(fl(lo) >= 0 && fl(lo) <= fl(mid) && fl(mid) <= fl(hi) && fl(mid) < float64(bins) && fl(hi) <= float64(bins)) {
			return c.Errorf("filter %d spans bins %g..%g..%g, outside the %d spectrogram bins: check the edge frequencies", i, fl(lo), fl(mid), fl(hi), bins)
		}
		for j := range bins {
			out[j*mels+i] = fl(MelWeight[uint64](a, a.ToFloat(a.Uint(uint64(j))), lo, mid, hi))
		}
	}
	c.Set(0, FromFloat64s(dt, []int64{bins, mels}, out))
	return nil
}

// The filter edges, written once over Arith for every executor: the
// mel scale is 2595·log10(1 + hz/700), and edge k of num_mel_bins+2 is
// the bin ⌊(dft_length+1)·hz_k / sample_rate⌋ of the frequency hz_k at
// low + k·step mels. An edge within an ulp of an integer may land on
// either side of it in another libm's arithmetic (docs/numerics.md).

const melHz, melScale = 700, 2595

// MelScale is the lower edge in mels and the step between edges for
// mels filters (all float64 V).
func MelScale[V any](a Arith[V], mels, lowHz, highHz V) (low, step V) {
	toMel := func(hz V) V {
		return a.FMul(arithLog(a, a.FAdd(a.Float(1), a.FDiv(hz, a.Float(melHz)))), a.Float(melScale/math.Ln10))
	}
	low = toMel(lowHz)
	return low, a.FDiv(a.FSub(toMel(highHz), low), a.FAdd(mels, a.Float(2)))
}

// MelEdge is edge k's spectrogram bin, an integer-valued float64 V.
func MelEdge[V any](a Arith[V], k, low, step, dftLen, rate V) V {
	mel := a.FAdd(a.FMul(k, step), low)
	hz := a.FMul(a.Float(melHz), a.FSub(arithExp(a, a.FMul(mel, a.Float(math.Ln10/melScale))), a.Float(1)))
	return arithFloor(a, a.FDiv(a.FMul(a.FAdd(dftLen, a.Float(1)), hz), rate))
}

// MelWeight is bin j's weight in the triangular filter of edges lo, mid
// and hi: rising from lo to 1 at mid, falling to hi (1 at mid alone when
// lo = mid).
func MelWeight[V any](a Arith[V], j, lo, mid, hi V) V {
	zero, one := a.Float(0), a.Float(1)
	up := a.FDiv(a.FSub(j, lo), a.FSub(mid, lo))
	down := a.FDiv(a.FSub(hi, j), a.FSub(hi, mid))
	return a.Select(a.Less(j, lo), zero,
		a.Select(a.Less(j, mid), up,
			a.Select(a.LessEq(j, mid), one,
				a.Select(a.Less(j, hi), down, zero))))
}
