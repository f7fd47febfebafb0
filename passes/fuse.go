package passes

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The fusion passes (fuse-epilogue, fuse-elementwise) decide which nodes a
// backend computes as one kernel and record each decision as a
// kiln.FusionGroup node holding the original nodes (ir/ops/kiln.go): the
// graph keeps its meaning (the reference executor runs the bodies) and a
// backend lowers each group without searching for patterns again.

// fuser is the graph state one fusion pass reads: who reads each value,
// which values are graph outputs, node positions, compile-time values.
type fuser struct {
	m      *ir.Model
	g      *ir.Graph
	opsets ops.Opsets
	known  map[*ir.Value]*ir.Tensor
	uses   map[*ir.Value][]*ir.Node
	outSet map[*ir.Value]bool
	order  map[*ir.Node]int
	taken  map[*ir.Node]bool // already in a group
	// namer (through names) holds the graph's names as of the pass's
	// first new name and every name it has handed out since.
	namer *ir.Namer
	// copies counts the copies copyNode made of each value name.
	copies map[string]int
	// target is the backend's judgement of what fuses (Context.Target).
	target Target
}

func newFuser(c *Context, m *ir.Model) (*fuser, error) {
	known, err := ops.InferShapesWithin(m, c.Limits)
	if err != nil {
		return nil, err
	}
	f := &fuser{m: m, g: m.Graph, opsets: ops.OpsetsOf(m), known: known, uses: m.Graph.Uses(),
		outSet: map[*ir.Value]bool{}, order: map[*ir.Node]int{}, taken: map[*ir.Node]bool{}, target: c.target()}
	for _, v := range m.Graph.Outputs {
		f.outSet[v] = true
	}
	for i, n := range m.Graph.Nodes {
		f.order[n] = i
	}
	return f, nil
}

// fusible reports whether the target computes n in a fused loop; a node
// engines compute on the host (strings: ops.OnHost) never is.
func (f *fuser) fusible(n *ir.Node) bool { return !ops.OnHost(n) && f.target.Fusible(n, f.opsets) }

// constOf returns v's compile-time value, or nil; a graph input with a
// default is not constant (callers may override it).
func (f *fuser) constOf(v *ir.Value) *ir.Tensor {
	if v == nil || slices.Contains(f.g.Inputs, v) {
		return nil
	}
	if v.Const != nil {
		return v.Const
	}
	return f.known[v]
}

// scalar reports whether v is a one-element float32 constant.
func (f *fuser) scalar(v *ir.Value) (float64, bool) {
	if t := f.constOf(v); t != nil && t.Len() == 1 && v.Type.Elem == ir.Float32 {
		return t.Float64At(0), true
	}
	return 0, false
}

// single returns v's one reader when v may be absorbed into it: one reader,
// not a graph output.
func (f *fuser) single(v *ir.Value) *ir.Node {
	if us := f.uses[v]; len(us) == 1 && !f.outSet[v] {
		return us[0]
	}
	return nil
}

// onlyUsedBy reports whether every reader of v is in set.
func (f *fuser) onlyUsedBy(v *ir.Value, set []*ir.Node) bool {
	for _, u := range f.uses[v] {
		if !slices.Contains(set, u) {
			return false
		}
	}
	return true
}

// is reports whether n is an ungrouped ONNX node of op taking ins (nil
// matches anything) as its first inputs.
func (f *fuser) is(n *ir.Node, op string, ins ...*ir.Value) bool {
	if n == nil || n.OpType != op || n.Domain != "" || f.taken[n] || len(n.Inputs) < len(ins) {
		return false
	}
	for i, v := range ins {
		if v != nil && n.Inputs[i] != v {
			return false
		}
	}
	return true
}

func staticDims(v *ir.Value) ([]int64, bool) { return v.Type.Shape.Ints() }

