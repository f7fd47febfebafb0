package kernel

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Linear quantization. How scales and zero points lay out (per tensor, per
// axis, blocked; per row of a matmul, per output channel of a convolution)
// and the output types are resolved by ir/ops (ops.KernelContext's
// QuantLayout, QuantParamDims, QuantizedType, DequantizedType,
// QuantPrecision), as the reference applies them. The arithmetic is the
// reference's, step for step: scales apply in float32; quantized values
// round half to even, add the zero point and saturate; the integer matmuls
// and convolutions accumulate in int32 (exact unless the sum overflows it,
// as ONNX specifies), and requantize with the multiplier formed in float32
// and applied in float64.

// qRange is the range integer quantized type d saturates to; ok is false
// for the others (the small floats round as Cast does instead).
func qRange(d ir.DType) (lo, hi float64, ok bool) {
	if d.IsPackedInt() {
		l, h := ir.PackedIntRange(d)
		return float64(l), float64(h), true
	}
	switch d {
	case ir.Int8, ir.Uint8, ir.Int16, ir.Uint16:
		lo, hi = intBounds(d)
		return lo, hi, true
	}
	return 0, 0, false
}

// qSaturate rounds v (float) half to even, adds zero point zp (nil: none)
// and saturates to type d's range, giving a value of type d (of a packed
// type: its code, a Uint8).
func qSaturate(v, zp *Expr, d ir.DType) *Expr {
	lo, hi, _ := qRange(d)
	r := Round(v)
	if zp != nil {
		r = Add(r, CastTo(zp, v.Type))
	}
	// A NaN stays NaN through the clamp and converts to 0, as the
	// reference's conversion does.
	r = Clamp(r, Const(v.Type, lo), Const(v.Type, hi))
	if d.IsPackedInt() {
		return And(CastTo(CastTo(r, ir.Int8), ir.Uint8), IntConst(ir.Uint8, codeMask(d)))
	}
	return CastTo(r, d)
}

// knownDims is b's dims, -1 where known only at run time.
func knownDims(b *Buffer) []int64 {
	out := make([]int64, b.Rank())
	for i, d := range b.Dims {
		out[i] = -1
		if n, ok := d.IntValue(); ok {
			out[i] = n
		}
	}
	return out
}

// paramDims is a scale's or zero point's dims, which must be static.
func paramDims(c *Ctx, i int) ([]int64, error) {
	d, ok := c.In[i].Static()
	if !ok {
		return nil, c.Unsupported("input %d (a scale or zero point) has dims known only at run time", i)
	}
	return d, nil
}

// zeros is n index expressions 0.
func zeros(n int) []*Expr { return Ints(make([]int64, n)...) }

// rvars is RVar(0) ... RVar(n-1).
func rvars(n int) []*Expr {
	out := make([]*Expr, n)
	for i := range out {
		out[i] = RVar(i)
	}
	return out
}

// ---- QuantizeLinear, DequantizeLinear ----

// quantParams reads (De)QuantizeLinear's scale and zero point (nil when
// absent) at each point of x, laid out as ops.QuantLayout resolves.
func quantParams(c *Ctx) (scale, zp *Expr, err error) {
	x, s, z := c.In[0], c.In[1], c.Input(2)
	sd, err := paramDims(c, 1)
	if err != nil {
		return nil, nil, err
	}
	if z != nil {
		zd, err := paramDims(c, 2)
		if err != nil {
			return nil, nil, err
		}
		// One element each is per tensor, whatever the ranks (a scalar
		// scale and a [1] zero point, as ONNX's reference pairs them).
		if !slices.Equal(zd, sd) && (ir.Product(zd) != 1 || ir.Product(sd) != 1) {
			return nil, nil, fmt.Errorf("%s: scale has shape %v but the zero point %v", c.Node, sd, zd)
		}
	}
	l, err := c.QuantLayout(knownDims(x), sd)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", c.Node, err)
	}
	at := func(b *Buffer) []*Expr {
		switch {
		case l.Axis < 0:
			return zeros(b.Rank())
		case l.Block == 0:
			return []*Expr{Var(l.Axis)}
		}
		return point(x.Rank(), l.Axis, Div(Var(l.Axis), C(l.Block)))
	}
	scale = Load(s, at(s)...)
	if z != nil {
		zp = c.element(z, at(z))
	}
	return scale, zp, nil
}

