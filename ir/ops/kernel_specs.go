package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Resolutions of the opset 18 to 26 ops that the reference kernels and the
// compiled definitions (codegen/kernel) share, so that a backend reads
// what an attribute means here instead of deciding it again.

// GeluTanh reports whether a Gelu node takes the tanh approximation
// (approximate "tanh") rather than the exact form ("none").
func (c *KernelContext) GeluTanh() (bool, error) {
	if _, err := geluFunc(c.String("approximate")); err != nil {
		return false, c.Errorf("%v", err)
	}
	return c.String("approximate") == "tanh", nil
}

// BitShiftLeft reports a BitShift node's direction: true for LEFT, false
// for RIGHT.
func (c *KernelContext) BitShiftLeft() (bool, error) {
	left, err := shiftLeft(c.attrs)
	if err != nil {
		return false, c.Errorf("%v", err)
	}
	return left, nil
}

func shiftLeft(a attrs) (bool, error) {
	switch d := a.String("direction"); d {
	case "LEFT":
		return true, nil
	case "RIGHT":
		return false, nil
	default:
		return false, fmt.Errorf("direction is %q, want LEFT or RIGHT", d)
	}
}

// GroupNorm is a GroupNormalization node resolved against its channel
// count: Groups groups of channels; scale and bias hold one value per
// channel (opset 21 on) or, before, per group.
type GroupNorm struct {
	Groups     int64
	Epsilon    float64
	PerChannel bool
}

// GroupNormSpec resolves a GroupNormalization node for an input of the
// given channel count.
func (c *KernelContext) GroupNormSpec(channels int64) (*GroupNorm, error) {
	groups := c.Int("num_groups")
	if groups <= 0 || channels%groups != 0 {
		return nil, c.Errorf("%d channels do not split into %d groups", channels, groups)
	}
	return &GroupNorm{Groups: groups, Epsilon: float64(c.Float("epsilon")), PerChannel: groupNormPerChannel(c.attrs)}, nil
}

// groupNormPerChannel: opset 21 made scale and bias per channel, and
// added stash_type with them.
func groupNormPerChannel(a attrs) bool { return a.declares("stash_type") }

// CenterCropPadShift is where CenterCropPad reads along an axis of length
// in cropped or padded to out: output position i reads input position
// i + shift (outside [0, in) it is padding), centring the input.
func CenterCropPadShift(in, out int64) int64 {
	if out > in {
		return -((out - in) / 2)
	}
	return (in - out) / 2
}

var windowFuncs = map[string]windowFunc{"HannWindow": hann, "HammingWindow": hamming, "BlackmanWindow": blackman}

// WindowValues is a HannWindow, HammingWindow or BlackmanWindow node's
// output of size samples, as float64s.
func (c *KernelContext) WindowValues(size int64) ([]float64, error) {
	f := windowFuncs[c.Node.OpType]
	if f == nil {
		return nil, c.Errorf("not a window function")
	}
	if size < 0 || size > math.MaxInt32 {
		return nil, c.Errorf("size %d is out of range", size)
	}
	return windowValues(f, size, c.Int("periodic") != 0), nil
}

// windowValues samples f: over a period of size samples when periodic,
// else of size - 1 (a symmetric window).
func windowValues(f windowFunc, size int64, periodic bool) []float64 {
	p := float64(size)
	if !periodic {
		p--
	}
	v := make([]float64, size)
	for n := range v {
		v[n] = f(float64(n), p)
	}
	return v
}

// The structural inputs of these ops (see structuralInputs): CumProd's
// axis, as CumSum's; AffineGrid's size; Col2Im's image and block shapes;
// MaxUnpool's output_shape; DFT's length and axis; STFT's frame step and
// length.
func init() {
	for op, inputs := range map[string][]int{"CumProd": {1}, "AffineGrid": {1}, "Col2Im": {1, 2}, "MaxUnpool": {2},
		"DFT": {1, 2}, "STFT": {1, 3}} {
		structuralInputs[op] = inputs
	}
}

