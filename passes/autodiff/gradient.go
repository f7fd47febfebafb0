package autodiff

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// HasGradient reports whether m's graph holds an
// ai.onnx.preview.training.Gradient node.
func HasGradient(m *ir.Model) bool {
	for _, n := range m.Graph.Nodes {
		if isGradient(n) {
			return true
		}
	}
	return false
}

func isGradient(n *ir.Node) bool { return n.Domain == ops.TrainingDomain && n.OpType == ops.Gradient }

// ExpandGradients replaces every Gradient node of m's graph by the nodes
// that compute it: the gradient of the value its y attribute names (seeded
// with ones) with respect to each value xs names, zeros for an x that y
// does not depend on. Gradient states a fact about its graph, so it is
// expanded before the graph runs (the reference executor's kernel refuses
// it).
func ExpandGradients(m *ir.Model) error {
	if !HasGradient(m) {
		return nil
	}
	known, err := ops.InferShapes(m)
	if err != nil {
		return err
	}
	byName := map[string]*ir.Value{}
	for _, v := range m.Graph.Inputs {
		byName[v.Name] = v
	}
	for _, v := range m.Graph.Initializers {
		byName[v.Name] = v
	}
	for _, n := range m.Graph.Nodes {
		for _, o := range n.Outputs {
			if o != nil {
				byName[o.Name] = o
			}
		}
	}
	for _, n := range append([]*ir.Node(nil), m.Graph.Nodes...) {
		if !isGradient(n) {
			continue
		}
		find := func(name string) (*ir.Value, error) {
			if v := byName[name]; v != nil {
				return v, nil
			}
			return nil, fmt.Errorf("%s: no value named %q in the graph", n, name)
		}
		y, err := find(attrString(n, "y"))
		if err != nil {
			return err
		}
		var xs []*ir.Value
		for _, name := range attrStrings(n, "xs") {
			x, err := find(name)
			if err != nil {
				return err
			}
			xs = append(xs, x)
		}
		if len(xs) != len(n.Outputs) {
			return fmt.Errorf("%s: %d xs for %d outputs", n, len(xs), len(n.Outputs))
		}
		b := NewBuilder(m, known, "grad/")
		one := ops.FromFloat64s(y.Type.Elem, []int64{1}, []float64{1})
		seed := b.Op("ConstantOfShape", []*ir.Value{b.ShapeOf(y)}, ir.AttrT("value", one))
		grads, err := backward(b, []*ir.Value{y}, []*ir.Value{seed}, xs)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		for i, o := range n.Outputs {
			if o == nil {
				continue
			}
			d := grads[i]
			if d == nil {
				d = b.ZerosLike(xs[i])
			}
			// The node's output keeps its name (a graph output, say):
			// an Identity of the gradient now produces it.
			id := &ir.Node{Name: b.Name("Gradient_" + o.Name), OpType: "Identity", Inputs: []*ir.Value{d}, Outputs: []*ir.Value{o}}
			o.Producer = id
			m.Graph.Nodes = append(m.Graph.Nodes, id)
		}
		removeNode(m.Graph, n)
	}
	if err := m.Graph.TopoSort(); err != nil {
		return err
	}
	_, err = ops.InferShapes(m)
	return err
}

func attrString(n *ir.Node, name string) string {
	if a := n.Attr(name); a != nil {
		return a.S
	}
	return ""
}

func attrStrings(n *ir.Node, name string) []string {
	if a := n.Attr(name); a != nil {
		return a.Strings
	}
	return nil
}

func removeNode(g *ir.Graph, n *ir.Node) {
	for i, m := range g.Nodes {
		if m == n {
			g.Nodes = append(g.Nodes[:i], g.Nodes[i+1:]...)
			return
		}
	}
}