// defQuantize is y = saturate(round(x / scale) + zero_point), the division
// in float32 rounded to the precision ops.QuantPrecision gives; into a
// small float, x / scale + zero_point in float32, rounded as Cast rounds
// (saturate as the node says).
func defQuantize(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	var zt ir.DType
	if z := c.Input(2); z != nil {
		zt = z.DType
	}
	ot, err := c.QuantizedType(zt, c.Input(2) != nil)
	if err != nil {
		return fmt.Errorf("%s: %v", c.Node, err)
	}
	if _, _, ok := qRange(ot); !ok && !ot.IsSmallFloat() || ot != out.DType {
		return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: ot}
	}
	scale, zp, err := quantParams(c)
	if err != nil {
		return err
	}
	q := Div(CastTo(Load(x, Vars(x.Rank())...), ir.Float32), CastTo(scale, ir.Float32))
	if p := c.QuantPrecision(c.In[1].DType); p == ir.Float16 || p == ir.BFloat16 {
		q = CastTo(q, p)
	}
	switch {
	case ot.IsSmallFloat():
		return quantizeSmallFloat(c, q, zp, ot)
	case ot.IsPackedInt():
		c.Emit(storeCodes(out, qSaturate(q, zp, ot)))
	default:
		c.Emit(copyOf(out, qSaturate(q, zp, ot)))
	}
	return nil
}

// quantizeSmallFloat stores q + zero_point (0 when absent: the reference
// adds it all the same, which turns -0 into +0) in float32, rounded into
// small float type ot as Cast rounds.
func quantizeSmallFloat(c *Ctx, q, zp *Expr, ot ir.DType) error {
	saturate, _, err := c.CastOptions()
	if err != nil {
		return fmt.Errorf("%s: %v", c.Node, err)
	}
	z := Const(ir.Float32, 0)
	if zp != nil {
		z = CastTo(zp, ir.Float32)
	}
	code, err := c.EncodeSmallFloat(ot, CastTo(Add(q, z), ir.Float64), saturate, ir.RoundUp)
	if err != nil {
		return err
	}
	c.Emit(storeCodes(c.Out[0], code))
	return nil
}

// defDequantize is y = (x - zero_point) · scale in float32, both operands
// of the subtraction converted to float32 first (as the reference: an
// int32 x loses precision the same way).
func defDequantize(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	if ot := c.DequantizedType(c.In[1].DType); !ot.IsFloat() || ot != out.DType {
		return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: ot}
	}
	scale, zp, err := quantParams(c)
	if err != nil {
		return err
	}
	v := CastTo(c.element(x, Vars(x.Rank())), ir.Float32)
	if zp != nil {
		v = Sub(v, CastTo(zp, ir.Float32))
	}
	v = Mul(v, CastTo(scale, ir.Float32))
	c.Emit(copyOf(out, StoreAs(v, out.DType)))
	return nil
}

