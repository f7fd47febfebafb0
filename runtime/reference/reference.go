// Package reference is kiln's reference executor: it runs an ir graph node
// by node with the registry's reference kernels. It is the oracle every
// compiled backend is tested against, and the portable fallback.
package reference

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Executor runs one model. It is safe for concurrent Run calls: Run keeps
// its state on the stack.
type Executor struct {
	model   *ir.Model
	opsets  ops.Opsets
	schemas map[*ir.Node]*ops.Schema
	// lastUse is the index of the last node reading each value, so Run can
	// drop intermediates early.
	lastUse map[*ir.Value]int
	// feeds are the graph inputs a caller must (or, for inputs with an
	// initializer default, may) provide.
	feeds []*ir.Value
	// limits bound every tensor: static ones at New, each node's outputs
	// again before its kernel runs (their shapes may depend on the inputs).
	limits ir.Limits
}

// New prepares a model: it resolves every node's schema, rejects what kiln
// does not support (listing every unsupported op, opset and dtype at once),
// and runs shape inference, which checks the model's shapes and sizes
// against the default limits.
func New(m *ir.Model) (*Executor, error) { return NewWithin(m, ir.Limits{}) }

// NewWithin is New under the given limits (zero fields take their
// defaults).
func NewWithin(m *ir.Model, lim ir.Limits) (*Executor, error) {
	if err := m.Verify(); err != nil {
		return nil, err
	}
	e := &Executor{model: m, opsets: ops.OpsetsOf(m), schemas: map[*ir.Node]*ops.Schema{}, lastUse: map[*ir.Value]int{},
		limits: lim.OrDefaults()}
	if err := Unsupported(m); err != nil {
		return nil, err
	}
	if _, err := ops.InferShapesWithin(m, e.limits); err != nil {
		return nil, err
	}
	// Inference has typed the intermediates: check their dtypes too.
	if err := Unsupported(m); err != nil {
		return nil, err
	}
	e.resolveSchemas(m.Graph)
	for i, n := range m.Graph.Nodes {
		for _, v := range n.Inputs {
			e.lastUse[v] = i
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.FreeValues() {
				e.lastUse[v] = i
			}
		}
	}
	for _, v := range m.Graph.Outputs {
		e.lastUse[v] = len(m.Graph.Nodes)
	}
	e.feeds = m.Graph.Inputs
	return e, nil
}

// resolveSchemas records the schema of every node of g and of its
// subgraphs, at any depth.
func (e *Executor) resolveSchemas(g *ir.Graph) {
	for _, n := range g.Nodes {
		s, _ := e.opsets.Schema(n)
		e.schemas[n] = s
		for _, sg := range n.Subgraphs() {
			e.resolveSchemas(sg)
		}
	}
}

// scope is the values one graph's run has computed, and the scope of the
// graph enclosing it: a subgraph reads its enclosing graphs' values
// directly.
type scope struct {
	vals  map[*ir.Value]*ir.Tensor
	outer *scope
}

func (sc *scope) get(v *ir.Value) *ir.Tensor {
	for ; sc != nil; sc = sc.outer {
		if t, ok := sc.vals[v]; ok {
			return t
		}
	}
	return nil
}

// UnsupportedErrors is every unsupported op, opset and dtype of a model.
type UnsupportedErrors = ops.UnsupportedErrors

