package text

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/kiln-ml/kiln/ir"
)

// resolver turns the AST into ir, binding every name to its *ir.Value.
type resolver struct {
	filename string
	external map[string]*os.File // external data files opened so far, by location
	lim      ir.Limits
}

func newResolver(filename string, lim ir.Limits) *resolver {
	return &resolver{filename: filename, external: map[string]*os.File{}, lim: lim.OrDefaults()}
}

// close closes the external data files.
func (r *resolver) close() {
	for _, f := range r.external {
		f.Close()
	}
}

func errorf(pos lexer.Position, format string, args ...any) error {
	return fmt.Errorf("%s: %s", pos, fmt.Sprintf(format, args...))
}

// scope maps names to values; subgraphs see their enclosing graphs' values.
type scope struct {
	parent *scope
	values map[string]*ir.Value
}

func (s *scope) lookup(name string) *ir.Value {
	for ; s != nil; s = s.parent {
		if v, ok := s.values[name]; ok {
			return v
		}
	}
	return nil
}

func (s *scope) define(tok lexer.Token, v *ir.Value) error {
	if _, dup := s.values[v.Name]; dup {
		return errorf(tok.Pos, "value %q is defined twice", v.Name)
	}
	s.values[v.Name] = v
	return nil
}

// unquote reads a string token the way ONNX's parser does: a backslash makes
// the next byte literal.
func unquote(tok lexer.Token) string {
	s := tok.Value
	if tok.Type != tokString {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (r *resolver) model(a *astModel) (*ir.Model, error) {
	m := &ir.Model{}
	for _, f := range a.Header {
		if err := r.headerField(m, f); err != nil {
			return nil, err
		}
	}
	g, err := r.graph(a.Graph.Name, a.Graph.Body, nil)
	if err != nil {
		return nil, err
	}
	m.Graph = g
	return m, nil
}

func (r *resolver) headerField(m *ir.Model, f *astField) error {
	key := f.Key.Value
	str := func(dst *string) error {
		if f.Value == nil || f.Value.Tok.Type != tokString {
			return errorf(f.Key.Pos, "%s: expected a string", key)
		}
		*dst = unquote(f.Value.Tok)
		return nil
	}
	integer := func(dst *int64) error {
		if f.Value == nil || f.Value.Tok.Type != tokInt {
			return errorf(f.Key.Pos, "%s: expected an integer", key)
		}
		n, err := strconv.ParseInt(f.Value.Tok.Value, 10, 64)
		if err != nil {
			return errorf(f.Value.Tok.Pos, "%s: %v", key, err)
		}
		*dst = n
		return nil
	}
	pairs := func() ([]ir.StringPair, error) {
		if f.Value != nil {
			return nil, errorf(f.Key.Pos, "%s: expected a [\"key\" : value, ...] list", key)
		}
		out := make([]ir.StringPair, len(f.List))
		for i, p := range f.List {
			out[i] = ir.StringPair{Key: unquote(p.Key), Value: unquote(p.Value)}
		}
		return out, nil
	}
	switch key {
	case "ir_version":
		return integer(&m.IRVersion)
	case "model_version":
		return integer(&m.ModelVersion)
	case "producer_name":
		return str(&m.ProducerName)
	case "producer_version":
		return str(&m.ProducerVersion)
	case "domain":
		return str(&m.Domain)
	case "doc_string":
		return str(&m.DocString)
	case "metadata_props":
		ps, err := pairs()
		m.Metadata = ps
		return err
	case "opset_import":
		ps, err := pairs()
		if err != nil {
			return err
		}
		for i, p := range ps {
			v, err := strconv.ParseInt(p.Value, 10, 64)
			if err != nil || f.List[i].Value.Type != tokInt {
				return errorf(f.List[i].Value.Pos, "opset_import: expected an integer version for %q", p.Key)
			}
			m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: p.Key, Version: v})
		}
		return nil
	}
	return errorf(f.Key.Pos, "unknown model field %q", key)
}

