package passes

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// convBNPass folds an inference-mode BatchNormalization into the Conv that
// feeds it: with s = scale / sqrt(var + eps) per output channel,
// W' = W·s and B' = (B − mean)·s + bias. The Conv takes over the BN's output
// value, so readers need no rewriting.
func convBNPass(_ *Context, m *ir.Model) error {
	g := m.Graph
	names := g.Namer()
	uses := g.Uses()
	isOutput := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		isOutput[v] = true
	}
	dead := map[*ir.Node]bool{}
	for _, bn := range g.Nodes {
		if bn.OpType != "BatchNormalization" || bn.Domain != "" || len(bn.Outputs) != 1 {
			continue
		}
		conv := bn.Inputs[0].Producer
		if conv == nil || conv.OpType != "Conv" || conv.Domain != "" || dead[conv] ||
			len(uses[bn.Inputs[0]]) != 1 || isOutput[bn.Inputs[0]] {
			continue
		}
		if t := bn.Attr("training_mode"); t != nil && t.I != 0 {
			continue
		}
		w := conv.Input(1)
		params := bn.Inputs[1:]
		if w == nil || len(params) != 4 || !allConst(params) {
			continue
		}
		bias, ok := biasValues(conv.Input(2))
		if !ok {
			continue
		}
		eps := float32(1e-5)
		if a := bn.Attr("epsilon"); a != nil {
			eps = a.F
		}
		var wv, bv *ir.Value
		switch {
		case w.Const != nil && w.Const.DType == ir.Float32:
			newW, newB, ok := foldBN(w.Const, bias, params, eps)
			if !ok {
				continue
			}
			wv = g.AddInitializer(names.Unique(w.Name+"_bn"), newW)
			bv = g.AddInitializer(names.Unique(bn.Outputs[0].Name+"_bias"), newB)
		case len(uses[w]) == 1 && !isOutput[w]:
			newB, ok := foldBNQuantized(g, names, w.Producer, bias, params, eps)
			if !ok {
				continue
			}
			wv = w
			bv = g.AddInitializer(names.Unique(bn.Outputs[0].Name+"_bias"), newB)
		default:
			continue
		}
		conv.Inputs = []*ir.Value{conv.Inputs[0], wv, bv}
		out := bn.Outputs[0]
		out.Producer = conv
		conv.Outputs[0] = out
		dead[bn] = true
	}
	var kept []*ir.Node
	for _, n := range g.Nodes {
		if !dead[n] {
			kept = append(kept, n)
		}
	}
	g.Nodes = kept
	return nil
}

func allConst(vs []*ir.Value) bool {
	for _, v := range vs {
		if v == nil || v.Const == nil {
			return false
		}
	}
	return true
}

// biasValues returns a Conv bias's values: a float constant's, or an int32
// constant's dequantization (a quantized model's); nil for no bias.
func biasValues(b *ir.Value) ([]float64, bool) {
	switch {
	case b == nil:
		return nil, true
	case b.Const != nil && b.Const.DType == ir.Float32:
		return ops.Float64s(b.Const), true
	}
	dq := b.Producer
	if dq == nil || dq.OpType != "DequantizeLinear" || dq.Domain != "" || !allConst(dq.Inputs[:2]) || dq.Input(2) != nil && dq.Input(2).Const == nil {
		return nil, false
	}
	q, s := ops.Float64s(dq.Inputs[0].Const), ops.Float64s(dq.Inputs[1].Const)
	var z []float64
	if dq.Input(2) != nil {
		z = ops.Float64s(dq.Inputs[2].Const)
	}
	if dq.Inputs[0].Const.DType != ir.Int32 || len(q) == 0 || len(s) != 1 && len(s) != len(q) || z != nil && len(z) != len(s) {
		return nil, false
	}
	out := make([]float64, len(q))
	for i := range q {
		k := min(i, len(s)-1)
		zp := 0.0
		if z != nil {
			zp = z[k]
		}
		out[i] = float64(float32(q[i]-zp) * float32(s[k]))
	}
	return out, true
}

