// Package opcase reads one-line op test cases and turns them into models
// with inputs, for tests that run an op on a backend and compare it with
// the reference executor:
//
//	Slice-13 T[20,10,5], int64[2]=[0 1], int64[2]=[3 -1], int64[2]=[0 2]
//	Gather-13(axis=1) T[3,4], int64[2]~[0 -1]
//	TopK-11(largest=0) T[3,5], int64[1]=[2] -> 2
//
// An input is a type (T is the element type under test), then optionally
// its values: "=[...]" makes a constant (an initializer), "~[...]" a graph
// input with those values (a value 0x... is the element's bits: a NaN's
// payload, -0), "~KIND" a graph input drawn at random of a
// kind (pos: > 0, nz: non-zero, unit: in (-1, 1), idx(N): indices in
// [-N, N)), "=rand" a constant drawn at random; without values it is a
// random graph input. "_" is an omitted optional input. Attributes are
// ints, floats (with a '.' or 'e'), "strings", lists [1 2], [0.5 1.5] or
// ["a" "b"], or a dtype named by T. "-> N" sets the number of outputs
// (default 1). An op of another domain is named after it, its OPSET the
// domain's version: ai.onnx.ml.Binarizer-1. A case the kernel layer's
// definition is meant to refuse ends in !refused("WHY"), WHY a part of
// the refusal's message:
//
//	Foo-1 T[3] !refused("no kernel")
package opcase