func (r *resolver) graph(name lexer.Token, a *astGraphBody, parent *scope) (*ir.Graph, error) {
	g := &ir.Graph{Name: unquote(name)}
	sc := &scope{parent: parent, values: map[string]*ir.Value{}}

	for _, d := range a.Inputs {
		v, err := r.decl(d)
		if err != nil {
			return nil, err
		}
		if err := sc.define(d.Name, v); err != nil {
			return nil, err
		}
		g.Inputs = append(g.Inputs, v)
		if v.Const != nil {
			g.Initializers = append(g.Initializers, v)
		}
	}
	var infos []*astDecl
	for _, d := range a.Decls {
		if d.Data == nil {
			infos = append(infos, d) // bound after the nodes define their outputs
			continue
		}
		v, err := r.decl(d)
		if err != nil {
			return nil, err
		}
		// Only inputs are defined without data this early in a graph.
		if in := sc.values[v.Name]; in != nil && in.Const == nil {
			in.Const = v.Const // an initializer named like an input is its default
			v = in
		} else if err := sc.define(d.Name, v); err != nil {
			return nil, err
		}
		g.Initializers = append(g.Initializers, v)
	}
	for _, an := range a.Nodes {
		n, err := r.node(an, sc)
		if err != nil {
			return nil, err
		}
		g.Nodes = append(g.Nodes, n)
	}
	// A declaration types a node output of this graph (as frontend/onnx
	// reads value_info and outputs). Inputs, initializers and outer values
	// keep the type they were defined with; a value_info entry naming one
	// of them, or nothing, stays a detached value of its own.
	for _, d := range infos {
		t, err := r.declType(d)
		if err != nil {
			return nil, err
		}
		v := sc.values[unquote(d.Name)]
		if v == nil || v.Producer == nil {
			v = &ir.Value{Name: unquote(d.Name)}
		}
		v.Type = t
		g.ValueInfo = append(g.ValueInfo, v)
	}
	for _, d := range a.Outputs {
		if d.Data != nil {
			return nil, errorf(d.Name.Pos, "graph output %q cannot have data", unquote(d.Name))
		}
		t, err := r.declType(d)
		if err != nil {
			return nil, err
		}
		v := sc.lookup(unquote(d.Name))
		if v == nil {
			return nil, errorf(d.Name.Pos, "graph output %q is not defined", unquote(d.Name))
		}
		if v.Producer != nil && sc.values[v.Name] == v {
			v.Type = t
		}
		g.Outputs = append(g.Outputs, v)
	}
	return g, nil
}

func (r *resolver) declType(d *astDecl) (ir.Type, error) {
	if d.Type == nil {
		return ir.Type{}, nil
	}
	return r.typ(d.Type)
}

// decl makes the value a declaration introduces, with its data if any.
func (r *resolver) decl(d *astDecl) (*ir.Value, error) {
	t, err := r.declType(d)
	if err != nil {
		return nil, err
	}
	v := &ir.Value{Name: unquote(d.Name), Type: t}
	if d.Data != nil {
		if v.Const, err = r.tensor(d.Type, d.Data); err != nil {
			return nil, fmt.Errorf("%w (initializer %q)", err, v.Name)
		}
		v.Const.Name = v.Name
	}
	return v, nil
}

func (r *resolver) typ(a *astType) (ir.Type, error) {
	inner := func(a *astType) (*ir.Type, error) {
		t, err := r.typ(a)
		return &t, err
	}
	switch {
	case a.Seq != nil:
		in, err := inner(a.Seq)
		return ir.Type{Kind: ir.SequenceKind, Inner: in}, err
	case a.Optional != nil:
		in, err := inner(a.Optional)
		return ir.Type{Kind: ir.OptionalKind, Inner: in}, err
	case a.Map != nil:
		key, err := elemType(a.Map.Key)
		if err != nil {
			return ir.Type{}, err
		}
		in, err := inner(a.Map.Value)
		return ir.Type{Kind: ir.MapKind, Elem: key, Inner: in}, err
	case a.Sparse != nil:
		t, err := tensorType(a.Sparse)
		t.Kind = ir.SparseTensorKind
		return t, err
	case a.Opaque:
		return ir.Type{}, errorf(a.Pos, "opaque types are not supported")
	}
	return tensorType(a.Tensor)
}

