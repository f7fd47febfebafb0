package passes

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// simplifyPass removes nodes that compute their input unchanged: Identity,
// Dropout in inference mode (mask unused), Reshape to the same static
// shape, Transpose with the identity permutation, Cast to the same type.
// It first collapses chains: Reshape of a Reshape reads the first's input,
// and Transpose of a Transpose becomes one Transpose (often the identity);
// the inner node goes when dce finds it unread.
func simplifyPass(_ *Context, m *ir.Model) error {
	g := m.Graph
	opsets := ops.OpsetsOf(m)
	for _, n := range g.Nodes {
		collapseChain(n)
	}
	var kept []*ir.Node
	for _, n := range g.Nodes {
		if in := passThrough(n, opsets); in != nil && bypass(g, n.Outputs[0], in) {
			continue
		}
		kept = append(kept, n)
	}
	g.Nodes = kept
	return nil
}

// collapseChain makes a Reshape or Transpose read through a producer of the
// same op. A Reshape's target shape must be a static initializer without 0
// entries (0 copies a dim of the input, which would change meaning).
func collapseChain(n *ir.Node) {
	in := n.Input(0)
	if n.Domain != "" || in == nil || in.Producer == nil || in.Producer.OpType != n.OpType || in.Producer.Domain != "" {
		return
	}
	inner := in.Producer
	switch n.OpType {
	case "Reshape":
		shape := n.Input(1)
		if shape == nil || shape.Const == nil || n.Attr("allowzero") != nil {
			return
		}
		for _, d := range ops.Int64s(shape.Const) {
			if d == 0 {
				return
			}
		}
		n.Inputs[0] = inner.Inputs[0]
	case "Transpose":
		outer, first := n.Attr("perm"), inner.Attr("perm")
		if outer == nil || first == nil || len(outer.Ints) != len(first.Ints) {
			return
		}
		// out[i] = mid[outer[i]] = x[first[outer[i]]]
		perm := make([]int64, len(outer.Ints))
		for i, p := range outer.Ints {
			perm[i] = first.Ints[p]
		}
		n.Inputs[0] = inner.Inputs[0]
		n.SetAttr(ir.AttrIs("perm", perm...))
	}
}

// passThrough returns the input a node forwards unchanged, or nil.
func passThrough(n *ir.Node, opsets ops.Opsets) *ir.Value {
	if n.Domain != "" || len(n.Outputs) == 0 || n.Outputs[0] == nil || n.Input(0) == nil {
		return nil
	}
	in, out := n.Inputs[0], n.Outputs[0]
	same := in.Type.IsTensor() && in.Type.Shape.IsStatic() && in.Type.Equal(out.Type)
	switch n.OpType {
	case "Identity":
		return in
	case "Dropout":
		if n.Output(1) != nil {
			return nil
		}
		if t := n.Input(2); t != nil && (t.Const == nil || t.Const.Int64At(0) != 0) {
			return nil // training mode, or not known to be off
		}
		return in
	case "Reshape", "Cast":
		if same {
			return in
		}
	case "Transpose":
		perm := n.Attr("perm")
		if perm == nil || !same {
			return nil
		}
		for i, p := range perm.Ints {
			if p != int64(i) {
				return nil
			}
		}
		return in
	}
	return nil
}

// bypass makes readers of out read in instead. When out is a graph output,
// in takes over its name (when in is an intermediate no one else sees), so
// the model's interface does not change; otherwise it gives up.
func bypass(g *ir.Graph, out, in *ir.Value) bool {
	isOutput, inVisible := false, false
	for _, v := range g.Outputs {
		isOutput = isOutput || v == out
		inVisible = inVisible || v == in
	}
	if isOutput {
		for _, v := range g.Inputs {
			inVisible = inVisible || v == in
		}
		if inVisible || in.Const != nil || in.Producer == nil {
			return false
		}
		in.Name = out.Name
	}
	g.ReplaceUses(out, in)
	return true
}