// bnFactors returns, per output channel, the factor scale/sqrt(var+eps)
// a BN multiplies by and the new bias (b−mean)·factor + shift.
func bnFactors(oc int64, bias []float64, params []*ir.Value, eps float32) (factor, newB []float64, ok bool) {
	scale, shift, mean, variance := ops.Float64s(params[0].Const), ops.Float64s(params[1].Const), ops.Float64s(params[2].Const), ops.Float64s(params[3].Const)
	for _, p := range [][]float64{scale, shift, mean, variance} {
		if int64(len(p)) != oc {
			return nil, nil, false
		}
	}
	b := bias
	if b == nil {
		b = make([]float64, oc)
	}
	if int64(len(b)) != oc {
		return nil, nil, false
	}
	factor, newB = make([]float64, oc), make([]float64, oc)
	for c := range oc {
		factor[c] = scale[c] / math.Sqrt(variance[c]+float64(eps))
		newB[c] = (b[c]-mean[c])*factor[c] + shift[c]
	}
	return factor, newB, true
}

// foldBN returns the scaled weights and the new bias, in float64 then
// rounded once to float32.
func foldBN(w *ir.Tensor, bias []float64, params []*ir.Value, eps float32) (*ir.Tensor, *ir.Tensor, bool) {
	oc := w.Dims[0]
	factor, newB, ok := bnFactors(oc, bias, params, eps)
	if !ok {
		return nil, nil, false
	}
	wd := ops.Float64s(w)
	per := int64(len(wd)) / oc
	for c := range oc {
		for i := c * per; i < (c+1)*per; i++ {
			wd[i] *= factor[c]
		}
	}
	return ops.FromFloat64s(ir.Float32, w.Dims, wd), ops.FromFloat64s(ir.Float32, []int64{oc}, newB), true
}

// foldBNQuantized folds a BN into weights dequantized by dq (int8
// constants with zero point 0, per tensor or per output channel, as
// quantization-aware training exports them): each channel's scale is
// multiplied by |factor|, and a negative factor negates the channel's int8
// values (refused where one is -128). dq, read only by the Conv, is
// rewritten in place, its new constants named by names; it returns the
// new float bias.
func foldBNQuantized(g *ir.Graph, names *ir.Namer, dq *ir.Node, bias []float64, params []*ir.Value, eps float32) (*ir.Tensor, bool) {
	if dq == nil || dq.OpType != "DequantizeLinear" || dq.Domain != "" || !allConst(dq.Inputs[:2]) || attrInt(dq, "block_size", 0) != 0 {
		return nil, false
	}
	wq, sw := dq.Inputs[0].Const, dq.Inputs[1].Const
	if wq.DType != ir.Int8 || len(wq.Dims) < 3 || sw.DType != ir.Float32 {
		return nil, false
	}
	oc := wq.Dims[0]
	if axis := attrInt(dq, "axis", 1); sw.Len() != 1 && (len(sw.Dims) != 1 || sw.Dims[0] != oc || axis != 0 && axis != -int64(len(wq.Dims))) {
		return nil, false
	}
	if z := dq.Input(2); z != nil {
		if z.Const == nil {
			return nil, false
		}
		for i := range int(z.Const.Len()) {
			if z.Const.Int64At(i) != 0 {
				return nil, false
			}
		}
	}
	factor, newB, ok := bnFactors(oc, bias, params, eps)
	if !ok {
		return nil, false
	}
	q := ir.Data[int8](wq.Clone())
	scales := make([]float32, oc)
	per := int64(len(q)) / oc
	for c := range oc {
		s := sw.Float32s()[min(c, sw.Len()-1)] * float32(math.Abs(factor[c]))
		if !(s > 0 && s <= math.MaxFloat32) {
			return nil, false
		}
		scales[c] = s
		if factor[c] < 0 {
			for i := c * per; i < (c+1)*per; i++ {
				if q[i] == math.MinInt8 {
					return nil, false
				}
				q[i] = -q[i]
			}
		}
	}
	w := dq.Inputs[0]
	dq.Inputs = []*ir.Value{
		g.AddInitializer(names.Unique(w.Name+"_bn"), ir.FromSlice(ir.Int8, wq.Dims, q)),
		g.AddInitializer(names.Unique(dq.Inputs[1].Name+"_bn"), ir.FromSlice(ir.Float32, []int64{oc}, scales)),
	}
	dq.SetAttr(ir.AttrI("axis", 0))
	return ops.FromFloat64s(ir.Float32, []int64{oc}, newB), true
}
