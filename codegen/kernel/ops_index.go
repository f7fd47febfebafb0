package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Index remaps, gathers and scatters: each output element is an input
// element at a computed index (or a constant). Parameters that set the
// output's shape (Slice's starts, Pad's pads, ...) are resolved by ir/ops,
// as the reference resolves them; the output buffer's dims are inference's.

// copyOf is the kernel writing out[point] = in[idx(point)].
func copyOf(out *Buffer, v *Expr) *Kernel {
	return &Kernel{Out: out, Space: out.Dims, Value: v}
}

// Index returns integer index expression x (any integer type) as an int64
// inside [0, dim): negative indices count from the end (ONNX), and any
// index still outside is clamped, so that invalid input can never read
// outside the tensor.
func Index(x, dim *Expr) *Expr {
	i := CastTo(x, ir.Int64)
	if x.Type.IsUnsigned() {
		return Clamp(i, C(0), Sub(dim, C(1)))
	}
	i = Select(Lt(i, C(0)), Add(i, dim), i)
	return Clamp(i, C(0), Sub(dim, C(1)))
}

// point returns Vars(n) with axis a replaced by x.
func point(n, a int, x *Expr) []*Expr {
	p := Vars(n)
	p[a] = x
	return p
}

// defReshape copies a Reshape, Flatten, Squeeze or Unsqueeze in order:
// element i of the output is element i of the input. Backends make these
// nodes views where they can; this is the copy where they cannot (a graph
// output, dynamic dims a target's own copy does not take).
func defReshape(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	flat := C(0)
	for k, d := range out.Dims {
		flat = Add(Mul(flat, d), Var(k))
	}
	c.Emit(copyOf(out, Load(in, unravel(flat, in.Dims)...)))
	return nil
}

