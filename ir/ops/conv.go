package ops

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Conv and ConvTranspose, and the sliding-window arithmetic (auto_pad,
// pads, strides, dilations, ceil_mode) that the pools (pool.go) and the
// quantized convolutions (quant.go) share with them, so that every window
// op pads and sizes its output the same way.

var (
	convTypes   = []ir.DType{ir.Float16, ir.Float32, ir.Float64}
	convTypes22 = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.BFloat16}
)

func convAttrs() []AttrDef {
	return []AttrDef{
		defString("auto_pad", "NOTSET"),
		defInts("dilations"),
		defInt("group", 1),
		defInts("kernel_shape"),
		defInts("pads"),
		defInts("strides"),
	}
}

func convTransposeAttrs() []AttrDef {
	return append(convAttrs(), defInts("output_padding"), defInts("output_shape"))
}

// Conv-11 and ConvTranspose-11 only reworded the spec; v22 added bfloat16.
var convOps = []*Schema{
	{Name: "Conv", Since: 1, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: convAttrs(), Types: convTypes, Infer: inferConv, Run: runConv},
	{Name: "Conv", Since: 22, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: convAttrs(), Types: convTypes22, Infer: inferConv, Run: runConv},
	{Name: "ConvTranspose", Since: 1, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: convTransposeAttrs(), Types: convTypes, Infer: inferConvTranspose, Run: runConvTranspose},
	{Name: "ConvTranspose", Since: 22, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: convTransposeAttrs(), Types: convTypes22, Infer: inferConvTranspose, Run: runConvTranspose},
}

func init() { register(convOps) }

// windowSpec is a sliding-window node's geometry, one entry per spatial
// axis (pads holds the begins, then the ends).
type windowSpec struct {
	kernel, strides, dilations, pads []int64
	autoPad                          string
	ceil                             bool
}

// readWindow reads the window attributes the row declares. kernel is
// kernel_shape or, for convolutions without it, the weights' spatial dims
// (-1 where unknown).
func readWindow(a attrs, kernel []int64) (*windowSpec, error) {
	n := len(kernel)
	w := &windowSpec{kernel: kernel, autoPad: a.String("auto_pad")}
	list := func(name string, def int64, count int) ([]int64, error) {
		var v []int64
		if a.declares(name) {
			v = a.Ints(name)
		}
		if v == nil {
			v = slices.Repeat([]int64{def}, count)
		}
		if len(v) != count {
			return nil, fmt.Errorf("%s has %d values, want %d for %d spatial axes", name, len(v), count, n)
		}
		return v, nil
	}
	var err error
	if w.strides, err = list("strides", 1, n); err != nil {
		return nil, err
	}
	if w.dilations, err = list("dilations", 1, n); err != nil {
		return nil, err
	}
	if w.pads, err = list("pads", 0, 2*n); err != nil {
		return nil, err
	}
	w.ceil = a.declares("ceil_mode") && a.Int("ceil_mode") != 0
	for i := range n {
		switch {
		case kernel[i] == 0 || kernel[i] < -1:
			return nil, fmt.Errorf("kernel size %d on spatial axis %d", kernel[i], i)
		case w.strides[i] < 1:
			return nil, fmt.Errorf("stride %d on spatial axis %d", w.strides[i], i)
		case w.dilations[i] < 1:
			return nil, fmt.Errorf("dilation %d on spatial axis %d", w.dilations[i], i)
		case w.pads[i] < 0 || w.pads[n+i] < 0:
			return nil, fmt.Errorf("negative pads %v", ir.FormatList(w.pads))
		}
	}
	switch w.autoPad {
	case "", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER":
	default:
		return nil, fmt.Errorf("unknown auto_pad %q", w.autoPad)
	}
	return w, nil
}

// Window is a convolution's or pooling's geometry on each spatial axis,
// with auto_pad resolved against the input as inference resolves it:
// backends read it here instead of redoing that arithmetic. Kernel tap k
// of output position o reads input o*Strides + k*Dilations - PadBegin;
// for a ConvTranspose (TransposeWindow) input i reaches output
// i*Strides + k*Dilations - PadBegin instead.
type Window struct {
	Kernel, Strides, Dilations []int64
	PadBegin, PadEnd           []int64
	Out                        []int64 // the output's spatial sizes
}

