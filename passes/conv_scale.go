package passes

import (
	"github.com/kiln-ml/kiln/ir"
)

// convScalePass moves a per-channel scale from a Conv's input to its
// weights: Conv(x·s, W) = Conv(x, W·s) when s is constant over space
// (shape [1,C,1,1] or [C,1,1]) and the Conv ungrouped, s scaling input
// channel c and W·s every weight that reads it, padding being zeros
// either way. That is a squeeze-excitation block's end (EfficientNet,
// MobileNetV3: the pooled, gated channel weights times the block's
// tensor, then the 1×1 projection): the product x·s is a pass over the
// block's largest tensor, W·s one over the weights, smaller wherever
// the Conv has fewer output channels per kernel tap than x has pixels
// (all but EfficientNet-B0's 7×7 blocks). The Mul must have no other
// reader; the Conv is 1×1 (see worthScalingWeights).
func convScalePass(c *Context, m *ir.Model) error {
	readers := map[*ir.Value]int{}
	for _, n := range m.Graph.Nodes {
		for _, v := range n.Inputs {
			readers[v]++
		}
	}
	for _, v := range m.Graph.Outputs {
		readers[v]++
	}
	changed := false
	for _, n := range m.Graph.Nodes {
		mul := n.Inputs[0].Producer
		if n.OpType != "Conv" || n.Domain != "" || mul == nil || mul.OpType != "Mul" || mul.Domain != "" || readers[n.Inputs[0]] != 1 {
			continue
		}
		x, s, ok := spatialScale(mul)
		if !ok || !worthScalingWeights(n, x) {
			continue
		}
		w := n.Inputs[1]
		ws := &ir.Value{Name: m.Graph.UniqueName("conv-scale/" + w.Name), Type: ir.TensorType(w.Type.Elem, w.Type.Shape)}
		scale := &ir.Node{Name: m.Graph.UniqueName("conv-scale/Mul"), OpType: "Mul", Inputs: []*ir.Value{w, s}, Outputs: []*ir.Value{ws}}
		ws.Producer = scale
		m.Graph.Nodes = append(m.Graph.Nodes, scale)
		n.Inputs[0], n.Inputs[1] = x, ws
		removeNodes(m.Graph, mul)
		changed = true
	}
	if !changed {
		return nil
	}
	return m.Graph.TopoSort()
}

// spatialScale splits Mul node n into a float32 [N,C,H,W] tensor x and a
// scale s of shape [1,C,1,1] or [C,1,1].
func spatialScale(n *ir.Node) (x, s *ir.Value, ok bool) {
	if len(n.Inputs) != 2 {
		return nil, nil, false
	}
	for i := range 2 {
		x, s = n.Inputs[i], n.Inputs[1-i]
		xd, ok1 := staticDims(x)
		sd, ok2 := staticDims(s)
		if !ok1 || !ok2 || len(xd) != 4 || x.Type.Elem != ir.Float32 || s.Type.Elem != ir.Float32 {
			continue
		}
		if len(sd) == 4 && sd[0] == 1 {
			sd = sd[1:]
		}
		if len(sd) == 3 && sd[0] == xd[1] && sd[1] == 1 && sd[2] == 1 {
			return x, s, true
		}
	}
	return nil, nil, false
}

// worthScalingWeights reports whether Conv n reading x takes the scale in
// its weights: ungrouped, 1×1 (a backend may run larger kernels faster
// with weights it knows at compile time, Winograd's), and no more
// weights to scale than x has elements.
func worthScalingWeights(n *ir.Node, x *ir.Value) bool {
	if attrInt(n, "group", 1) != 1 || len(n.Inputs) < 2 {
		return false
	}
	w, ok1 := staticDims(n.Inputs[1])
	xd, ok2 := staticDims(x)
	return ok1 && ok2 && len(w) == 4 && w[2] == 1 && w[3] == 1 && ir.Product(w) <= ir.Product(xd)
}
