package passes

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// foldIfPass replaces every If of the main graph whose condition inference
// computes (an exporter's shape check, AffineGrid's test of the rank) by
// the nodes of the branch it takes. Compiled backends have no If kernel,
// and the untaken branch often does not even type on this model's shapes.
// Inference runs again after each round: an If inside the taken branch
// is then a node of the main graph, and its condition may be known too.
// Subgraphs inside the taken branch (a Loop body, an If whose condition
// stays unknown) are kept as they are.
func foldIfPass(c *Context, m *ir.Model) error {
	if !slices.ContainsFunc(m.Graph.Nodes, func(n *ir.Node) bool { return n.OpType == "If" }) {
		return nil // no inference to pay for
	}
	for {
		known, err := ops.InferShapesWithin(m, c.Limits)
		if err != nil {
			return err
		}
		if !inlineKnownIfs(m.Graph, known) {
			return nil
		}
	}
}

// inlineKnownIfs inlines each If whose condition known holds and reports
// whether it found any.
func inlineKnownIfs(g *ir.Graph, known map[*ir.Value]*ir.Tensor) bool {
	taken := map[*ir.Node]*ir.Graph{}
	for _, n := range g.Nodes {
		if b := takenBranch(n, known); b != nil {
			taken[n] = b
		}
	}
	if len(taken) == 0 {
		return false
	}
	// Names the rewritten graph keeps: every name but those of the
	// branches about to be inlined or dropped.
	used := map[string]bool{}
	addNamesExcept(used, g, taken)
	names := ir.NewNamer()
	for name := range used {
		names.Reserve(name)
	}
	var nodes []*ir.Node
	for _, n := range g.Nodes {
		if b := taken[n]; b != nil {
			nodes = append(nodes, inlineBranch(g, n, b, names)...)
			continue
		}
		nodes = append(nodes, n)
	}
	g.Nodes = nodes
	return true
}

// takenBranch is the branch an If node runs when its condition is a known
// boolean, or nil. A branch with inputs or the wrong number of outputs
// (which inference refuses) or sparse initializers (which nothing
// computes with) stays an If, for the backend to report.
func takenBranch(n *ir.Node, known map[*ir.Value]*ir.Tensor) *ir.Graph {
	if n.OpType != "If" || n.Domain != "" && n.Domain != "ai.onnx" {
		return nil
	}
	cond := known[n.Input(0)]
	if n.Input(0) == nil || cond == nil || cond.DType != ir.Bool || cond.Len() != 1 {
		return nil
	}
	name := "else_branch"
	if cond.Int64At(0) != 0 {
		name = "then_branch"
	}
	a := n.Attr(name)
	if a == nil || a.G == nil {
		return nil
	}
	b := a.G
	if len(b.Inputs) != 0 || len(b.Outputs) != len(n.Outputs) || slices.Contains(b.Outputs, nil) || len(b.SparseInitializers) != 0 {
		return nil
	}
	return b
}

// inlineBranch moves branch b of If node n into g: its initializers join
// g's, its values and nodes take names unique in g (names, which it
// extends), and n's outputs become the branch's outputs. It returns the
// nodes that replace n, in order. The branch's nodes read outer values
// directly, and those are defined before n, so the order holds.
func inlineBranch(g *ir.Graph, n *ir.Node, b *ir.Graph, names *ir.Namer) []*ir.Node {
	for _, bn := range b.Nodes {
		for _, sg := range bn.Subgraphs() {
			inner := map[string]bool{}
			addNames(inner, sg)
			for name := range inner {
				names.Reserve(name)
			}
		}
	}
	for _, v := range b.Initializers {
		v.Name = names.Unique(v.Name)
		v.Const.Name = v.Name
		g.Initializers = append(g.Initializers, v)
	}
	local := map[*ir.Node]bool{}
	for _, bn := range b.Nodes {
		local[bn] = true
		if bn.Name != "" {
			bn.Name = names.Unique(bn.Name)
		}
		for _, o := range bn.Outputs {
			if o != nil {
				o.Name = names.Unique(o.Name)
			}
		}
	}
	nodes := b.Nodes
	branchOuts := append([]*ir.Value(nil), b.Outputs...)
	boundTo := map[*ir.Value]*ir.Value{} // branch value → the output of n it became
	for i, bo := range branchOuts {
		out := n.Outputs[i]
		if out == nil {
			continue
		}
		if bo.Producer != nil && local[bo.Producer] && boundTo[bo] == nil {
			// The branch's node computes n's output directly, under its name.
			boundTo[bo] = out
			rebind(bo.Producer, bo, out)
			b.ReplaceUses(bo, out)
			continue
		}
		// An outer value, a constant, or a value already given to another
		// output: an Identity gives it n's output's name (simplify removes
		// it where it can).
		src := cmp.Or(boundTo[bo], bo)
		id := &ir.Node{Name: names.Unique(cmp.Or(n.Name, "If") + "_out" + strconv.Itoa(i)), OpType: "Identity", Inputs: []*ir.Value{src}, Outputs: []*ir.Value{out}}
		out.Producer = id
		nodes = append(nodes, id)
	}
	for _, v := range b.ValueInfo {
		if boundTo[v] == nil {
			g.ValueInfo = append(g.ValueInfo, v)
		}
	}
	return nodes
}

// rebind makes node p compute out in place of its output old.
func rebind(p *ir.Node, old, out *ir.Value) {
	for j, o := range p.Outputs {
		if o == old {
			p.Outputs[j] = out
		}
	}
	out.Producer = p
}

// addNamesExcept is addNames of g without the subgraphs of the nodes in
// skip.
func addNamesExcept(used map[string]bool, g *ir.Graph, skip map[*ir.Node]*ir.Graph) {
	for _, vs := range [][]*ir.Value{g.Inputs, g.Initializers} {
		for _, v := range vs {
			used[v.Name] = true
		}
	}
	for _, n := range g.Nodes {
		used[n.Name] = true
		for _, o := range n.Outputs {
			if o != nil {
				used[o.Name] = true
			}
		}
		if skip[n] == nil {
			for _, sg := range n.Subgraphs() {
				addNames(used, sg)
			}
		}
	}
}