// Window reads the window attributes of the context's node, for the given
// kernel sizes over an input of the given spatial sizes.
func (c *KernelContext) Window(kernel, in []int64) (Window, error) {
	w, err := readWindow(c.attrs, kernel)
	if err != nil {
		return Window{}, fmt.Errorf("%s: %w", c.Node, err)
	}
	return resolveWindow(c, w, w.axis, in)
}

// TransposeWindow is Window for a ConvTranspose: output_padding and
// output_shape resolved as inference resolves them.
func (c *KernelContext) TransposeWindow(kernel, in []int64) (Window, error) {
	tw, err := readTransposeWindow(c.attrs, kernel)
	if err != nil {
		return Window{}, fmt.Errorf("%s: %w", c.Node, err)
	}
	return resolveWindow(c, tw.windowSpec, tw.axis, in)
}

func resolveWindow(c *KernelContext, w *windowSpec, resolve func(i int, in int64) (out, pb, pe int64, err error), in []int64) (Window, error) {
	n := len(w.kernel)
	win := Window{Kernel: w.kernel, Strides: w.strides, Dilations: w.dilations,
		PadBegin: make([]int64, n), PadEnd: make([]int64, n), Out: make([]int64, n)}
	if len(in) != n {
		return Window{}, fmt.Errorf("%s: %d spatial axes for a window of %d", c.Node, len(in), n)
	}
	for i := range n {
		var err error
		if win.Out[i], win.PadBegin[i], win.PadEnd[i], err = resolve(i, in[i]); err != nil {
			return Window{}, fmt.Errorf("%s: %w", c.Node, err)
		}
	}
	return win, nil
}

func (w *windowSpec) same() bool { return w.autoPad == "SAME_UPPER" || w.autoPad == "SAME_LOWER" }

// splitPad divides a total padding between the two ends: SAME_UPPER puts
// the odd one at the end, everything else at the beginning.
func (w *windowSpec) splitPad(total int64) (begin, end int64) {
	if w.autoPad == "SAME_UPPER" {
		return total / 2, total - total/2
	}
	return total - total/2, total / 2
}

// axis resolves spatial axis i of a forward window (convolution, pooling)
// over an input of size in: the output size and the padding at each end.
// The output is -1 when in or the kernel is unknown.
func (w *windowSpec) axis(i int, in int64) (out, padBegin, padEnd int64, err error) {
	n := len(w.kernel)
	k, s, d := w.kernel[i], w.strides[i], w.dilations[i]
	if in < 0 || k < 0 {
		return -1, -1, -1, nil
	}
	ek := (k-1)*d + 1 // the dilated kernel's extent
	switch w.autoPad {
	case "VALID":
		if in < ek {
			return 0, 0, 0, fmt.Errorf("the dilated window (%d) is wider than the input (%d) on spatial axis %d", ek, in, i)
		}
		return (in-ek)/s + 1, 0, 0, nil
	case "SAME_UPPER", "SAME_LOWER":
		out = (in + s - 1) / s
		begin, end := w.splitPad(max(0, (out-1)*s+ek-in))
		return out, begin, end, nil
	}
	padBegin, padEnd = w.pads[i], w.pads[n+i]
	span := in + padBegin + padEnd - ek
	if span < 0 {
		return 0, 0, 0, fmt.Errorf("the dilated window (%d) is wider than the padded input (%d) on spatial axis %d", ek, in+padBegin+padEnd, i)
	}
	if !w.ceil {
		return span/s + 1, padBegin, padEnd, nil
	}
	out = (span+s-1)/s + 1
	// A last window that would start inside the end padding sees no input;
	// ONNX's reference, ONNX Runtime and PyTorch all drop it.
	if (out-1)*s >= in+padBegin {
		out--
	}
	return out, padBegin, padEnd, nil
}

