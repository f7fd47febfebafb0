// Package ir is kiln's extended-ONNX intermediate representation: models,
// graphs in SSA form, values, tensors, types and attributes. Every ONNX model
// reads into it and writes back from it faithfully; kiln's own ops live in
// domain "kiln".
package ir

import "slices"

// KilnDomain is the operator domain of kiln's extended ops (fused, gradient,
// quantized and optimizer ops).
const KilnDomain = "kiln"

// OpsetImport is one entry of a model's opset_import.
type OpsetImport struct {
	Domain  string // "" (or "ai.onnx") is the default ONNX domain
	Version int64
}

// StringPair is one metadata entry (metadata_props).
type StringPair struct{ Key, Value string }

// Model is a whole ONNX model: its header fields and its main graph.
type Model struct {
	IRVersion       int64
	OpsetImports    []OpsetImport
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	DocString       string
	Metadata        []StringPair
	Graph           *Graph
}

// Opset returns the imported version of a domain ("" and "ai.onnx" are the
// same), or 0 when the model does not import it.
func (m *Model) Opset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	for _, o := range m.OpsetImports {
		d := o.Domain
		if d == "ai.onnx" {
			d = ""
		}
		if d == domain {
			return o.Version
		}
	}
	return 0
}

// Graph is a list of nodes in topological order with its inputs, outputs and
// initializers. Values are SSA: each has one producer (a node, a graph input,
// or an initializer). A subgraph (If/Loop/Scan body) may read values of
// enclosing graphs directly.
type Graph struct {
	Name      string
	DocString string
	Inputs    []*Value
	Outputs   []*Value
	// Initializers are the constant values. An initializer may also be a
	// graph input (old-style defaults that callers can override).
	Initializers []*Value
	// SparseInitializers are ONNX sparse_initializer entries; kiln keeps them
	// for faithful round trips but does not compute with them.
	SparseInitializers []*SparseTensor
	Nodes              []*Node
	// ValueInfo lists the intermediate values whose types the model declared,
	// in the model's order, so writers reproduce value_info faithfully.
	ValueInfo []*Value
	Metadata  []StringPair
}

// Value is an SSA value: a graph input, an initializer, or a node output.
type Value struct {
	Name string
	Type Type
	// Producer is the node that computes the value; nil for graph inputs and
	// initializers.
	Producer *Node
	// Const holds an initializer's data; nil otherwise.
	Const     *Tensor
	DocString string
}

// IsConst reports whether the value is an initializer.
func (v *Value) IsConst() bool { return v != nil && v.Const != nil }

// Node is one operator application.
type Node struct {
	Name     string
	OpType   string
	Domain   string // "" is the default ONNX domain
	Overload string
	// Inputs may hold nil for an omitted optional input (ONNX's "" name).
	Inputs    []*Value
	Outputs   []*Value
	Attrs     []*Attribute
	DocString string
	Metadata  []StringPair
}

// Input returns input i, or nil when it is omitted or out of range.
func (n *Node) Input(i int) *Value {
	if i < len(n.Inputs) {
		return n.Inputs[i]
	}
	return nil
}

// Output returns output i, or nil when it is omitted or out of range.
func (n *Node) Output(i int) *Value {
	if i < len(n.Outputs) {
		return n.Outputs[i]
	}
	return nil
}

// Attr returns the attribute named name, or nil.
func (n *Node) Attr(name string) *Attribute {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// SetAttr replaces or adds an attribute.
func (n *Node) SetAttr(a *Attribute) {
	for i, old := range n.Attrs {
		if old.Name == a.Name {
			n.Attrs[i] = a
			return
		}
	}
	n.Attrs = append(n.Attrs, a)
}

// String names the node for messages: `node "conv1" (Conv)`.
func (n *Node) String() string {
	op := n.OpType
	if n.Domain != "" {
		op = n.Domain + "." + op
	}
	if n.Name == "" {
		return "node (" + op + ")"
	}
	return "node \"" + n.Name + "\" (" + op + ")"
}

// SparseTensor is ONNX's COO sparse tensor.
type SparseTensor struct {
	Values  *Tensor // 1-D values; its Name names the sparse tensor
	Indices *Tensor // int64 [NNZ] linear or [NNZ, rank] coordinates
	Dims    []int64
}

// Equal compares two sparse tensors.
func (s *SparseTensor) Equal(o *SparseTensor) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Values.Equal(o.Values) && s.Indices.Equal(o.Indices) && slices.Equal(s.Dims, o.Dims)
}
