package onnx

import (
	"errors"
	"fmt"
	"os"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// GraphProto field numbers.
const (
	graphNode              = 1
	graphName              = 2
	graphInitializer       = 5
	graphDocString         = 10
	graphInput             = 11
	graphOutput            = 12
	graphValueInfo         = 13
	graphSparseInitializer = 15
	graphMetadataProps     = 16
)

// decoder holds the state of one Read: where external data lives, the data
// files opened so far, how deep in nested graphs and types it is, and the
// limits (MaxNesting bounds that depth, so hostile input cannot exhaust
// the stack; MaxTensorBytes bounds each tensor before it is allocated).
type decoder struct {
	dir   string
	files map[string]*os.File
	depth int
	lim   ir.Limits
}

func newDecoder(dir string, lim ir.Limits) *decoder {
	return &decoder{dir: dir, files: map[string]*os.File{}, lim: lim.OrDefaults()}
}

func (d *decoder) close() {
	for _, f := range d.files {
		f.Close()
	}
}

// enter counts one level of nesting; the caller defers d.depth--.
func (d *decoder) enter() error {
	d.depth++
	if d.depth > d.lim.MaxNesting {
		return d.lim.NestingError("subgraphs and types")
	}
	return nil
}

// scope maps the names a graph defines to their values. Lookups fall back
// to enclosing graphs, which is how subgraphs read outer values.
type scope struct {
	names  map[string]*ir.Value
	sparse map[string]bool // sparse initializers, which ir keeps apart from values
	parent *scope
}

func (s *scope) lookup(name string) *ir.Value {
	for ; s != nil; s = s.parent {
		if v, ok := s.names[name]; ok {
			return v
		}
	}
	return nil
}

func (s *scope) isSparse(name string) bool {
	for ; s != nil; s = s.parent {
		if s.sparse[name] {
			return true
		}
	}
	return false
}

func (s *scope) define(v *ir.Value, what string) error {
	if _, dup := s.names[v.Name]; dup {
		return fmt.Errorf("value %q is defined twice (second time as %s)", v.Name, what)
	}
	s.names[v.Name] = v
	return nil
}

// rawGraph is a GraphProto split into its fields. Protobuf allows fields in
// any order, but names must be defined before they are resolved, so the
// graph is decoded in two steps.
type rawGraph struct {
	nodes, inits, inputs, outputs, valueInfo, sparse [][]byte
}

// graph decodes a GraphProto whose enclosing graph (nil for the main graph)
// has scope outer.
func (d *decoder) graph(b []byte, outer *scope) (*ir.Graph, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	g := &ir.Graph{}
	var raw rawGraph
	err := eachField(b, func(f field) (err error) {
		switch f.num {
		case graphNode:
			return collect(&raw.nodes, f)
		case graphInitializer:
			return collect(&raw.inits, f)
		case graphInput:
			return collect(&raw.inputs, f)
		case graphOutput:
			return collect(&raw.outputs, f)
		case graphValueInfo:
			return collect(&raw.valueInfo, f)
		case graphSparseInitializer:
			return collect(&raw.sparse, f)
		case graphName:
			g.Name, err = f.str()
		case graphDocString:
			g.DocString, err = f.str()
		case graphMetadataProps:
			err = collectPair(&g.Metadata, f)
		}
		return err
	})
	if err == nil {
		err = d.fillGraph(g, &raw, &scope{names: map[string]*ir.Value{}, sparse: map[string]bool{}, parent: outer})
	}
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", g.Name, err)
	}
	return g, nil
}

func collect(list *[][]byte, f field) error {
	b, err := f.bytes()
	*list = append(*list, b)
	return err
}

