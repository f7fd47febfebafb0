package text

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Print returns m in text syntax with all tensor data inline.
func Print(m *ir.Model) (string, error) {
	p := &printer{}
	p.model(m)
	return string(p.b), p.err
}

// PrintGraph returns g in text syntax, for golden files and dumps; what it
// cannot print is reported in a comment in place of the text.
func PrintGraph(g *ir.Graph) string {
	p := &printer{}
	p.graph(g, "")
	if p.err != nil {
		return "# " + p.err.Error() + "\n"
	}
	return string(p.b)
}

// printer appends text to b and keeps the first error; ext, when set, takes
// large initializers' data.
type printer struct {
	b   []byte
	err error
	ext *externalWriter
}

func (p *printer) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *printer) str(s ...string) {
	for _, x := range s {
		p.b = append(p.b, x...)
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// quote returns name as an identifier when it reads back as one, else as a
// string.
func quote(name string) string {
	if identRE.MatchString(name) && !typeWords[name] && !isSpecialFloat(name) {
		return name
	}
	return string(appendQuoted(nil, name))
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func (p *printer) model(m *ir.Model) {
	var fields []string
	add := func(key, val string) { fields = append(fields, key+": "+val) }
	if m.IRVersion != 0 {
		add("ir_version", strconv.FormatInt(m.IRVersion, 10))
	}
	if len(m.OpsetImports) > 0 {
		ops := make([]string, len(m.OpsetImports))
		for i, o := range m.OpsetImports {
			ops[i] = fmt.Sprintf("%s : %d", quoteString(o.Domain), o.Version)
		}
		add("opset_import", "["+strings.Join(ops, ", ")+"]")
	}
	for _, f := range []struct{ key, val string }{
		{"producer_name", m.ProducerName}, {"producer_version", m.ProducerVersion},
		{"domain", m.Domain},
	} {
		if f.val != "" {
			add(f.key, quoteString(f.val))
		}
	}
	if m.ModelVersion != 0 {
		add("model_version", strconv.FormatInt(m.ModelVersion, 10))
	}
	if m.DocString != "" {
		add("doc_string", quoteString(m.DocString))
	}
	if len(m.Metadata) > 0 {
		add("metadata_props", pairs(m.Metadata))
	}
	if len(fields) > 0 {
		p.str("<\n  ", strings.Join(fields, ",\n  "), "\n>\n")
	}
	if m.Graph == nil {
		p.fail("model has no graph")
		return
	}
	p.graph(m.Graph, "")
}

func quoteString(s string) string { return string(appendQuoted(nil, s)) }

func pairs(ps []ir.StringPair) string {
	out := make([]string, len(ps))
	for i, kv := range ps {
		out[i] = quoteString(kv.Key) + " : " + quoteString(kv.Value)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// graph prints g; ind is the indentation of the lines after the first.
func (p *printer) graph(g *ir.Graph, ind string) {
	if len(g.SparseInitializers) > 0 {
		p.fail("graph %q: sparse initializers cannot be printed", g.Name)
	}
	p.str(quote(g.Name), " (")
	for i, v := range g.Inputs {
		if i > 0 {
			p.str(", ")
		}
		p.valueInfo(v)
	}
	p.str(") => (")
	for i, v := range g.Outputs {
		if i > 0 {
			p.str(", ")
		}
		p.valueInfo(v)
	}
	p.str(")\n")
	if len(g.Initializers)+len(g.ValueInfo) > 0 {
		p.str(ind, "<\n")
		for i, v := range g.Initializers {
			p.str(ind, "  ")
			p.tensor(v.Const, v.Name, true)
			if i < len(g.Initializers)+len(g.ValueInfo)-1 {
				p.str(",")
			}
			p.str("\n")
		}
		for i, v := range g.ValueInfo {
			p.str(ind, "  ")
			p.valueInfo(v)
			if i < len(g.ValueInfo)-1 {
				p.str(",")
			}
			p.str("\n")
		}
		p.str(ind, ">\n")
	}
	p.str(ind, "{\n")
	for _, n := range g.Nodes {
		p.str(ind, "  ")
		p.node(n, ind+"  ")
		p.str("\n")
	}
	p.str(ind, "}")
	if ind == "" {
		p.str("\n")
	}
}

// valueInfo prints `type name`, or the name alone for an untyped value.
func (p *printer) valueInfo(v *ir.Value) {
	if v == nil {
		p.fail("missing value in a graph's inputs, outputs or value_info")
		return
	}
	if v.Type.Kind != ir.UnknownKind {
		p.typ(v.Type)
		p.str(" ")
	}
	p.str(quote(v.Name))
}

func (p *printer) typ(t ir.Type) {
	switch t.Kind {
	case ir.TensorKind:
		p.tensorType(t.Elem, t.Shape)
	case ir.SparseTensorKind:
		p.str("sparse_tensor(")
		p.tensorType(t.Elem, t.Shape)
		p.str(")")
	case ir.SequenceKind, ir.OptionalKind:
		p.str(map[ir.TypeKind]string{ir.SequenceKind: "seq(", ir.OptionalKind: "optional("}[t.Kind])
		p.inner(t)
		p.str(")")
	case ir.MapKind:
		p.str("map(")
		p.elem(t.Elem)
		p.str(", ")
		p.inner(t)
		p.str(")")
	default:
		p.fail("a type with no kind cannot be printed here")
	}
}

func (p *printer) inner(t ir.Type) {
	if t.Inner == nil {
		p.fail("%v type without an element type cannot be printed", t)
		return
	}
	p.typ(*t.Inner)
}

func (p *printer) elem(d ir.DType) {
	if !d.Valid() || d == ir.Undefined {
		p.fail("element type %s cannot be printed", d)
	}
	p.str(d.String())
}

// tensorType prints `float` for a scalar and `float[]` for unknown rank,
// as the syntax defines them.
func (p *printer) tensorType(elem ir.DType, s ir.Shape) {
	p.elem(elem)
	if !s.Ranked {
		p.str("[]")
		return
	}
	if len(s.Dims) == 0 {
		return
	}
	p.str("[")
	for i, d := range s.Dims {
		if i > 0 {
			p.str(",")
		}
		switch {
		case d.Param != "":
			p.str(quote(d.Param))
		case d.Value >= 0:
			p.str(strconv.FormatInt(d.Value, 10))
		default:
			p.str("?")
		}
	}
	p.str("]")
}

// tensor prints a constant: `float[2] name = {1.0, 2.0}`, or with external
// data when p.ext takes it. initializer says the name is always printed.
func (p *printer) tensor(t *ir.Tensor, name string, initializer bool) {
	if t == nil {
		p.fail("initializer %q has no data", name)
		return
	}
	p.tensorType(t.DType, ir.S(t.Dims...))
	if initializer || name != "" {
		p.str(" ", quote(name), " =")
	}
	if t.DType == ir.String {
		if int64(len(t.Strings)) != t.Len() {
			p.fail("tensor %q has %d strings for shape %v", name, len(t.Strings), t.Dims)
			return
		}
	} else if ir.RawLen(t.DType, t.Len()) != len(t.Raw) {
		p.fail("tensor %q has %d bytes for %s%v", name, len(t.Raw), t.DType, t.Dims)
		return
	}
	if initializer && p.ext.wants(t) {
		off, err := p.ext.write(t)
		if err != nil {
			p.fail("%v", err)
		}
		p.str(" ", externalPairs(p.ext.location, off, len(t.Raw)))
		return
	}
	p.str(" {")
	p.b = appendTensorData(p.b, t)
	p.str("}")
}

func (p *printer) node(n *ir.Node, ind string) {
	if n.Name != "" {
		p.str("[", quote(n.Name), "] ")
	}
	for i, v := range n.Outputs {
		if i > 0 {
			p.str(", ")
		}
		p.ref(v)
	}
	if len(n.Outputs) > 0 {
		p.str(" ")
	}
	p.str("= ")
	if n.Domain != "" {
		for _, seg := range strings.Split(n.Domain, ".") {
			if !identRE.MatchString(seg) {
				p.fail("%s: domain %q is not a dotted identifier", n, n.Domain)
			}
		}
		p.str(n.Domain, ".")
	}
	if !identRE.MatchString(n.OpType) {
		p.fail("%s: op type %q is not an identifier", n, n.OpType)
	}
	p.str(n.OpType)
	if n.Overload != "" {
		if !identRE.MatchString(n.Overload) {
			p.fail("%s: overload %q is not an identifier", n, n.Overload)
		}
		p.str(":", n.Overload)
	}
	// Attributes holding subgraphs go after the inputs, so the inputs stay
	// on the node's line.
	subgraphs := len(n.Subgraphs()) > 0
	if len(n.Attrs) > 0 && !subgraphs {
		p.attrs(n.Attrs, ind, false)
	}
	p.str(" (")
	for i, v := range n.Inputs {
		if i > 0 {
			p.str(", ")
		}
		p.ref(v)
	}
	p.str(")")
	if subgraphs {
		p.attrs(n.Attrs, ind, true)
	}
}

// ref prints a node input or output name; `""` for an omitted one.
func (p *printer) ref(v *ir.Value) {
	if v == nil {
		p.str(`""`)
		return
	}
	p.str(quote(v.Name))
}

// attrs prints `<a = 1, b = [2, 3]>` on the node's line, or one attribute
// a line when subgraphs make the list long.
func (p *printer) attrs(as []*ir.Attribute, ind string, multiline bool) {
	sep, open, end := ", ", " <", ">"
	if multiline {
		sep, open, end = ",\n"+ind+"  ", " <\n"+ind+"  ", "\n"+ind+">"
	}
	p.str(open)
	for i, a := range as {
		if i > 0 {
			p.str(sep)
		}
		p.attr(a, ind+"  ")
	}
	p.str(end)
}

func (p *printer) attr(a *ir.Attribute, ind string) {
	p.str(quoteAttrName(a.Name))
	if a.RefAttrName != "" {
		if a.Kind != ir.AttrUndefined {
			p.str(": ", a.Kind.String())
		}
		p.str(" = @", a.RefAttrName)
		if !identRE.MatchString(a.RefAttrName) {
			p.fail("attribute %q refers to %q, which is not an identifier", a.Name, a.RefAttrName)
		}
		return
	}
	n := 0
	switch a.Kind {
	case ir.AttrFloat, ir.AttrInt, ir.AttrString, ir.AttrTensor, ir.AttrGraph, ir.AttrTypeProto:
		p.str(" = ")
		p.attrElem(a.Kind, a, 0, ind)
		return
	case ir.AttrFloats:
		n = len(a.Floats)
	case ir.AttrInts:
		n = len(a.Ints)
	case ir.AttrStrings:
		n = len(a.Strings)
	case ir.AttrTensors:
		n = len(a.Tensors)
	case ir.AttrGraphs:
		n = len(a.Graphs)
	case ir.AttrTypeProtos:
		n = len(a.TypeProtos)
	default:
		p.fail("attribute %q of kind %s cannot be printed", a.Name, a.Kind)
		return
	}
	if n == 0 {
		p.str(": ", a.Kind.String())
	}
	p.str(" = [")
	for i := 0; i < n; i++ {
		if i > 0 {
			p.str(", ")
		}
		p.attrElem(a.Kind, a, i, ind)
	}
	p.str("]")
}

// quoteAttrName prints an attribute name. Type words need no quotes here;
// other non-identifiers are quoted, which kiln reads but ONNX's parser does
// not.
func quoteAttrName(name string) string {
	if identRE.MatchString(name) {
		return name
	}
	return quoteString(name)
}

// attrElem prints element i of a list attribute, or the value of a single
// one.
func (p *printer) attrElem(kind ir.AttrKind, a *ir.Attribute, i int, ind string) {
	switch kind {
	case ir.AttrFloat:
		p.b = appendFloat32(p.b, a.F)
	case ir.AttrFloats:
		p.b = appendFloat32(p.b, a.Floats[i])
	case ir.AttrInt:
		p.b = strconv.AppendInt(p.b, a.I, 10)
	case ir.AttrInts:
		p.b = strconv.AppendInt(p.b, a.Ints[i], 10)
	case ir.AttrString:
		p.b = appendQuoted(p.b, a.S)
	case ir.AttrStrings:
		p.b = appendQuoted(p.b, a.Strings[i])
	case ir.AttrTensor:
		p.attrTensor(a.T)
	case ir.AttrTensors:
		p.attrTensor(a.Tensors[i])
	case ir.AttrGraph:
		p.subgraph(a.G, ind)
	case ir.AttrGraphs:
		p.subgraph(a.Graphs[i], ind)
	case ir.AttrTypeProto:
		if a.TP == nil {
			p.fail("attribute %q has no type", a.Name)
			return
		}
		p.typ(*a.TP)
	case ir.AttrTypeProtos:
		p.typ(a.TypeProtos[i])
	}
}

func (p *printer) attrTensor(t *ir.Tensor) {
	if t == nil {
		p.fail("tensor attribute has no value")
		return
	}
	p.tensor(t, t.Name, false)
}

func (p *printer) subgraph(g *ir.Graph, ind string) {
	if g == nil {
		p.fail("graph attribute has no value")
		return
	}
	p.graph(g, ind)
}
