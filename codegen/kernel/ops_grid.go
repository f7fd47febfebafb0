package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Sampling grids: GridSample reads an image at coordinates it takes from
// the grid at run time, AffineGrid makes such coordinates. The sampling
// rules are ir/ops' (GridSampleSpec); coordinates compute in float64 in
// the reference's order of operations, so that a coordinate on a pixel's
// edge rounds and floors as the reference's does.

// gridAxis is one spatial axis of a GridSample: its length and the pixel
// coordinate an output point samples along it.
type gridAxis struct {
	d      int64
	lo, hi *Expr
	x      *Expr // float64
}

// defGridSample sums, over each axis' taps (1 nearest, 2 linear, 4 cubic:
// the reduction axes), the product of the taps' weights times the image
// there, 0 for taps outside it under zeros padding.
func defGridSample(c *Ctx) error {
	x, grid, out := c.In[0], c.In[1], c.Out[0]
	xd, ok := x.Static()
	gd, ok2 := grid.Static()
	if !ok || !ok2 {
		return c.Unsupported("a GridSample of dynamic dims")
	}
	spec, err := gridSampling(c)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	k := len(xd) - 2
	if k < 1 || len(gd) != k+2 || gd[k+1] != int64(k) {
		return c.Unsupported("input %v and grid %v: want (N, C, D1..Dk) and (N, d1..dk, k)", xd, gd)
	}
	f := ir.Float64
	axes := make([]gridAxis, k)
	for a := range axes {
		// The grid lists coordinates innermost axis first.
		at := append([]*Expr{Var(0)}, Vars(k + 2)[2:]...)
		g := CastTo(Load(grid, append(at, C(int64(k-1-a)))...), f)
		axes[a] = spec.pixel(g, xd[2+a])
	}
	taps := int64(1)
	switch {
	case spec.Linear:
		taps = 2
	case spec.Cubic:
		taps = 4
	}
	weight := Const(f, 1)
	valid := Bool(true)
	idx := []*Expr{Var(0), Var(1)}
	for a, ax := range axes {
		pos, w := spec.tap(ax, RVar(a))
		pos, inside := spec.resolve(ax, pos)
		weight, valid = Mul(weight, w), And(valid, inside)
		idx = append(idx, pos)
	}
	v := Mul(weight, CastTo(LoadOr(valid, x, Const(ComputeType(x.DType), 0), idx...), f))
	extents := make([]*Expr, k)
	for a := range extents {
		extents[a] = C(taps)
	}
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: v,
		Reduce: &Reduce{Op: SumOp, Extents: extents, Post: StoreAs(CastTo(Acc(f), ComputeType(out.DType)), out.DType)}})
	return nil
}

// gridSample is the spec with the sampling rules as expressions.
type gridSample struct{ *ops.GridSample }

func gridSampling(c *Ctx) (gridSample, error) {
	s, err := c.GridSampleSpec()
	return gridSample{s}, err
}

// pixel is the pixel coordinate that grid value g names on an axis of
// length d: denormalized, rounded for nearest, and brought inside under
// border or reflection padding.
func (s gridSample) pixel(g *Expr, d int64) gridAxis {
	f := ir.Float64
	lo, hi := s.Bounds(d)
	ax := gridAxis{d: d, lo: Const(f, lo), hi: Const(f, hi)}
	n := Const(f, float64(d))
	one, two := Const(f, 1), Const(f, 2)
	if s.AlignCorners {
		ax.x = Mul(Div(Add(g, one), two), Sub(n, one))
	} else {
		ax.x = Div(Sub(Mul(Add(g, one), n), one), two)
	}
	if s.Nearest {
		ax.x = Round(ax.x)
	}
	outside := Or(Lt(ax.x, ax.lo), Gt(ax.x, ax.hi))
	switch s.Padding {
	case "border":
		ax.x = Select(outside, Max(Const(f, 0), Min(ax.x, Sub(n, one))), ax.x)
	case "reflection":
		ax.x = Select(outside, reflect(ax.x, lo, hi), ax.x)
	}
	return ax
}