// defDynamicQuantize quantizes x to uint8 over its range widened to
// include 0: a reduction finds -min and max (into a scratch pair), then
// scale = (max - min) / 255 and zero point = saturate(round(-min / scale)),
// all in float32 as the reference. A zero range gives scale 0, zero point
// 0 and zeros.
func defDynamicQuantize(c *Ctx) error {
	x := c.In[0]
	all := rvars(x.Rank())
	v := Load(x, all...)
	f := ir.Float32
	zero := Const(f, 0)
	// The range: min(0, x...) and max(0, x...) (NaN propagates).
	rng := c.Temp(f, C(2))
	c.Emit(
		&Kernel{Name: "DynamicQuantizeLinear.min", Out: rng, Store: []*Expr{C(0)}, Value: v,
			Reduce: &Reduce{Op: MinOp, Extents: x.Dims, Post: Min(Acc(f), zero)}},
		&Kernel{Name: "DynamicQuantizeLinear.max", Out: rng, Store: []*Expr{C(1)}, Value: v,
			Reduce: &Reduce{Op: MaxOp, Extents: x.Dims, Post: Max(Acc(f), zero)}},
	)
	lo, hi := Load(rng, C(0)), Load(rng, C(1))
	scale := Div(Sub(hi, lo), Const(f, 255))
	nonzero := Ne(scale, zero)
	zp := Round(Div(Neg(lo), scale))
	zp = Clamp(zp, zero, Const(f, 255))
	y := qSaturate(Div(Load(x, Vars(x.Rank())...), scale), zp, ir.Uint8)
	c.Emit(copyOf(c.Out[0], Select(nonzero, y, IntConst(ir.Uint8, 0))))
	if o := c.Out[1]; o != nil {
		c.Emit(copyOf(o, scale))
	}
	if o := c.Out[2]; o != nil {
		c.Emit(copyOf(o, Select(nonzero, CastTo(zp, ir.Uint8), IntConst(ir.Uint8, 0))))
	}
	return nil
}

// ---- integer and quantized matmuls and convolutions ----

// qParamAt reads input i (a scale or zero point of a quantized matmul or
// convolution) at index idx of the tensor it applies to, of dims xd, laid
// out as ops.QuantParamDims resolves. Where cond (nil: always) is false
// nothing is read: idx may be out of range there.
func qParamAt(c *Ctx, i int, xd []int64, idx []*Expr, cond *Expr) (*Expr, error) {
	b := c.In[i]
	pd, err := paramDims(c, i)
	if err != nil {
		return nil, err
	}
	lay, err := c.QuantParamDims(i, pd, xd)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.Node, err)
	}
	var at []*Expr
	switch {
	case len(lay) == 0: // per tensor
		at = zeros(b.Rank())
	case b.Rank() == len(lay): // as it is, broadcast
		off := len(idx) - len(lay)
		at = make([]*Expr, len(lay))
		for k, d := range lay {
			at[k] = C(0)
			if d != 1 {
				at[k] = idx[off+k]
			}
		}
	default: // a 1-D parameter spread along one axis
		off := len(idx) - len(lay)
		for k, d := range lay {
			if d != 1 {
				at = []*Expr{idx[off+k]}
			}
		}
	}
	if cond != nil && len(lay) > 0 {
		return LoadOr(cond, b, Const(ComputeType(b.DType), 0), at...), nil
	}
	return Load(b, at...), nil
}

// qCentered is input x's element at idx minus its zero point, input zp
// (absent: 0), in int32; where cond (nil: always) is false it is 0 and
// nothing is read (a convolution's padding).
func qCentered(c *Ctx, x, zp int, idx []*Expr, cond *Expr) (*Expr, error) {
	var v *Expr
	if cond != nil {
		v = LoadOr(cond, c.In[x], IntConst(c.In[x].DType, 0), idx...)
	} else {
		v = Load(c.In[x], idx...)
	}
	v = CastTo(v, ir.Int32)
	if c.Input(zp) != nil {
		z, err := qParamAt(c, zp, knownDims(c.In[x]), idx, cond)
		if err != nil {
			return nil, err
		}
		v = Sub(v, CastTo(z, ir.Int32))
	}
	if cond != nil {
		v = Select(cond, v, IntConst(ir.Int32, 0))
	}
	return v, nil
}

