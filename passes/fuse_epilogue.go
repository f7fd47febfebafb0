package passes

import (
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// fuseEpiloguePass groups a Conv, Gemm or MatMul (float32) with what
// follows it into one FusionGroup (kind "conv", "gemm" or "matmul"), so a
// backend applies those steps as it stores the product instead of in
// passes over memory. In order, each optional, each the only reader of
// the previous value and not a graph output:
//
//   - for MatMul, an Add of a constant 1-D bias along the last dim;
//   - a residual Add of a tensor of the same shape computed before the
//     producer (so the group cannot feed itself: no cycle);
//   - an activation: Relu, Clip with constant bounds, LeakyRelu, Sigmoid,
//     HardSwish, or SiLU written as x·Sigmoid(x).
func fuseEpiloguePass(_ *Context, m *ir.Model) error {
	f, err := newFuser(m)
	if err != nil {
		return err
	}
	var groups []group
	for _, p := range m.Graph.Nodes {
		if p.Domain != "" || p.OpType != "Conv" && p.OpType != "Gemm" && p.OpType != "MatMul" || len(p.Outputs) != 1 || p.Outputs[0].Type.Elem != ir.Float32 {
			continue
		}
		if nodes := f.epilogue(p); len(nodes) > 1 {
			for _, n := range nodes {
				f.taken[n] = true
			}
			groups = append(groups, group{kind: strings.ToLower(p.OpType), nodes: nodes})
		}
	}
	f.apply(groups)
	return nil
}

// epilogue returns p followed by the nodes that fold into its store.
func (f *fuser) epilogue(p *ir.Node) []*ir.Node {
	nodes := []*ir.Node{p}
	v := p.Outputs[0]
	if u := f.single(v); p.OpType == "MatMul" && f.is(u, "Add") && f.isBias(u, v) {
		nodes, v = append(nodes, u), u.Outputs[0]
	}
	if u := f.single(v); f.is(u, "Add") && f.residual(u, v, p) {
		nodes, v = append(nodes, u), u.Outputs[0]
	}
	if silu := f.silu(v); silu != nil {
		return append(nodes, silu...)
	}
	if u := f.single(v); u != nil && f.isActivation(u) {
		nodes = append(nodes, u)
	}
	return nodes
}

// isBias reports whether Add a adds a constant 1-D tensor of v's last dim
// to v.
func (f *fuser) isBias(a *ir.Node, v *ir.Value) bool {
	b := other(a, v)
	t := f.constOf(b)
	d, ok := staticDims(v)
	return t != nil && ok && len(d) > 0 && b.Type.Elem == ir.Float32 && slices.Equal(t.Dims, []int64{d[len(d)-1]})
}

// residual reports whether Add a adds to v a float32 tensor of v's shape
// that is an input, a constant, or computed before p.
func (f *fuser) residual(a *ir.Node, v *ir.Value, p *ir.Node) bool {
	r := other(a, v)
	if r == nil || r.Type.Elem != ir.Float32 || !r.Type.Shape.IsStatic() || !r.Type.Shape.Equal(v.Type.Shape) {
		return false
	}
	i, computed := f.order[r.Producer]
	return !computed || i < f.order[p]
}

// other returns the operand of binary node a that is not v, or nil when a
// reads v twice or is not binary.
func other(a *ir.Node, v *ir.Value) *ir.Value {
	if len(a.Inputs) != 2 || a.Inputs[0] == a.Inputs[1] {
		return nil
	}
	if a.Inputs[0] == v {
		return a.Inputs[1]
	}
	return a.Inputs[0]
}

// isActivation reports whether n is an activation a store can apply.
func (f *fuser) isActivation(n *ir.Node) bool {
	switch {
	case f.is(n, "Relu"), f.is(n, "LeakyRelu"), f.is(n, "Sigmoid"), f.is(n, "HardSwish"):
		return true
	case f.is(n, "Clip"):
		return f.constClip(n)
	}
	return false
}

// constClip reports whether Clip n's bounds are known at compile time.
func (f *fuser) constClip(n *ir.Node) bool {
	for _, b := range n.Inputs[1:] {
		if t := f.constOf(b); b != nil && (t == nil || t.Len() != 1) {
			return false
		}
	}
	return true
}

// silu returns [Sigmoid, Mul] when v's only readers compute v·Sigmoid(v).
func (f *fuser) silu(v *ir.Value) []*ir.Node {
	us := f.uses[v]
	if len(us) != 2 || f.outSet[v] {
		return nil
	}
	s, mul := us[0], us[1]
	if f.is(s, "Mul") {
		s, mul = mul, s
	}
	if !f.is(s, "Sigmoid", v) || !f.is(mul, "Mul") || len(mul.Inputs) != 2 || f.single(s.Outputs[0]) != mul {
		return nil
	}
	if !(mul.Inputs[0] == v && mul.Inputs[1] == s.Outputs[0] || mul.Inputs[1] == v && mul.Inputs[0] == s.Outputs[0]) {
		return nil
	}
	return []*ir.Node{s, mul}
}
