package ir

import (
	"fmt"
	"math"
)

// Diff returns a description of the first difference between two models, or
// "" when they are equal: same header, and graphs equal node by node, with
// values matched by name and tensors compared bit for bit. Round-trip tests
// of every reader and writer use it.
func Diff(a, b *Model) string {
	switch {
	case a.IRVersion != b.IRVersion:
		return fmt.Sprintf("ir_version %d != %d", a.IRVersion, b.IRVersion)
	case len(a.OpsetImports) != len(b.OpsetImports):
		return fmt.Sprintf("opset_import %v != %v", a.OpsetImports, b.OpsetImports)
	case a.ProducerName != b.ProducerName || a.ProducerVersion != b.ProducerVersion:
		return fmt.Sprintf("producer %q %q != %q %q", a.ProducerName, a.ProducerVersion, b.ProducerName, b.ProducerVersion)
	case a.Domain != b.Domain || a.ModelVersion != b.ModelVersion:
		return fmt.Sprintf("domain/model_version %q %d != %q %d", a.Domain, a.ModelVersion, b.Domain, b.ModelVersion)
	case a.DocString != b.DocString:
		return "model doc_string differs"
	}
	for i := range a.OpsetImports {
		if a.OpsetImports[i] != b.OpsetImports[i] {
			return fmt.Sprintf("opset_import %v != %v", a.OpsetImports, b.OpsetImports)
		}
	}
	if d := diffPairs("model metadata", a.Metadata, b.Metadata); d != "" {
		return d
	}
	if (a.Graph == nil) != (b.Graph == nil) {
		return "one model has no graph"
	}
	if a.Graph == nil {
		return ""
	}
	return DiffGraphs(a.Graph, b.Graph)
}

// DiffGraphs is Diff for two graphs.
func DiffGraphs(a, b *Graph) string {
	where := "graph " + fmt.Sprintf("%q", a.Name)
	if a.Name != b.Name {
		return fmt.Sprintf("graph name %q != %q", a.Name, b.Name)
	}
	if a.DocString != b.DocString {
		return where + ": doc_string differs"
	}
	if d := diffValues(where+" inputs", a.Inputs, b.Inputs); d != "" {
		return d
	}
	if d := diffValues(where+" outputs", a.Outputs, b.Outputs); d != "" {
		return d
	}
	if d := diffValues(where+" initializers", a.Initializers, b.Initializers); d != "" {
		return d
	}
	if d := diffValues(where+" value_info", a.ValueInfo, b.ValueInfo); d != "" {
		return d
	}
	if len(a.SparseInitializers) != len(b.SparseInitializers) {
		return fmt.Sprintf("%s: %d sparse initializers != %d", where, len(a.SparseInitializers), len(b.SparseInitializers))
	}
	for i := range a.SparseInitializers {
		if !a.SparseInitializers[i].Equal(b.SparseInitializers[i]) {
			return fmt.Sprintf("%s: sparse initializer %d differs", where, i)
		}
	}
	if d := diffPairs(where+" metadata", a.Metadata, b.Metadata); d != "" {
		return d
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("%s: %d nodes != %d", where, len(a.Nodes), len(b.Nodes))
	}
	for i := range a.Nodes {
		if d := diffNodes(a.Nodes[i], b.Nodes[i]); d != "" {
			return fmt.Sprintf("%s: node %d: %s", where, i, d)
		}
	}
	return ""
}

func diffNodes(a, b *Node) string {
	if a.Name != b.Name || a.OpType != b.OpType || a.Domain != b.Domain || a.Overload != b.Overload {
		return fmt.Sprintf("%s != %s", a, b)
	}
	if a.DocString != b.DocString {
		return a.String() + ": doc_string differs"
	}
	if d := diffPairs(a.String()+" metadata", a.Metadata, b.Metadata); d != "" {
		return d
	}
	if d := diffNames(a.String()+" inputs", a.Inputs, b.Inputs); d != "" {
		return d
	}
	if d := diffNames(a.String()+" outputs", a.Outputs, b.Outputs); d != "" {
		return d
	}
	for i, o := range a.Outputs {
		if o != nil && !o.Type.Equal(b.Outputs[i].Type) {
			return fmt.Sprintf("%s output %q: type %s != %s", a, o.Name, o.Type, b.Outputs[i].Type)
		}
	}
	if len(a.Attrs) != len(b.Attrs) {
		return fmt.Sprintf("%s: %d attributes != %d", a, len(a.Attrs), len(b.Attrs))
	}
	for i := range a.Attrs {
		if d := diffAttrs(a.Attrs[i], b.Attrs[i]); d != "" {
			return fmt.Sprintf("%s: attribute %q: %s", a, a.Attrs[i].Name, d)
		}
	}
	return ""
}