import (
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Case is a parsed case line.
type Case struct {
	Line  string
	Op    string
	Opset int64
	Attrs []attrSpec
	Ins   []inSpec
	NOut  int

	// Domain is the op's domain ("" the default one).
	Domain string

	// Refusal, when set, is a part of the message with which the kernel
	// layer's definition is meant to refuse the case (!refused("...")).
	Refusal string
}

type attrSpec struct{ name, val string }

type inSpec struct {
	absent bool
	dtype  string // "T" or a dtype name
	dims   []int64
	konst  bool     // =[...]
	given  []string // ~[...] or =[...]
	kind   string   // ~pos, ~nz, ~unit, ~idx(N)
	idxN   int64
}

// Parse reads a case line.
func Parse(line string) (*Case, error) {
	c := &Case{Line: line, NOut: 1}
	s, refusal, err := cutRefusal(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("%q: %v", line, err)
	}
	c.Refusal = refusal
	if i := strings.LastIndex(s, "->"); i >= 0 && !strings.Contains(s[i:], `"`) { // not an Einsum equation's
		n, err := strconv.Atoi(strings.TrimSpace(s[i+2:]))
		if err != nil {
			return nil, fmt.Errorf("%q: bad output count", line)
		}
		c.NOut, s = n, strings.TrimSpace(s[:i])
	}
	head, rest, _ := strings.Cut(s, " ")
	if i := strings.IndexByte(head, '('); i >= 0 {
		// The attributes may contain spaces: take them up to the matching ')'.
		j := strings.IndexByte(s, ')')
		if j < 0 {
			return nil, fmt.Errorf("%q: unclosed attributes", line)
		}
		attrs := s[i+1 : j]
		head, rest = s[:i], strings.TrimSpace(s[j+1:])
		for _, a := range splitTop(attrs) {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				return nil, fmt.Errorf("%q: attribute %q wants name=value", line, a)
			}
			c.Attrs = append(c.Attrs, attrSpec{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	op, ver, ok := strings.Cut(head, "-")
	if !ok {
		return nil, fmt.Errorf("%q: want Op-OPSET", line)
	}
	v, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%q: bad opset %q", line, ver)
	}
	c.Op, c.Opset = op, v
	if i := strings.LastIndexByte(op, '.'); i >= 0 {
		c.Domain, c.Op = op[:i], op[i+1:]
	}
	for _, in := range splitTop(rest) {
		spec, err := parseInput(strings.TrimSpace(in))
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		c.Ins = append(c.Ins, spec)
	}
	return c, nil
}

// refusedMark starts a case's declared refusal.
const refusedMark = "!refused("

// cutRefusal splits a trailing !refused("WHY") off a case line; WHY must
// be a quoted, non-empty part of the expected message.
func cutRefusal(s string) (rest, why string, err error) {
	i := strings.LastIndex(s, refusedMark)
	if i < 0 {
		return s, "", nil
	}
	arg := strings.TrimSpace(s[i+len(refusedMark):])
	if !strings.HasSuffix(arg, ")") {
		return "", "", fmt.Errorf(`%s...) is not closed`, refusedMark)
	}
	why, err = strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(arg, ")")))
	if err != nil || why == "" {
		return "", "", fmt.Errorf(`%s...) wants a quoted, non-empty part of the refusal's message`, refusedMark)
	}
	return strings.TrimSpace(s[:i]), why, nil
}

// splitTop splits s at commas outside brackets, parentheses and quotes.
func splitTop(s string) []string {
	var out []string
	depth, start, quoted := 0, 0, false
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '[' || r == '(':
			depth++
		case r == ']' || r == ')':
			depth--
		case r == ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

func parseInput(s string) (inSpec, error) {
	if s == "_" {
		return inSpec{absent: true}, nil
	}
	var spec inSpec
	typ, vals := s, ""
	if i := strings.IndexAny(s, "=~"); i >= 0 {
		typ, vals = s[:i], s[i:]
	}
	if i := strings.IndexByte(typ, '['); i >= 0 {
		spec.dtype = typ[:i]
		body := strings.TrimSuffix(typ[i+1:], "]")
		for _, d := range strings.Split(body, ",") {
			if d = strings.TrimSpace(d); d == "" {
				continue
			}
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return spec, fmt.Errorf("bad dim %q", d)
			}
			spec.dims = append(spec.dims, n)
		}
	} else {
		spec.dtype = typ // a scalar
	}
	switch {
	case vals == "":
	case strings.HasPrefix(vals, "=[") || strings.HasPrefix(vals, "~["):
		spec.konst = vals[0] == '='
		spec.given = strings.Fields(strings.Trim(vals[1:], "[]"))
		if int64(len(spec.given)) != ir.Product(spec.dims) {
			return spec, fmt.Errorf("%q: %d values for %d elements", s, len(spec.given), ir.Product(spec.dims))
		}
	case strings.HasPrefix(vals, "~idx("):
		n, err := strconv.ParseInt(strings.TrimSuffix(vals[5:], ")"), 10, 64)
		if err != nil {
			return spec, fmt.Errorf("bad %q", vals)
		}
		spec.kind, spec.idxN = "idx", n
	case vals == "~pos" || vals == "~nz" || vals == "~unit":
		spec.kind = vals[1:]
	case vals == "=rand":
		spec.konst = true
	default:
		return spec, fmt.Errorf("bad values %q", vals)
	}
	return spec, nil
}

// Types reports whether the case is a template over T.
func (c *Case) Types() bool {
	for _, in := range c.Ins {
		if in.dtype == "T" {
			return true
		}
	}
	for _, a := range c.Attrs {
		if a.val == "T" {
			return true
		}
	}
	return false
}

// Add builds the case with T = t into graph g (value names prefixed by
// prefix), returning its outputs and the random or given values of its
// graph inputs.
func (c *Case) Add(g *ir.Graph, prefix string, t ir.DType, r *rand.Rand) ([]*ir.Value, map[string]*ir.Tensor, error) {
	feeds := map[string]*ir.Tensor{}
	var ins []*ir.Value
	for i, spec := range c.Ins {
		if spec.absent {
			ins = append(ins, nil)
			continue
		}
		d := t
		if spec.dtype != "T" {
			var err error
			if d, err = ir.ParseDType(spec.dtype); err != nil {
				return nil, nil, fmt.Errorf("%s: %v", c.Line, err)
			}
		}
		name := fmt.Sprintf("%s_in%d", prefix, i)
		val, err := spec.values(d, r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", c.Line, err)
		}
		if spec.konst {
			ins = append(ins, g.AddInitializer(name, val))
			continue
		}
		ins = append(ins, g.AddInput(name, ir.TensorType(d, ir.S(spec.dims...))))
		feeds[name] = val
	}
	var attrs []*ir.Attribute
	for _, a := range c.Attrs {
		at, err := parseAttr(a, t)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", c.Line, err)
		}
		attrs = append(attrs, at)
	}
	n := &ir.Node{Name: prefix, OpType: c.Op, Domain: c.Domain, Inputs: ins, Attrs: attrs}
	for i := 0; i < c.NOut; i++ {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprintf("%s_out%d", prefix, i), Producer: n})
	}
	g.Nodes = append(g.Nodes, n)
	g.Outputs = append(g.Outputs, n.Outputs...)
	return n.Outputs, feeds, nil
}

