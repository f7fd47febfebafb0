package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// The ONNX integer ops QLinearConv, ConvInteger, QLinearMatMul and
// MatMulInteger run on the int8 kernels (ops_qlinear.go) when their
// weights are constant and their activation parameters per tensor; the
// rest (weights known at run time, per-row zero points, weights minus
// zero point outside s8, batched B) goes to the kernel layer's definitions
// (handInfo). QLinear ops requantize in float64 with the multiplier
// formed in float32, as the reference does: bit for bit the same.

func init() {
	t := []ir.DType{ir.Uint8, ir.Int8}
	row := func() *opInfo {
		return &opInfo{types: t,
			check: func(g *gen, n *ir.Node) error { _, err := g.qlinOfOp(n); return err },
			scratch: func(g *gen, n *ir.Node) int64 {
				ql, err := g.qlinOfOp(n)
				if err != nil {
					return 0
				}
				return g.qlinScratch(ql)
			},
			lower: func(g *gen, n *ir.Node) error {
				ql, err := g.qlinOfOp(n)
				if err != nil {
					return err
				}
				return g.lowerQLin(ql)
			}}
	}
	register(map[string]*opInfo{"QLinearConv": row(), "ConvInteger": row(), "QLinearMatMul": row(), "MatMulInteger": row()})
}

// qlinOfOp reads an ONNX integer op (once per node).
func (g *gen) qlinOfOp(n *ir.Node) (*qlin, error) {
	if ql := g.plan(n).qop; ql != nil {
		return ql, nil
	}
	ql, err := g.readQOp(n)
	if err != nil {
		return nil, err
	}
	g.plan(n).qop = ql
	return ql, nil
}

// qopInputs are an integer op's inputs by part (nil: absent).
type qopInputs struct {
	x, xScale, xZp, w, wScale, wZp, yScale, yZp, bias *ir.Value
}

func (g *gen) readQOp(n *ir.Node) (*qlin, error) {
	var in qopInputs
	conv := false
	switch n.OpType {
	case "QLinearConv":
		conv = true
		fallthrough
	case "QLinearMatMul":
		in = qopInputs{n.Inputs[0], n.Input(1), n.Input(2), n.Input(3), n.Input(4), n.Input(5), n.Input(6), n.Input(7), n.Input(8)}
	case "ConvInteger":
		conv = true
		fallthrough
	case "MatMulInteger":
		in = qopInputs{x: n.Inputs[0], w: n.Input(1), xZp: n.Input(2), wZp: n.Input(3)}
	default:
		return nil, fmt.Errorf("not an integer op")
	}
	y := n.Outputs[0]
	ql := &qlin{x: in.x, y: y, conv: conv, xSigned: in.x.Type.Elem == ir.Int8}
	wt := g.constOf(in.w)
	if wt == nil || wt.DType != ir.Int8 && wt.DType != ir.Uint8 {
		return nil, fmt.Errorf("the weights are not constant 8-bit integers")
	}
	zpX, ok := g.scalarParam(in.xZp, 0)
	if !ok {
		return nil, fmt.Errorf("the input's zero point is not a constant scalar")
	}
	ql.zpX = int64(zpX)
	// Output channels and the weights' channel of each element.
	var chOf func(i int) int
	if conv {
		var err error
		if ql.cg, err = g.qconvGeom(n, in.x, in.w, y); err != nil {
			return nil, err
		}
		ql.ch, ql.K = wt.Dims[0], ir.Product(wt.Dims[1:])
		chOf = func(i int) int { return i / int(ql.K) }
	} else {
		if len(wt.Dims) != 2 || len(dimsOf(in.x)) < 1 {
			return nil, fmt.Errorf("B is not 2-D")
		}
		ql.K, ql.ch = wt.Dims[0], wt.Dims[1]
		if xd := dimsOf(in.x); xd[len(xd)-1] != ql.K {
			return nil, fmt.Errorf("A's last dim is not K")
		}
		chOf = func(i int) int { return i % int(ql.ch) }
	}
	perChannel := func(v *ir.Value, what string) ([]float64, error) {
		if v == nil {
			return nil, nil
		}
		f := g.constFloats(v)
		switch {
		case f == nil:
			return nil, fmt.Errorf("%s is not constant", what)
		case len(f) == 1:
			out := make([]float64, ql.ch)
			for i := range out {
				out[i] = f[0]
			}
			return out, nil
		case int64(len(f)) == ql.ch && len(dimsOf(v)) == 1:
			return f, nil
		}
		return nil, fmt.Errorf("%s has %d values for %d channels", what, len(f), ql.ch)
	}
	wzp, err := perChannel(in.wZp, "the weights' zero point")
	if err != nil {
		return nil, err
	}
	var zp []int64
	if wzp != nil {
		zp = make([]int64, ql.ch)
		for i, v := range wzp {
			zp[i] = int64(v)
		}
	}
	w, err := qCentered(wt, zp, chOf)
	if err != nil {
		return nil, err
	}
	if !conv {
		w = transposeKN(w, ql.K, ql.ch)
	}
	ql.w = w
	if n.OpType == "ConvInteger" || n.OpType == "MatMulInteger" {
		if y.Type.Elem != ir.Int32 {
			return nil, fmt.Errorf("a %s output", y.Type.Elem)
		}
		ql.out = qOutInt32
		return ql, nil
	}
	// QLinear: the reference's multiplier, float32(float32(s_x·s_w)/s_y).
	ql.out = qOutF64
	sx, ok1 := g.scalarParam(in.xScale, 0)
	sy, ok2 := g.scalarParam(in.yScale, 0)
	zpY, ok3 := g.scalarParam(in.yZp, 0)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("the input's or output's scale or zero point is not a constant scalar")
	}
	sw, err := perChannel(in.wScale, "the weights' scale")
	if err != nil || sw == nil {
		return nil, fmt.Errorf("the weights' scale: %v", err)
	}
	if d := y.Type.Elem; d != ir.Uint8 && d != ir.Int8 {
		return nil, fmt.Errorf("a %s output", d)
	}
	ql.ySigned, ql.zpY = y.Type.Elem == ir.Int8, int64(zpY)
	ql.mult = make([]float64, ql.ch)
	for c := range ql.mult {
		m := float32(float32(sx)*float32(sw[c])) / float32(sy)
		if math.IsNaN(float64(m)) || math.IsInf(float64(m), 0) {
			return nil, fmt.Errorf("the multiplier s_x·s_w/s_y is %v", m)
		}
		ql.mult[c] = float64(m)
	}
	if in.bias != nil {
		bt := g.constOf(in.bias)
		if bt == nil || bt.DType != ir.Int32 || bt.Len() != ql.ch {
			return nil, fmt.Errorf("the bias is not a constant int32 per channel")
		}
		ql.bias = make([]int32, ql.ch)
		for c := range ql.bias {
			ql.bias[c] = int32(bt.Int64At(c))
		}
	}
	ql.qBounds(math.Inf(-1), math.Inf(1), 1)
	return ql, nil
}