// qRescale is the quantized output of an int32 accumulation acc at each
// output point: acc·(s1·s2/s3), the multiplier formed in float32 and
// applied in float64, rounded half to even, plus the output zero point,
// saturated. s1, s2, s3 and zp are input indices (scales and y's zero
// point).
func qRescale(c *Ctx, acc *Expr, s1, s2, s3, zp int) (*Expr, error) {
	out := c.Out[0]
	od := knownDims(out)
	at := Vars(out.Rank())
	var p [4]*Expr
	for k, i := range []int{s1, s2, s3, zp} {
		var err error
		if p[k], err = qParamAt(c, i, od, at, nil); err != nil {
			return nil, err
		}
	}
	f := ir.Float32
	m := Div(Mul(CastTo(p[0], f), CastTo(p[1], f)), CastTo(p[2], f))
	return qSaturate(Mul(CastTo(acc, ir.Float64), CastTo(m, ir.Float64)), p[3], out.DType), nil
}

// qOutType checks that a quantized op's output is a type kiln computes.
func qOutType(c *Ctx) error {
	if _, _, ok := qRange(c.Out[0].DType); !ok {
		return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: c.Out[0].DType}
	}
	return nil
}

// qMatmul is the kernel summing (a - a_zero_point)·(b - b_zero_point) over
// K in int32 for inputs a, b and their zero points at the given indices,
// numpy's matmul broadcasting (a 1-D operand is a row or a column whose
// axis the output drops). post gives the stored value from the sum.
func qMatmul(c *Ctx, ai, azp, bi, bzp int, post func(acc *Expr) (*Expr, error)) error {
	a, b, out := c.In[ai], c.In[bi], c.Out[0]
	ar, br, r := a.Rank(), b.Rank(), out.Rank()
	nb := r // the output's batch rank
	if ar > 1 {
		nb--
	}
	if br > 1 {
		nb--
	}
	batch := out.Dims[:nb]
	k := RVar(0)
	aIdx := []*Expr{k}
	if ar > 1 {
		aIdx = append(Broadcast(&Buffer{Dims: a.Dims[:ar-2]}, batch), Var(nb), k)
	}
	bIdx := []*Expr{k}
	if br > 1 {
		bIdx = append(Broadcast(&Buffer{Dims: b.Dims[:br-2]}, batch), k, Var(r-1))
	}
	av, err := qCentered(c, ai, azp, aIdx, nil)
	if err != nil {
		return err
	}
	bv, err := qCentered(c, bi, bzp, bIdx, nil)
	if err != nil {
		return err
	}
	p, err := post(Acc(ir.Int32))
	if err != nil {
		return err
	}
	red := &Reduce{Op: SumOp, Extents: []*Expr{a.Dims[ar-1]}}
	if p.Op != OpAcc {
		red.Post = p
	}
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: Mul(av, bv), Reduce: red})
	return nil
}

func defMatMulInteger(c *Ctx) error {
	return qMatmul(c, 0, 2, 1, 3, func(acc *Expr) (*Expr, error) { return acc, nil })
}

func defQLinearMatMul(c *Ctx) error {
	if err := qOutType(c); err != nil {
		return err
	}
	return qMatmul(c, 0, 2, 3, 5, func(acc *Expr) (*Expr, error) { return qRescale(c, acc, 1, 4, 6, 7) })
}

