// Package ops is kiln's operator registry: for each ONNX (and kiln-domain)
// operator, one row per opset version range with its schema, its type and
// shape inference (the single source of shapes for every pass and backend)
// and its reference kernel (the oracle every backend is tested against).
//
// Rows live in one file per op family (elementwise.go, linalg.go, conv.go,
// pool.go, norm.go, shape.go, reduce.go, quant.go, rnn.go; kiln.go for the
// kiln domain), each a slice registered from init.
package ops

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Schema describes one operator over a range of opset versions: from Since
// up to (not including) the Since of the next row for the same op.
type Schema struct {
	Domain string // "" for ONNX
	Name   string
	Since  int64

	// Input and output arity; MaxInputs/MaxOutputs of -1 mean variadic.
	MinInputs, MaxInputs   int
	MinOutputs, MaxOutputs int

	Attrs []AttrDef

	// Types lists the element types the reference kernel implements for the
	// op's primary type (its first input's, or for ops without inputs its
	// first output's). nil means every numeric type and bool.
	Types []ir.DType

	// Infer sets the output types from the input types (and constant input
	// values where known). Mandatory.
	Infer func(c *InferContext) error
	// Run is the reference kernel. Mandatory.
	Run func(c *KernelContext) error

	// Elementwise ops compute each output element from the inputs'
	// elements at the same index (numpy broadcasting): fusion passes may
	// chain them into one loop.
	Elementwise bool

	// Random ops draw their outputs (random.go): no two runs need agree,
	// so a node is never evaluated at compile time or merged with another.
	Random bool

	// Containers: the op takes sequence and optional values as well as
	// tensors (the Sequence* and Optional* ops, control flow, Identity).
	// Every other op's inputs must be tensors, which inference checks.
	Containers bool
}

// takingContainers marks a family's rows Containers.
func takingContainers(rows []*Schema) []*Schema {
	for _, s := range rows {
		s.Containers = true
	}
	return rows
}

// Elementwise reports whether node n is an elementwise op (Schema).
func (o Opsets) Elementwise(n *ir.Node) bool {
	s, err := o.Schema(n)
	return err == nil && s.Elementwise
}

// AttrDef declares one attribute. A nil Default with Required false means
// the attribute is optional and has no default (its absence means
// something, as Pad's "value" or Clip's bounds).
type AttrDef struct {
	Name     string
	Kind     ir.AttrKind
	Default  *ir.Attribute
	Required bool
}

type opKey struct{ domain, name string }

var registry = map[opKey][]*Schema{}

// register adds a family's rows; families call it from init.
func register(rows []*Schema) {
	for _, s := range rows {
		if s.Infer == nil || s.Run == nil {
			panic(fmt.Sprintf("ops: %s v%d lacks inference or a reference kernel", s.Name, s.Since))
		}
		s = movesCodes(s)
		k := opKey{s.Domain, s.Name}
		for _, old := range registry[k] {
			if old.Since == s.Since {
				panic(fmt.Sprintf("ops: %s v%d registered twice", s.Name, s.Since))
			}
		}
		registry[k] = append(registry[k], s)
		sort.Slice(registry[k], func(i, j int) bool { return registry[k][i].Since < registry[k][j].Since })
	}
}

// Lookup returns the row for an op at the model's opset version of its
// domain, or an *UnsupportedError.
func Lookup(domain, name string, opset int64) (*Schema, error) {
	if domain == "ai.onnx" {
		domain = ""
	}
	rows := registry[opKey{domain, name}]
	if len(rows) == 0 {
		return nil, &UnsupportedError{Domain: domain, Op: name, Opset: opset, Reason: "operator not implemented"}
	}
	var found *Schema
	for _, s := range rows {
		if s.Since <= opset {
			found = s
		}
	}
	if found == nil {
		return nil, &UnsupportedError{Domain: domain, Op: name, Opset: opset,
			Reason: fmt.Sprintf("opset %d predates the versions kiln implements (from %d)", opset, rows[0].Since)}
	}
	return found, nil
}

// All returns every registered row, sorted by domain, name and version.
func All() []*Schema {
	var out []*Schema
	for _, rows := range registry {
		out = append(out, rows...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Since < b.Since
	})
	return out
}

// SupportsType reports whether the row's kernel handles element type d.
func (s *Schema) SupportsType(d ir.DType) bool {
	if s.Types == nil {
		return d != ir.String && d.Size() > 0 && d != ir.Complex64 && d != ir.Complex128 && d < ir.Float8E4M3FN
	}
	for _, t := range s.Types {
		if t == d {
			return true
		}
	}
	return false
}