// reflect mirrors x at lo and hi until it lies between them (x outside).
func reflect(x *Expr, lo, hi float64) *Expr {
	f := ir.Float64
	span := hi - lo
	if span <= 0 {
		return Const(f, lo)
	}
	l, h, sp := Const(f, lo), Const(f, hi), Const(f, span)
	mirror := func(dx *Expr, evenFrom, oddFrom *Expr, evenSign float64) *Expr {
		n := Floor(Div(dx, sp))
		r := Sub(dx, Mul(n, sp))
		even := Eq(Rem(CastTo(n, ir.Int64), C(2)), C(0))
		return Select(even, Add(evenFrom, Mul(Const(f, evenSign), r)), Sub(oddFrom, Mul(Const(f, evenSign), r)))
	}
	below := mirror(Sub(l, x), l, h, 1)  // even: lo + r, odd: hi - r
	above := mirror(Sub(x, h), h, l, -1) // even: hi - r, odd: lo + r
	return Select(Lt(x, l), below, above)
}

// tap is tap r's integer position along an axis and its weight.
func (s gridSample) tap(ax gridAxis, r *Expr) (pos, w *Expr) {
	f := ir.Float64
	if s.Nearest {
		return CastTo(ax.x, ir.Int64), Const(f, 1)
	}
	x0 := Floor(ax.x)
	t := Sub(ax.x, x0)
	base := CastTo(x0, ir.Int64)
	one := Const(f, 1)
	if s.Linear {
		return Add(base, r), Select(Eq(r, C(0)), Sub(one, t), t)
	}
	a := Const(f, ops.GridSampleCubicA)
	near := func(v *Expr) *Expr { // ((a+2)v - (a+3))v² + 1
		return Add(Mul(Sub(Mul(Add(a, Const(f, 2)), v), Add(a, Const(f, 3))), Mul(v, v)), one)
	}
	far := func(v *Expr) *Expr { // ((a·v - 5a)v + 8a)v - 4a
		return Sub(Mul(Add(Mul(Sub(Mul(a, v), Mul(Const(f, 5), a)), v), Mul(Const(f, 8), a)), v), Mul(Const(f, 4), a))
	}
	ws := []*Expr{far(Add(t, one)), near(t), near(Sub(one, t)), far(Sub(Const(f, 2), t))}
	w = ws[3]
	for i := 2; i >= 0; i-- {
		w = Select(Eq(r, C(int64(i))), ws[i], w)
	}
	return Add(base, Sub(r, C(1))), w
}

// resolve brings tap position p inside the axis under the padding mode;
// inside is false for a tap that reads zero (zeros padding).
func (s gridSample) resolve(ax gridAxis, p *Expr) (pos, inside *Expr) {
	last := C(ax.d - 1)
	switch s.Padding {
	case "zeros":
		return p, And(Ge(p, C(0)), Le(p, last))
	case "reflection":
		pf := CastTo(p, ir.Float64)
		out := Or(Lt(pf, ax.lo), Gt(pf, ax.hi))
		lo, hi := s.Bounds(ax.d)
		p = CastTo(Select(out, reflect(pf, lo, hi), pf), ir.Int64)
	}
	return Clamp(p, C(0), last), Bool(true)
}

// defAffineGrid is each output point's coordinates, θ[b] times the
// point's normalized position (innermost axis first, then 1), a sum of
// k+1 products unrolled; the positions are AffineGridCoords tables.
func defAffineGrid(c *Ctx) error {
	theta, out := c.In[0], c.Out[0]
	od, ok := out.Static()
	if !ok || len(od) < 3 {
		return c.Unsupported("an AffineGrid of dynamic dims")
	}
	k := len(od) - 2
	if td, ok := theta.Static(); !ok || len(td) != 3 || td[1] != int64(k) || td[2] != int64(k+1) {
		return c.Unsupported("theta of dims %s for a %d-D grid", theta.Dims, k)
	}
	t := ComputeType(theta.DType)
	align := c.Int("align_corners") != 0
	b, i := Var(0), Var(k+1)
	v := Const(t, 0)
	for j := range k {
		axis := k - 1 - j // base[j] is the coordinate of axis k-1-j
		tab := c.Table(ops.FromFloat64s(t, []int64{od[1+axis]}, ops.AffineGridCoords(od[1+axis], align)))
		v = Add(v, Mul(CastTo(Load(theta, b, i, C(int64(j))), t), Load(tab, Var(1+axis))))
	}
	v = Add(v, CastTo(Load(theta, b, i, C(int64(k))), t))
	c.Emit(copyOf(out, StoreAs(v, out.DType)))
	return nil
}

func init() {
	define(map[string]*OpDef{
		"GridSample": {Types: registryTypes("GridSample"), Build: defGridSample},
		"AffineGrid": {Types: registryTypes("AffineGrid"), Build: defAffineGrid},
	})
}
