package ir

import "fmt"

// Verify checks the model's main graph; see Graph.Verify.
func (m *Model) Verify() error {
	if m.Graph == nil {
		return fmt.Errorf("model has no graph")
	}
	return m.Graph.Verify()
}

// Verify checks that the graph is well formed and returns the first problem:
// every value has one definition and a unique name (SSA), every node input is
// defined before it is read (here or in an enclosing graph), each node output
// names its node as producer, graph outputs are defined, initializers agree
// with their declared types, and attributes carry the field their kind says.
func (g *Graph) Verify() error {
	return g.verify(map[*Value]bool{}, map[string]bool{})
}

func (g *Graph) verify(outer map[*Value]bool, outerNames map[string]bool) error {
	defined := map[*Value]bool{}
	for v := range outer {
		defined[v] = true
	}
	names := map[string]bool{}
	for n := range outerNames {
		names[n] = true
	}
	define := func(v *Value, what string) error {
		if v == nil {
			return nil
		}
		if v.Name == "" {
			return fmt.Errorf("graph %q: %s has no name", g.Name, what)
		}
		if names[v.Name] {
			return fmt.Errorf("graph %q: value %q is defined twice (%s)", g.Name, v.Name, what)
		}
		names[v.Name] = true
		defined[v] = true
		return nil
	}
	for _, v := range g.Initializers {
		if v.Const == nil {
			return fmt.Errorf("graph %q: initializer %q has no data", g.Name, v.Name)
		}
		if err := checkConstType(v); err != nil {
			return fmt.Errorf("graph %q: %w", g.Name, err)
		}
	}
	for _, v := range g.Inputs {
		if v.Producer != nil {
			return fmt.Errorf("graph %q: input %q has a producer", g.Name, v.Name)
		}
		if err := define(v, "graph input"); err != nil {
			return err
		}
	}
	for _, v := range g.Initializers {
		if defined[v] && !outer[v] {
			continue // an input with a default value
		}
		if err := define(v, "initializer"); err != nil {
			return err
		}
	}
	for _, n := range g.Nodes {
		if n.OpType == "" {
			return fmt.Errorf("graph %q: %s has no op type", g.Name, n)
		}
		for i, v := range n.Inputs {
			if v != nil && !defined[v] {
				return fmt.Errorf("graph %q: %s reads %q (input %d), which is not defined before it", g.Name, n, v.Name, i)
			}
		}
		for _, a := range n.Attrs {
			if err := checkAttr(a); err != nil {
				return fmt.Errorf("graph %q: %s: %w", g.Name, n, err)
			}
		}
		for _, sg := range n.Subgraphs() {
			if err := sg.verify(defined, names); err != nil {
				return fmt.Errorf("graph %q: in a subgraph of %s: %w", g.Name, n, err)
			}
		}
		for i, o := range n.Outputs {
			if o == nil {
				continue
			}
			if o.Producer != n {
				return fmt.Errorf("graph %q: %s output %d %q does not name the node as its producer", g.Name, n, i, o.Name)
			}
			if o.Const != nil {
				return fmt.Errorf("graph %q: %s output %q also holds constant data", g.Name, n, o.Name)
			}
			if err := define(o, n.String()+" output"); err != nil {
				return err
			}
		}
	}
	for i, v := range g.Outputs {
		if v == nil {
			return fmt.Errorf("graph %q: output %d is missing", g.Name, i)
		}
		if !defined[v] {
			return fmt.Errorf("graph %q: output %q is not defined by any node, input or initializer", g.Name, v.Name)
		}
	}
	return nil
}

func checkConstType(v *Value) error {
	t := v.Const
	if v.Type.Kind != TensorKind {
		return fmt.Errorf("initializer %q has non-tensor type %s", v.Name, v.Type)
	}
	if v.Type.Elem != t.DType {
		return fmt.Errorf("initializer %q holds %s data but is declared %s", v.Name, t.DType, v.Type)
	}
	if v.Type.Shape.Ranked && !v.Type.Shape.Equal(t.Shape()) {
		// Symbolic or unknown dims may stand for the data's sizes.
		if len(v.Type.Shape.Dims) != len(t.Dims) {
			return fmt.Errorf("initializer %q has shape %v but is declared %s", v.Name, t.Dims, v.Type)
		}
		for i, d := range v.Type.Shape.Dims {
			if d.IsStatic() && d.Value != t.Dims[i] {
				return fmt.Errorf("initializer %q has shape %v but is declared %s", v.Name, t.Dims, v.Type)
			}
		}
	}
	if want := t.Len(); t.DType == String {
		if int64(len(t.Strings)) != want {
			return fmt.Errorf("initializer %q has %d strings for shape %v", v.Name, len(t.Strings), t.Dims)
		}
	} else if RawLen(t.DType, want) != len(t.Raw) {
		return fmt.Errorf("initializer %q has %d bytes of data for %s%v (want %d)", v.Name, len(t.Raw), t.DType, t.Dims, RawLen(t.DType, want))
	}
	return nil
}

func checkAttr(a *Attribute) error {
	if a.Name == "" {
		return fmt.Errorf("attribute with no name")
	}
	bad := false
	switch a.Kind {
	case AttrTensor:
		bad = a.T == nil
	case AttrGraph:
		bad = a.G == nil
	case AttrSparseTensor:
		bad = a.Sparse == nil
	case AttrTypeProto:
		bad = a.TP == nil
	case AttrFloat, AttrInt, AttrString, AttrFloats, AttrInts, AttrStrings, AttrTensors, AttrGraphs, AttrSparseTensors, AttrTypeProtos:
	default:
		if a.RefAttrName == "" {
			return fmt.Errorf("attribute %q has unknown kind %d", a.Name, a.Kind)
		}
	}
	if bad {
		return fmt.Errorf("attribute %q of kind %s has no value", a.Name, a.Kind)
	}
	return nil
}