func elemType(tok lexer.Token) (ir.DType, error) {
	d, err := ir.ParseDType(tok.Value)
	if err != nil {
		return d, errorf(tok.Pos, "expected an element type, found %q", tok.Value)
	}
	return d, nil
}

func tensorType(a *astTensorType) (ir.Type, error) {
	elem, err := elemType(a.Elem)
	if err != nil {
		return ir.Type{}, err
	}
	t := ir.Type{Kind: ir.TensorKind, Elem: elem}
	switch {
	case !a.Bracket: // `float` is a scalar
		t.Shape = ir.Shape{Ranked: true, Dims: []ir.Dim{}}
	case len(a.Dims) == 0: // `float[]` has unknown rank
	default:
		t.Shape = ir.Shape{Ranked: true, Dims: make([]ir.Dim, len(dimTokens(a.Dims)))}
		for i, tok := range dimTokens(a.Dims) {
			switch {
			case tok.Value == "?" && tok.Type == tokPunct:
				t.Shape.Dims[i] = ir.UnknownDim()
			case tok.Type == tokInt:
				n, err := strconv.ParseInt(tok.Value, 10, 64)
				if err != nil || n < 0 {
					return t, errorf(tok.Pos, "bad dimension %s", tok.Value)
				}
				t.Shape.Dims[i] = ir.D(n)
			default:
				t.Shape.Dims[i] = ir.Sym(unquote(tok))
			}
		}
	}
	return t, nil
}

// dimTokens drops the commas from a captured dims list.
func dimTokens(toks []lexer.Token) []lexer.Token {
	out := toks[:0:0]
	for _, t := range toks {
		if t.Value != "," || t.Type != tokPunct {
			out = append(out, t)
		}
	}
	return out
}

func (r *resolver) node(a *astNode, sc *scope) (*ir.Node, error) {
	n := &ir.Node{OpType: a.Op[len(a.Op)-1], Domain: strings.Join(a.Op[:len(a.Op)-1], "."), Overload: a.Overload}
	if a.Labelled {
		n.Name = unquote(a.Label)
	}
	inputs, err := splitIDs(a.Inputs)
	if err != nil {
		return nil, err
	}
	outputs, err := splitIDs(a.Outputs)
	if err != nil {
		return nil, err
	}
	for _, tok := range inputs {
		name := ""
		if tok != nil {
			name = unquote(*tok)
		}
		if name == "" {
			n.Inputs = append(n.Inputs, nil)
			continue
		}
		v := sc.lookup(name)
		if v == nil {
			return nil, errorf(tok.Pos, "undefined value %q (input of %s)", name, n)
		}
		n.Inputs = append(n.Inputs, v)
	}
	for _, aa := range append(a.Attrs, a.Attrs2...) {
		attr, err := r.attr(aa, sc)
		if err != nil {
			return nil, err
		}
		n.Attrs = append(n.Attrs, attr)
	}
	for _, tok := range outputs {
		if tok == nil || unquote(*tok) == "" {
			n.Outputs = append(n.Outputs, nil)
			continue
		}
		v := &ir.Value{Name: unquote(*tok), Producer: n}
		if err := sc.define(*tok, v); err != nil {
			return nil, err
		}
		n.Outputs = append(n.Outputs, v)
	}
	return n, nil
}

// splitIDs splits a run of names and commas into slots, nil for an empty
// slot. As in ONNX's parser, `Op(,x)` has an empty first input, `Op(x,)` has
// one input, and `""` is the clearer way to write an empty name.
func splitIDs(toks []lexer.Token) ([]*lexer.Token, error) {
	var out []*lexer.Token
	var cur *lexer.Token
	for i := range toks {
		switch tok := &toks[i]; {
		case tok.Type == tokPunct: // a comma ends the slot
			out = append(out, cur)
			cur = nil
		case tok.Type == tokString || tok.Type == tokIdent || tok.Type == tokType:
			if cur != nil {
				return nil, errorf(tok.Pos, "expected ',' before %s", tok.Value)
			}
			cur = tok
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out, nil
}