func defTranspose(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	perm := c.Ints("perm")
	if len(perm) == 0 {
		for i := in.Rank() - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != in.Rank() {
		return c.Unsupported("perm %v for rank %d", perm, in.Rank())
	}
	idx := make([]*Expr, in.Rank())
	for k, p := range perm {
		if p < 0 || int(p) >= in.Rank() || idx[p] != nil {
			return c.Unsupported("perm %v is not a permutation", perm)
		}
		idx[p] = Var(k)
	}
	c.Emit(copyOf(out, Load(in, idx...)))
	return nil
}

func defSlice(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	axes, err := c.SliceAxes(in.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	idx := Vars(in.Rank())
	for _, a := range axes {
		first := sliceFirst(in.Dims[a.Axis], a)
		idx[a.Axis] = Add(first, Mul(Var(a.Axis), C(a.Step)))
	}
	c.Emit(copyOf(out, Load(in, idx...)))
	return nil
}

// sliceFirst is the first index a Slice reads along axis a of a dim: at
// compile time by ops.SliceRange where the dim is static, else its
// clamping of the start (a compile-time constant) over the dim read at run
// time. The count is the output dim, which inference gives.
func sliceFirst(dim *Expr, a ops.SliceAxis) *Expr {
	if d, ok := StaticInts([]*Expr{dim}); ok {
		first, _ := ops.SliceRange(d[0], a.Start, a.End, a.Step)
		return C(first)
	}
	start := C(a.Start)
	if a.Start < 0 {
		start = Add(dim, start)
	}
	hi := dim
	if a.Step < 0 {
		hi = Sub(dim, C(1))
	}
	return Clamp(start, C(0), hi)
}

func defPad(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	dims := knownDims(in) // -1 where known only at run time
	p, err := c.PadSpec(in.DType, dims)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	idx := make([]*Expr, in.Rank())
	inside := Bool(true)
	for a := range idx {
		src := Sub(Var(a), C(p.Begin[a]))
		n := in.Dims[a]
		switch p.Mode {
		case "constant":
			if p.Begin[a] > 0 || p.End[a] > 0 {
				inside = And(inside, And(Ge(src, C(0)), Lt(src, n)))
			}
		case "edge":
			src = Clamp(src, C(0), Sub(n, C(1)))
		case "wrap":
			src = FloorMod(src, n)
		case "reflect":
			// Reflection without repeating the edge has period 2(n-1); an
			// axis of one element reflects to it.
			if dims[a] == 1 {
				src = C(0)
				break
			}
			period := Max(Mul(C(2), Sub(n, C(1))), C(1))
			m := FloorMod(src, period)
			src = Select(Ge(m, n), Sub(period, m), m)
		}
		idx[a] = src
	}
	if p.Mode != "constant" {
		c.Emit(copyOf(out, Load(in, idx...)))
		return nil
	}
	t := ComputeType(in.DType)
	fill := Const(t, 0)
	switch f, ok := c.Scalar(2, t); {
	case ok: // constant_value, known or read at run time
		fill = f
	case p.Fill != nil && t.IsFloat(): // Pad-1/2's value attribute
		fill = Const(t, p.Fill.Float64At(0))
	case p.Fill != nil:
		fill = IntConst(t, p.Fill.Int64At(0))
	}
	c.Emit(copyOf(out, LoadOr(inside, in, fill, idx...)))
	return nil
}

func defConcat(c *Ctx) error {
	out := c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), out.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	pos := C(0)
	for _, in := range c.In {
		store := Vars(in.Rank())
		store[axis] = Add(Var(axis), pos)
		c.Emit(&Kernel{Out: out, Space: in.Dims, Value: Load(in, Vars(in.Rank())...), Store: store})
		pos = Add(pos, in.Dims[axis])
	}
	return nil
}

func defSplit(c *Ctx) error {
	in := c.In[0]
	axis, err := ops.NormAxis(c.Int("axis"), in.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	pos := C(0)
	for _, out := range c.Out {
		if out == nil {
			continue
		}
		c.Emit(copyOf(out, Load(in, point(in.Rank(), axis, Add(Var(axis), pos))...)))
		pos = Add(pos, out.Dims[axis])
	}
	return nil
}

func defExpand(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	c.Emit(copyOf(out, Load(in, Broadcast(in, out.Dims)...)))
	return nil
}

func defTile(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	idx := make([]*Expr, in.Rank())
	for a := range idx {
		idx[a] = Rem(Var(a), in.Dims[a])
		if n, ok := in.Dims[a].IntValue(); ok && n == 1 {
			idx[a] = C(0)
		}
	}
	c.Emit(copyOf(out, Load(in, idx...)))
	return nil
}

func defDepthToSpace(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	b := C(c.Int("blocksize"))
	oc := out.Dims[1]
	y, x := Var(2), Var(3)
	h, bh, w, bw := Div(y, b), Rem(y, b), Div(x, b), Rem(x, b)
	var ch *Expr
	if c.String("mode") == "CRD" {
		ch = Add(Mul(Var(1), Mul(b, b)), Add(Mul(bh, b), bw))
	} else { // DCR
		ch = Add(Mul(Add(Mul(bh, b), bw), oc), Var(1))
	}
	c.Emit(copyOf(out, Load(in, Var(0), ch, h, w)))
	return nil
}

func defSpaceToDepth(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	b := C(c.Int("blocksize"))
	ic := in.Dims[1]
	blk, ch := Div(Var(1), ic), Rem(Var(1), ic)
	bh, bw := Div(blk, b), Rem(blk, b)
	c.Emit(copyOf(out, Load(in, Var(0), ch, Add(Mul(Var(2), b), bh), Add(Mul(Var(3), b), bw))))
	return nil
}

func defTrilu(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	r := in.Rank()
	k, ok := c.Scalar(1, ir.Int64)
	if !ok {
		k = C(0)
	}
	d := Sub(Var(r-1), Var(r-2)) // j - i
	keep := Le(d, k)
	if c.Int("upper") != 0 {
		keep = Ge(d, k)
	}
	t := ComputeType(in.DType)
	c.Emit(copyOf(out, Select(keep, Load(in, Vars(r)...), Const(t, 0))))
	return nil
}

func defEyeLike(c *Ctx) error {
	out := c.Out[0]
	k := C(c.Int("k"))
	t := ComputeType(out.DType)
	v := Select(Eq(Sub(Var(1), Var(0)), k), Const(t, 1), Const(t, 0))
	c.Emit(copyOf(out, v))
	return nil
}

// defCenterCropPad reads each output element at its position shifted by
// CenterCropPadShift on every axis, 0 where that falls in the padding.
func defCenterCropPad(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	dims, ok := in.Static()
	odims, ok2 := out.Static()
	if !ok || !ok2 {
		return c.Unsupported("a CenterCropPad of dynamic dims")
	}
	idx := make([]*Expr, in.Rank())
	inside := Bool(true)
	for a := range idx {
		idx[a] = Add(Var(a), C(ops.CenterCropPadShift(dims[a], odims[a])))
		if odims[a] > dims[a] {
			inside = And(inside, inRange(idx[a], dims[a], false))
		}
	}
	c.Emit(copyOf(out, LoadOr(inside, in, Const(ComputeType(in.DType), 0), idx...)))
	return nil
}

func defRange(c *Ctx) error {
	out := c.Out[0]
	t := ComputeType(out.DType)
	start, _ := c.Scalar(0, t)
	delta, _ := c.Scalar(2, t)
	c.Emit(copyOf(out, Add(start, Mul(CastTo(Var(0), t), delta))))
	return nil
}

func defConstantOfShape(c *Ctx) error {
	out := c.Out[0]
	t := ComputeType(out.DType)
	v := Const(t, 0)
	if tv := c.Tensor("value"); tv != nil && tv.Len() == 1 {
		if t.IsFloat() {
			v = Const(t, tv.Float64At(0))
		} else {
			v = IntConst(t, tv.Int64At(0))
		}
	}
	c.Emit(copyOf(out, v))
	return nil
}

// defShape writes the input's dims (Shape-15's range of them): the
// symbols' values at run time where they are dynamic.
func defShape(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	lo, hi := c.ShapeBounds(in.Rank())
	c.Emit(copyOf(out, CastTo(pick(Var(0), in.Dims[lo:hi]), out.DType)))
	return nil
}

// defSize writes the input's element count.
func defSize(c *Ctx) error {
	c.Emit(copyOf(c.Out[0], CastTo(c.In[0].Numel(), c.Out[0].DType)))
	return nil
}

// pick is xs[i] for an index i in [0, len(xs)): a chain of selects, for
// the few entries of a shape.
func pick(i *Expr, xs []*Expr) *Expr {
	if len(xs) == 0 {
		return C(0)
	}
	v := xs[len(xs)-1]
	for k := len(xs) - 2; k >= 0; k-- {
		v = Select(Eq(i, C(int64(k))), xs[k], v)
	}
	return v
}

func defOneHot(c *Ctx) error {
	ind, vals, out := c.In[0], c.In[2], c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), ind.Rank()+1)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	depth := out.Dims[axis]
	// The indices' coordinates are the output's without the depth axis.
	p := append(Vars(axis), Vars(out.Rank())[axis+1:]...)
	j := CastTo(Load(ind, p...), ir.Int64) // float indices truncate
	j = Select(Lt(j, C(0)), Add(j, depth), j)
	on, off := Load(vals, C(1)), Load(vals, C(0))
	c.Emit(copyOf(out, Select(Eq(j, Var(axis)), on, off)))
	return nil
}