func (d *decoder) fillGraph(g *ir.Graph, raw *rawGraph, sc *scope) error {
	for _, b := range raw.inputs {
		v, err := d.valueInfo(b)
		if err != nil {
			return fmt.Errorf("input: %w", err)
		}
		if err := sc.define(v, "graph input"); err != nil {
			return err
		}
		g.Inputs = append(g.Inputs, v)
	}
	for _, b := range raw.inits {
		if err := d.initializer(g, b, sc); err != nil {
			return err
		}
	}
	for _, b := range raw.sparse {
		s, err := d.sparseTensor(b)
		if err != nil {
			return fmt.Errorf("sparse_initializer: %w", err)
		}
		if s.Values != nil {
			sc.sparse[s.Values.Name] = true
		}
		g.SparseInitializers = append(g.SparseInitializers, s)
	}
	// Define every node output before resolving any input, so nodes may come
	// in any order and subgraphs may read values produced later.
	nodes := make([]*rawNode, len(raw.nodes))
	for i, b := range raw.nodes {
		n, err := readNode(b)
		if err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		for _, o := range n.Outputs {
			if o != nil {
				if err := sc.define(o, n.String()+" output"); err != nil {
					return err
				}
			}
		}
		nodes[i] = n
		g.Nodes = append(g.Nodes, n.Node)
	}
	for _, n := range nodes {
		if err := d.resolveNode(n, sc); err != nil {
			return err
		}
	}
	for _, b := range raw.outputs {
		decl, err := d.valueInfo(b)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		v := sc.lookup(decl.Name)
		if v == nil {
			return fmt.Errorf("graph output %q is not defined by any node, input or initializer", decl.Name)
		}
		// The declaration types a node output of this graph. Inputs,
		// initializers and outer values keep the type they were defined with.
		if v.Producer != nil && sc.names[v.Name] == v {
			v.Type, v.DocString = decl.Type, decl.DocString
		}
		g.Outputs = append(g.Outputs, v)
	}
	for _, b := range raw.valueInfo {
		decl, err := d.valueInfo(b)
		if err != nil {
			return fmt.Errorf("value_info: %w", err)
		}
		// value_info may also name values that no longer exist (models
		// pruned by other tools); those are kept as detached values so the
		// list writes back unchanged.
		if v := sc.names[decl.Name]; v != nil && v.Producer != nil {
			v.Type, v.DocString = decl.Type, decl.DocString
			decl = v
		}
		g.ValueInfo = append(g.ValueInfo, decl)
	}
	return g.TopoSort()
}

// initializer decodes one initializer. An initializer that is also a graph
// input (an overridable default) becomes that input's constant.
func (d *decoder) initializer(g *ir.Graph, b []byte, sc *scope) error {
	t, err := d.tensor(b)
	if err != nil {
		return fmt.Errorf("initializer: %w", err)
	}
	if t.Name == "" {
		return errors.New("initializer has no name")
	}
	if v := sc.names[t.Name]; v != nil && v.Producer == nil && v.Const == nil {
		v.Const = t
		g.Initializers = append(g.Initializers, v)
		return nil
	}
	v := &ir.Value{Name: t.Name, Type: t.Type(), Const: t}
	if err := sc.define(v, "initializer"); err != nil {
		return err
	}
	g.Initializers = append(g.Initializers, v)
	return nil
}

func appendGraph(b []byte, g *ir.Graph) ([]byte, error) {
	if g == nil {
		return nil, errors.New("nil graph")
	}
	var err error
	for _, n := range g.Nodes {
		b = appendMessage(b, graphNode, func(b []byte) []byte {
			if err == nil {
				b, err = appendNode(b, n)
			}
			return b
		})
	}
	b = appendString(b, graphName, g.Name)
	for _, v := range g.Initializers {
		if v.Const == nil {
			return nil, fmt.Errorf("graph %q: initializer %q has no data", g.Name, v.Name)
		}
		t := *v.Const
		t.Name = v.Name
		b = appendMessage(b, graphInitializer, func(b []byte) []byte {
			if err == nil {
				b, err = appendTensor(b, &t)
			}
			return b
		})
	}
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", g.Name, err)
	}
	b = appendString(b, graphDocString, g.DocString)
	for _, list := range []struct {
		num protowire.Number
		vs  []*ir.Value
	}{{graphInput, g.Inputs}, {graphOutput, g.Outputs}, {graphValueInfo, g.ValueInfo}} {
		for _, v := range list.vs {
			if v == nil {
				return nil, fmt.Errorf("graph %q: nil value in its inputs, outputs or value_info", g.Name)
			}
			b = appendMessage(b, list.num, func(b []byte) []byte { return appendValueInfo(b, v) })
		}
	}
	for _, s := range g.SparseInitializers {
		b = appendMessage(b, graphSparseInitializer, func(b []byte) []byte {
			if err == nil {
				b, err = appendSparseTensor(b, s)
			}
			return b
		})
	}
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", g.Name, err)
	}
	return appendPairs(b, graphMetadataProps, g.Metadata), nil
}