// axisDim is axis's output size for a symbolic input size: the same
// arithmetic as an expression, (H + 1)//2 for a 3x3 window with stride 2
// and pads 1; unknown when the input or the kernel is. The checks that
// the window fits are left to run time.
func (w *windowSpec) axisDim(i int, in ir.Dim) ir.Dim {
	n := len(w.kernel)
	k, s, d := w.kernel[i], w.strides[i], w.dilations[i]
	x, ok := ir.DimExpr(in)
	if !ok || k < 0 {
		return ir.UnknownDim()
	}
	ek := (k-1)*d + 1
	div := func(num *dimexpr.Expr) *dimexpr.Expr {
		q, _ := num.FloorDiv(dimexpr.Const(s))
		return q
	}
	switch w.autoPad {
	case "VALID":
		return ir.DimOf(div(x.AddConst(-ek)).AddConst(1))
	case "SAME_UPPER", "SAME_LOWER":
		return ir.DimOf(div(x.AddConst(s - 1)))
	}
	pb, pe := w.pads[i], w.pads[n+i]
	span := x.AddConst(pb + pe - ek)
	switch {
	case !w.ceil:
		return ir.DimOf(div(span).AddConst(1))
	case pe+s <= ek:
		// No window can start in the end padding: ceil(span/s) + 1.
		return ir.DimOf(div(span.AddConst(s - 1)).AddConst(1))
	case pe < ek:
		// The last window is dropped exactly when it would start in the
		// end padding, which leaves the windows starting before
		// in + pb: ceil((in + pb)/s) of them.
		return ir.DimOf(div(x.AddConst(pb + s - 1)))
	}
	return ir.UnknownDim()
}

// transposeWindow is a ConvTranspose's window: the forward attributes plus
// output_padding and the spatial part of output_shape (-1s when absent).
type transposeWindow struct {
	*windowSpec
	outPad, outShape []int64
}

// axis resolves spatial axis i of a ConvTranspose over an input of size in:
// the output size and the padding cropped at each end (-1 when unknown).
func (w *transposeWindow) axis(i int, in int64) (out, padBegin, padEnd int64, err error) {
	n := len(w.kernel)
	k, s, d, want := w.kernel[i], w.strides[i], w.dilations[i], w.outShape[i]
	if (in < 0 || k < 0) && want < 0 {
		return -1, -1, -1, nil
	}
	full := s*(in-1) + w.outPad[i] + (k-1)*d + 1 // the output before cropping pads
	switch {
	case want >= 0:
		out = want
	case w.same():
		out = in * s
	case w.autoPad == "VALID":
		return full, 0, 0, nil
	default:
		out = full - w.pads[i] - w.pads[n+i]
		if out < 0 {
			return 0, 0, 0, fmt.Errorf("pads %v crop more than the whole output (%d) on spatial axis %d", ir.FormatList(w.pads), full, i)
		}
		return out, w.pads[i], w.pads[n+i], nil
	}
	if in < 0 || k < 0 {
		return out, -1, -1, nil
	}
	// An output larger than the full one is not negative padding: the
	// extra positions at the end get only the bias (as in ONNX Runtime).
	padBegin, padEnd = w.splitPad(max(0, full-out))
	return out, padBegin, padEnd, nil
}

// axisDim is axis's output size for a symbolic input size.
func (w *transposeWindow) axisDim(i int, in ir.Dim) ir.Dim {
	n := len(w.kernel)
	k, s, d, want := w.kernel[i], w.strides[i], w.dilations[i], w.outShape[i]
	if want >= 0 {
		return ir.D(want)
	}
	x, ok := ir.DimExpr(in)
	if !ok || k < 0 {
		return ir.UnknownDim()
	}
	if w.same() {
		return ir.DimOf(x.MulConst(s))
	}
	full := x.AddConst(-1).MulConst(s).AddConst(w.outPad[i] + (k-1)*d + 1)
	if w.autoPad == "VALID" {
		return ir.DimOf(full)
	}
	return ir.DimOf(full.AddConst(-w.pads[i] - w.pads[n+i]))
}

// grid is a resolved window normalized to three spatial axes (1- and 2-D
// ops get leading axes of size 1), so one loop nest serves every rank. For
// a ConvTranspose, in is its input and out its output, and the window maps
// the input to the output instead.
type grid struct {
	in, out, k, s, d, pb, pe [3]int
}