func defGather(c *Ctx) error {
	data, ind, out := c.In[0], c.In[1], c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), data.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	q := ind.Rank()
	vars := Vars(out.Rank())
	j := Index(Load(ind, vars[axis:axis+q]...), data.Dims[axis])
	idx := append(append(append([]*Expr{}, vars[:axis]...), j), vars[axis+q:]...)
	c.Emit(copyOf(out, Load(data, idx...)))
	return nil
}

func defGatherElements(c *Ctx) error {
	data, ind, out := c.In[0], c.In[1], c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), data.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	j := Index(Load(ind, Vars(ind.Rank())...), data.Dims[axis])
	c.Emit(copyOf(out, Load(data, point(data.Rank(), axis, j)...)))
	return nil
}

// gatherNDIndex is the data index GatherND reads (and ScatterND writes)
// for index tuple position tuple (the indices' leading coordinates) and
// element coordinates rest (data's trailing dims), with b batch dims.
func gatherNDIndex(data, ind *Buffer, b int, tuple, rest []*Expr) []*Expr {
	q := ind.Rank()
	k, _ := ind.Dims[q-1].IntValue()
	idx := append([]*Expr{}, tuple[:b]...)
	for i := 0; i < int(k); i++ {
		at := append(append([]*Expr{}, tuple...), C(int64(i)))
		idx = append(idx, Index(Load(ind, at...), data.Dims[b+i]))
	}
	return append(idx, rest...)
}

