package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Pooling: each output element reduces its window of the input (max or
// mean), windows sized and padded by ir/ops (KernelContext.Window), as the
// convolutions'. Taps in the padding are left out.

// poolWindow is a pool's geometry over its static input, and each tap's
// input coordinates: pos[a] = o·s + k·d - pad on spatial axis a, with the
// output position Var(2+a) and the tap taps[a].
type poolWindow struct {
	xd  []int64
	win ops.Window
}

func (c *Ctx) poolWindow() (*poolWindow, error) {
	xd, ok := staticButBatch(c.In[0])
	if !ok {
		return nil, c.Unsupported("a pool of dynamic dims other than the batch")
	}
	ks := c.Ints("kernel_shape")
	if len(xd) != len(ks)+2 {
		return nil, c.Unsupported("input %v for kernel_shape %v", xd, ks)
	}
	win, err := c.Window(ks, xd[2:])
	if err != nil {
		return nil, c.Unsupported("%v", err)
	}
	return &poolWindow{xd: xd, win: win}, nil
}

// at returns the input index tap taps reads for the output point (Vars)
// and whether it lies inside the input (Bool(true) when it always does).
func (p *poolWindow) at(taps []*Expr) (idx []*Expr, inside *Expr) {
	idx = []*Expr{Var(0), Var(1)}
	inside = Bool(true)
	for a, k := range p.win.Kernel {
		s, d, pb, in, out := p.win.Strides[a], p.win.Dilations[a], p.win.PadBegin[a], p.xd[2+a], p.win.Out[a]
		pos := Sub(Add(Mul(Var(2+a), C(s)), Mul(taps[a], C(d))), C(pb))
		inside = And(inside, inRange(pos, in, pb == 0 && (out-1)*s+(k-1)*d-pb < in))
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
	})
}