// grid resolves the window over the static spatial dims in with resolve
// (windowSpec.axis or transposeWindow.axis).
func (w *windowSpec) grid(in []int64, resolve func(i int, in int64) (out, pb, pe int64, err error)) (grid, error) {
	var g grid
	if len(in) > 3 {
		return g, fmt.Errorf("the reference kernels handle 1 to 3 spatial axes, not %d", len(in))
	}
	for a := range 3 {
		g.in[a], g.out[a], g.k[a], g.s[a], g.d[a] = 1, 1, 1, 1, 1
	}
	off := 3 - len(in)
	for i, n := range in {
		out, pb, pe, err := resolve(i, n)
		if err != nil {
			return g, err
		}
		a := off + i
		g.in[a], g.out[a], g.pb[a], g.pe[a] = int(n), int(out), int(pb), int(pe)
		g.k[a], g.s[a], g.d[a] = int(w.kernel[i]), int(w.strides[i]), int(w.dilations[i])
	}
	return g, nil
}

func (g *grid) inSize() int     { return g.in[0] * g.in[1] * g.in[2] }
func (g *grid) outSize() int    { return g.out[0] * g.out[1] * g.out[2] }
func (g *grid) kernelSize() int { return g.k[0] * g.k[1] * g.k[2] }

// span returns [lo, hi): the i in [0, n) with 0 <= i*s+off < limit, that
// is, the window positions whose tap at offset off lands inside an axis of
// size limit.
func span(n, s, off, limit int) (lo, hi int) {
	if off < 0 {
		lo = (-off + s - 1) / s
	}
	if limit > off {
		hi = min(n, (limit-off+s-1)/s)
	}
	return lo, max(lo, hi)
}

// spans precomputes span for every kernel tap of every axis, mapping the
// positions of axis size n to an axis of size limit.
func (g *grid) spans(n, limit [3]int) (lo, hi [3][]int) {
	for a := range 3 {
		lo[a], hi[a] = make([]int, g.k[a]), make([]int, g.k[a])
		for k := range g.k[a] {
			lo[a][k], hi[a][k] = span(n[a], g.s[a], k*g.d[a]-g.pb[a], limit[a])
		}
	}
	return lo, hi
}

// axpy adds a*x[i*xs] to y[i*ys] for i in [0, n): one kernel tap applied
// along a row. The unit-stride case is the hot loop of every convolution.
func axpy(n int, a float64, x []float64, xs int, y []float64, ys int) {
	if xs == 1 && ys == 1 {
		x, y = x[:n], y[:n]
		for i := range y {
			y[i] += a * x[i]
		}
		return
	}
	for i := range n {
		y[i*ys] += a * x[i*xs]
	}
}

// convolve adds the convolution of x by w to y (which holds the bias or
// zeros). x is [batch, cin, in...], w [cout, cin/group, k...] and y
// [batch, cout, out...], row-major. The loops run per output plane, then
// per kernel tap, then along output rows, so the innermost loop walks x and
// y contiguously (for stride 1) with the tap's weight in a register.
func convolve(y, x, w []float64, batch, cin, cout, group int, g grid) {
	cg, mg := cin/group, cout/group
	inPlane, outPlane, kSize := g.inSize(), g.outSize(), g.kernelSize()
	lo, hi := g.spans(g.out, g.in)
	parallelFor(batch*cout, func(p int) {
		b, m := p/cout, p%cout
		yp := y[p*outPlane:][:outPlane]
		for ci := range cg {
			xp := x[(b*cin+m/mg*cg+ci)*inPlane:][:inPlane]
			wk := w[(m*cg+ci)*kSize:][:kSize]
			for kd := range g.k[0] {
				for kh := range g.k[1] {
					for kw := range g.k[2] {
						wv := wk[(kd*g.k[1]+kh)*g.k[2]+kw]
						ow0, ow1 := lo[2][kw], hi[2][kw]
						if ow0 == ow1 {
							continue
						}
						iw0 := ow0*g.s[2] + kw*g.d[2] - g.pb[2]
						for od := lo[0][kd]; od < hi[0][kd]; od++ {
							id := od*g.s[0] + kd*g.d[0] - g.pb[0]
							for oh := lo[1][kh]; oh < hi[1][kh]; oh++ {
								ih := oh*g.s[1] + kh*g.d[1] - g.pb[1]
								yrow := yp[(od*g.out[1]+oh)*g.out[2]+ow0:]
								xrow := xp[(id*g.in[1]+ih)*g.in[2]+iw0:]
								axpy(ow1-ow0, wv, xrow, g.s[2], yrow, 1)
							}
						}
					}
				}
			}
		}
	})
}