// Attention is an Attention node resolved against its inputs' static
// shapes, as every backend must read it: Q, K and V as [B, H, S, D] (3-D
// inputs [B, S, H*D] split by q_num_heads and kv_num_heads), query head h
// reading key/value head h / (QHeads/KVHeads), Past cached steps before
// K's and V's KVSeq, and the attributes' defaults applied. The bias each
// score gets is attnBias's: attn_mask (bool: 0 where true, -Inf where
// false; past its last dim -Inf), then -Inf where Causal and key j is
// after query i + offset (offset Past, or with nonpad_kv_seqlen its
// nonpad[b] - QSeq), and -Inf at keys j >= nonpad[b].
type Attention struct {
	Rank                   int // of Q, K and V
	Batch, QHeads, KVHeads int64
	QSeq, KVSeq, Past      int64
	Head, VHead            int64
	Scale, Softcap         float64
	Mode                   int64 // qk_matmul_output_mode: which scores output 3 holds
	Causal                 bool
}

// Total is the number of keys: the past's and the new ones.
func (a *Attention) Total() int64 { return a.Past + a.KVSeq }

// AttentionSpec resolves an Attention node for Q, K and V of dims q, k
// and v and past_key of dims past (nil when absent).
func (c *KernelContext) AttentionSpec(q, k, v, past []int64) (*Attention, error) {
	if err := attnAttrsCheck(c.attrs); err != nil {
		return nil, c.Errorf("%v", err)
	}
	rank := len(q)
	if rank != 3 && rank != 4 || len(k) != rank || len(v) != rank {
		return nil, c.Errorf("Q, K and V must all be 3-D or all 4-D, are %v, %v and %v", ir.FormatList(q), ir.FormatList(k), ir.FormatList(v))
	}
	a := &Attention{Rank: rank, Batch: q[0], Softcap: float64(c.Float("softcap")), Mode: c.Int("qk_matmul_output_mode"),
		Causal: c.Int("is_causal") != 0}
	if rank == 4 {
		a.QHeads, a.KVHeads, a.QSeq, a.KVSeq, a.Head, a.VHead = q[1], k[1], q[2], k[2], q[3], v[3]
		if k[3] != q[3] || v[1] != k[1] {
			return nil, c.Errorf("Q %v, K %v and V %v do not fit together", ir.FormatList(q), ir.FormatList(k), ir.FormatList(v))
		}
	} else {
		qh, kvh, err := attnHeads(c.attrs)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		if q[2]%qh != 0 || k[2]%kvh != 0 || v[2]%kvh != 0 || k[2]/kvh != q[2]/qh {
			return nil, c.Errorf("Q %v, K %v and V %v do not split into %d and %d heads", ir.FormatList(q), ir.FormatList(k), ir.FormatList(v), qh, kvh)
		}
		a.QHeads, a.KVHeads, a.QSeq, a.KVSeq, a.Head, a.VHead = qh, kvh, q[1], k[1], q[2]/qh, v[2]/kvh
	}
	if k[0] != a.Batch || v[0] != a.Batch || v[rank-2] != k[rank-2] {
		return nil, c.Errorf("Q %v, K %v and V %v do not fit together", ir.FormatList(q), ir.FormatList(k), ir.FormatList(v))
	}
	if a.KVHeads == 0 || a.QHeads%a.KVHeads != 0 {
		return nil, c.Errorf("%d query heads are not a multiple of %d key/value heads", a.QHeads, a.KVHeads)
	}
	if past != nil {
		if len(past) != 4 || past[0] != a.Batch || past[1] != a.KVHeads || past[3] != a.Head {
			return nil, c.Errorf("past_key of shape %v does not fit [%d, %d, P, %d]", ir.FormatList(past), a.Batch, a.KVHeads, a.Head)
		}
		a.Past = past[2]
	}
	a.Scale = attnScale(c.attrs, a.Head)
	return a, nil
}

// attnScale is the scores' scale: the attribute, else 1/√(head size).
func attnScale(a attrs, head int64) float64 {
	if a.Has("scale") {
		return float64(a.Float("scale"))
	}
	return 1 / math.Sqrt(float64(head))
}

// Rotary is a RotaryEmbedding node resolved against its input: the input
// as [B, H, S, D] (3-D [B, S, H*D] split by num_heads), the first Rot
// features of each head rotated in pairs, the two halves of them or, when
// Interleaved, adjacent features; the angles' cos and sin come from the
// caches at position_ids[b, s] ([max_position, Rot/2]) or, without
// position_ids, at [b, s] ([B, S, Rot/2]).
type Rotary struct {
	Heads, Head, Rot int64
	Interleaved      bool
}