// Unsupported lists each distinct op/opset/dtype combination of the model
// that the reference kernels do not implement, or returns nil.
func Unsupported(m *ir.Model) error {
	opsets := ops.OpsetsOf(m)
	seen := map[string]bool{}
	var list UnsupportedErrors
	var walk func(g *ir.Graph)
	walk = func(g *ir.Graph) {
		for _, n := range g.Nodes {
			for _, sg := range n.Subgraphs() {
				walk(sg)
			}
			var ue *ops.UnsupportedError
			s, err := opsets.Schema(n)
			if err != nil {
				if !errors.As(err, &ue) {
					ue = &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Reason: err.Error()}
				}
			} else if d := primaryType(n); d != ir.Undefined && !s.SupportsType(d) {
				ue = &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain], DType: d}
			}
			if ue != nil && !seen[ue.Error()] {
				seen[ue.Error()] = true
				list = append(list, ue)
			}
		}
	}
	walk(m.Graph)
	var ue *ops.UnsupportedError
	if errors.As(ops.CheckOpsets(m), &ue) {
		list = append(list, ue)
	}
	for _, v := range append(append([]*ir.Value{}, m.Graph.Inputs...), m.Graph.Outputs...) {
		if !executableType(v.Type) {
			ue := &ops.UnsupportedError{Op: "value " + v.Name, Reason: "non-tensor type " + v.Type.String()}
			list = append(list, ue)
		}
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// executableType reports whether the executor takes or gives values of type
// t: tensors, and sequences and optionals of them (not maps or sparse
// tensors).
func executableType(t ir.Type) bool {
	switch t.Kind {
	case ir.TensorKind, ir.UnknownKind:
		return true
	case ir.SequenceKind, ir.OptionalKind:
		return t.Inner == nil || executableType(*t.Inner)
	}
	return false
}

// sameKind reports whether value t is of the kind (tensor, sequence,
// optional) that type want says, with its element type, where want knows
// them.
func sameKind(want ir.Type, t *ir.Tensor) bool {
	switch want.Kind {
	case ir.UnknownKind:
		return true
	case ir.TensorKind:
		return t.IsTensor()
	}
	if want.Kind != t.Kind {
		return false
	}
	inner := want.Inner
	for inner != nil && inner.Kind != ir.TensorKind {
		inner = inner.Inner
	}
	return inner == nil || inner.Elem == ir.Undefined || inner.Elem == t.DType
}

// primaryType is the element type of a node's first input, or of its first
// output for generators; Undefined when not yet known.
func primaryType(n *ir.Node) ir.DType {
	if v := n.Input(0); v != nil {
		return v.Type.Elem
	}
	if v := n.Output(0); v != nil {
		return v.Type.Elem
	}
	return ir.Undefined
}

// Inputs returns the graph inputs Run accepts.
func (e *Executor) Inputs() []*ir.Value { return e.feeds }

// Run executes the graph on named inputs and returns the outputs by name.
func (e *Executor) Run(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	g := e.model.Graph
	env := map[*ir.Value]*ir.Tensor{}
	for _, v := range g.Initializers {
		env[v] = v.Const
	}
	if err := e.bindInputs(inputs, env); err != nil {
		return nil, err
	}
	sc := &scope{vals: env}
	for i, n := range g.Nodes {
		outs, err := e.runNode(n, sc)
		if err != nil {
			return nil, err
		}
		for k, o := range n.Outputs {
			if o != nil {
				env[o] = outs[k]
			}
		}
		for _, v := range n.Inputs {
			if v != nil && e.lastUse[v] == i && v.Const == nil {
				delete(env, v)
			}
		}
	}
	result := map[string]*ir.Tensor{}
	for _, v := range g.Outputs {
		t := env[v]
		if t == nil {
			return nil, fmt.Errorf("output %q was not computed", v.Name)
		}
		result[v.Name] = t
	}
	return result, nil
}

// runGraph runs a subgraph (an If branch, a Loop or Scan body) on tensors
// for its inputs, in a scope inside outer, and returns its outputs.
func (e *Executor) runGraph(g *ir.Graph, inputs []*ir.Tensor, outer *scope) ([]*ir.Tensor, error) {
	if len(inputs) != len(g.Inputs) {
		return nil, fmt.Errorf("graph %q takes %d inputs, got %d", g.Name, len(g.Inputs), len(inputs))
	}
	sc := &scope{vals: make(map[*ir.Value]*ir.Tensor, len(g.Nodes)+len(g.Inputs)), outer: outer}
	for _, v := range g.Initializers {
		sc.vals[v] = v.Const
	}
	for i, v := range g.Inputs {
		sc.vals[v] = inputs[i]
	}
	for _, n := range g.Nodes {
		outs, err := e.runNode(n, sc)
		if err != nil {
			return nil, err
		}
		for k, o := range n.Outputs {
			if o != nil {
				sc.vals[o] = outs[k]
			}
		}
	}
	result := make([]*ir.Tensor, len(g.Outputs))
	for i, v := range g.Outputs {
		if result[i] = sc.get(v); result[i] == nil {
			return nil, fmt.Errorf("graph %q: output %q was not computed", g.Name, v.Name)
		}
	}
	return result, nil
}

func (e *Executor) runNode(n *ir.Node, sc *scope) (outs []*ir.Tensor, err error) {
	s := e.schemas[n]
	if s == nil {
		return nil, fmt.Errorf("%s: no schema", n)
	}
	in := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		if v != nil {
			in[i] = sc.get(v)
		}
	}
	c := ops.NewKernelContext(s, n, e.opsets[n.Domain], in)
	c.Opsets = e.opsets
	c.Limits = e.limits
	c.RunGraph = func(g *ir.Graph, inputs []*ir.Tensor) ([]*ir.Tensor, error) { return e.runGraph(g, inputs, sc) }
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: internal error in the reference kernel: %v\n%s", n, r, debug.Stack())
		}
	}()
	// The outputs' sizes, from the shapes the node is about to run on,
	// before the kernel allocates them: an Expand or Tile to a shape that
	// only the inputs give must fail here, not in the allocator (which
	// kills the process) or by wrapping to a small size. Where inference
	// cannot tell, the kernel reports its own error.
	if types, err := ops.RunTypes(s, n, e.opsets[n.Domain], e.opsets, in); err == nil {
		for k, o := range n.Outputs {
			if o != nil && k < len(types) {
				if err := e.limits.CheckType(fmt.Sprintf("%s: output %q", n, o.Name), types[k]); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := s.Run(c); err != nil {
		return nil, err
	}
	for k, o := range n.Outputs {
		if o == nil {
			continue
		}
		t := c.Outputs[k]
		if t == nil {
			return nil, fmt.Errorf("%s: the reference kernel did not produce output %q", n, o.Name)
		}
		if o.Type.Elem != ir.Undefined && t.DType != o.Type.Elem {
			return nil, fmt.Errorf("%s: output %q is %s but was inferred %s", n, o.Name, t.DType, o.Type)
		}
		if !sameKind(o.Type, t) {
			return nil, fmt.Errorf("%s: output %q is a %s but was inferred %s", n, o.Name, t.Type(), o.Type)
		}
	}
	return c.Outputs, nil
}

// bindInputs checks the caller's tensors against the declared inputs: every
// required input present, no unknown names, dtypes equal, ranks equal,
// static dims equal and symbolic dims bound consistently.
func (e *Executor) bindInputs(inputs map[string]*ir.Tensor, env map[*ir.Value]*ir.Tensor) error {
	byName := map[string]*ir.Value{}
	for _, v := range e.feeds {
		byName[v.Name] = v
	}
	var names []string
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if byName[name] == nil {
			return fmt.Errorf("unknown input %q; the model's inputs are %s", name, inputNames(e.feeds))
		}
	}
	symbols := map[string]int64{}
	for _, v := range e.feeds {
		t, ok := inputs[v.Name]
		if !ok {
			if v.Const != nil {
				continue
			}
			return fmt.Errorf("missing input %q (%s)", v.Name, v.Type)
		}
		if err := CheckTensor(v, t, symbols); err != nil {
			return err
		}
		env[v] = t
	}
	return nil
}

// CheckTensor checks one input tensor against its declaration, binding
// symbolic dims in symbols.
func CheckTensor(v *ir.Value, t *ir.Tensor, symbols map[string]int64) error {
	if t == nil {
		return fmt.Errorf("input %q is nil", v.Name)
	}
	want := v.Type
	if want.Kind == ir.SequenceKind || want.Kind == ir.OptionalKind || !t.IsTensor() {
		return checkCompound(v, want, t)
	}
	if want.Elem != ir.Undefined && t.DType != want.Elem {
		return fmt.Errorf("input %q: got %s%v, the model declares %s", v.Name, t.DType, t.Dims, want)
	}
	if !want.Shape.Ranked {
		return nil
	}
	if len(t.Dims) != len(want.Shape.Dims) {
		return fmt.Errorf("input %q: got shape %v (rank %d), the model declares %s (rank %d)", v.Name, t.Dims, len(t.Dims), want, len(want.Shape.Dims))
	}
	for i, d := range want.Shape.Dims {
		got := t.Dims[i]
		switch {
		case d.IsStatic() && d.Value != got:
			return fmt.Errorf("input %q: got shape %v, the model declares %s (dim %d must be %d)", v.Name, t.Dims, want, i, d.Value)
		case d.IsSymbolic():
			if b, ok := symbols[d.Param]; ok && b != got {
				return fmt.Errorf("input %q: got shape %v, but %s is already %d", v.Name, t.Dims, d.Param, b)
			}
			symbols[d.Param] = got
		}
	}
	// Checked arithmetic: dims whose byte size wraps around must not
	// match a short buffer.
	if size, err := ir.ByteSize(t.DType, t.Dims); err != nil {
		return fmt.Errorf("input %q: %s%v: %w", v.Name, t.DType, t.Dims, err)
	} else if t.DType != ir.String && size != int64(len(t.Raw)) {
		return fmt.Errorf("input %q: %d bytes of data for %s%v", v.Name, len(t.Raw), t.DType, t.Dims)
	}
	return nil
}

// checkCompound checks a sequence or optional input against its declared
// type: the kind, then each element as a tensor of the element type (whose
// symbolic dims may differ from one element to the next).
func checkCompound(v *ir.Value, want ir.Type, t *ir.Tensor) error {
	if want.Kind == ir.UnknownKind {
		return nil // an input the model does not type takes any value
	}
	if want.Kind != t.Kind {
		return fmt.Errorf("input %q: got a %s, the model declares %s", v.Name, t.Type(), want)
	}
	if want.Inner == nil {
		return nil
	}
	for i, e := range t.Elems {
		elem := &ir.Value{Name: fmt.Sprintf("%s[%d]", v.Name, i), Type: *want.Inner}
		if err := CheckTensor(elem, e, map[string]int64{}); err != nil {
			return err
		}
	}
	if t.IsTensor() || len(t.Elems) > 0 || want.Inner.Kind != ir.TensorKind {
		return nil
	}
	if d := want.Inner.Elem; d != ir.Undefined && t.DType != d {
		return fmt.Errorf("input %q: an empty %s of %s, the model declares %s", v.Name, t.Type(), t.DType, want)
	}
	return nil
}

func inputNames(vs []*ir.Value) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = fmt.Sprintf("%q", v.Name)
	}
	return strings.Join(names, ", ")
}
