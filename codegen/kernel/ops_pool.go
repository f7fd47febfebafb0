package kernel

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Pooling: each output element reduces its window of the input (max or
// mean), windows sized and padded by ir/ops (KernelContext.Window), as the
// convolutions'. Taps in the padding are left out.

// poolWindow is a pool's geometry over its input (xd: its dims, -1 for
// those known only at run time), and each tap's input coordinates: pos[a]
// = o·s + k·d - pad on spatial axis a, with the output position Var(2+a)
// and the tap taps[a].
type poolWindow struct {
	x   *Buffer
	xd  []int64
	win ops.Window
	// byRem holds the begin pads that vary with a dynamic size
	// (ops.DynamicWindow).
	byRem [][]int64
}

func (c *Ctx) poolWindow() (*poolWindow, error) {
	xd := knownDims(c.In[0])
	ks := c.Ints("kernel_shape")
	if len(xd) != len(ks)+2 {
		return nil, c.Unsupported("input %v for kernel_shape %v", c.In[0].Dims, ks)
	}
	win, byRem, err := c.DynamicWindow(ks, xd[2:])
	if err != nil {
		return nil, c.Unsupported("%v", err)
	}
	return &poolWindow{x: c.In[0], xd: xd, win: win, byRem: byRem}, nil
}

// staticPlane reports whether the input's channels and spatial dims are
// known when compiling.
func (p *poolWindow) staticPlane() bool { return !slices.Contains(p.xd[1:], -1) }

// at returns the input index tap taps reads for the output point (Vars)
// and whether it lies inside the input (Bool(true) when it always does).
func (p *poolWindow) at(taps []*Expr) (idx []*Expr, inside *Expr) {
	idx = []*Expr{Var(0), Var(1)}
	inside = Bool(true)
	for a := range p.win.Kernel {
		s, d, in := p.win.Strides[a], p.win.Dilations[a], spatialExtent(p.x, p.xd, a)
		pos := Sub(Add(Mul(Var(2+a), C(s)), Mul(taps[a], C(d))), padBegin(p.win, p.byRem, a, in))
		inside = And(inside, inExtent(pos, in, windowInside(p.win, a, p.xd[2+a])))
		idx = append(idx, pos)
	}
	return idx, inside
}

// tapLoad reads tap taps, or other in the padding.
func (p *poolWindow) tapLoad(x *Buffer, taps []*Expr, other *Expr) *Expr {
	idx, inside := p.at(taps)
	if inside.Op == OpConst {
		return Load(x, idx...)
	}
	return LoadOr(inside, x, other, idx...)
}

// defMaxPool: the window's largest element (the type's lowest where it
// holds none); Indices, when asked for, is where the first element equal
// to it lies, in PoolIndexStrides' numbering (-1 for an empty window), as
// the reference picks it.
func defMaxPool(c *Ctx) error {
	p, err := c.poolWindow()
	if err != nil {
		return err
	}
	x, y := c.In[0], c.Out[0]
	t := ComputeType(x.DType)
	lowest := Identity(MaxOp, t)
	extents := Ints(p.win.Kernel...)
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: p.tapLoad(x, RVars(len(extents)), lowest),
		Reduce: &Reduce{Op: MaxOp, Extents: extents}})
	ind := c.Output(1)
	if ind == nil {
		return nil
	}
	if !p.staticPlane() {
		return c.Unsupported("MaxPool's Indices over an input of dynamic dims %s", x.Dims)
	}
	// One flat tap axis (ArgMax reduces one): tap = Σ k_a·Π K_(a+1..).
	n := int64(1)
	for _, k := range p.win.Kernel {
		n *= k
	}
	taps := func(flat *Expr) []*Expr {
		ks := make([]*Expr, len(p.win.Kernel))
		rest := flat
		for a := len(ks) - 1; a >= 0; a-- {
			ks[a] = Rem(rest, C(p.win.Kernel[a]))
			rest = Div(rest, C(p.win.Kernel[a]))
		}
		return ks
	}
	// The first tap (in tap order) inside the input that holds the
	// maximum: the least such tap index (n when there is none).
	best := Load(y, Vars(y.Rank())...)
	r := RVar(0)
	idx, inside := p.at(taps(r))
	xv := LoadOr(inside, x, lowest, idx...)
	match := And(inside, Or(Eq(xv, best), And(IsNaN(xv), IsNaN(best)))) // a NaN wins where there is one
	st := ops.PoolIndexStrides(p.xd[2:], c.Node.Attr("storage_order") != nil && c.Int("storage_order") != 0)
	at := Acc(ir.Int64)
	idx, _ = p.at(taps(at))
	flat := Mul(Add(Mul(Var(0), C(p.xd[1])), Var(1)), C(ir.Product(p.xd[2:])))
	for a, s := range st {
		flat = Add(flat, Mul(idx[2+a], C(s)))
	}
	c.Emit(&Kernel{Out: ind, Space: ind.Dims, Value: Select(match, r, C(n)),
		Reduce: &Reduce{Op: MinOp, Extents: []*Expr{C(n)}, Post: Select(Eq(at, C(n)), C(-1), flat)}})
	return nil
}