// Model builds one model at opset of every case of lines side by side
// (case i's names prefixed "c<i>"), with T = t, and the values of its
// graph inputs drawn from r.
func Model(lines []string, t ir.DType, opset int64, r *rand.Rand) (*ir.Model, map[string]*ir.Tensor, error) {
	g := ir.NewGraph("ops")
	feeds := map[string]*ir.Tensor{}
	for i, line := range lines {
		c, err := Parse(line)
		if err != nil {
			return nil, nil, err
		}
		_, f, err := c.Add(g, fmt.Sprintf("c%d", i), t, r)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range f {
			feeds[k] = v
		}
	}
	return NewModel(g, opset), feeds, nil
}

// NewModel wraps a graph of cases at opset in a model: the default domain
// and every other domain its nodes use import that version (a case names
// its domain's version).
func NewModel(g *ir.Graph, opset int64) *ir.Model {
	m := ir.NewModel(g, opset)
	for _, n := range g.Nodes {
		if n.Domain != "" && n.Domain != "ai.onnx" && m.Opset(n.Domain) == 0 {
			m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: n.Domain, Version: opset})
		}
	}
	return m
}

func parseAttr(a attrSpec, t ir.DType) (*ir.Attribute, error) {
	v := a.val
	switch {
	case v == "T":
		return ir.AttrI(a.name, int64(t)), nil
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		return ir.AttrS(a.name, s), err
	case strings.HasSuffix(v, "}") && strings.Contains(v, "{"): // a 1-D tensor: float{1.5 NaN}, uint8{0 6}
		name, list, _ := strings.Cut(strings.TrimSuffix(v, "}"), "{")
		d, err := ir.ParseDType(name)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %v", a.name, err)
		}
		fields := strings.Fields(list)
		fs := make([]float64, len(fields))
		for i, f := range fields {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, err
			}
			fs[i] = x
		}
		return &ir.Attribute{Name: a.name, Kind: ir.AttrTensor, T: fromFloats(d, []int64{int64(len(fs))}, fs)}, nil
	case strings.HasPrefix(v, `["`):
		var ss []string
		for _, f := range strings.Fields(strings.Trim(v, "[]")) {
			s, err := strconv.Unquote(f)
			if err != nil {
				return nil, err
			}
			ss = append(ss, s)
		}
		return &ir.Attribute{Name: a.name, Kind: ir.AttrStrings, Strings: ss}, nil
	case strings.HasPrefix(v, "["):
		fields := strings.Fields(strings.Trim(v, "[]"))
		if strings.ContainsAny(v, ".e") {
			fs := make([]float32, len(fields))
			for i, f := range fields {
				x, err := strconv.ParseFloat(f, 32)
				if err != nil {
					return nil, err
				}
				fs[i] = float32(x)
			}
			return &ir.Attribute{Name: a.name, Kind: ir.AttrFloats, Floats: fs}, nil
		}
		is := make([]int64, len(fields))
		for i, f := range fields {
			x, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, err
			}
			is[i] = x
		}
		return ir.AttrIs(a.name, is...), nil
	case strings.ContainsAny(v, ".e") && !strings.HasPrefix(v, "-") || strings.HasPrefix(v, "-") && strings.ContainsAny(v[1:], ".e"):
		x, err := strconv.ParseFloat(v, 32)
		return ir.AttrF(a.name, float32(x)), err
	}
	x, err := strconv.ParseInt(v, 10, 64)
	return ir.AttrI(a.name, x), err
}

