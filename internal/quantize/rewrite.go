package quantize

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// rewrite turns p's graph into ONNX's QDQ form with the activation
// parameters given per root tensor (plan.root). It returns warnings: biases
// that saturated int32.
func (p *plan) rewrite(params map[*ir.Value]actParams) ([]string, error) {
	g := p.g
	p.names = g.Namer()
	var warnings []string
	paramsOf := func(v *ir.Value) actParams { return params[p.root(v)] }
	type weightKey struct {
		w    *ir.Value
		axis int
	}
	weights := map[weightKey]*ir.Value{}
	for _, n := range p.units {
		axis, ok := p.weightAxis[n]
		if !ok {
			continue
		}
		w := n.Inputs[1]
		if err := finite(w, n); err != nil {
			return nil, err
		}
		dq := weights[weightKey{w, axis}]
		var scales []float32
		if dq == nil {
			var q *ir.Tensor
			q, scales = weightParams(w.Const, axis)
			dq = p.dequantize(w.Name, q, scales, axis, true)
			weights[weightKey{w, axis}] = dq
		} else {
			scales = ir.Data[float32](dq.Producer.Inputs[1].Const)
		}
		n.Inputs[1] = dq
		b := n.Input(2)
		if b == nil || b.Const == nil || b.Const.DType != ir.Float32 || !biasFits(n, b, len(scales), axis) {
			continue
		}
		if err := finite(b, n); err != nil {
			return nil, err
		}
		q, bs, clipped := biasParams(b.Const, paramsOf(n.Inputs[0]).scale, scales)
		if clipped {
			warnings = append(warnings, fmt.Sprintf("%s: its bias %q saturates int32 at scale input·weight (a bias far larger than the products it is added to)", n, b.Name))
		}
		bAxis := -1
		if len(bs) > 1 {
			bAxis = len(b.Const.Dims) - 1
		}
		n.Inputs[2] = p.dequantize(b.Name, q, bs, bAxis, false)
	}
	inputs := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		inputs[v] = true
	}
	for _, v := range p.acts {
		p.pair(v, paramsOf(v), inputs[v])
	}
	if err := g.TopoSort(); err != nil {
		return nil, err
	}
	return warnings, nil
}

// finite fails when initializer v (an input of n) holds NaN or ±Inf.
func finite(v *ir.Value, n *ir.Node) error {
	for _, x := range ir.Data[float32](v.Const) {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%s: initializer %q holds %v, which no scale quantizes", n, v.Name, x)
		}
	}
	return nil
}

// biasFits reports whether bias b of unit n has one element per output
// channel (channels of them; or any shape per tensor) and n adds it as it
// is: Conv's B, or Gemm's C of [N] or [1,N] with alpha and beta 1.
func biasFits(n *ir.Node, b *ir.Value, channels, axis int) bool {
	dims := b.Const.Dims
	switch n.OpType {
	case "Conv":
		return len(dims) == 1 && (axis < 0 || dims[0] == int64(channels))
	case "Gemm":
		for _, name := range []string{"alpha", "beta"} {
			if a := n.Attr(name); a != nil && a.F != 1 {
				return false
			}
		}
		n := dims[len(dims)-1]
		return (len(dims) == 1 || len(dims) == 2 && dims[0] == 1) && (axis < 0 || n == int64(channels))
	}
	return false
}

// dequantize adds initializers for quantized constant q and its scales
// (per slice of axis, or one when axis < 0) and a DequantizeLinear of
// them, and returns its output. zeroPoint adds q's type's zeros as the
// zero point (weights; a bias's int32 has none, as ONNX Runtime writes).
func (p *plan) dequantize(base string, q *ir.Tensor, scales []float32, axis int, zeroPoint bool) *ir.Value {
	g := p.g
	qv := g.AddInitializer(p.names.Unique(base+"_quantized"), q)
	var s, z *ir.Tensor
	if axis < 0 {
		s = ir.Scalar(ir.Float32, scales[0])
		z = ir.NewTensor(q.DType)
	} else {
		s = ir.FromSlice(ir.Float32, []int64{int64(len(scales))}, slices.Clone(scales))
		z = ir.NewTensor(q.DType, int64(len(scales)))
	}
	in := []*ir.Value{qv, g.AddInitializer(p.names.Unique(base+"_scale"), s)}
	if zeroPoint {
		in = append(in, g.AddInitializer(p.names.Unique(base+"_zero_point"), z))
	}
	var attrs []*ir.Attribute
	if axis >= 0 {
		attrs = append(attrs, ir.AttrI("axis", int64(axis)))
	}
	return p.node("DequantizeLinear", base, in, attrs, ir.TensorType(ir.Float32, q.Shape()), base+"_dequantized")
}

// node appends a one-output node named base_OP with an output of type t.
func (p *plan) node(op, base string, in []*ir.Value, attrs []*ir.Attribute, t ir.Type, out string) *ir.Value {
	g := p.g
	n := &ir.Node{Name: p.names.Unique(base + "_" + op), OpType: op, Inputs: in, Attrs: attrs}
	g.Nodes = append(g.Nodes, n)
	v := &ir.Value{Name: p.names.Unique(out), Type: t, Producer: n}
	n.Outputs = []*ir.Value{v}
	return v
}

// pair puts QuantizeLinear → DequantizeLinear after v with parameters ap
// and makes every reader of v read the DequantizeLinear's output. A graph
// output keeps its name, which moves to the DequantizeLinear's output
// (a graph input that is also an output stays one).
func (p *plan) pair(v *ir.Value, ap actParams, isInput bool) {
	g := p.g
	var outputs []int
	for i, o := range g.Outputs {
		if o == v {
			outputs = append(outputs, i)
		}
	}
	base := v.Name
	s := g.AddInitializer(p.names.Unique(base+"_scale"), ir.Scalar(ir.Float32, ap.scale))
	z := g.AddInitializer(p.names.Unique(base+"_zero_point"), ir.Scalar(ir.Uint8, ap.zp))
	// The DequantizeLinear's output, made before the QuantizeLinear so
	// that the readers it takes over are v's readers only.
	dq := &ir.Value{Name: p.names.Unique(base + "_dequantized"), Type: v.Type.Clone()}
	g.ReplaceUses(v, dq)
	qt := v.Type.Clone()
	qt.Elem = ir.Uint8
	q := p.node("QuantizeLinear", base, []*ir.Value{v, s, z}, nil, qt, base+"_quantized")
	n := &ir.Node{Name: p.names.Unique(base + "_DequantizeLinear"), OpType: "DequantizeLinear", Inputs: []*ir.Value{q, s, z}, Outputs: []*ir.Value{dq}}
	dq.Producer = n
	g.Nodes = append(g.Nodes, n)
	if len(outputs) == 0 {
		return
	}
	if isInput {
		for _, i := range outputs {
			g.Outputs[i] = v
		}
		return
	}
	v.Name = p.names.Unique(base + "_float")
	dq.Name = base
}