func defGatherND(c *Ctx) error {
	data, ind, out := c.In[0], c.In[1], c.Out[0]
	b := 0
	if c.Node.Attr("batch_dims") != nil {
		b = int(c.Int("batch_dims"))
	}
	if _, ok := ind.Dims[ind.Rank()-1].IntValue(); !ok {
		return c.Unsupported("index tuples of dynamic length")
	}
	q := ind.Rank()
	vars := Vars(out.Rank())
	c.Emit(copyOf(out, Load(data, gatherNDIndex(data, ind, b, vars[:q-1], vars[q-1:])...)))
	return nil
}

// reductionOf maps a scatter's reduction attribute to a combine op.
func reductionOf(c *Ctx) ReduceOp {
	if c.Node.Attr("reduction") == nil {
		return None
	}
	return map[string]ReduceOp{"add": SumOp, "mul": ProdOp, "max": MaxOp, "min": MinOp}[c.String("reduction")]
}

func defScatterElements(c *Ctx) error {
	data, ind, upd, out := c.In[0], c.In[1], c.In[2], c.Out[0]
	axis, err := ops.NormAxis(c.Int("axis"), data.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	c.Emit(copyOf(out, Load(data, Vars(data.Rank())...)))
	j := Index(Load(ind, Vars(ind.Rank())...), data.Dims[axis])
	c.Emit(&Kernel{Out: out, Space: ind.Dims, Value: Load(upd, Vars(upd.Rank())...),
		Store: point(data.Rank(), axis, j), Combine: reductionOf(c), Serial: true})
	return nil
}

// defTensorScatter copies the cache, then writes update's steps along the
// axis from write_indices[b] (0 without it) on, wrapping around the cache
// in circular mode; in linear mode a step past the cache (which the
// reference refuses) writes nothing.
func defTensorScatter(c *Ctx) error {
	cache, upd, out := c.In[0], c.In[1], c.Out[0]
	spec, err := c.TensorScatterSpec(cache.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if upd.Rank() != cache.Rank() {
		return c.Unsupported("update of rank %d for a cache of rank %d", upd.Rank(), cache.Rank())
	}
	c.Emit(copyOf(out, Load(cache, Vars(cache.Rank())...)))
	pos := Var(spec.Axis)
	if w := c.Input(2); w != nil {
		pos = Add(CastTo(Load(w, Var(0)), ir.Int64), pos)
	}
	length := cache.Dims[spec.Axis]
	k := &Kernel{Out: out, Space: upd.Dims, Value: Load(upd, Vars(upd.Rank())...)}
	if spec.Circular {
		pos = FloorMod(pos, length)
	} else {
		k.When = And(Ge(pos, C(0)), Lt(pos, length))
	}
	k.Store = point(cache.Rank(), spec.Axis, pos)
	c.Emit(k)
	return nil
}

func defScatterND(c *Ctx) error {
	data, ind, upd, out := c.In[0], c.In[1], c.In[2], c.Out[0]
	if _, ok := ind.Dims[ind.Rank()-1].IntValue(); !ok {
		return c.Unsupported("index tuples of dynamic length")
	}
	c.Emit(copyOf(out, Load(data, Vars(data.Rank())...)))
	q := ind.Rank()
	vars := Vars(upd.Rank())
	c.Emit(&Kernel{Out: out, Space: upd.Dims, Value: Load(upd, vars...),
		Store: gatherNDIndex(data, ind, 0, vars[:q-1], vars[q-1:]), Combine: reductionOf(c), Serial: true})
	return nil
}

// defResize interpolates one resized axis after another, as the reference
// does (its tables of taps per axis come from ir/ops): each pass reads the
// previous one's result, a weighted sum over the axis' taps, or the
// extrapolation value where a position has none. Intermediate results are
// float32 for float data and float64 for integers, whose final rounding
// must agree with the reference's.
func defResize(c *Ctx) error { return resizeBy(c, c.ResizeSpec) }

// defUpsample is Resize-10 by its old name: its geometry is Resize's
// (ops.UpsampleSpec), the interpolation the same.
func defUpsample(c *Ctx) error {
	if err := c.CheckUpsample(); err != nil {
		return c.Unsupported("%v", err)
	}
	return resizeBy(c, c.UpsampleSpec)
}

// resizeBy interpolates as the node's geometry, spec, says.
func resizeBy(c *Ctx, spec func(dims []int64) (*ops.Resize, error)) error {
	in, out := c.In[0], c.Out[0]
	dims, ok := in.Static()
	if _, outOK := out.Static(); !ok || !outOK {
		return resizeDynamic(c)
	}
	rs, err := spec(dims)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	ft := ir.Float32
	if in.DType == ir.Float64 || !in.DType.IsFloat() {
		ft = ir.Float64
	}
	var axes []int
	for a, taps := range rs.Taps {
		if taps != nil {
			axes = append(axes, a)
		}
	}
	if len(axes) == 0 {
		c.Emit(copyOf(out, Load(in, Vars(in.Rank())...)))
		return nil
	}
	cur := in
	curDims := append([]int64{}, dims...)
	for k, a := range axes {
		taps := rs.Taps[a]
		n := 1
		for _, t := range taps {
			n = max(n, len(t))
		}
		idx := make([]int64, len(taps)*n)
		w := make([]float64, len(taps)*n)
		valid := make([]int64, len(taps))
		for x, t := range taps {
			valid[x] = int64(len(t))
			for j, tap := range t {
				idx[x*n+j], w[x*n+j] = int64(tap.I), tap.W
			}
		}
		shape := []int64{int64(len(taps)), int64(n)}
		it, wt := c.Table(ir.FromSlice(ir.Int64, shape, idx)), c.Table(ops.FromFloat64s(ft, shape, w))
		var v *Expr
		for j := 0; j < n; j++ {
			at := point(len(dims), a, Load(it, Var(a), C(int64(j))))
			term := Mul(Load(wt, Var(a), C(int64(j))), CastTo(Load(cur, at...), ft))
			if v == nil {
				v = term
			} else {
				v = Add(v, term)
			}
		}
		if hasEmpty(taps) {
			vt := c.Table(ir.FromSlice(ir.Int64, []int64{int64(len(taps))}, valid))
			v = Select(Eq(Load(vt, Var(a)), C(0)), Const(ft, rs.Extrapolation), v)
		}
		curDims[a] = int64(len(taps))
		if k < len(axes)-1 {
			next := c.Temp(ft, Ints(curDims...)...)
			c.Emit(copyOf(next, v))
			cur = next
			continue
		}
		c.Emit(copyOf(out, StoreAs(resizeRounded(in.DType, v), out.DType)))
	}
	return nil
}

// resizeFloat is the type a Resize of t-typed data interpolates in.
func resizeFloat(t ir.DType) ir.DType {
	if t == ir.Float64 || !t.IsFloat() {
		return ir.Float64
	}
	return ir.Float32
}

// resizeRounded is interpolated value v as the input's type d computes:
// integers round to nearest, ties away from zero, and saturate
// (ops.RoundSaturate).
func resizeRounded(d ir.DType, v *Expr) *Expr {
	t := ComputeType(d)
	if t.IsFloat() {
		return v
	}
	half := Const(ir.Float64, 0.5)
	r := Select(Lt(v, Const(ir.Float64, 0)), Neg(Floor(Add(Neg(v), half))), Floor(Add(v, half)))
	lo, hi := intBounds(t)
	return CastTo(Clamp(r, Const(ir.Float64, lo), Const(ir.Float64, hi)), t)
}

// resizeDynamic is resizeBy over dims known only at run time: each
// resized axis' taps repeat with a period (ops.ResizePhases), so a table
// per phase gives output x's taps, shifted by x div period times the
// shift and clamped to the input. One kernel sums, over every resized
// axis' taps, the product of their weights times the input (the
// n-dimensional form of the per-axis passes, which would need scratch of
// run-time size).
func resizeDynamic(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	rp, err := c.ResizePhases(knownDims(in))
	if err != nil {
		return resizeAtRunTime(c)
	}
	ft := resizeFloat(in.DType)
	at := Vars(in.Rank())
	weight := Const(ft, 1)
	var extents []*Expr
	for a, ap := range rp.Axes {
		if ap.Taps == nil {
			continue
		}
		n := 1
		for _, t := range ap.Taps {
			n = max(n, len(t))
		}
		idx := make([]int64, ap.Period*int64(n))
		w := make([]float64, len(idx))
		for ph, t := range ap.Taps {
			for j, tap := range t {
				idx[ph*n+j], w[ph*n+j] = int64(tap.I), tap.W
			}
		}
		shape := []int64{ap.Period, int64(n)}
		it, wt := c.Table(ir.FromSlice(ir.Int64, shape, idx)), c.Table(ops.FromFloat64s(ft, shape, w))
		phase, base, j := Rem(Var(a), C(ap.Period)), Mul(Div(Var(a), C(ap.Period)), C(ap.Shift)), RVar(len(extents))
		at[a] = Clamp(Add(base, Load(it, phase, j)), C(0), Sub(in.Dims[a], C(1)))
		weight = Mul(weight, Load(wt, phase, j))
		extents = append(extents, C(int64(n)))
	}
	if len(extents) == 0 {
		c.Emit(copyOf(out, Load(in, at...)))
		return nil
	}
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: Mul(weight, CastTo(Load(in, at...), ft)),
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: StoreAs(resizeRounded(in.DType, Acc(ft)), out.DType)}})
	return nil
}

