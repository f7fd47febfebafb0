package passes

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// epilogueKinds are the groups fuse-epilogue forms around each op.
var epilogueKinds = map[string]ops.GroupKind{"Conv": ops.GroupConv, "Gemm": ops.GroupGemm, "MatMul": ops.GroupMatMul}

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
//     HardSwish, or any elementwise function of the product alone written
//     out in several nodes (SiLU as x·Sigmoid(x), GELU with Erf).
func fuseEpiloguePass(c *Context, m *ir.Model) error {
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	var cands []group // every product with its epilogue, maybe empty
	for _, p := range m.Graph.Nodes {
		kind, ok := epilogueKinds[p.OpType]
		if p.Domain != "" || !ok || len(p.Outputs) != 1 || p.Outputs[0].Type.Elem != ir.Float32 {
			continue
		}
		nodes, roles := f.epilogue(p)
		for _, n := range nodes {
			f.taken[n] = true
		}
		cands = append(cands, group{kind: kind, nodes: nodes, roles: roles})
	}
	var groups []group
	for _, gr := range f.expandDepthwise(cands) {
		if len(gr.nodes) > 1 {
			groups = append(groups, gr)
		}
	}
	f.apply(groups)
	return nil
}

// expandDepthwise merges a 1×1 Conv group (the Conv and its activation:
// a clamp, or any function of the product alone, EfficientNet's SiLU)
// whose output's only reader is a depthwise Conv with the latter's group
// into one "conv-dw" group: MobileNet's expansion, whose large expanded
// tensor a backend can then keep out of memory.
func (f *fuser) expandDepthwise(cands []group) []group {
	byBase := map[*ir.Node]int{}
	for i, gr := range cands {
		byBase[gr.nodes[0]] = i
	}
	merged := map[int]bool{} // depthwise groups taken into an earlier one
	var out []group
	for i, gr := range cands {
		if merged[i] {
			continue
		}
		last := gr.nodes[len(gr.nodes)-1]
		j, ok := byBase[f.single(last.Outputs[0])]
		if ok && j != i && !merged[j] && f.pointwiseConv(gr) && f.depthwiseConv(cands[j].nodes[0], last.Outputs[0]) {
			merged[j] = true
			roles := []ops.Role{ops.RoleExpand}
			for range gr.nodes[1:] {
				roles = append(roles, ops.RoleExpandActivation)
			}
			roles = append(append(roles, ops.RoleDepthwise), cands[j].roles[1:]...)
			out = append(out, group{kind: ops.GroupConvDepthwise, nodes: append(slices.Clip(gr.nodes), cands[j].nodes...), roles: roles})
			continue
		}
		out = append(out, gr)
	}
	return out
}

// pointwiseConv reports whether gr is a static-shape 1×1, stride-1,
// unpadded, ungrouped Conv followed by nothing but its activation.
func (f *fuser) pointwiseConv(gr group) bool {
	c := gr.nodes[0]
	if c.OpType != "Conv" || !c.Outputs[0].Type.Shape.IsStatic() || slices.ContainsFunc(gr.roles[1:], func(r ops.Role) bool { return r != ops.RoleActivation }) {
		return false
	}
	// The activation must be a function of each value alone: constants
	// of one element (a per-channel PRelu slope would need the channel).
	for _, n := range gr.nodes[1:] {
		for _, v := range n.Inputs {
			if k := f.constOf(v); k != nil && k.Len() != 1 {
				return false
			}
		}
	}
	w, ok := staticDims(c.Inputs[1])
	return ok && f.constWeights(c) && len(w) == 4 && w[2] == 1 && w[3] == 1 && attrInt(c, "group", 1) == 1 &&
		allEqual(attrInts(c, "strides"), 1) && allEqual(attrInts(c, "pads"), 0) && autoPadNotSet(c)
}

// depthwiseConv reports whether n is a Conv reading x (as its input) with
// one channel per group and as many outputs as inputs.
func (f *fuser) depthwiseConv(n *ir.Node, x *ir.Value) bool {
	if n.OpType != "Conv" || n.Domain != "" || n.Inputs[0] != x {
		return false
	}
	xd, ok1 := staticDims(x)
	w, ok2 := staticDims(n.Inputs[1])
	return ok1 && ok2 && f.constWeights(n) && len(xd) == 4 && len(w) == 4 && w[1] == 1 && w[0] == xd[1] && attrInt(n, "group", 1) == xd[1]
}

// constWeights reports whether Conv n's weights and bias are known at
// compile time: a conv-dw kernel packs them then.
func (f *fuser) constWeights(n *ir.Node) bool {
	for _, v := range n.Inputs[1:] {
		if v != nil && f.constOf(v) == nil {
			return false
		}
	}
	return true
}

