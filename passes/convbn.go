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
		if w == nil || w.Const == nil || w.Const.DType != ir.Float32 || len(params) != 4 || !allConst(params) {
			continue
		}
		if b := conv.Input(2); b != nil && b.Const == nil {
			continue
		}
		eps := float32(1e-5)
		if a := bn.Attr("epsilon"); a != nil {
			eps = a.F
		}
		newW, newB, ok := foldBN(w.Const, conv.Input(2), params, eps)
		if !ok {
			continue
		}
		wv := g.AddInitializer(g.UniqueName(w.Name+"_bn"), newW)
		bv := g.AddInitializer(g.UniqueName(bn.Outputs[0].Name+"_bias"), newB)
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

// foldBN returns the scaled weights and the new bias, in float64 then
// rounded once to float32.
func foldBN(w *ir.Tensor, bias *ir.Value, params []*ir.Value, eps float32) (*ir.Tensor, *ir.Tensor, bool) {
	oc := w.Dims[0]
	scale, shift, mean, variance := ops.Float64s(params[0].Const), ops.Float64s(params[1].Const), ops.Float64s(params[2].Const), ops.Float64s(params[3].Const)
	for _, p := range [][]float64{scale, shift, mean, variance} {
		if int64(len(p)) != oc {
			return nil, nil, false
		}
	}
	b := make([]float64, oc)
	if bias != nil {
		b = ops.Float64s(bias.Const)
		if int64(len(b)) != oc {
			return nil, nil, false
		}
	}
	wd := ops.Float64s(w)
	per := int64(len(wd)) / oc
	newB := make([]float64, oc)
	for c := int64(0); c < oc; c++ {
		s := scale[c] / math.Sqrt(variance[c]+float64(eps))
		for i := c * per; i < (c+1)*per; i++ {
			wd[i] *= s
		}
		newB[c] = (b[c]-mean[c])*s + shift[c]
	}
	return ops.FromFloat64s(ir.Float32, w.Dims, wd), ops.FromFloat64s(ir.Float32, []int64{oc}, newB), true
}
