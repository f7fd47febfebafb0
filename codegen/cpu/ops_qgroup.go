package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Quantized fusion groups (passes/fuse_qdq.go; the INT8 contract,
// /work/notes/int8-contract.md §2). A group's body is the float QDQ
// simulation and its roles say what each body node is; the semantics are
// the body's. This file reads a body by its roles:
//
//   - qconv, qgemm, qmatmul become a qlin (ops_qlinear.go): the integer
//     product with bias, residual, activation and requantization in its
//     store;
//   - qadd and qmul are their body as one kernel-layer map (the float arithmetic of
//     the body itself: u8 in, u8 out, nothing between);
//   - qpool is one kernel-layer reduction summing u8 in int32, requantized
//     once (GlobalAveragePool, AveragePool);
//   - qlut is a 256-entry table of the body's value at every input byte,
//     computed at compile time by the reference kernels, and a lookup.
//
// A group of the right structure that the integer kernels do not take
// (weights known only at run time, asymmetric weights that do not fit s8,
// per-row activation parameters, ...) runs its body as it is, node by node
// through the kernel layer, its intermediate values in the group's scratch:
// correct, and as slow as the float model. A body that does not have the
// structure its kind and roles promise is an error naming the group.

// qParts are a quantized group's nodes by role.
type qParts struct {
	dqIn            []*ir.Node // one, or two for qadd
	dqW, dqB, base  *ir.Node
	bases           int      // how many base nodes (a qlut's chain has several)
	biasAdd         *ir.Node // an Add of the dq-bias (a MatMul has no bias operand)
	dqRes, res, act *ir.Node
	qOut            *ir.Node
}

// qPartsOf sorts a quantized group's body by its roles (which
// ops.GroupOf checked are the kind's).
func qPartsOf(body []*ir.Node, roles []ops.Role) (*qParts, error) {
	var err error
	p := &qParts{}
	for i, n := range body {
		one := func(dst **ir.Node) error {
			if *dst != nil {
				return fmt.Errorf("two body nodes have the role %q", roles[i])
			}
			*dst = n
			return nil
		}
		switch roles[i] {
		case ops.RoleDQInput:
			p.dqIn = append(p.dqIn, n)
		case ops.RoleDQWeight:
			err = one(&p.dqW)
		case ops.RoleDQBias:
			err = one(&p.dqB)
		case ops.RoleBase:
			if p.bases++; p.base == nil {
				p.base = n
			}
		case ops.RoleDQResidual:
			err = one(&p.dqRes)
		case ops.RoleBias:
			err = one(&p.biasAdd)
		case ops.RoleResidual:
			err = one(&p.res)
		case ops.RoleActivation:
			err = one(&p.act)
		case ops.RoleQOutput:
			err = one(&p.qOut)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, n := range append(append([]*ir.Node{}, p.dqIn...), p.dqW, p.dqB, p.dqRes) {
		if n != nil && (n.OpType != "DequantizeLinear" || n.Domain != "") {
			return nil, fmt.Errorf("the dq node %s is not a DequantizeLinear", n)
		}
	}
	if p.qOut == nil || p.qOut.OpType != "QuantizeLinear" || p.qOut.Domain != "" || body[len(body)-1] != p.qOut {
		return nil, fmt.Errorf("the body does not end in its q-output QuantizeLinear")
	}
	if p.base == nil || len(p.dqIn) == 0 {
		return nil, fmt.Errorf("the body has no base or no dq-input")
	}
	return p, nil
}

// prepareQGroup sets up a quantized group's lowering.
func (g *gen) prepareQGroup(fg *ir.Node, kind ops.GroupKind, body []*ir.Node, roles []ops.Role) error {
	p, err := qPartsOf(body, roles)
	if err != nil {
		return err
	}
	if p.bases > 1 && kind != ops.GroupQLut {
		return fmt.Errorf("a %s group with %d base nodes", kind, p.bases)
	}
	var why error
	switch kind {
	case ops.GroupQConv, ops.GroupQGemm, ops.GroupQMatMul:
		var ql *qlin
		if ql, why = g.qlinOfGroup(fg, kind, p); why == nil {
			g.setGroupScratch(fg, g.qlinScratch(ql))
			g.plan(fg).lower = func() error { return g.lowerQLin(ql) }
			return nil
		}
	case ops.GroupQAdd, ops.GroupQMul:
		if len(p.dqIn) != 2 || p.dqW != nil || p.dqB != nil || p.res != nil || p.biasAdd != nil {
			return fmt.Errorf("a %s group is two dq-inputs, a base, an optional activation and a q-output", kind)
		}
		var kern *kernel.Kernel
		if kern, why = g.fusedMap(body, fg.Outputs[0]); why == nil {
			kern.Name = map[ops.GroupKind]string{ops.GroupQAdd: "QAdd", ops.GroupQMul: "QMul"}[kind]
			g.layerKernel(fg, kern)
			return nil
		}
	case ops.GroupQPool:
		if len(p.dqIn) != 1 || p.dqW != nil || p.dqB != nil || p.res != nil || p.act != nil {
			return fmt.Errorf("a qpool group is a dq-input, a pooling base and a q-output")
		}
		var kern *kernel.Kernel
		if kern, why = g.qpoolKernel(fg, p); why == nil {
			g.layerKernel(fg, kern)
			return nil
		}
	case ops.GroupQLut:
		if len(p.dqIn) != 1 || p.dqW != nil || p.dqB != nil || p.dqRes != nil {
			return fmt.Errorf("a qlut group is a dq-input, elementwise float ops and a q-output")
		}
		var kern *kernel.Kernel
		if kern, why = g.qlutKernel(fg, p); why == nil {
			g.layerKernel(fg, kern)
			return nil
		}
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	_ = why // the reason the integer kernels refused: the body runs as it is
	return g.prepareBodyAsIs(fg, body)
}

func init() {
	// What the integer kernels take (the passes ask, QuantizedKernel);
	// a group whose parameters they then refuse still compiles, its body
	// as it is.
	// Each base must be an op whose integer kernel the kind is
	// (ops.Int8Of).
	bases := func(kind ops.GroupKind, body []*ir.Node, roles []ops.Role) bool {
		for i, n := range body {
			if roles[i] == ops.RoleBase && ops.Int8Of(n).Kind != kind {
				return false
			}
		}
		return true
	}
	linear := func(kind ops.GroupKind) func(body []*ir.Node, roles []ops.Role) bool {
		return func(body []*ir.Node, roles []ops.Role) bool {
			for i, n := range body {
				switch {
				case roles[i] != ops.RoleBase:
				case kind == ops.GroupQGemm && n.Attr("transA") != nil && n.Attr("transA").I != 0:
					return false
				case kind == ops.GroupQConv && len(n.Inputs[0].Type.Shape.Dims) > 4:
					return false
				}
			}
			return bases(kind, body, roles)
		}
	}
	quantizedLowerings[ops.GroupQConv] = linear(ops.GroupQConv)
	quantizedLowerings[ops.GroupQGemm] = linear(ops.GroupQGemm)
	quantizedLowerings[ops.GroupQMatMul] = linear(ops.GroupQMatMul)
	any := func([]*ir.Node, []ops.Role) bool { return true }
	quantizedLowerings[ops.GroupQAdd] = any
	quantizedLowerings[ops.GroupQMul] = any
	quantizedLowerings[ops.GroupQLut] = any
	quantizedLowerings[ops.GroupQPool] = func(body []*ir.Node, roles []ops.Role) bool {
		return bases(ops.GroupQPool, body, roles)
	}
}

// setGroupScratch records the scratch a group's lowering needs (plan.go
// reads it for the memory plan).
func (g *gen) setGroupScratch(fg *ir.Node, bytes int64) {
	p := g.plan(fg)
	p.groupScratch, p.hasGroupScratch = bytes, true
}

// layerKernel makes group fg's lowering the one kernel-layer kernel kern.
func (g *gen) layerKernel(fg *ir.Node, kern *kernel.Kernel) {
	p := g.plan(fg)
	p.lower = func() error { g.emitKernel(kern, nil); return nil }
	p.layered = true
}

// ---- reading constants ----

// constFloats returns v's compile-time value as float64s, or nil.
func (g *gen) constFloats(v *ir.Value) []float64 {
	t := g.constOf(v)
	if t == nil {
		return nil
	}
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float64At(i)
	}
	return out
}

// scalarParam reads an optional scalar constant (absent: def); ok is
// false when it is not a compile-time scalar.
func (g *gen) scalarParam(v *ir.Value, def float64) (float64, bool) {
	if v == nil {
		return def, true
	}
	f := g.constFloats(v)
	if len(f) != 1 {
		return 0, false
	}
	return f[0], true
}

// qAct is the output's quantization: scale, zero point, signedness.
type qAct struct {
	scale  float64
	zp     int64
	signed bool
}

// qActOf reads a (De)QuantizeLinear's per-tensor scale and zero point; x
// is its quantized side (the input of a DequantizeLinear, the output of a
// QuantizeLinear), which must be u8 or s8.
func (g *gen) qActOf(n *ir.Node, x *ir.Value) (qAct, error) {
	if d := x.Type.Elem; d != ir.Uint8 && d != ir.Int8 {
		return qAct{}, fmt.Errorf("%s: %s is %s, not uint8 or int8", n, x.Name, d)
	}
	if n.Attr("block_size") != nil && n.Attr("block_size").I != 0 {
		return qAct{}, fmt.Errorf("%s: blocked quantization", n)
	}
	s, ok1 := g.scalarParam(n.Input(1), 0)
	z, ok2 := g.scalarParam(n.Input(2), 0)
	if !ok1 || !ok2 || !(s > 0) || math.IsInf(s, 0) {
		return qAct{}, fmt.Errorf("%s: the scale and zero point must be constant scalars, the scale positive", n)
	}
	if n.Input(1).Type.Elem != ir.Float32 {
		return qAct{}, fmt.Errorf("%s: a %s scale", n, n.Input(1).Type.Elem)
	}
	return qAct{scale: s, zp: int64(z), signed: x.Type.Elem == ir.Int8}, nil
}

// qWeights reads a weight DequantizeLinear over a constant of dims wd:
// the centered s8 weights with the output channel on axis chAxis, and
// each channel's scale.
func (g *gen) qWeights(dq *ir.Node, chAxis int) (w []int8, scales []float64, err error) {
	wt := g.constOf(dq.Inputs[0])
	if wt == nil || wt.DType != ir.Int8 && wt.DType != ir.Uint8 {
		return nil, nil, fmt.Errorf("the weights are not a constant int8 or uint8 tensor")
	}
	wd := wt.Dims
	ch := wd[chAxis]
	sf := g.constFloats(dq.Input(1))
	if sf == nil || dq.Input(1).Type.Elem != ir.Float32 {
		return nil, nil, fmt.Errorf("the weight scale is not a constant float32")
	}
	var zf []float64
	if z := dq.Input(2); z != nil {
		if zf = g.constFloats(z); zf == nil || len(zf) != len(sf) {
			return nil, nil, fmt.Errorf("the weight zero point is not a constant like the scale")
		}
	}
	lay, err := g.attrs(dq).QuantLayout(wd, dimsOf(dq.Input(1)))
	if err != nil {
		return nil, nil, err
	}
	if lay.Block != 0 || lay.Axis >= 0 && lay.Axis != chAxis {
		return nil, nil, fmt.Errorf("weights quantized along axis %d (block %d), not per output channel", lay.Axis, lay.Block)
	}
	inner := ir.Product(wd[chAxis+1:])
	chOf := func(i int) int { return int((int64(i) / inner) % ch) }
	scales = make([]float64, ch)
	zp := make([]int64, ch)
	for c := range scales {
		j := 0
		if lay.Axis >= 0 {
			j = c
		}
		scales[c] = sf[j]
		if !(scales[c] > 0) || math.IsInf(scales[c], 0) {
			return nil, nil, fmt.Errorf("weight scale %g", scales[c])
		}
		if zf != nil {
			zp[c] = int64(zf[j])
		}
	}
	w, err = qCentered(wt, zp, chOf)
	return w, scales, err
}

// transposeKN returns the [N][K] transpose of a row-major [K][N].
func transposeKN(w []int8, K, N int64) []int8 {
	out := make([]int8, len(w))
	for k := int64(0); k < K; k++ {
		for n := int64(0); n < N; n++ {
			out[n*K+k] = w[k*N+n]
		}
	}
	return out
}

// qlinOfGroup reads a qconv, qgemm or qmatmul group; an error says why
// the integer kernels do not take it.
func (g *gen) qlinOfGroup(fg *ir.Node, kind ops.GroupKind, p *qParts) (*qlin, error) {
	if len(p.dqIn) != 1 || p.dqW == nil {
		return nil, fmt.Errorf("want one dq-input and a dq-weight")
	}
	base := p.base
	if ops.Int8Of(base).Kind != kind || base.Domain != "" {
		return nil, fmt.Errorf("a %s group's base is %s", kind, base)
	}
	dqx := p.dqIn[0]
	ql := &qlin{x: dqx.Inputs[0], y: fg.Outputs[0], out: qOutF32}
	xa, err := g.qActOf(dqx, ql.x)
	if err != nil {
		return nil, err
	}
	ql.xSigned, ql.zpX = xa.signed, xa.zp
	if dqx.Outputs[0].Type.Elem != ir.Float32 || base.Inputs[0] != dqx.Outputs[0] || base.Input(1) != p.dqW.Outputs[0] {
		return nil, fmt.Errorf("the base does not read the dq-input and dq-weight as its operands")
	}
	var wScales []float64
	alpha, beta := 1.0, 1.0
	var biasIn *ir.Value // the base's (or bias Add's) bias operand
	switch kind {
	case ops.GroupQConv:
		wd := dimsOf(p.dqW.Inputs[0])
		if ql.cg, err = g.qconvGeom(base, base.Inputs[0], p.dqW.Outputs[0], base.Outputs[0]); err != nil {
			return nil, err
		}
		if ql.w, wScales, err = g.qWeights(p.dqW, 0); err != nil {
			return nil, err
		}
		ql.conv, ql.ch, ql.K = true, wd[0], ir.Product(wd[1:])
		biasIn = base.Input(2)
	case ops.GroupQGemm:
		a := g.attrs(base)
		if a.Int("transA") != 0 {
			return nil, fmt.Errorf("transA")
		}
		alpha, beta = float64(a.Float("alpha")), float64(a.Float("beta"))
		wd := dimsOf(p.dqW.Inputs[0])
		if len(wd) != 2 {
			return nil, fmt.Errorf("B is not 2-D")
		}
		if a.Int("transB") != 0 {
			ql.ch, ql.K = wd[0], wd[1]
			ql.w, wScales, err = g.qWeights(p.dqW, 0)
		} else {
			ql.K, ql.ch = wd[0], wd[1]
			if ql.w, wScales, err = g.qWeights(p.dqW, 1); err == nil {
				ql.w = transposeKN(ql.w, ql.K, ql.ch)
			}
		}
		if err != nil {
			return nil, err
		}
		biasIn = base.Input(2)
		if biasIn != nil && !slices.Equal(dimsOf(biasIn), []int64{ql.ch}) {
			return nil, fmt.Errorf("a bias of shape %v", dimsOf(biasIn))
		}
	case ops.GroupQMatMul:
		wd := dimsOf(p.dqW.Inputs[0])
		if len(wd) != 2 || len(dimsOf(ql.x)) < 1 {
			return nil, fmt.Errorf("B is not 2-D")
		}
		ql.K, ql.ch = wd[0], wd[1]
		if ql.w, wScales, err = g.qWeights(p.dqW, 1); err != nil {
			return nil, err
		}
		ql.w = transposeKN(ql.w, ql.K, ql.ch)
		if xd := dimsOf(ql.x); xd[len(xd)-1] != ql.K {
			return nil, fmt.Errorf("A's last dim is not K")
		}
	}
	v := base.Outputs[0]
	// A bias Add (or a "residual" Add of the dq-bias) adds the bias to a
	// MatMul.
	if p.biasAdd == nil && p.res != nil && p.dqB != nil && slices.Contains(p.res.Inputs, p.dqB.Outputs[0]) {
		p = &qParts{dqIn: p.dqIn, dqW: p.dqW, dqB: p.dqB, base: p.base, biasAdd: p.res, act: p.act, qOut: p.qOut}
	}
	if a := p.biasAdd; a != nil {
		if biasIn != nil || p.dqB == nil || a.OpType != "Add" || a.Domain != "" || len(a.Inputs) != 2 || !slices.Contains(a.Inputs, v) {
			return nil, fmt.Errorf("the bias Add %s does not add the dq-bias to the product", a)
		}
		other := a.Inputs[0]
		if other == v {
			other = a.Inputs[1]
		}
		if other != p.dqB.Outputs[0] || !slices.Equal(dimsOf(other), []int64{ql.ch}) {
			return nil, fmt.Errorf("a bias of shape %v", dimsOf(other))
		}
		biasIn, v = other, a.Outputs[0]
	}
	qo := p.qOut
	ya, err := g.qActOf(qo, qo.Outputs[0])
	if err != nil {
		return nil, err
	}
	ql.ySigned, ql.zpY = ya.signed, ya.zp
	sx, sy := xa.scale, ya.scale
	// Bias: int32 added to the sum when its scale is s_x·s_w (as float32
	// multiplies them), else a float term.
	if biasIn != nil && p.dqB == nil {
		// A float bias the base reads as it is.
		bf := g.constFloats(biasIn)
		if bf == nil || biasIn.Type.Elem != ir.Float32 || int64(len(bf)) != ql.ch {
			return nil, fmt.Errorf("the bias is neither the dq-bias nor a float constant per channel")
		}
		ql.fbias = make([]float32, ql.ch)
		for c := range ql.fbias {
			ql.fbias[c] = float32(beta * float64(float32(bf[c])) / sy)
		}
	} else if biasIn != nil {
		if biasIn != p.dqB.Outputs[0] {
			return nil, fmt.Errorf("the bias is not the dq-bias")
		}
		bt := g.constOf(p.dqB.Inputs[0])
		bs := g.constFloats(p.dqB.Input(1))
		if bt == nil || bt.DType != ir.Int32 || bt.Len() != ql.ch || (len(bs) != 1 && int64(len(bs)) != ql.ch) {
			return nil, fmt.Errorf("the bias is not a constant int32 per channel with a constant scale")
		}
		if z := p.dqB.Input(2); z != nil {
			if zf := g.constFloats(z); zf == nil || slices.ContainsFunc(zf, func(x float64) bool { return x != 0 }) {
				return nil, fmt.Errorf("a bias zero point")
			}
		}
		exact := alpha == 1 && beta == 1
		for c := int64(0); c < ql.ch && exact; c++ {
			s := bs[min(c, int64(len(bs))-1)]
			exact = float32(s) == float32(sx)*float32(wScales[c])
		}
		if exact {
			ql.bias = make([]int32, ql.ch)
			for c := range ql.bias {
				ql.bias[c] = int32(bt.Int64At(c))
			}
		} else {
			ql.fbias = make([]float32, ql.ch)
			for c := range ql.fbias {
				s := bs[min(int64(c), int64(len(bs))-1)]
				ql.fbias[c] = float32(beta * float64(float32(float64(bt.Int64At(c))*s)) / sy)
			}
		}
	}
	ql.mult = make([]float64, ql.ch)
	for c := range ql.mult {
		ql.mult[c] = alpha * sx * wScales[c] / sy
	}
	// Residual: a u8/s8 tensor of the output's shape, dequantized.
	if p.res != nil {
		if p.dqRes == nil || p.res.OpType != "Add" || p.res.Domain != "" {
			return nil, fmt.Errorf("the residual is not an Add of a dq-residual")
		}
		r := residual(p.res, v)
		if r == nil || r != p.dqRes.Outputs[0] {
			return nil, fmt.Errorf("the residual Add does not add the dq-residual to the product")
		}
		ra, err := g.qActOf(p.dqRes, p.dqRes.Inputs[0])
		if err != nil {
			return nil, err
		}
		if !slices.Equal(dimsOf(p.dqRes.Inputs[0]), dimsOf(ql.y)) {
			return nil, fmt.Errorf("a broadcast residual")
		}
		ql.res, ql.resSigned, ql.resZp, ql.resMult = p.dqRes.Inputs[0], ra.signed, ra.zp, float32(ra.scale/sy)
		v = p.res.Outputs[0]
	} else if p.dqRes != nil {
		return nil, fmt.Errorf("a dq-residual without a residual Add")
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if a := p.act; a != nil {
		if a.Input(0) != v || !g.storeActivation(a) {
			return nil, fmt.Errorf("the activation %s is not a clamp of the product", a)
		}
		if a.OpType == "Relu" {
			lo = 0
		} else if lo, hi, err = clipBounds(g, a); err != nil {
			return nil, err
		}
		v = a.Outputs[0]
	}
	if qo.Inputs[0] != v || qo.Outputs[0].Type.Elem != ql.y.Type.Elem {
		return nil, fmt.Errorf("the q-output does not quantize the product")
	}
	ql.qBounds(lo, hi, sy)
	if ql.conv && !slices.Equal(dimsOf(ql.y), dimsOf(base.Outputs[0])) {
		return nil, fmt.Errorf("output shape")
	}
	return ql, nil
}

// ---- qpool, qlut ----

// qpoolKernel is one reduction: the window's bytes summed in int32 (the
// padding adds zp, that is nothing), then (sum - n·zp)·s_x/(count·s_y)
// requantized.
func (g *gen) qpoolKernel(fg *ir.Node, p *qParts) (*kernel.Kernel, error) {
	dq, base, qo := p.dqIn[0], p.base, p.qOut
	x, y := dq.Inputs[0], fg.Outputs[0]
	xa, err := g.qActOf(dq, x)
	if err != nil {
		return nil, err
	}
	ya, err := g.qActOf(qo, y)
	if err != nil {
		return nil, err
	}
	if base.Inputs[0] != dq.Outputs[0] || qo.Inputs[0] != base.Outputs[0] || len(dimsOf(x)) < 3 {
		return nil, fmt.Errorf("the pool does not read the dq-input or the q-output the pool")
	}
	xd := dimsOf(x)
	xb, yb := g.buffer(x), g.buffer(y)
	var value, count *kernel.Expr
	var extents []*kernel.Expr
	zp := kernel.IntConst(ir.Int32, xa.zp)
	load := func(idx ...*kernel.Expr) *kernel.Expr {
		return kernel.CastTo(kernel.Load(xb, idx...), ir.Int32)
	}
	switch base.OpType {
	case "GlobalAveragePool":
		sp := xd[2:]
		idx := []*kernel.Expr{kernel.Var(0), kernel.Var(1)}
		for a := range sp {
			idx = append(idx, kernel.RVar(a))
		}
		value, extents = kernel.Sub(load(idx...), zp), kernel.Ints(sp...)
		count = kernel.Const(ir.Float32, float64(ir.Product(sp)))
	case "AveragePool":
		a := g.attrs(base)
		ks := a.Ints("kernel_shape")
		win, err := a.Window(ks, xd[2:])
		if err != nil {
			return nil, err
		}
		includePad := base.Attr("count_include_pad") != nil && a.Int("count_include_pad") != 0
		idx := []*kernel.Expr{kernel.Var(0), kernel.Var(1)}
		inside := kernel.Bool(true)
		for ax, k := range win.Kernel {
			pos := kernel.Sub(kernel.Add(kernel.Mul(kernel.Var(2+ax), kernel.C(win.Strides[ax])), kernel.Mul(kernel.RVar(ax), kernel.C(win.Dilations[ax]))), kernel.C(win.PadBegin[ax]))
			inside = kernel.And(inside, kernel.And(kernel.Ge(pos, kernel.C(0)), kernel.Lt(pos, kernel.C(xd[2+ax]))))
			idx = append(idx, pos)
			_ = k
		}
		v := kernel.CastTo(kernel.LoadOr(inside, xb, kernel.IntConst(x.Type.Elem, xa.zp), idx...), ir.Int32)
		value, extents = kernel.Sub(v, zp), kernel.Ints(win.Kernel...)
		counts := ops.AveragePoolCounts(win, xd[2:], includePad)
		count = kernel.Const(ir.Float32, 1)
		for ax, cs := range counts {
			f := make([]float32, len(cs))
			for i, c := range cs {
				f[i] = float32(c)
			}
			tab := &kernel.Buffer{Name: fmt.Sprintf("%s.count%d", fg.Name, ax), DType: ir.Float32, Dims: kernel.Ints(int64(len(f))), ID: -1,
				Data: ir.FromSlice(ir.Float32, []int64{int64(len(f))}, f)}
			count = kernel.Mul(count, kernel.Load(tab, kernel.Var(2+ax)))
		}
	default:
		return nil, fmt.Errorf("a %s pool", base.OpType)
	}
	f := kernel.Mul(kernel.CastTo(kernel.Acc(ir.Int32), ir.Float32), kernel.Const(ir.Float32, xa.scale/ya.scale))
	post := qSaturateExpr(kernel.Div(f, count), ya)
	return &kernel.Kernel{Name: "QPool", Out: yb, Space: yb.Dims, Value: value,
		Reduce: &kernel.Reduce{Op: kernel.SumOp, Extents: extents, Post: post}}, nil
}

// qSaturateExpr rounds v half to even, adds the zero point and saturates
// to the output type.
func qSaturateExpr(v *kernel.Expr, a qAct) *kernel.Expr {
	lo, hi := 0.0, 255.0
	d := ir.Uint8
	if a.signed {
		lo, hi, d = -128, 127, ir.Int8
	}
	r := kernel.Add(kernel.Round(v), kernel.Const(ir.Float32, float64(a.zp)))
	return kernel.CastTo(kernel.Clamp(r, kernel.Const(ir.Float32, lo), kernel.Const(ir.Float32, hi)), d)
}

// qlutKernel tabulates the body at each of the 256 input bytes (the
// reference kernels compute it, so the table is the body's semantics
// exactly) and looks the input up.
func (g *gen) qlutKernel(fg *ir.Node, p *qParts) (*kernel.Kernel, error) {
	dq := p.dqIn[0]
	x, y := dq.Inputs[0], fg.Outputs[0]
	if d := x.Type.Elem; d != ir.Uint8 && d != ir.Int8 {
		return nil, fmt.Errorf("a %s input", d)
	}
	if len(fg.Inputs) == 0 || fg.Inputs[0] != x {
		return nil, fmt.Errorf("the group's first input is not the dq-input's")
	}
	// Every other input must be a constant (scales, zero points, the
	// body's float constants); the body must be elementwise over x.
	var all *ir.Tensor
	if x.Type.Elem == ir.Int8 {
		b := make([]int8, 256)
		for i := range b {
			b[i] = int8(i - 128)
		}
		all = ir.FromSlice(ir.Int8, []int64{256}, b)
	} else {
		b := make([]uint8, 256)
		for i := range b {
			b[i] = uint8(i)
		}
		all = ir.FromSlice(ir.Uint8, []int64{256}, b)
	}
	in := []*ir.Tensor{all}
	for _, v := range fg.Inputs[1:] {
		t := g.constOf(v)
		if t == nil {
			return nil, fmt.Errorf("input %s is not constant", v.Name)
		}
		in = append(in, t)
	}
	for _, n := range fg.Attr("body").G.Nodes {
		if n.Domain != "" || !(kernel.Fusible(n) || n.OpType == "QuantizeLinear" || n.OpType == "DequantizeLinear") {
			return nil, fmt.Errorf("%s is not elementwise", n)
		}
	}
	s, err := g.opsets.Schema(fg)
	if err != nil {
		return nil, err
	}
	kc := ops.NewKernelContext(s, fg, g.opsets[fg.Domain], in)
	kc.Opsets = g.opsets
	if err := s.Run(kc); err != nil {
		return nil, err
	}
	tab := kc.Outputs[0]
	if tab == nil || tab.Len() != 256 || tab.DType != y.Type.Elem {
		return nil, fmt.Errorf("the body does not map 256 bytes to 256 %s", y.Type.Elem)
	}
	tb := &kernel.Buffer{Name: fg.Name + ".lut", DType: tab.DType, Dims: kernel.Ints(256), ID: -1, Data: tab}
	xb, yb := g.buffer(x), g.buffer(y)
	idx := kernel.CastTo(kernel.Load(xb, kernel.Vars(xb.Rank())...), ir.Int64)
	if x.Type.Elem == ir.Int8 {
		idx = kernel.Add(idx, kernel.C(128))
	}
	return &kernel.Kernel{Name: "QLut", Out: yb, Space: yb.Dims, Value: kernel.Load(tb, idx)}, nil
}

// ---- the body as it is ----

// prepareBodyAsIs lowers a group's body node by node through the kernel
// layer: each node's kernels, the body's inner values (and the nodes'
// own temporaries) in the group's scratch, the last node writing the
// group's output.
func (g *gen) prepareBodyAsIs(fg *ir.Node, body []*ir.Node) error {
	out := fg.Attr("body").G.Outputs[0]
	for _, v := range append(append([]*ir.Value{}, fg.Inputs...), fg.Outputs...) {
		if _, ok := g.symShapes[v]; ok {
			return fmt.Errorf("the integer kernels do not take this group and its body has dynamic dims (pin them with cc build --shape)")
		}
	}
	inner := map[*ir.Value]*kernel.Buffer{}
	temps := map[*kernel.Buffer]int64{}
	var scratch int64
	place := func(b *kernel.Buffer) {
		temps[b] = scratch
		scratch += align64(g.tempBytes(b))
	}
	bufOf := func(v *ir.Value) *kernel.Buffer {
		if v == nil {
			return nil
		}
		if v == out {
			return g.buffer(fg.Outputs[0])
		}
		if b, ok := inner[v]; ok {
			return b
		}
		return g.buffer(v)
	}
	var kernels []*kernel.Kernel
	for _, n := range body {
		for _, o := range n.Outputs {
			if o != nil && o != out {
				b := &kernel.Buffer{Name: o.Name, DType: o.Type.Elem, Dims: kernel.Ints(dimsOf(o)...), ID: -1}
				inner[o] = b
				place(b)
			}
		}
		ins := make([]*kernel.Buffer, len(n.Inputs))
		consts := make([]*ir.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			ins[i] = bufOf(v)
			if _, ok := inner[v]; !ok {
				consts[i] = g.constOf(v)
			}
		}
		outs := make([]*kernel.Buffer, len(n.Outputs))
		for i, v := range n.Outputs {
			outs[i] = bufOf(v)
		}
		c, err := kernel.NewCtx(n, g.opsets, ins, outs, consts)
		if err != nil {
			return err
		}
		if err := kernel.Build(c); err != nil {
			return err
		}
		for _, t := range c.Temps {
			place(t)
		}
		kernels = append(kernels, c.Kernels...)
	}
	g.setGroupScratch(fg, scratch)
	p := g.plan(fg)
	p.layered = true
	p.lower = func() error {
		for _, kern := range kernels {
			g.emitKernel(kern, temps)
		}
		return nil
	}
	return nil
}