// convolveTranspose adds the transposed convolution of x by w to y: x is
// [batch, cin, in...], w [cin, cout/group, k...], y [batch, cout, out...].
// Each input element scatters into the outputs its window covers; output
// position o receives input i through tap k when o = i*s + k*d - pad.
func convolveTranspose(y, x, w []float64, batch, cin, cout, group int, g grid) {
	cg, mg := cin/group, cout/group
	inPlane, outPlane, kSize := g.inSize(), g.outSize(), g.kernelSize()
	lo, hi := g.spans(g.in, g.out)
	parallelFor(batch*cout, func(p int) {
		b, m := p/cout, p%cout
		yp := y[p*outPlane:][:outPlane]
		for ci := range cg {
			c := m/mg*cg + ci
			xp := x[(b*cin+c)*inPlane:][:inPlane]
			wk := w[(c*mg+m%mg)*kSize:][:kSize]
			for kd := range g.k[0] {
				for kh := range g.k[1] {
					for kw := range g.k[2] {
						wv := wk[(kd*g.k[1]+kh)*g.k[2]+kw]
						iw0, iw1 := lo[2][kw], hi[2][kw]
						if iw0 == iw1 {
							continue
						}
						ow0 := iw0*g.s[2] + kw*g.d[2] - g.pb[2]
						for id := lo[0][kd]; id < hi[0][kd]; id++ {
							od := id*g.s[0] + kd*g.d[0] - g.pb[0]
							for ih := lo[1][kh]; ih < hi[1][kh]; ih++ {
								oh := ih*g.s[1] + kh*g.d[1] - g.pb[1]
								xrow := xp[(id*g.in[1]+ih)*g.in[2]+iw0:]
								yrow := yp[(od*g.out[1]+oh)*g.out[2]+ow0:]
								axpy(iw1-iw0, wv, xrow, 1, yrow, g.s[2])
							}
						}
					}
				}
			}
		}
	})
}

// convLayout checks a convolution's x and w shapes against each other and
// the group attribute. transposed says w is [C, M/group, k...] rather than
// [M, C/group, k...]. It returns the rank (-1 when unknown), the output
// channel count (-1 when unknown) and the kernel's spatial dims.
func convLayout(a attrs, x, w ir.Shape, transposed bool) (rank int, outChannels int64, kernel []int64, err error) {
	rank = x.Rank()
	if rank < 0 {
		rank = w.Rank()
	}
	if ks := a.Ints("kernel_shape"); rank < 0 && ks != nil {
		rank = len(ks) + 2
	}
	if rank < 0 {
		return -1, -1, nil, nil
	}
	if rank < 3 {
		return 0, 0, nil, fmt.Errorf("input has rank %d, want [N, C, spatial...] (rank >= 3)", rank)
	}
	if w.Ranked && w.Rank() != rank {
		return 0, 0, nil, fmt.Errorf("weights have rank %d, the input %d", w.Rank(), rank)
	}
	group := a.Int("group")
	if group < 1 {
		return 0, 0, nil, fmt.Errorf("group %d", group)
	}
	xd, wd := knownDims(ir.Shape{Ranked: true, Dims: dimsOf(x, rank)}), knownDims(ir.Shape{Ranked: true, Dims: dimsOf(w, rank)})
	c := xd[1]
	if transposed {
		if c >= 0 && wd[0] >= 0 && c != wd[0] {
			return 0, 0, nil, fmt.Errorf("input has %d channels, the weights %d", c, wd[0])
		}
		if wd[0] >= 0 && wd[0]%group != 0 {
			return 0, 0, nil, fmt.Errorf("%d input channels do not split into %d groups", wd[0], group)
		}
		outChannels = -1
		if wd[1] >= 0 {
			outChannels = wd[1] * group
		}
	} else {
		if c >= 0 && wd[1] >= 0 && c != wd[1]*group {
			return 0, 0, nil, fmt.Errorf("input has %d channels, the weights take %d per group in %d groups", c, wd[1], group)
		}
		if wd[0] >= 0 && wd[0]%group != 0 {
			return 0, 0, nil, fmt.Errorf("%d output channels do not split into %d groups", wd[0], group)
		}
		outChannels = wd[0]
	}
	kernel = wd[2:]
	if ks := a.Ints("kernel_shape"); ks != nil {
		if len(ks) != rank-2 {
			return 0, 0, nil, fmt.Errorf("kernel_shape %v for %d spatial axes", ir.FormatList(ks), rank-2)
		}
		for i, k := range ks {
			if kernel[i] >= 0 && kernel[i] != k {
				return 0, 0, nil, fmt.Errorf("kernel_shape %v differs from the weights' %v", ir.FormatList(ks), ir.FormatList(wd[2:]))
			}
		}
		kernel = ks
	}
	return rank, outChannels, kernel, nil
}