func diffAttrs(a, b *Attribute) string {
	if a.Name != b.Name || a.Kind != b.Kind || a.RefAttrName != b.RefAttrName || a.DocString != b.DocString {
		return fmt.Sprintf("%q %s != %q %s", a.Name, a.Kind, b.Name, b.Kind)
	}
	switch {
	case math.Float32bits(a.F) != math.Float32bits(b.F) && !(a.F != a.F && b.F != b.F):
		return fmt.Sprintf("%v != %v", a.F, b.F)
	case a.I != b.I:
		return fmt.Sprintf("%d != %d", a.I, b.I)
	case a.S != b.S:
		return fmt.Sprintf("%q != %q", a.S, b.S)
	case !a.T.Equal(b.T):
		return "tensor differs"
	case !a.Sparse.Equal(b.Sparse):
		return "sparse tensor differs"
	case (a.TP == nil) != (b.TP == nil) || (a.TP != nil && !a.TP.Equal(*b.TP)):
		return "type differs"
	case len(a.Floats) != len(b.Floats) || len(a.Ints) != len(b.Ints) || len(a.Strings) != len(b.Strings) ||
		len(a.Tensors) != len(b.Tensors) || len(a.Graphs) != len(b.Graphs) || len(a.SparseTensors) != len(b.SparseTensors) ||
		len(a.TypeProtos) != len(b.TypeProtos):
		return "list lengths differ"
	case (a.G == nil) != (b.G == nil):
		return "graph missing"
	}
	for i := range a.Floats {
		if math.Float32bits(a.Floats[i]) != math.Float32bits(b.Floats[i]) {
			return fmt.Sprintf("floats[%d] %v != %v", i, a.Floats[i], b.Floats[i])
		}
	}
	for i := range a.Ints {
		if a.Ints[i] != b.Ints[i] {
			return fmt.Sprintf("ints %v != %v", a.Ints, b.Ints)
		}
	}
	for i := range a.Strings {
		if a.Strings[i] != b.Strings[i] {
			return fmt.Sprintf("strings %q != %q", a.Strings, b.Strings)
		}
	}
	for i := range a.Tensors {
		if !a.Tensors[i].Equal(b.Tensors[i]) {
			return fmt.Sprintf("tensors[%d] differs", i)
		}
	}
	for i := range a.SparseTensors {
		if !a.SparseTensors[i].Equal(b.SparseTensors[i]) {
			return fmt.Sprintf("sparse_tensors[%d] differs", i)
		}
	}
	for i := range a.TypeProtos {
		if !a.TypeProtos[i].Equal(b.TypeProtos[i]) {
			return fmt.Sprintf("type_protos[%d] differs", i)
		}
	}
	if a.G != nil {
		if d := DiffGraphs(a.G, b.G); d != "" {
			return d
		}
	}
	for i := range a.Graphs {
		if d := DiffGraphs(a.Graphs[i], b.Graphs[i]); d != "" {
			return d
		}
	}
	return ""
}

func diffValues(where string, a, b []*Value) string {
	if d := diffNames(where, a, b); d != "" {
		return d
	}
	for i, v := range a {
		w := b[i]
		if v == nil {
			continue
		}
		if !v.Type.Equal(w.Type) {
			return fmt.Sprintf("%s: %q type %s != %s", where, v.Name, v.Type, w.Type)
		}
		if v.DocString != w.DocString {
			return fmt.Sprintf("%s: %q doc_string differs", where, v.Name)
		}
		if !v.Const.Equal(w.Const) {
			return fmt.Sprintf("%s: %q data differs", where, v.Name)
		}
	}
	return ""
}

func diffNames(where string, a, b []*Value) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%s: %d != %d", where, len(a), len(b))
	}
	for i := range a {
		an, bn := "", ""
		if a[i] != nil {
			an = a[i].Name
		}
		if b[i] != nil {
			bn = b[i].Name
		}
		if an != bn {
			return fmt.Sprintf("%s[%d]: %q != %q", where, i, an, bn)
		}
	}
	return ""
}

func diffPairs(where string, a, b []StringPair) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%s: %d entries != %d", where, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("%s: %v != %v", where, a[i], b[i])
		}
	}
	return ""
}