// values returns the input's data: given, or random of its kind.
func (spec inSpec) values(d ir.DType, r *rand.Rand) (*ir.Tensor, error) {
	n := ir.Product(spec.dims)
	if spec.given != nil {
		f := make([]float64, n)
		bits := map[int]uint64{}
		for i, s := range spec.given {
			if h, ok := strings.CutPrefix(s, "0x"); ok && !strings.ContainsAny(h, "pP") {
				u, err := strconv.ParseUint(h, 16, 64)
				if err != nil {
					return nil, err
				}
				bits[i] = u
				continue
			}
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, err
			}
			f[i] = x
		}
		t := fromFloats(d, spec.dims, f)
		for i, u := range bits {
			if err := setBits(t, i, u); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	f := make([]float64, n)
	for i := range f {
		f[i] = spec.random(d, r)
	}
	return fromFloats(d, spec.dims, f), nil
}

func (spec inSpec) random(d ir.DType, r *rand.Rand) float64 {
	switch spec.kind {
	case "idx":
		return float64(r.Int63n(2*spec.idxN) - spec.idxN)
	case "unit":
		return r.Float64()*1.8 - 0.9
	}
	var x float64
	switch {
	case d == ir.Bool:
		return float64(r.Intn(2))
	case d.IsFloat():
		x = r.NormFloat64() * 2
		if d == ir.Float16 || d == ir.BFloat16 {
			x = math.Round(x*64) / 64 // exactly representable
		}
	case d.IsSmallFloat():
		x = r.NormFloat64() * 2 // rounded into the type by fromFloats
	case d.IsPackedInt():
		lo, hi := ir.PackedIntRange(d)
		x = float64(lo + r.Int63n(hi-lo+1))
	case d.IsUnsigned():
		x = float64(r.Intn(20))
	default:
		x = float64(r.Intn(21) - 10)
	}
	switch spec.kind {
	case "pos":
		x = math.Abs(x) + 1
		if d.IsFloat() {
			x -= 0.5
		}
	case "nz":
		if x == 0 {
			x = 3
		}
	}
	return x
}

// fromFloats makes a tensor of type d (integers truncated, bools x != 0,
// small floats rounded as Cast rounds by default).
func fromFloats(d ir.DType, dims []int64, f []float64) *ir.Tensor {
	t := ir.NewTensor(d, dims...)
	for i, x := range f {
		switch {
		case d == ir.Float32:
			ir.Data[float32](t)[i] = float32(x)
		case d == ir.Float64:
			ir.Data[float64](t)[i] = x
		case d == ir.Float16:
			ir.Data[uint16](t)[i] = ir.Float32ToHalf(float32(x))
		case d == ir.BFloat16:
			ir.Data[uint16](t)[i] = ir.Float32ToBFloat16(float32(x))
		case d == ir.Bool:
			if x != 0 {
				t.Raw[i] = 1
			}
		case d.IsSmallFloat():
			t.SetCode(i, ir.EncodeSmallFloat(d, x, true))
		case d.IsPackedInt():
			t.SetCode(i, uint8(int64(x)))
		default:
			setInt(t, i, int64(x))
		}
	}
	return t
}

// setBits sets element i of t to the bits u (little-endian, as ir
// stores elements): a NaN's payload, a signaling NaN, -0; a packed
// type's code.
func setBits(t *ir.Tensor, i int, u uint64) error {
	if b := t.DType.PackedBits(); b > 0 {
		if u>>b != 0 {
			return fmt.Errorf("bits %#x do not fit a %s", u, t.DType)
		}
		t.SetCode(i, uint8(u))
		return nil
	}
	w := t.DType.Size()
	if w == 0 || t.DType.PackedBits() != 0 || w < 8 && u>>(8*w) != 0 {
		return fmt.Errorf("bits %#x do not fit a %s", u, t.DType)
	}
	for b := 0; b < w; b++ {
		t.Raw[i*w+b] = byte(u >> (8 * b))
	}
	return nil
}

func setInt(t *ir.Tensor, i int, v int64) {
	switch t.DType {
	case ir.Int8:
		ir.Data[int8](t)[i] = int8(v)
	case ir.Uint8:
		ir.Data[uint8](t)[i] = uint8(v)
	case ir.Int16:
		ir.Data[int16](t)[i] = int16(v)
	case ir.Uint16:
		ir.Data[uint16](t)[i] = uint16(v)
	case ir.Int32:
		ir.Data[int32](t)[i] = int32(v)
	case ir.Uint32:
		ir.Data[uint32](t)[i] = uint32(v)
	case ir.Int64:
		ir.Data[int64](t)[i] = v
	case ir.Uint64:
		ir.Data[uint64](t)[i] = uint64(v)
	}
}

// Inputs returns node n's input values as a case's model holds them: the
// fed ones (graph inputs, from feeds) and the constant ones (initializers,
// known at compile time), one slot per input, nil where the other has it.
func Inputs(n *ir.Node, feeds map[string]*ir.Tensor) (fed, consts []*ir.Tensor) {
	fed = make([]*ir.Tensor, len(n.Inputs))
	consts = make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		switch {
		case v == nil:
		case feeds[v.Name] != nil:
			fed[i] = feeds[v.Name]
		default:
			consts[i] = v.Const
		}
	}
	return fed, consts
}
