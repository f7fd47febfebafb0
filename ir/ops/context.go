package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// attrs reads a node's attributes, falling back to the schema's defaults.
// The getters assume the schema declares the attribute; a kernel or
// inference function asking for an undeclared one is a programming error.
type attrs struct {
	node   *ir.Node
	schema *Schema
}

func (a attrs) get(name string) *ir.Attribute {
	if at := a.node.Attr(name); at != nil {
		return at
	}
	for _, d := range a.schema.Attrs {
		if d.Name == name {
			return d.Default
		}
	}
	panic(fmt.Sprintf("ops: %s reads attribute %q that its schema does not declare", a.schema.Name, name))
}

// Has reports whether the node sets the attribute (defaults do not count).
func (a attrs) Has(name string) bool { return a.node.Attr(name) != nil }

// Int returns an int attribute (or its default; 0 when there is none).
func (a attrs) Int(name string) int64 {
	if at := a.get(name); at != nil {
		return at.I
	}
	return 0
}

// Float returns a float attribute (or its default; 0 when there is none).
func (a attrs) Float(name string) float32 {
	if at := a.get(name); at != nil {
		return at.F
	}
	return 0
}

// String returns a string attribute (or its default; "" when there is none).
func (a attrs) String(name string) string {
	if at := a.get(name); at != nil {
		return at.S
	}
	return ""
}

// Ints returns an ints attribute (or its default; nil when there is none).
func (a attrs) Ints(name string) []int64 {
	if at := a.get(name); at != nil {
		return at.Ints
	}
	return nil
}

// Floats returns a floats attribute (or its default; nil when there is none).
func (a attrs) Floats(name string) []float32 {
	if at := a.get(name); at != nil {
		return at.Floats
	}
	return nil
}

// Strings returns a strings attribute (or its default; nil when none).
func (a attrs) Strings(name string) []string {
	if at := a.get(name); at != nil {
		return at.Strings
	}
	return nil
}

// Tensor returns a tensor attribute, or nil.
func (a attrs) Tensor(name string) *ir.Tensor {
	if at := a.get(name); at != nil {
		return at.T
	}
	return nil
}

// Attr returns the raw attribute (or default), or nil.
func (a attrs) Attr(name string) *ir.Attribute { return a.get(name) }

// InferContext is what an inference function sees: the node, its input
// types, the values of constant inputs, and the output types to fill in.
type InferContext struct {
	attrs
	Node  *ir.Node
	Opset int64
	// Opsets are the model's opset imports, for ops whose subgraphs hold
	// nodes of other domains (kiln.FusionGroup); nil when the caller has
	// none to give.
	Opsets Opsets
	// Inputs holds each input's type; omitted optional inputs have the zero
	// Type (Kind UnknownKind).
	Inputs []ir.Type
	// Consts holds each input's value when it is known at compile time
	// (initializers, folded constants), else nil. Shape-computing ops
	// (Reshape, Expand, Slice, ...) use it to infer static shapes.
	Consts []*ir.Tensor
	// Outputs receives one type per node output.
	Outputs []ir.Type
	// Values may receive an output's value when inference knows it without
	// the inputs' data (Shape of a static shape, Size). Nodes whose inputs
	// are all constant are evaluated by the driver instead.
	Values []*ir.Tensor
	// SymInputs holds each input's value as dims when inference follows
	// it through a shape subgraph (Shape → Gather → Concat → ...), else
	// nil; SymIn also gives a constant input's. See symvalue.go.
	SymInputs []*SymTensor
	// SymValues receives an output's value as dims (SetSym).
	SymValues []*SymTensor
	// limits are the driver's, for the bodies of ops that hold subgraphs.
	limits ir.Limits
	// known and syms are the driver's values of the enclosing graphs, which
	// an If/Loop/Scan body reads directly (inferBody); nil outside a
	// driver.
	known map[*ir.Value]*ir.Tensor
	syms  map[*ir.Value]*SymTensor
}

// In returns input i's type (the zero Type when absent).
func (c *InferContext) In(i int) ir.Type {
	if i < len(c.Inputs) {
		return c.Inputs[i]
	}
	return ir.Type{}
}

// Const returns input i's constant value, or nil when unknown or absent.
func (c *InferContext) Const(i int) *ir.Tensor {
	if i < len(c.Consts) {
		return c.Consts[i]
	}
	return nil
}

// HasInput reports whether optional input i is present.
func (c *InferContext) HasInput(i int) bool {
	return i < len(c.Node.Inputs) && c.Node.Inputs[i] != nil
}

// SetValue records output i's compile-time value.
func (c *InferContext) SetValue(i int, t *ir.Tensor) {
	if i < len(c.Values) {
		c.Values[i] = t
	}
}

// Set sets output i's type.
func (c *InferContext) Set(i int, t ir.Type) {
	if i < len(c.Outputs) {
		c.Outputs[i] = t
	}
}