// maxResizeTerms bounds the taps a position of an n-dimensional Resize
// sums when they are computed at run time (cubic over three axes: 64).
const maxResizeTerms = 256

// resizeAtRunTime is a Resize whose taps are computed at run time, from
// lengths known then (sizes from a shape subgraph, scales that are no
// integer or its inverse): the reference's rule (ops.ResizeTaps) built as
// expressions of each output position and the axes' lengths. One kernel
// sums, over every combination of the resized axes' taps, their weights'
// product times the input; a position outside the crop region on any
// axis takes the extrapolation value.
func resizeAtRunTime(c *Ctx) error {
	in, out := c.In[0], c.Out[0]
	if in.Rank() != out.Rank() {
		return c.Unsupported("an output of rank %d for an input of rank %d", out.Rank(), in.Rank())
	}
	same := make([]bool, in.Rank())
	for a := range same {
		same[a] = in.Dims[a].String() == out.Dims[a].String() // one expression: one length
	}
	rs, err := c.ResizeRuntime(same)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	var ar exprArith
	f, ft := ir.Float64, resizeFloat(in.DType)
	type axisTaps struct{ index, weight []*Expr }
	axes := make([]axisTaps, in.Rank())
	inside, nonEmpty := Bool(true), Bool(true)
	terms := 1
	for a, ax := range rs.Axes {
		if !ax.Resized {
			axes[a] = axisTaps{index: []*Expr{Var(a)}, weight: []*Expr{nil}}
			continue
		}
		g := ops.ResizeAxis[*Expr]{In: CastTo(in.Dims[a], f), Out: CastTo(out.Dims[a], f),
			RoiStart: Const(f, rs.RoiStart[a]), RoiEnd: Const(f, rs.RoiEnd[a])}
		if ax.Scale > 0 {
			g.Scale, g.Length = Const(f, ax.Scale), Mul(Const(f, ax.Scale), g.In)
		} else {
			g.Scale, g.Length = Div(g.Out, g.In), g.Out
		}
		// The axis' taps, once per output position: tables of their
		// indices and weights (and whether the position is inside the
		// crop region) that the interpolation reads.
		index, weight, in1 := ops.ResizeTaps[*Expr](ar, ax.Rule, g, CastTo(Var(0), f))
		n := int64(len(index))
		pick := func(v []*Expr) *Expr {
			e := v[n-1]
			for j := n - 2; j >= 0; j-- {
				e = Select(Eq(Var(1), C(j)), v[j], e)
			}
			return e
		}
		it, wt := c.Temp(ir.Int64, out.Dims[a], C(n)), c.Temp(ft, out.Dims[a], C(n))
		c.Emit(copyOf(it, CastTo(pick(index), ir.Int64)))
		c.Emit(copyOf(wt, CastTo(pick(weight), ft)))
		t := axisTaps{}
		for j := range n {
			t.index, t.weight = append(t.index, Load(it, Var(a), C(j))), append(t.weight, Load(wt, Var(a), C(j)))
		}
		axes[a] = t
		if rs.Crop {
			ok := c.Temp(ir.Int64, out.Dims[a])
			c.Emit(copyOf(ok, CastTo(in1, ir.Int64)))
			inside = And(inside, Ne(Load(ok, Var(a)), C(0)))
		}
		nonEmpty = And(nonEmpty, Gt(in.Dims[a], C(0)))
		if terms *= len(index); terms > maxResizeTerms {
			return c.Unsupported("%d taps per position (at most %d are computed at run time)", terms, maxResizeTerms)
		}
	}
	// Each combination of taps: its indices and weights' product, where a
	// tap of weight 0 (one the reference drops) adds nothing.
	var v *Expr
	pick := make([]int, in.Rank())
	for {
		at := make([]*Expr, in.Rank())
		var w *Expr
		for a, t := range axes {
			at[a] = t.index[pick[a]]
			if tw := t.weight[pick[a]]; tw != nil {
				if w == nil {
					w = tw
				} else {
					w = Mul(w, tw)
				}
			}
		}
		x := CastTo(LoadOr(nonEmpty, in, Const(ComputeType(in.DType), 0), at...), ft)
		term := x
		if w != nil {
			term = Select(Eq(w, Const(ft, 0)), Const(ft, 0), Mul(w, x))
		}
		if v == nil {
			v = term
		} else {
			v = Add(v, term)
		}
		a := len(pick) - 1
		for ; a >= 0; a-- {
			if pick[a]++; pick[a] < len(axes[a].index) {
				break
			}
			pick[a] = 0
		}
		if a < 0 {
			break
		}
	}
	if rs.Crop {
		v = Select(inside, v, Const(ft, rs.Extrapolation))
	}
	c.Emit(copyOf(out, StoreAs(resizeRounded(in.DType, v), out.DType)))
	return nil
}