// defAveragePool: the window's sum over the divisor ops.AveragePoolCounts
// gives (per axis, so a table per axis when it varies).
func defAveragePool(c *Ctx) error {
	p, err := c.poolWindow()
	if err != nil {
		return err
	}
	x, y := c.In[0], c.Out[0]
	t := ComputeType(x.DType)
	includePad := c.Node.Attr("count_include_pad") != nil && c.Int("count_include_pad") != 0
	if !p.staticPlane() {
		return p.averageDynamic(c, includePad)
	}
	counts := ops.AveragePoolCounts(p.win, p.xd[2:], includePad)
	div := Const(t, 1)
	var fixed float64 = 1
	for a, cs := range counts {
		if allSame(cs) {
			fixed *= float64(cs[0])
			continue
		}
		f := make([]float64, len(cs))
		for i, v := range cs {
			f[i] = float64(v)
		}
		tab := c.Table(ops.FromFloat64s(t, []int64{int64(len(f))}, f))
		div = Mul(div, Load(tab, Var(2+a)))
	}
	div = Mul(div, Const(t, fixed))
	extents := Ints(p.win.Kernel...)
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: p.tapLoad(x, RVars(len(extents)), Const(t, 0)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: Div(Acc(t), div)}})
	return nil
}

// averageDynamic is AveragePool over spatial dims known only at run
// time: each axis' count of taps (ops.AveragePoolCounts' rule) is, for an
// undilated window starting at o·s - pad, its overlap with [0, in) (or,
// with includePad, the padded input), computed per output.
func (p *poolWindow) averageDynamic(c *Ctx, includePad bool) error {
	x, y := c.In[0], c.Out[0]
	t := ComputeType(x.DType)
	div := Const(t, 1)
	fixed := int64(1)
	for a, k := range p.win.Kernel {
		s, d, pb, pe := p.win.Strides[a], p.win.Dilations[a], p.win.PadBegin[a], p.win.PadEnd[a]
		if p.byRem[a] != nil {
			return c.Unsupported("an AveragePool with auto_pad %s and stride %d over a dynamic dim", c.String("auto_pad"), s)
		}
		if pb == 0 && pe == 0 && !p.ceil(c) || includePad && !p.ceil(c) {
			fixed *= k // every window lies inside the (padded) input
			continue
		}
		if d != 1 {
			return c.Unsupported("an AveragePool with dilation %d and padding over a dynamic dim", d)
		}
		lo, hi := C(0), spatialExtent(x, p.xd, a)
		if includePad {
			lo, hi = C(-pb), Add(hi, C(pe))
		}
		start := Sub(Mul(Var(2+a), C(s)), C(pb))
		n := Sub(Min(Add(start, C(k)), hi), Max(start, lo))
		div = Mul(div, CastTo(n, t))
	}
	div = Mul(div, Const(t, float64(fixed)))
	extents := Ints(p.win.Kernel...)
	c.Emit(&Kernel{Out: y, Space: y.Dims, Value: p.tapLoad(x, RVars(len(extents)), Const(t, 0)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: Div(Acc(t), div)}})
	return nil
}