// Errorf returns an error naming the node.
func (c *InferContext) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Node, fmt.Sprintf(format, args...))
}

// KernelContext is what a reference kernel sees: the node, its input
// tensors, and the outputs to produce.
type KernelContext struct {
	attrs
	Node  *ir.Node
	Opset int64
	// Opsets: as InferContext's.
	Opsets Opsets
	// Inputs holds nil for omitted optional inputs.
	Inputs []*ir.Tensor
	// Outputs receives one tensor per node output; a kernel may leave an
	// optional output nil when the node does not ask for it.
	Outputs []*ir.Tensor
	// RunGraph runs a subgraph of the node (an If branch, a Loop or Scan
	// body) on tensors for its inputs and returns its outputs. The executor
	// sets it, closing over the environment the node runs in, so that the
	// subgraph's reads of enclosing graphs' values resolve, at any depth.
	// Nil where the caller cannot run subgraphs.
	RunGraph func(g *ir.Graph, inputs []*ir.Tensor) ([]*ir.Tensor, error)
	// Limits are the executor's (zero fields: the defaults), for kernels
	// that bound their own work: Loop's iteration count.
	Limits ir.Limits
}

// In returns input i, or nil when absent.
func (c *KernelContext) In(i int) *ir.Tensor {
	if i < len(c.Inputs) {
		return c.Inputs[i]
	}
	return nil
}

// Set sets output i.
func (c *KernelContext) Set(i int, t *ir.Tensor) {
	if i < len(c.Outputs) {
		c.Outputs[i] = t
	}
}

// Errorf returns an error naming the node.
func (c *KernelContext) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Node, fmt.Sprintf(format, args...))
}

// Unsupported returns the error for an element type the kernel lacks.
func (c *KernelContext) Unsupported(d ir.DType) error {
	return &UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: d}
}

// NewInferContext prepares inference for node n under schema s.
func NewInferContext(s *Schema, n *ir.Node, opset int64, inputs []ir.Type, consts []*ir.Tensor) *InferContext {
	return &InferContext{attrs: attrs{n, s}, Node: n, Opset: opset, Inputs: inputs, Consts: consts, Outputs: make([]ir.Type, len(n.Outputs)), Values: make([]*ir.Tensor, len(n.Outputs)), SymValues: make([]*SymTensor, len(n.Outputs))}
}

// NewKernelContext prepares a reference kernel call for node n under s.
func NewKernelContext(s *Schema, n *ir.Node, opset int64, inputs []*ir.Tensor) *KernelContext {
	return &KernelContext{attrs: attrs{n, s}, Node: n, Opset: opset, Inputs: inputs, Outputs: make([]*ir.Tensor, len(n.Outputs))}
}

// CheckNode validates a node against its schema: arity, required
// attributes, attribute kinds, and attributes the schema does not know.
func (s *Schema) CheckNode(n *ir.Node) error {
	nin, nout := len(n.Inputs), len(n.Outputs)
	if nin < s.MinInputs || (s.MaxInputs >= 0 && nin > s.MaxInputs) {
		return fmt.Errorf("%s: has %d inputs, %s v%d takes %s", n, nin, s.Name, s.Since, arity(s.MinInputs, s.MaxInputs))
	}
	if nout < s.MinOutputs || (s.MaxOutputs >= 0 && nout > s.MaxOutputs) {
		return fmt.Errorf("%s: has %d outputs, %s v%d gives %s", n, nout, s.Name, s.Since, arity(s.MinOutputs, s.MaxOutputs))
	}
	for i := 0; i < s.MinInputs && i < nin; i++ {
		if n.Inputs[i] == nil {
			return fmt.Errorf("%s: required input %d is missing", n, i)
		}
	}
	for _, d := range s.Attrs {
		a := n.Attr(d.Name)
		if a == nil {
			if d.Required {
				return fmt.Errorf("%s: required attribute %q is missing", n, d.Name)
			}
			continue
		}
		if a.Kind != d.Kind {
			return fmt.Errorf("%s: attribute %q is %s, want %s", n, d.Name, a.Kind, d.Kind)
		}
	}
	for _, a := range n.Attrs {
		known := false
		for _, d := range s.Attrs {
			known = known || d.Name == a.Name
		}
		if !known {
			return fmt.Errorf("%s: unknown attribute %q for %s v%d", n, a.Name, s.Name, s.Since)
		}
	}
	return nil
}

func arity(min, max int) string {
	switch {
	case max < 0:
		return fmt.Sprintf("at least %d", min)
	case min == max:
		return fmt.Sprint(min)
	}
	return fmt.Sprintf("%d to %d", min, max)
}

// HasInput reports whether the node has optional input i. A backend's
// context may hold no value for an input the node has (one known only at
// run time): In then returns nil.
func (c *KernelContext) HasInput(i int) bool {
	return i < len(c.Node.Inputs) && c.Node.Inputs[i] != nil
}
