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
	uses := m.Graph.Uses() // subgraphs' reads included
	isOutput := map[*ir.Value]bool{}
	for _, v := range m.Graph.Outputs {
		isOutput[v] = true
	}
	type rewrite struct {
		conv, mul *ir.Node
		x, s      *ir.Value
	}
	var todo []rewrite
	for _, n := range m.Graph.Nodes {
		if n.OpType != "Conv" || n.Domain != "" && n.Domain != "ai.onnx" || len(n.Inputs) < 2 || n.Inputs[0] == nil || n.Inputs[1] == nil {
			continue
		}
		in := n.Inputs[0]
		mul := in.Producer
		if mul == nil || mul.OpType != "Mul" || mul.Domain != "" && mul.Domain != "ai.onnx" || len(uses[in]) != 1 || isOutput[in] {
			continue
		}
		if x, s, ok := spatialScale(mul); ok && worthScalingWeights(n, x) {
			todo = append(todo, rewrite{n, mul, x, s})
		}
	}
	names := m.Graph.Namer()
	for _, r := range todo {
		w := r.conv.Inputs[1]
		ws := &ir.Value{Name: names.Unique("conv-scale/" + w.Name), Type: ir.TensorType(w.Type.Elem, w.Type.Shape)}
		scale := &ir.Node{Name: names.Unique("conv-scale/Mul"), OpType: "Mul", Inputs: []*ir.Value{w, r.s}, Outputs: []*ir.Value{ws}}
		ws.Producer = scale
		m.Graph.Nodes = append(m.Graph.Nodes, scale)
		r.conv.Inputs[0], r.conv.Inputs[1] = r.x, ws
		removeNodes(m.Graph, r.mul)
	}
	if len(todo) == 0 {
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
	if attrInt(n, "group", 1) != 1 {
		return false
	}
	w, ok1 := staticDims(n.Inputs[1])
	xd, ok2 := staticDims(x)
	return ok1 && ok2 && len(w) == 4 && w[2] == 1 && w[3] == 1 && ir.Product(w) <= ir.Product(xd)
}