// RotarySpec resolves a RotaryEmbedding node for an input of dims x.
func (c *KernelContext) RotarySpec(x []int64) (*Rotary, error) {
	r := &Rotary{Interleaved: c.Int("interleaved") != 0}
	switch len(x) {
	case 4:
		r.Heads, r.Head = x[1], x[3]
	case 3:
		if r.Heads = c.Int("num_heads"); r.Heads <= 0 || x[2]%r.Heads != 0 {
			return nil, c.Errorf("a 3-D input of shape %v needs a positive num_heads that divides its last dim", ir.FormatList(x))
		}
		r.Head = x[2] / r.Heads
	default:
		return nil, c.Errorf("input must be 3-D or 4-D, has shape %v", ir.FormatList(x))
	}
	rot, err := rotaryDim(c.attrs, r.Head)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	r.Rot = rot
	return r, nil
}

// rotaryDim is rotary_embedding_dim (0: the whole head), even and at most
// the head size.
func rotaryDim(a attrs, head int64) (int64, error) {
	rot := a.Int("rotary_embedding_dim")
	if rot == 0 {
		rot = head
	}
	if rot < 0 || rot%2 != 0 || rot > head {
		return 0, fmt.Errorf("rotary_embedding_dim %d must be even and at most the head size %d", rot, head)
	}
	return rot, nil
}

// GridSample is a GridSample node's attributes resolved: how it samples
// (Nearest, Linear or Cubic, whichever opset names them) and pads
// ("zeros", "border" or "reflection"). The sampling itself is the
// reference's: a coordinate v in [-1, 1] on an axis of length d is the
// pixel (v+1)/2·(d-1) with AlignCorners, else ((v+1)·d - 1)/2; nearest
// rounds it half to even; outside Bounds, border clamps it into [0, d-1]
// and reflection mirrors it at the bounds (as it does integer taps);
// cubic weighs its four taps by Keys' kernel with a = CubicA.
type GridSample struct {
	Nearest, Linear, Cubic bool
	Padding                string
	AlignCorners           bool
}

// GridSampleCubicA is the a of GridSample's cubic convolution.
const GridSampleCubicA = -0.75

// GridSampleSpec resolves a GridSample node's attributes.
func (c *KernelContext) GridSampleSpec() (*GridSample, error) {
	s, err := gridSampleOf(c.attrs, c.Opset)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &GridSample{Nearest: s.mode == sampleNearest, Linear: s.mode == sampleLinear, Cubic: s.mode == sampleCubic,
		Padding: s.padding, AlignCorners: s.alignCorners}, nil
}

// Bounds is the range of pixel coordinates on an axis of length d that
// reflection mirrors at.
func (s *GridSample) Bounds(d int64) (lo, hi float64) {
	return gridSampleSpec{alignCorners: s.AlignCorners}.bounds(d)
}

// AffineGridCoords are AffineGrid's normalized coordinates of the d
// positions of an axis.
func AffineGridCoords(d int64, alignCorners bool) []float64 {
	v := make([]float64, d)
	for i := range v {
		v[i] = gridCoord(int64(i), d, alignCorners)
	}
	return v
}

// Col2Im is a Col2Im node's geometry: the image's and block's spatial
// dims, Blocks block positions per axis, and per axis the dilations,
// strides and pads (begins, then ends). Block element b at block position
// l adds into image position l·Strides - PadBegin + b·Dilations.
type Col2Im struct {
	Image, Block, Blocks []int64
	Dilations, Strides   []int64
	Pads                 []int64
}

// Col2ImSpec resolves a Col2Im node for the given image_shape and
// block_shape.
func (c *KernelContext) Col2ImSpec(image, block []int64) (*Col2Im, error) {
	g, err := col2imOf(c.attrs, image, block)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &Col2Im{Image: g.image, Block: g.block, Blocks: g.blocks, Dilations: g.dilations, Strides: g.strides, Pads: g.pads}, nil
}

// MaxUnpoolShape is the output shape MaxUnpool's indices number into,
// for an input of dims in: an output_shape larger than it holds it in
// its leading corner, zeros elsewhere.
func (c *KernelContext) MaxUnpoolShape(in []int64) ([]int64, error) {
	dims, err := unpoolShape(c.attrs, in)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return dims, nil
}