// group is one fusion decision: nodes (in a valid evaluation order) whose
// last node's output is the only value read outside.
type group struct {
	kind  ops.GroupKind
	nodes []*ir.Node
	roles []ops.Role // one per node (kiln.FusionGroup's roles), or nil
}

// apply replaces each group's nodes with one kiln.FusionGroup node at the
// position of the group's last node, where everything it reads is computed.
// The group node takes over the last node's output value (so readers need
// no rewriting); inside the body that node writes a renamed copy, keeping
// names unique across the model.
func (f *fuser) apply(groups []group) {
	if len(groups) == 0 {
		return
	}
	if f.m.Opset(ir.KilnDomain) == 0 {
		f.m.OpsetImports = append(f.m.OpsetImports, ir.OpsetImport{Domain: ir.KilnDomain, Version: 1})
	}
	at := map[*ir.Node]*ir.Node{}
	absorbed := map[*ir.Node]bool{}
	var bodies []*ir.Graph
	for _, gr := range groups {
		last := gr.nodes[len(gr.nodes)-1]
		out := last.Outputs[0]
		inner := &ir.Value{Name: f.names().Unique(out.Name + "_fused"), Type: out.Type, Producer: last}
		last.Outputs[0] = inner
		body := &ir.Graph{Name: string(gr.kind), Nodes: gr.nodes, Outputs: []*ir.Value{inner}}
		bodies = append(bodies, body)
		fg := &ir.Node{Name: last.Name, OpType: ops.FusionGroup, Domain: ir.KilnDomain,
			Inputs: body.FreeValues(), Outputs: []*ir.Value{out},
			Attrs: []*ir.Attribute{ir.AttrS("kind", string(gr.kind)), ir.AttrG("body", body)}}
		if gr.roles != nil {
			fg.Attrs = append(fg.Attrs, ops.RolesAttr(gr.roles))
		}
		out.Producer = fg
		at[last] = fg
		for _, n := range gr.nodes {
			absorbed[n] = true
		}
	}
	f.moveValueInfo(bodies)
	var nodes []*ir.Node
	for _, n := range f.g.Nodes {
		if fg := at[n]; fg != nil {
			nodes = append(nodes, fg)
		} else if !absorbed[n] {
			nodes = append(nodes, n)
		}
	}
	f.g.Nodes = nodes
}

// names is the pass's namer, made at its first name: Graph.UniqueName
// per new node would list the graph's names once per node, quadratic in a
// graph of many groups.
func (f *fuser) names() *ir.Namer {
	if f.namer == nil {
		f.namer = f.g.Namer()
	}
	return f.namer
}

// addNames adds the names of g's inputs, initializers, nodes and node
// outputs, subgraphs included, to set: those Graph.UniqueName avoids
// (fold_if's renaming reads them).
func addNames(set map[string]bool, g *ir.Graph) {
	for _, vs := range [][]*ir.Value{g.Inputs, g.Initializers} {
		for _, v := range vs {
			set[v.Name] = true
		}
	}
	for _, n := range g.Nodes {
		set[n.Name] = true
		for _, o := range n.Outputs {
			if o != nil {
				set[o.Name] = true
			}
		}
		for _, sg := range n.Subgraphs() {
			addNames(set, sg)
		}
	}
}

// moveValueInfo moves the declared types of values now defined in a body
// from the outer graph's value_info to that body's, where a reader of the
// model expects them; in one pass over value_info for all the bodies.
func (f *fuser) moveValueInfo(bodies []*ir.Graph) {
	definedIn := map[*ir.Value]*ir.Graph{}
	for _, body := range bodies {
		for _, n := range body.Nodes {
			for _, o := range n.Outputs {
				definedIn[o] = body
			}
		}
	}
	var kept []*ir.Value
	for _, v := range f.g.ValueInfo {
		if body := definedIn[v]; body != nil {
			body.ValueInfo = append(body.ValueInfo, v)
		} else {
			kept = append(kept, v)
		}
	}
	f.g.ValueInfo = kept
}