func attrInt(n *ir.Node, name string, def int64) int64 {
	if a := n.Attr(name); a != nil {
		return a.I
	}
	return def
}

func attrInts(n *ir.Node, name string) []int64 {
	if a := n.Attr(name); a != nil {
		return a.Ints
	}
	return nil
}

func allEqual(xs []int64, v int64) bool {
	for _, x := range xs {
		if x != v {
			return false
		}
	}
	return true
}

func autoPadNotSet(n *ir.Node) bool {
	a := n.Attr("auto_pad")
	return a == nil || a.S == "" || a.S == "NOTSET" || a.S == "VALID"
}

// epilogue returns p followed by the nodes that fold into its store, and
// each one's role.
func (f *fuser) epilogue(p *ir.Node) ([]*ir.Node, []ops.Role) {
	nodes, roles := []*ir.Node{p}, []ops.Role{ops.RoleBase}
	v := p.Outputs[0]
	if u := f.single(v); p.OpType == "MatMul" && f.is(u, "Add") && f.isBias(u, v) {
		nodes, roles, v = append(nodes, u), append(roles, ops.RoleBias), u.Outputs[0]
	}
	if u := f.single(v); f.is(u, "Add") && f.residual(u, v, p) {
		nodes, roles, v = append(nodes, u), append(roles, ops.RoleResidual), u.Outputs[0]
	}
	if chain := f.activationChain(v); len(chain) > 0 {
		for _, u := range chain {
			nodes, roles = append(nodes, u), append(roles, ops.RoleActivation)
		}
		return nodes, roles
	}
	if u := f.single(v); u != nil && f.isActivation(u) {
		nodes, roles = append(nodes, u), append(roles, ops.RoleActivation)
	}
	return nodes, roles
}

// maxActivationChain bounds the nodes of one activation.
const maxActivationChain = 12

// activationChain returns, in graph order, nodes that compute an
// elementwise function of v alone and are all v's readers: each reads
// only v, constants or another of them, keeps v's float32 shape, and all
// but the last are read only among them (SiLU's Sigmoid and Mul, GELU's
// Div, Erf, Add, Mul and Mul, HardSwish written out). Nil when v's readers
// do not form one.
func (f *fuser) activationChain(v *ir.Value) []*ir.Node {
	if f.outSet[v] || len(f.uses[v]) == 0 {
		return nil
	}
	in := map[*ir.Value]bool{v: true}
	set := map[*ir.Node]bool{}
	var chain []*ir.Node
	vals := []*ir.Value{v}
	for i := 0; i < len(vals); i++ {
		for _, u := range f.uses[vals[i]] {
			if set[u] || !f.elementwiseOf(u, in, v) {
				continue
			}
			if len(chain) == maxActivationChain {
				return nil
			}
			set[u] = true
			chain = append(chain, u)
			in[u.Outputs[0]] = true
			vals = append(vals, u.Outputs[0])
		}
	}
	slices.SortFunc(chain, func(a, b *ir.Node) int { return f.order[a] - f.order[b] })
	member := func(us []*ir.Node) bool {
		return !slices.ContainsFunc(us, func(u *ir.Node) bool { return !set[u] })
	}
	if len(chain) == 0 || !member(f.uses[v]) {
		return nil
	}
	for i, u := range chain {
		out := u.Outputs[0]
		last := i == len(chain)-1
		if !last && (f.outSet[out] || !member(f.uses[out])) || last && len(f.uses[out]) == 0 && !f.outSet[out] {
			return nil
		}
	}
	return chain
}

// elementwiseOf reports whether n is an ungrouped elementwise op the target
// fuses whose operands are all in in or constant, with v's type.
func (f *fuser) elementwiseOf(n *ir.Node, in map[*ir.Value]bool, v *ir.Value) bool {
	if n.Domain != "" || f.taken[n] || len(n.Outputs) != 1 || !f.fusible(n) || !n.Outputs[0].Type.Equal(v.Type) {
		return false
	}
	for _, x := range n.Inputs {
		if x != nil && !in[x] && f.constOf(x) == nil {
			return false
		}
	}
	return true
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

// isActivation reports whether n is an activation an epilogue can apply:
// an elementwise op the target fuses with one non-constant operand (the
// product), float32 in and out. Relu and a Clip with constant bounds are
// applied by the store itself; the others run over the stored tile.
func (f *fuser) isActivation(n *ir.Node) bool {
	if n == nil || n.Domain != "" || len(n.Outputs) != 1 || !f.fusible(n) || n.Outputs[0].Type.Elem != ir.Float32 {
		return false
	}
	vars := 0
	for _, v := range n.Inputs {
		if v != nil && f.constOf(v) == nil {
			vars++
		}
	}
	return vars == 1 && n.Inputs[0] != nil && f.constOf(n.Inputs[0]) == nil
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