// convShape infers a convolution's output shape [N, M, out...] from x
// [N, C, in...] and w [M, C/group, k...], and resolves its window (nil when
// even the rank is unknown).
func convShape(a attrs, x, w ir.Shape) (*windowSpec, ir.Shape, error) {
	rank, m, kernel, err := convLayout(a, x, w, false)
	if err != nil || rank < 0 {
		return nil, ir.Shape{}, err
	}
	spec, err := readWindow(a, kernel)
	if err != nil {
		return nil, ir.Shape{}, err
	}
	xdims := dimsOf(x, rank)
	out, err := spec.shape(xdims[0], dimOf(m), xdims[2:])
	return spec, out, err
}

// shape is a forward window's output shape [n, c, out...] over the spatial
// input dims in.
func (w *windowSpec) shape(n, c ir.Dim, in []ir.Dim) (ir.Shape, error) {
	out := ir.ShapeOf(n, c)
	for i, d := range in {
		if !d.IsStatic() {
			out.Dims = append(out.Dims, w.axisDim(i, d))
			continue
		}
		size, _, _, err := w.axis(i, dimValue(d))
		if err != nil {
			return ir.Shape{}, err
		}
		out.Dims = append(out.Dims, dimOf(size))
	}
	return out, nil
}

func inferConv(c *InferContext) error {
	elem, err := sameElem(c, 0, 1, 2)
	if err != nil {
		return err
	}
	_, shape, err := convShape(c.attrs, c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkBias(c.In(2).Shape, shape); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

// checkBias checks an optional per-output-channel bias against the output.
func checkBias(b, out ir.Shape) error {
	if !b.Ranked {
		return nil
	}
	if b.Rank() != 1 {
		return fmt.Errorf("bias has shape %s, want [M]", b)
	}
	if out.Ranked && b.Dims[0].IsStatic() && out.Dims[1].IsStatic() && b.Dims[0].Value != out.Dims[1].Value {
		return fmt.Errorf("bias has %d elements for %d output channels", b.Dims[0].Value, out.Dims[1].Value)
	}
	return nil
}

// convFloat64 runs a convolution on float64 data; the quantized
// convolutions call it after removing zero points. bias may be nil.
func convFloat64(a attrs, xd []int64, x []float64, wd []int64, w, bias []float64) ([]int64, []float64, error) {
	spec, shape, err := convShape(a, ir.S(xd...), ir.S(wd...))
	if err != nil {
		return nil, nil, err
	}
	g, err := spec.grid(xd[2:], spec.axis)
	if err != nil {
		return nil, nil, err
	}
	dims, _ := shape.Ints()
	y := make([]float64, ir.Product(dims))
	if err := addBias(y, bias, dims); err != nil {
		return nil, nil, err
	}
	convolve(y, x, w, int(xd[0]), int(xd[1]), int(dims[1]), int(a.Int("group")), g)
	return dims, y, nil
}

// addBias fills each output channel's planes with its bias.
func addBias(y, bias []float64, dims []int64) error {
	if bias == nil {
		return nil
	}
	if int64(len(bias)) != dims[1] {
		return fmt.Errorf("bias has %d elements for %d output channels", len(bias), dims[1])
	}
	plane := int(ir.Product(dims[2:]))
	for p := range int(dims[0] * dims[1]) {
		b := bias[p%len(bias)]
		for i := range plane {
			y[p*plane+i] = b
		}
	}
	return nil
}

func runConv(c *KernelContext) error {
	x, w := c.In(0), c.In(1)
	dims, y, err := convFloat64(c.attrs, x.Dims, Float64s(x), w.Dims, Float64s(w), optFloat64s(c.In(2)))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, FromFloat64s(x.DType, dims, y))
	return nil
}

// readTransposeWindow reads a ConvTranspose's window attributes.
func readTransposeWindow(a attrs, kernel []int64) (*transposeWindow, error) {
	n := len(kernel)
	spec, err := readWindow(a, kernel)
	if err != nil {
		return nil, err
	}
	w := &transposeWindow{windowSpec: spec, outPad: a.Ints("output_padding"), outShape: a.Ints("output_shape")}
	if w.outPad == nil {
		w.outPad = make([]int64, n)
	}
	if len(w.outPad) != n || slices.Min(append([]int64{0}, w.outPad...)) < 0 {
		return nil, fmt.Errorf("output_padding %v for %d spatial axes", ir.FormatList(w.outPad), n)
	}
	switch len(w.outShape) {
	case 0:
		w.outShape = slices.Repeat([]int64{-1}, n)
	case n:
	case n + 2: // a full [N, C, spatial...] shape, as some exporters write
		w.outShape = w.outShape[2:]
	default:
		return nil, fmt.Errorf("output_shape %v for %d spatial axes", ir.FormatList(w.outShape), n)
	}
	return w, nil
}

// convTransposeShape infers ConvTranspose's output [N, M, out...] from x
// [N, C, in...] and w [C, M/group, k...], and resolves its window (nil
// when even the rank is unknown).
func convTransposeShape(a attrs, x, w ir.Shape) (*transposeWindow, ir.Shape, error) {
	rank, m, kernel, err := convLayout(a, x, w, true)
	if err != nil || rank < 0 {
		return nil, ir.Shape{}, err
	}
	tw, err := readTransposeWindow(a, kernel)
	if err != nil {
		return nil, ir.Shape{}, err
	}
	xdims := dimsOf(x, rank)
	out := ir.ShapeOf(xdims[0], dimOf(m))
	for i, d := range xdims[2:] {
		if !d.IsStatic() {
			out.Dims = append(out.Dims, tw.axisDim(i, d))
			continue
		}
		o, _, _, err := tw.axis(i, dimValue(d))
		if err != nil {
			return nil, ir.Shape{}, err
		}
		out.Dims = append(out.Dims, dimOf(o))
	}
	return tw, out, nil
}

func inferConvTranspose(c *InferContext) error {
	elem, err := sameElem(c, 0, 1, 2)
	if err != nil {
		return err
	}
	_, shape, err := convTransposeShape(c.attrs, c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkBias(c.In(2).Shape, shape); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

func runConvTranspose(c *KernelContext) error {
	x, w := c.In(0), c.In(1)
	tw, shape, err := convTransposeShape(c.attrs, ir.S(x.Dims...), ir.S(w.Dims...))
	if err != nil {
		return c.Errorf("%v", err)
	}
	g, err := tw.grid(x.Dims[2:], tw.axis)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, _ := shape.Ints()
	y := make([]float64, ir.Product(dims))
	if err := addBias(y, optFloat64s(c.In(2)), dims); err != nil {
		return c.Errorf("%v", err)
	}
	convolveTranspose(y, Float64s(x), Float64s(w), int(x.Dims[0]), int(x.Dims[1]), int(dims[1]), int(c.Int("group")), g)
	c.Set(0, FromFloat64s(x.DType, dims, y))
	return nil
}