// TensorScatter is a TensorScatter node resolved for a cache of the given
// rank: update's steps along Axis go to write_indices[b] + s, modulo the
// cache's length when Circular.
type TensorScatter struct {
	Axis     int
	Circular bool
}

// TensorScatterSpec resolves a TensorScatter node for a cache of rank
// rank.
func (c *KernelContext) TensorScatterSpec(rank int) (*TensorScatter, error) {
	circular, ok := tensorScatterMode(c.attrs)
	if !ok {
		return nil, c.Errorf("mode %q is neither linear nor circular", c.String("mode"))
	}
	axis, err := tensorScatterAxis(c.Int("axis"), rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &TensorScatter{Axis: axis, Circular: circular}, nil
}

// DFTTwiddles are cos and sin of 2πw/n for w in [0, n): a transform's
// term k·j takes twiddle k·j mod n (the angle reduced exactly, as the
// reference's transform does), with sin negated for a forward one.
func DFTTwiddles(n int64) (cos, sin []float64) {
	t := newDFT(n)
	return t.cos, t.sin
}

// RoiAlign is a RoiAlign node's attributes resolved: Max pooling (else
// the average), HalfPixel coordinates (from opset 16's default; else
// output_half_pixel, and regions at least 1 pixel wide), the output's
// size, the sampling grid per output pixel (SamplingRatio per axis, 0:
// from each region's size) and the rois' scale. Each sample is the
// reference's bilinear one (bilinearSample): zero outside [-1, h]×[-1, w].
type RoiAlign struct {
	Max, HalfPixel      bool
	OutHeight, OutWidth int64
	SamplingRatio       int64
	SpatialScale        float64
}

// RoiAlignSpec resolves a RoiAlign node's attributes.
func (c *KernelContext) RoiAlignSpec() (*RoiAlign, error) {
	maxMode, halfPixel, err := roiAlignMode(c.attrs)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &RoiAlign{Max: maxMode, HalfPixel: halfPixel, OutHeight: c.Int("output_height"), OutWidth: c.Int("output_width"),
		SamplingRatio: c.Int("sampling_ratio"), SpatialScale: float64(c.Float("spatial_scale"))}, nil
}

// DeformConv is a DeformConv node's geometry for input and weights of the
// given dims: tap t of output position o on axis i reads the input at
// o·Strides - PadBegin + t·Dilations plus the tap's learned offset,
// bilinearly (linear sampling, zero outside the image).
type DeformConv struct {
	Kernel, Strides, Dilations, PadBegin, Out []int64
	Groups, OffsetGroups                      int64
}

// DeformConvSpec resolves a DeformConv node for input dims x and weights
// dims w.
func (c *KernelContext) DeformConvSpec(x, w []int64) (*DeformConv, error) {
	if len(x) < 3 || len(w) != len(x) {
		return nil, c.Errorf("input %v and weights %v must have one rank of at least 3", ir.FormatList(x), ir.FormatList(w))
	}
	win, err := deformWindow(c.attrs, w[2:])
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	k := len(x) - 2
	s := &DeformConv{Kernel: win.kernel, Strides: win.strides, Dilations: win.dilations, PadBegin: win.pads[:k],
		Out: make([]int64, k), Groups: c.Int("group"), OffsetGroups: c.Int("offset_group")}
	for i := range s.Out {
		if s.Out[i], _, _, err = win.axis(i, x[2+i]); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	if x[1] != w[1]*s.Groups || w[0]%s.Groups != 0 || x[1]%s.OffsetGroups != 0 {
		return nil, c.Errorf("input's %d channels, weights %v, group %d and offset_group %d do not fit", x[1], ir.FormatList(w), s.Groups, s.OffsetGroups)
	}
	return s, nil
}

// UpsampleSpec resolves an Upsample node (Resize-10 by its old name) as
// ResizeSpec does, refusing scales below 1 as the reference does.
func (c *KernelContext) UpsampleSpec(dims []int64) (*Resize, error) {
	if err := c.CheckUpsample(); err != nil {
		return nil, err
	}
	return c.ResizeSpec(dims)
}

// CheckUpsample refuses an Upsample node's scales below 1, as the
// reference does, whatever the dims its backend resizes over.
func (c *KernelContext) CheckUpsample() error {
	scales := upsampleScales(c.attrs)
	if scales == nil {
		scales = c.In(1)
	}
	if err := checkUpsampleScales(scales); err != nil {
		return c.Errorf("%v", err)
	}
	return nil
}

// ReverseSequenceAxes are a ReverseSequence node's batch and time axes (0
// and 1, in either order).
func (c *KernelContext) ReverseSequenceAxes() (batch, time int, err error) {
	if batch, time, err = reverseAxes(c.attrs); err != nil {
		return 0, 0, c.Errorf("%v", err)
	}
	return batch, time, nil
}

// LabelMap is a LabelEncoder node's map for an input of one element type:
// Keys (of the input's type) and Values (the output's), vectors of one
// length, and Default, the one value of an element no key matches. Of
// equal keys the first counts; float keys match as the reference matches
// them: every NaN one key, -0 and 0 one key.
type LabelMap struct {
	Keys, Values, Default *ir.Tensor
}

// LabelEncoderSpec resolves a LabelEncoder node's map for input elements
// of type in (LabelEncoder-1's direction is the input's).
func (c *KernelContext) LabelEncoderSpec(in ir.DType) (*LabelMap, error) {
	m, err := labelMapOf(c.attrs)
	if err == nil {
		m, err = m.forInput(c.attrs, in)
	}
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &LabelMap{Keys: m.keys, Values: m.values, Default: m.fallback}, nil
}

// DynamicWindow is Window for an input whose spatial sizes may be unknown
// when compiling (-1): such an axis' output size is -1 (the caller's
// output dims hold it as an expression) and its pads are the attributes'
// (explicit pads, VALID's none, SAME's split of a stride-1 window's
// extent). A SAME padding with stride s > 1 varies with the size, by its
// remainder mod s only: PadBegin is -1 there, and PadBeginByRem[a][r] is
// the begin pad of the sizes ≡ r (mod s) (nil for the other axes).
func (c *KernelContext) DynamicWindow(kernel, in []int64) (win Window, padBeginByRem [][]int64, err error) {
	w, err := readWindow(c.attrs, kernel)
	if err != nil {
		return Window{}, nil, fmt.Errorf("%s: %w", c.Node, err)
	}
	padBeginByRem = make([][]int64, len(kernel))
	win, err = resolveWindow(c, w, func(i int, size int64) (out, pb, pe int64, err error) {
		if size >= 0 || kernel[i] < 0 {
			return w.axis(i, size)
		}
		switch s := w.strides[i]; {
		case w.autoPad == "VALID":
			return -1, 0, 0, nil
		case w.same() && s != 1:
			// Sizes ≡ r (mod s) pad as s + r does.
			for r := range s {
				_, b, _, err := w.axis(i, s+r)
				if err != nil {
					return 0, 0, 0, err
				}
				padBeginByRem[i] = append(padBeginByRem[i], b)
			}
			return -1, -1, -1, nil
		case w.same():
			pb, pe = w.splitPad((w.kernel[i] - 1) * w.dilations[i])
			return -1, pb, pe, nil
		}
		return -1, w.pads[i], w.pads[len(w.kernel)+i], nil
	}, in)
	return win, padBeginByRem, err
}

// DynamicTransposeWindow is TransposeWindow for an input whose spatial
// sizes may be unknown when compiling (-1): such an axis' output size is
// -1 (the caller's output dims hold it) and its pads are the attributes'
// (explicit pads, VALID's none). An axis whose pads follow from its size
// (auto_pad SAME, output_shape) is refused.
func (c *KernelContext) DynamicTransposeWindow(kernel, in []int64) (Window, error) {
	tw, err := readTransposeWindow(c.attrs, kernel)
	if err != nil {
		return Window{}, fmt.Errorf("%s: %w", c.Node, err)
	}
	return resolveWindow(c, tw.windowSpec, func(i int, size int64) (out, pb, pe int64, err error) {
		if size >= 0 || kernel[i] < 0 {
			return tw.axis(i, size)
		}
		switch {
		case tw.outShape[i] >= 0 || tw.same():
			return 0, 0, 0, fmt.Errorf("spatial axis %d's pads follow from its size (output_shape or auto_pad SAME), which is known only at run time", i)
		case tw.autoPad == "VALID":
			return -1, 0, 0, nil
		}
		return -1, tw.pads[i], tw.pads[len(kernel)+i], nil
	}, in)
}

// ResizePhases is a Resize whose taps repeat along each resized axis, as
// a backend needs them for input sizes known only at run time: output x
// = q·Period + r samples phase r's taps, their indices shifted by q·Shift
// and clamped to the input, as ResizeSpec's taps are.
type ResizePhases struct {
	// Axes holds one entry per input axis; a nil Taps leaves it as it is.
	Axes []ResizeAxisPhases
}

// ResizeAxisPhases is one axis of ResizePhases: Taps[r] (r < Period)
// with indices relative to q·Shift.
type ResizeAxisPhases struct {
	Period, Shift int64
	Taps          [][]ResizeTap
}

// ResizePhases resolves a Resize over an input of rank len(dims) whose
// sizes may be unknown (-1): constant scales, each an integer or one over
// an integer, and a coordinate mode and options under which a position's
// taps depend only on it and the scale (half_pixel, asymmetric,
// tf_half_pixel_for_nn, and pytorch_half_pixel when upsampling; no
// exclude_outside or antialias). Anything else is an error naming it.
func (c *KernelContext) ResizePhases(dims []int64) (*ResizePhases, error) {
	r, err := resizeAttrsOf(c.attrs, c.Opset)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	_, si, zi := resizeInputs(c.attrs)
	if zi >= 0 && c.HasInput(zi) && (c.In(zi) == nil || c.In(zi).Len() > 0) {
		return nil, c.Errorf("sizes over an input of dynamic dims: want constant scales")
	}
	var scales *ir.Tensor
	if si >= 0 && c.HasInput(si) {
		if scales = c.In(si); scales == nil {
			return nil, c.Errorf("scales is not known when compiling")
		}
	}
	if t := upsampleScales(c.attrs); t != nil {
		scales = t
	}
	if scales == nil || scales.Len() == 0 {
		return nil, c.Errorf("no scales")
	}
	switch {
	case r.coord != "half_pixel" && r.coord != "asymmetric" && r.coord != "tf_half_pixel_for_nn" && r.coord != "pytorch_half_pixel":
		return nil, c.Errorf("coordinate_transformation_mode %s over an input of dynamic dims", r.coord)
	case r.exclude || r.antialias:
		return nil, c.Errorf("exclude_outside or antialias over an input of dynamic dims")
	}
	rank := len(dims)
	rep := make([]int64, rank)
	for i := range rep {
		rep[i] = 1
	}
	p, err := planResize(r, ir.S(rep...), scales, nil)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	out := &ResizePhases{Axes: make([]ResizeAxisPhases, rank)}
	for ax, s := range p.scales {
		if s == 1 {
			continue
		}
		ap := &out.Axes[ax]
		switch m := math.Round(1 / s); {
		case s == math.Trunc(s):
			ap.Period, ap.Shift = int64(s), 1
		case 1/m == s:
			ap.Period, ap.Shift = 1, int64(m)
		default:
			return nil, c.Errorf("scale %v on axis %d over an input of dynamic dims: want an integer or one over an integer", s, ax)
		}
		if r.coord == "pytorch_half_pixel" && ap.Period < 2 {
			return nil, c.Errorf("pytorch_half_pixel downsampling over an input of dynamic dims")
		}
		rep[ax] = 8 * ap.Shift // wide enough that the middle period's taps clamp nowhere
	}
	if p, err = planResize(r, ir.S(rep...), scales, nil); err != nil {
		return nil, c.Errorf("%v", err)
	}
	p.roiStart, p.roiEnd = make([]float64, rank), make([]float64, rank)
	for ax := range out.Axes {
		ap := &out.Axes[ax]
		if ap.Period == 0 {
			continue
		}
		taps := resizeTaps(r, p, ax, rep[ax], p.out[ax].Value)
		for ph := range ap.Period {
			var t []ResizeTap
			for _, tap := range taps[4*ap.Period+ph] {
				if tap.I <= 0 || int64(tap.I) >= rep[ax]-1 {
					return nil, c.Errorf("the taps on axis %d reach too far for an input of dynamic dims", ax)
				}
				t = append(t, ResizeTap{I: tap.I - int(4*ap.Shift), W: tap.W})
			}
			ap.Taps = append(ap.Taps, t)
		}
	}
	return out, nil
}

// ResizeRuntime is a Resize whose lengths are known only at run time,
// for a backend to compute each position's taps there (ResizeTaps): per
// input axis, its rule and either a constant scale or none, when the
// output's length (sizes, given as an expression of the dims) divided by
// the input's is the scale, as the reference computes it.
type ResizeRuntime struct {
	Axes             []ResizeRuntimeAxis
	Extrapolation    float64
	RoiStart, RoiEnd []float64
	Crop             bool // tf_crop_and_resize: a position may take Extrapolation
}

// ResizeRuntimeAxis is one axis of ResizeRuntime. An axis that is not
// Resized is copied.
type ResizeRuntimeAxis struct {
	Resized bool
	Rule    ResizeRule
	Scale   float64 // 0: the output's length over the input's, at run time
}

// ResizeRuntime resolves a Resize over an input of rank len(same) whose
// lengths, or whose output's, are known only at run time: same[a]
// reports that axis a's output length is its input's. Scales must be
// constants; sizes may be computed at run time under the "stretch"
// policy (the output's dims then hold them). Antialias needs a constant
// scale (its tap count follows from it).
func (c *KernelContext) ResizeRuntime(same []bool) (*ResizeRuntime, error) {
	r, err := resizeAttrsOf(c.attrs, c.Opset)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	rank := len(same)
	ri, si, zi := resizeInputs(c.attrs)
	var scales *ir.Tensor
	if si >= 0 && c.HasInput(si) {
		if scales = c.In(si); scales == nil {
			return nil, c.Errorf("scales is not known when compiling")
		}
		if scales.Len() == 0 {
			scales = nil
		}
	}
	if t := upsampleScales(c.attrs); t != nil {
		scales = t
	}
	bySizes := zi >= 0 && c.HasInput(zi) && (c.In(zi) == nil || c.In(zi).Len() > 0)
	rs := &ResizeRuntime{Axes: make([]ResizeRuntimeAxis, rank), Extrapolation: r.extrapolation,
		RoiStart: make([]float64, rank), RoiEnd: make([]float64, rank), Crop: r.coord == "tf_crop_and_resize"}
	for i := range rs.RoiEnd {
		rs.RoiEnd[i] = 1
	}
	if r.coord == "tf_crop_and_resize" && ri >= 0 && c.HasInput(ri) {
		roi := c.In(ri)
		if roi == nil {
			return nil, c.Errorf("roi is not known when compiling")
		}
		v := Float64s(roi)
		all := r.axes
		for i := range rank {
			if r.axes == nil {
				all = append(all, int64(i))
			}
		}
		axes, err := normAxes(all, rank)
		if err != nil || !roi.DType.IsFloat() || len(v) != 2*len(axes) {
			return nil, c.Errorf("roi is %s%v, want %d floats", roi.DType, ir.FormatList(roi.Dims), 2*len(axes))
		}
		for i, ax := range axes {
			rs.RoiStart[ax], rs.RoiEnd[ax] = v[i], v[len(axes)+i]
		}
	}
	switch {
	case bySizes && scales != nil:
		return nil, c.Errorf("only one of scales and sizes may be given")
	case bySizes && r.policy != "stretch":
		return nil, c.Errorf("keep_aspect_ratio_policy %s with sizes known only at run time", r.policy)
	case bySizes && r.antialias:
		return nil, c.Errorf("antialias with sizes known only at run time: its filter's width follows from the scale")
	case !bySizes && scales == nil:
		return nil, c.Errorf("no scales")
	}
	p := &resizePlan{scales: make([]float64, rank)}
	if !bySizes {
		rep := make([]int64, rank)
		for i := range rep {
			rep[i] = 1
		}
		if p, err = planResize(r, ir.S(rep...), scales, nil); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	// At scale 1 an axis copies when the rule maps each position to
	// itself, which does not depend on the length (checked at one).
	identity := func(ax int) bool {
		const n = 17
		q := &resizePlan{scales: []float64{1}, lengths: []float64{n}, roiStart: rs.RoiStart[ax : ax+1], roiEnd: rs.RoiEnd[ax : ax+1]}
		return isIdentity(resizeTaps(r, q, 0, n, n))
	}
	for ax := range rank {
		s := p.scales[ax]
		if bySizes && same[ax] || !bySizes && s == 1 {
			if identity(ax) {
				continue
			}
			s = 1
		}
		rs.Axes[ax] = ResizeRuntimeAxis{Resized: true, Rule: newResizeRule(r, s), Scale: s}
	}
	return rs, nil
}