// ceil reports the node's ceil_mode.
func (p *poolWindow) ceil(c *Ctx) bool {
	return c.Node.Attr("ceil_mode") != nil && c.Int("ceil_mode") != 0
}

// defLpPool: the p-th root of the window's sum of |x|^p, the padding
// adding nothing.
func defLpPool(c *Ctx) error {
	p, err := c.poolWindow()
	if err != nil {
		return err
	}
	x, y := c.In[0], c.Out[0]
	t := ComputeType(x.DType)
	power := c.Int("p")
	if power <= 0 {
		return c.Unsupported("p = %d, want a positive power", power)
	}
	v := Abs(p.tapLoad(x, RVars(len(p.win.Kernel)), Const(t, 0)))
	post := Pow(Acc(t), Const(t, 1/float64(power)))
	switch power {
	case 1:
		post = Acc(t)
	case 2:
		v, post = Mul(v, v), Sqrt(Acc(t))
	default:
		v = Pow(v, Const(t, float64(power)))
	}
	k := &Kernel{Out: y, Space: y.Dims, Value: v, Reduce: &Reduce{Op: SumOp, Extents: Ints(p.win.Kernel...)}}
	if post.Op != OpAcc {
		k.Reduce.Post = post
	}
	c.Emit(k)
	return nil
}

// defMaxUnpool zeroes the output, then writes each input element at its
// index (numbered in MaxUnpoolShape's shape, which an output_shape holds
// in its leading corner), in order: a later element at the same index
// wins, as in the reference.
func defMaxUnpool(c *Ctx) error {
	x, ind, out := c.In[0], c.In[1], c.Out[0]
	xd, ok := x.Static()
	if !ok {
		return c.Unsupported("a MaxUnpool of dynamic dims")
	}
	dims, err := c.MaxUnpoolShape(xd)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if out.Rank() != len(dims) {
		return c.Unsupported("output of rank %d, want %d", out.Rank(), len(dims))
	}
	c.Emit(copyOf(out, Const(ComputeType(out.DType), 0)))
	j := Index(Load(ind, Vars(ind.Rank())...), C(ir.Product(dims)))
	store := make([]*Expr, len(dims))
	for a := len(dims) - 1; a >= 0; a-- {
		store[a] = Rem(j, C(dims[a]))
		j = Div(j, C(dims[a]))
	}
	c.Emit(&Kernel{Out: out, Space: x.Dims, Value: Load(x, Vars(x.Rank())...), Store: store, Serial: true})
	return nil
}