// qConv is the kernel summing conv(x - x_zero_point, w - w_zero_point) in
// int32 for inputs x, w and their zero points at the given indices (the
// padding contributes 0), with the window ops.KernelContext.Window
// resolves. post gives the stored value from the sum.
func qConv(c *Ctx, xi, xzp, wi, wzp int, post func(acc *Expr) (*Expr, error)) error {
	x, w, out := c.In[xi], c.In[wi], c.Out[0]
	xd, ok1 := x.Static()
	wd, ok2 := w.Static()
	od, ok3 := out.Static()
	if !ok1 || !ok2 || !ok3 {
		return c.Unsupported("a convolution of dims known only at run time")
	}
	if len(xd) < 3 || len(wd) != len(xd) || len(od) != len(xd) {
		return fmt.Errorf("%s: x %v and w %v are not a convolution's", c.Node, xd, wd)
	}
	win, err := c.Window(wd[2:], xd[2:])
	if err != nil {
		return err
	}
	g := c.Int("group")
	cin, m := xd[1], wd[0]
	if g < 1 || cin%g != 0 || m%g != 0 || wd[1] != cin/g || od[1] != m {
		return fmt.Errorf("%s: group %d does not split x %v and w %v", c.Node, g, xd, wd)
	}
	// Output channel o of group o/(M/g) reads that group's input channels.
	ch := RVar(0)
	if g > 1 {
		ch = Add(Mul(Div(Var(1), C(m/g)), C(cin/g)), RVar(0))
	}
	xIdx := []*Expr{Var(0), ch}
	wIdx := []*Expr{Var(1), RVar(0)}
	extents := []*Expr{C(cin / g)}
	inside := Bool(true)
	for j := range xd[2:] {
		s, d, p, k := win.Strides[j], win.Dilations[j], win.PadBegin[j], wd[2+j]
		pos := Add(Sub(Mul(Var(2+j), C(s)), C(p)), Mul(RVar(1+j), C(d)))
		// Check the bounds only where a tap can fall outside the input.
		if p > 0 {
			inside = And(inside, Ge(pos, C(0)))
		}
		if (od[2+j]-1)*s-p+(k-1)*d >= xd[2+j] {
			inside = And(inside, Lt(pos, C(xd[2+j])))
		}
		xIdx = append(xIdx, pos)
		wIdx = append(wIdx, RVar(1+j))
		extents = append(extents, C(k))
	}
	cond := inside
	if b, ok := inside.IntValue(); ok && b != 0 {
		cond = nil
	}
	xv, err := qCentered(c, xi, xzp, xIdx, cond)
	if err != nil {
		return err
	}
	wv, err := qCentered(c, wi, wzp, wIdx, nil)
	if err != nil {
		return err
	}
	p, err := post(Acc(ir.Int32))
	if err != nil {
		return err
	}
	red := &Reduce{Op: SumOp, Extents: extents}
	if p.Op != OpAcc {
		red.Post = p
	}
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: Mul(xv, wv), Reduce: red})
	return nil
}

func defConvInteger(c *Ctx) error {
	return qConv(c, 0, 2, 1, 3, func(acc *Expr) (*Expr, error) { return acc, nil })
}

// defQLinearConv adds the int32 bias (one per output channel) to the
// accumulation before requantizing, as the reference.
func defQLinearConv(c *Ctx) error {
	if err := qOutType(c); err != nil {
		return err
	}
	return qConv(c, 0, 2, 3, 5, func(acc *Expr) (*Expr, error) {
		if b := c.Input(8); b != nil {
			if bd, ok := b.Static(); !ok || len(bd) != 1 || !sameExtent(b.Dims[0], c.Out[0].Dims[1]) {
				return nil, fmt.Errorf("%s: bias has shape %v, want [%s]", c.Node, knownDims(b), c.Out[0].Dims[1])
			}
			acc = Add(acc, CastTo(Load(b, Var(1)), ir.Int32))
		}
		return qRescale(c, acc, 1, 4, 6, 7)
	})
}

func init() {
	int8s := []ir.DType{ir.Int8, ir.Uint8}
	define(map[string]*OpDef{
		"QuantizeLinear":        {Types: []ir.DType{ir.Float32, ir.Int32, ir.Float16, ir.BFloat16}, Build: defQuantize},
		"DequantizeLinear":      {Types: concat([]ir.DType{ir.Int8, ir.Uint8, ir.Int32, ir.Int16, ir.Uint16}, smallTypes), Build: defDequantize},
		"DynamicQuantizeLinear": {Types: []ir.DType{ir.Float32}, Build: defDynamicQuantize},
		"MatMulInteger":         {Types: int8s, Build: defMatMulInteger},
		"QLinearMatMul":         {Types: int8s, Build: defQLinearMatMul},
		"ConvInteger":           {Types: int8s, Build: defConvInteger},
		"QLinearConv":           {Types: int8s, Build: defQLinearConv},
	})
}