// UnsupportedError says that kiln does not implement an op, an opset
// version of it, or an element type for it; with Op empty, an opset
// version of a whole domain.
type UnsupportedError struct {
	Domain string
	Op     string
	Opset  int64
	DType  ir.DType // Undefined when the type is not the reason
	Reason string
}

func (e *UnsupportedError) Error() string {
	if e.Op == "" { // the opset itself
		return fmt.Sprintf("unsupported: opset %d for domain %q: %s", e.Opset, e.Domain, e.Reason)
	}
	op := e.Op
	if e.Domain != "" {
		op = e.Domain + "." + op
	}
	s := fmt.Sprintf("unsupported: %s (opset %d)", op, e.Opset)
	if e.DType != ir.Undefined {
		s += " for " + e.DType.String()
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// newestOpset is the newest opset version of each domain that kiln's rows
// were written against: ONNX 1.21's opset 26 and kiln's own opset 1. Of
// the ops kiln implements, opset 23 changed the quantization rows here;
// 24 added float8e8m0 and Cast's round_mode (its own row), and bfloat16
// to TopK; 25 added int2 and uint2; 26 only added ops. New element types
// share the older rows, whose kernels refuse the types they do not compute
// with (TestOpsets24To26 holds each such version to that). A model
// importing a newer version may use semantics these rows do not implement,
// so it is refused rather than run as if it were older. Raise an entry
// only after checking the ONNX changelog's ops of the new version
// (TestNewestOpsetCoversRows keeps the rows within it).
// ai.onnx.preview.training has had one version; of ai.onnx.ml's five,
// kiln's ops (ml.go) changed at 2 and 4 (LabelEncoder), and 5 only
// changed the tree ensembles.
var newestOpset = map[string]int64{"": 26, ir.KilnDomain: 1, TrainingDomain: 1, MLDomain: 5}

// NewestOpset returns the newest opset version kiln implements for a
// domain ("" and "ai.onnx" are the same), and false for a domain it does
// not implement.
func NewestOpset(domain string) (int64, bool) {
	if domain == "ai.onnx" {
		domain = ""
	}
	v, ok := newestOpset[domain]
	return v, ok
}

// CheckOpsets refuses an opset import newer than kiln implements, for the
// domains it implements, with an *UnsupportedError whose Op is empty:
// `unsupported: opset 99 for domain "": kiln supports up to 26`. Imports of
// other domains pass: a node of such a domain is an *UnsupportedError when
// it is looked up.
func CheckOpsets(m *ir.Model) error {
	for _, imp := range m.OpsetImports {
		d := imp.Domain
		if d == "ai.onnx" {
			d = ""
		}
		if newest, ok := newestOpset[d]; ok && imp.Version > newest {
			return &UnsupportedError{Domain: d, Opset: imp.Version, Reason: fmt.Sprintf("kiln supports up to %d", newest)}
		}
	}
	return nil
}

// Opsets resolves the opset version that applies to each node's domain.
type Opsets map[string]int64

// OpsetsOf returns the model's opset imports ("ai.onnx" folded into "").
func OpsetsOf(m *ir.Model) Opsets {
	o := Opsets{}
	for _, imp := range m.OpsetImports {
		d := imp.Domain
		if d == "ai.onnx" {
			d = ""
		}
		o[d] = imp.Version
	}
	if _, ok := o[ir.KilnDomain]; !ok {
		o[ir.KilnDomain] = 1
	}
	return o
}

// Schema looks up the row for a node under these opsets.
func (o Opsets) Schema(n *ir.Node) (*Schema, error) {
	d := n.Domain
	if d == "ai.onnx" {
		d = ""
	}
	v, ok := o[d]
	if !ok {
		return nil, &UnsupportedError{Domain: d, Op: n.OpType, Reason: fmt.Sprintf("the model does not import domain %q", d)}
	}
	return Lookup(d, n.OpType, v)
}

// UnsupportedErrors is every op, opset, element type or attribute a
// backend cannot compile in a model; errors.As finds each
// *UnsupportedError.
type UnsupportedErrors []*UnsupportedError

func (u UnsupportedErrors) Error() string {
	msgs := make([]string, len(u))
	for i, e := range u {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As find each *UnsupportedError.
func (u UnsupportedErrors) Unwrap() []error {
	errs := make([]error, len(u))
	for i, e := range u {
		errs[i] = e
	}
	return errs
}