// defRoiAlign pools each region of interest's output pixel over its grid
// of bilinear samples (RoiAlignSpec): the reduction axes are the grid's
// rows, columns and the four corners of a sample, each corner weighted,
// summed and divided by the grid's size, or their maximum. The
// coordinates, from the rois at run time, compute in float64 as the
// reference's.
func defRoiAlign(c *Ctx) error {
	x, rois, ind, out := c.In[0], c.In[1], c.In[2], c.Out[0]
	xd, ok := x.Static()
	if !ok || len(xd) != 4 || rois.Rank() != 2 || ind.Rank() != 1 {
		return c.Unsupported("input %s, rois %s and batch_indices %s: want static (N, C, H, W), (R, 4) and (R)", x.Dims, rois.Dims, ind.Dims)
	}
	spec, err := c.RoiAlignSpec()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	g := spec.SamplingRatio
	if g == 0 {
		return c.Unsupported("sampling_ratio 0 sizes each region's sampling grid from the rois' values")
	}
	f := ir.Float64
	h, w := xd[2], xd[3]
	roi := func(i int64) *Expr { return Mul(CastTo(Load(rois, Var(0), C(i)), f), Const(f, spec.SpatialScale)) }
	offset := Const(f, 0)
	if spec.HalfPixel {
		offset = Const(f, 0.5)
	}
	x0, y0 := Sub(roi(0), offset), Sub(roi(1), offset)
	rw, rh := Sub(Sub(roi(2), offset), x0), Sub(Sub(roi(3), offset), y0)
	if !spec.HalfPixel {
		rw, rh = Max(rw, Const(f, 1)), Max(rh, Const(f, 1))
	}
	bh, bw := Div(rh, Const(f, float64(spec.OutHeight))), Div(rw, Const(f, float64(spec.OutWidth)))
	// The sample at grid row RVar(0), column RVar(1) of output pixel
	// (Var(2), Var(3)).
	at := func(start, bin, pixel, cell *Expr) *Expr {
		return Add(Add(start, Mul(CastTo(pixel, f), bin)), Div(Mul(Add(CastTo(cell, f), Const(f, 0.5)), bin), Const(f, float64(g))))
	}
	sy, sx := at(y0, bh, Var(2), RVar(0)), at(x0, bw, Var(3), RVar(1))
	outside := Or(Or(Lt(sy, Const(f, -1)), Gt(sy, Const(f, float64(h)))), Or(Lt(sx, Const(f, -1)), Gt(sx, Const(f, float64(w)))))
	corner := RVar(2)
	ypos, yw := bilinearAxis(sy, h, Lt(corner, C(2)))
	xpos, xw := bilinearAxis(sx, w, Eq(Rem(corner, C(2)), C(0)))
	b := Index(Load(ind, Var(0)), C(xd[0]))
	v := Mul(Mul(yw, xw), CastTo(Load(x, b, Var(1), ypos, xpos), f))
	v = Select(outside, Const(f, 0), v)
	red := &Reduce{Op: SumOp, Extents: Ints(g, g, 4)}
	post := Div(Acc(f), Const(f, float64(max(g*g, 1))))
	if spec.Max {
		red.Op, post = MaxOp, Acc(f)
	}
	red.Post = StoreAs(CastTo(post, ComputeType(out.DType)), out.DType)
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: v, Reduce: red})
	return nil
}

// bilinearAxis is one axis of a bilinear sample at coordinate v (inside
// [-1, n]) on an axis of length n: the lower or (low false) upper
// neighbour and its weight, the coordinate clamped at 0 and the last
// pixel as the reference's bilinearSample clamps it.
func bilinearAxis(v *Expr, n int64, low *Expr) (pos, weight *Expr) {
	f := ir.Float64
	v = Max(v, Const(f, 0))
	lo := Clamp(CastTo(v, ir.Int64), C(0), C(n-1)) // int64(v), in range where the sample is inside
	edge := Ge(lo, C(n-1))
	v = Select(edge, Const(f, float64(n-1)), v)
	hi := Select(edge, C(n-1), Add(lo, C(1)))
	frac := Sub(v, CastTo(lo, f))
	return Select(low, lo, hi), Select(low, Sub(Const(f, 1), frac), frac)
}

func allSame(xs []int64) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return len(xs) > 0
}

// GlobalAveragePool and GlobalMaxPool are reductions: ops_reduce.go defines them.

func init() {
	floats := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	define(map[string]*OpDef{
		"MaxPool":     {Types: concat(floats, []ir.DType{ir.Int8, ir.Uint8}), Build: defMaxPool},
		"AveragePool": {Types: floats, Build: defAveragePool},
		"LpPool":      {Types: floats, Build: defLpPool},
		"MaxUnpool":   {Types: registryTypes("MaxUnpool"), Build: defMaxUnpool},
		"RoiAlign":    {Types: registryTypes("RoiAlign"), Build: defRoiAlign},
	})
}
