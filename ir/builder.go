package ir

import (
	"fmt"
	"strconv"
)

// NewModel wraps a graph in a model with IR version 8 and the given default
// ONNX opset.
func NewModel(g *Graph, opset int64) *Model {
	return &Model{IRVersion: 8, OpsetImports: []OpsetImport{{Domain: "", Version: opset}}, ProducerName: "kiln", Graph: g}
}

// NewGraph returns an empty graph.
func NewGraph(name string) *Graph { return &Graph{Name: name} }

// AddInput declares a graph input.
func (g *Graph) AddInput(name string, t Type) *Value {
	v := &Value{Name: name, Type: t}
	g.Inputs = append(g.Inputs, v)
	return v
}

// AddInitializer adds a constant; the value takes the tensor's type and the
// tensor takes the value's name.
func (g *Graph) AddInitializer(name string, t *Tensor) *Value {
	t.Name = name
	v := &Value{Name: name, Type: t.Type(), Const: t}
	g.Initializers = append(g.Initializers, v)
	return v
}

// AddNode appends a node with nOut fresh outputs of unknown type.
func (g *Graph) AddNode(opType string, inputs []*Value, nOut int, attrs ...*Attribute) *Node {
	n := &Node{OpType: opType, Inputs: inputs, Attrs: attrs}
	n.Name = g.UniqueName(opType)
	for i := 0; i < nOut; i++ {
		n.Outputs = append(n.Outputs, &Value{Name: g.UniqueName(n.Name + "_out" + strconv.Itoa(i)), Producer: n})
	}
	g.Nodes = append(g.Nodes, n)
	return n
}

// Apply appends a single-output node and returns its output.
func (g *Graph) Apply(opType string, inputs []*Value, attrs ...*Attribute) *Value {
	return g.AddNode(opType, inputs, 1, attrs...).Outputs[0]
}

// SetOutputs sets the graph outputs.
func (g *Graph) SetOutputs(vs ...*Value) { g.Outputs = vs }

// UniqueName returns prefix, or prefix_N, whichever no value or node in the
// graph uses yet.
func (g *Graph) UniqueName(prefix string) string {
	used := map[string]bool{}
	g.visitNames(func(s string) { used[s] = true })
	if !used[prefix] {
		return prefix
	}
	for i := 1; ; i++ {
		if s := prefix + "_" + strconv.Itoa(i); !used[s] {
			return s
		}
	}
}

func (g *Graph) visitNames(f func(string)) {
	for _, v := range g.Inputs {
		f(v.Name)
	}
	for _, v := range g.Initializers {
		f(v.Name)
	}
	for _, n := range g.Nodes {
		f(n.Name)
		for _, o := range n.Outputs {
			if o != nil {
				f(o.Name)
			}
		}
		for _, a := range n.Attrs {
			if a.G != nil {
				a.G.visitNames(f)
			}
			for _, sg := range a.Graphs {
				sg.visitNames(f)
			}
		}
	}
}

// Uses maps each value to the nodes that read it, in node order. Reads from
// subgraphs count as reads by the node that owns the subgraph.
func (g *Graph) Uses() map[*Value][]*Node {
	uses := map[*Value][]*Node{}
	for _, n := range g.Nodes {
		seen := map[*Value]bool{}
		for _, v := range n.Inputs {
			if v != nil && !seen[v] {
				seen[v] = true
				uses[v] = append(uses[v], n)
			}
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.FreeValues() {
				if !seen[v] {
					seen[v] = true
					uses[v] = append(uses[v], n)
				}
			}
		}
	}
	return uses
}

// Subgraphs returns the graphs held in the node's attributes.
func (n *Node) Subgraphs() []*Graph {
	var gs []*Graph
	for _, a := range n.Attrs {
		if a.G != nil {
			gs = append(gs, a.G)
		}
		gs = append(gs, a.Graphs...)
	}
	return gs
}

// FreeValues returns the values a graph (and its nested subgraphs) reads
// that it does not define itself — reads of enclosing scopes — in order of
// first use.
func (g *Graph) FreeValues() []*Value {
	defined := map[*Value]bool{}
	for _, v := range g.Inputs {
		defined[v] = true
	}
	for _, v := range g.Initializers {
		defined[v] = true
	}
	var free []*Value
	seen := map[*Value]bool{}
	note := func(v *Value) {
		if v != nil && !defined[v] && !seen[v] {
			seen[v] = true
			free = append(free, v)
		}
	}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			note(v)
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.FreeValues() {
				note(v)
			}
		}
		for _, o := range n.Outputs {
			if o != nil {
				defined[o] = true
			}
		}
	}
	for _, v := range g.Outputs {
		note(v)
	}
	return free
}

// ReplaceUses makes every reader of old (nodes, subgraphs and graph outputs)
// read new instead.
func (g *Graph) ReplaceUses(old, new *Value) {
	for _, n := range g.Nodes {
		for i, v := range n.Inputs {
			if v == old {
				n.Inputs[i] = new
			}
		}
		for _, sg := range n.Subgraphs() {
			sg.ReplaceUses(old, new)
		}
	}
	for i, v := range g.Outputs {
		if v == old {
			g.Outputs[i] = new
		}
	}
}

// TopoSort orders the nodes so every node follows the producers of its
// inputs, keeping the existing order where it is already valid. It fails on
// a cycle.
func (g *Graph) TopoSort() error {
	producerIndex := map[*Node]int{}
	for i, n := range g.Nodes {
		producerIndex[n] = i
	}
	deps := func(n *Node) []*Node {
		var ds []*Node
		add := func(v *Value) {
			if v != nil && v.Producer != nil {
				if _, local := producerIndex[v.Producer]; local {
					ds = append(ds, v.Producer)
				}
			}
		}
		for _, v := range n.Inputs {
			add(v)
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.FreeValues() {
				add(v)
			}
		}
		return ds
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[*Node]int{}
	order := make([]*Node, 0, len(g.Nodes))
	var visit func(n *Node) error
	visit = func(n *Node) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("graph %q has a cycle through %s", g.Name, n)
		}
		state[n] = visiting
		for _, d := range deps(n) {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = done
		order = append(order, n)
		return nil
	}
	for _, n := range g.Nodes {
		if err := visit(n); err != nil {
			return err
		}
	}
	g.Nodes = order
	return nil
}

// PinInput turns graph input name into a constant holding t (its dtype and
// static dims must be the input's): compilers that need the input's value
// (ops.ShapeTensorInputs) then have it.
func (g *Graph) PinInput(name string, t *Tensor) error {
	for i, v := range g.Inputs {
		if v.Name != name {
			continue
		}
		if v.Type.Elem != t.DType || !v.Type.Shape.Ranked || len(v.Type.Shape.Dims) != len(t.Dims) {
			return fmt.Errorf("input %q is %s; a value of %s%v does not fit", name, v.Type, t.DType, t.Dims)
		}
		for d, dim := range v.Type.Shape.Dims {
			if dim.IsStatic() && dim.Value != t.Dims[d] {
				return fmt.Errorf("input %q is %s; a value of %s%v does not fit", name, v.Type, t.DType, t.Dims)
			}
		}
		g.Inputs = append(g.Inputs[:i:i], g.Inputs[i+1:]...)
		t.Name = name
		v.Type = t.Type()
		v.Const = t
		g.Initializers = append(g.Initializers, v)
		return nil
	}
	return fmt.Errorf("no input %q", name)
}