func hasEmpty(taps [][]ops.ResizeTap) bool {
	for _, t := range taps {
		if t == nil {
			return true
		}
	}
	return false
}

// intBounds is integer type t's range as floats.
func intBounds(t ir.DType) (lo, hi float64) {
	bits := float64(8 * t.Size())
	if t.IsSigned() {
		return -pow2(bits - 1), pow2(bits-1) - 1
	}
	return 0, pow2(bits) - 1
}

func pow2(n float64) float64 {
	r := 1.0
	for i := 0; i < int(n); i++ {
		r *= 2
	}
	return r
}

func init() {
	floats := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	ints := []ir.DType{ir.Int8, ir.Int16, ir.Int32, ir.Int64, ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
	numeric := concat(floats, ints)
	all := concat(numeric, []ir.DType{ir.Bool})
	define(map[string]*OpDef{
		"Transpose":       moving(all, defTranspose),
		"Reshape":         moving(all, defReshape),
		"Flatten":         moving(all, defReshape),
		"Squeeze":         moving(all, defReshape),
		"Unsqueeze":       moving(all, defReshape),
		"Slice":           moving(all, defSlice),
		"Pad":             moving(all, defPad),
		"Concat":          moving(all, defConcat),
		"Split":           moving(all, defSplit),
		"Expand":          moving(all, defExpand),
		"Tile":            moving(all, defTile),
		"DepthToSpace":    moving(all, defDepthToSpace),
		"SpaceToDepth":    moving(all, defSpaceToDepth),
		"Trilu":           {Types: all, Build: defTrilu},
		"EyeLike":         {Types: all, Build: defEyeLike},
		"Range":           {Types: []ir.DType{ir.Float32, ir.Float64, ir.Int16, ir.Int32, ir.Int64}, Build: defRange},
		"CenterCropPad":   {Types: all, Build: defCenterCropPad},
		"ConstantOfShape": {Types: []ir.DType{ir.Int64}, Build: defConstantOfShape},
		"OneHot":          {Types: concat(numeric), Build: defOneHot},
		"Shape":           {Types: all, Build: defShape},
		"Size":            {Types: all, Build: defSize},
		"Gather":          moving(all, defGather),
		"GatherElements":  {Types: all, Build: defGatherElements},
		"GatherND":        {Types: all, Build: defGatherND},
		"ScatterElements": {Types: all, Build: defScatterElements},
		"ScatterND":       {Types: all, Build: defScatterND},
		"TensorScatter":   {Types: all, Build: defTensorScatter},
		"Resize":          {Types: numeric, Build: defResize},
		// Scatter (opsets 9 and 10) is ScatterElements by its old name,
		// without a reduction.
		"Scatter":            {Types: all, Build: defScatterElements},
		"Upsample":           {Types: numeric, Build: defUpsample},
		"ReverseSequence":    {Types: all, Build: defReverseSequence},
		"OptionalGetElement": {Types: all, Build: defOptionalGetElement},
		"OptionalHasElement": {Types: all, Build: defOptionalHasElement},
	})
}

// defReverseSequence reverses, for each batch entry b, the first
// sequence_lens[b] steps along the time axis: step t reads step
// len-1-t there and itself after. A length past the steps (which the
// reference refuses) is clamped into them.
func defReverseSequence(c *Ctx) error {
	in, lens, out := c.In[0], c.In[1], c.Out[0]
	batch, time, err := c.ReverseSequenceAxes()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if in.Rank() < 2 || lens.Rank() != 1 {
		return c.Unsupported("input of rank %d and sequence_lens of rank %d (want 2 or more, and 1)", in.Rank(), lens.Rank())
	}
	t, l := Var(time), CastTo(Load(lens, Var(batch)), ir.Int64)
	src := Clamp(Select(Lt(t, l), Sub(Sub(l, C(1)), t), t), C(0), Sub(in.Dims[time], C(1)))
	c.Emit(copyOf(out, Load(in, point(in.Rank(), time, src)...)))
	return nil
}

// plainTensorInput refuses an optional or sequence input i: an engine
// binds tensors, so an Optional op compiles only on a plain tensor (which
// always holds an element).
func plainTensorInput(c *Ctx, i int) error {
	if v := c.Node.Input(i); v != nil && v.Type.Kind != ir.TensorKind {
		return c.Unsupported("input %q is %s; compiled engines take a plain tensor here only", v.Name, v.Type)
	}
	return nil
}

// defOptionalGetElement passes a plain tensor through.
func defOptionalGetElement(c *Ctx) error {
	if err := plainTensorInput(c, 0); err != nil {
		return err
	}
	c.Emit(copyOf(c.Out[0], Load(c.In[0], Vars(c.In[0].Rank())...)))
	return nil
}

// defOptionalHasElement is true for a plain tensor, false for an omitted
// input (opset 18).
func defOptionalHasElement(c *Ctx) error {
	if err := plainTensorInput(c, 0); err != nil {
		return err
	}
	c.Emit(copyOf(c.Out[0], Bool(c.Input(0) != nil)))
	return nil
}
