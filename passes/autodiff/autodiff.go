// Package autodiff is kiln's reverse-mode differentiation over the IR:
// given a scalar (or seeded) value y and values xs, it appends to the graph
// the nodes that compute dy/dx for each x, one gradient rule per op.
//
// Each op's entry lives in the file named like the ir/ops file that
// defines the op (conv.go, elementwise_math.go, attention.go, ...; a test
// checks it); every op of the registry has an entry, and an entry without
// a rule says why the op is not differentiated (a test checks both, and
// that every rule matches central finite differences). Gradients are written in
// standard ONNX ops — ConvTranspose for a convolution's input, Conv over
// transposed axes for its weights, MaxPool's Indices with ScatterElements,
// ReduceSum for broadcasting — so a gradient graph is an ONNX model that
// other runtimes load and every backend compiles.
package autodiff

import (
	"fmt"
	"sort"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Ctx is what a rule sees: the node, its attributes with the schema's
// defaults (through the embedded KernelContext, which also resolves
// windows and axes as every backend does), the gradients of its outputs
// and which inputs need one.
type Ctx struct {
	*Builder
	*ops.KernelContext
	Node  *ir.Node
	Opset int64
	// DY holds each output's gradient, nil for an output no y depends on.
	DY []*ir.Value
	// Need says which inputs a gradient is wanted for: a rule may leave
	// the others nil and save their work (a first convolution's input).
	Need []bool
}

// X returns input i (nil when absent).
func (c *Ctx) X(i int) *ir.Value { return c.Node.Input(i) }

// Y returns output i.
func (c *Ctx) Y(i int) *ir.Value { return c.Node.Output(i) }

// Fail is an error naming the node.
func (c *Ctx) Fail(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Node, fmt.Sprintf(format, args...))
}

// Rule returns the gradient of each of the node's inputs (nil where none
// is needed or the input is not differentiable).
type Rule func(c *Ctx) ([]*ir.Value, error)

// entry is one op's decision: a rule, or why it has none.
type entry struct {
	rule Rule
	why  string
}

type opKey struct{ domain, op string }

var rules = map[opKey]entry{}

// define adds a family's rules.
func define(domain string, rows map[string]Rule) {
	for op, r := range rows {
		k := opKey{domain, op}
		if _, dup := rules[k]; dup {
			panic("autodiff: " + op + " declared twice")
		}
		if r == nil {
			panic("autodiff: " + op + " has a nil rule: declare it with notDifferentiable and a reason")
		}
		rules[k] = entry{rule: r}
	}
}

// notDifferentiable declares ops that deliberately have no rule, and why.
func notDifferentiable(domain, why string, names ...string) {
	for _, op := range names {
		k := opKey{domain, op}
		if _, dup := rules[k]; dup {
			panic("autodiff: " + op + " declared twice")
		}
		rules[k] = entry{why: why}
	}
}

// Reasons that ops of several families share.
const (
	booleanResult    = "a boolean result"
	integerResult    = "integer or boolean outputs: no gradient exists"
	valueIndependent = "its result does not depend on its input's values (a shape or a constant)"
	sampleMap        = "not implemented: the gradient scatters through the same index or sample map the kernel builds; no model kiln trains uses it yet"
	containerValues  = "not implemented: gradients flow through tensors only; a sequence or optional value would need its own adjoint (a sequence of gradients)"
)

// Lookup returns the rule for an op, or the reason it has none.
func Lookup(domain, op string) (Rule, string, bool) {
	if domain == "ai.onnx" {
		domain = ""
	}
	e, ok := rules[opKey{domain, op}]
	return e.rule, e.why, ok
}

// Differentiable lists the ops with a rule, sorted ("domain.Op" outside
// ONNX's default domain).
func Differentiable() []string {
	var out []string
	for k, e := range rules {
		if e.rule != nil {
			out = append(out, qualified(k.domain, k.op))
		}
	}
	sort.Strings(out)
	return out
}

func qualified(domain, op string) string {
	if domain == "" {
		return op
	}
	return domain + "." + op
}

// Backward appends to m's graph the gradients of ys (seeded with seeds:
// each y's incoming gradient, of its shape) with respect to xs, and
// returns one gradient per x: nil for an x that no y depends on. The
// graph must be typed (ops.InferShapes); the new nodes are typed too.
func Backward(m *ir.Model, known map[*ir.Value]*ir.Tensor, ys, seeds, xs []*ir.Value) ([]*ir.Value, error) {
	b := NewBuilder(m, known, "grad/")
	return backward(b, ys, seeds, xs)
}

func backward(b *Builder, ys, seeds, xs []*ir.Value) ([]*ir.Value, error) {
	g := b.G
	// The nodes between xs and ys: descendants of some x that some y
	// depends on.
	depends := map[*ir.Value]bool{} // on some x
	for _, x := range xs {
		depends[x] = true
	}
	nodes := append([]*ir.Node(nil), g.Nodes...)
	for _, n := range nodes {
		for _, v := range n.Inputs {
			if v != nil && depends[v] {
				for _, o := range n.Outputs {
					if o != nil {
						depends[o] = true
					}
				}
				break
			}
		}
	}
	wanted := map[*ir.Value]bool{} // some y depends on it
	for _, y := range ys {
		wanted[y] = true
	}
	var path []*ir.Node
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		on := false
		for _, o := range n.Outputs {
			on = on || o != nil && wanted[o] && depends[o]
		}
		if !on {
			continue
		}
		path = append(path, n)
		for _, v := range n.Inputs {
			if v != nil && depends[v] {
				wanted[v] = true
			}
		}
	}
	grads := map[*ir.Value][]*ir.Value{}
	for i, y := range ys {
		grads[y] = append(grads[y], seeds[i])
	}
	total := func(v *ir.Value) *ir.Value {
		parts := grads[v]
		switch len(parts) {
		case 0:
			return nil
		case 1:
			return parts[0]
		}
		s := b.Op("Sum", parts)
		grads[v] = []*ir.Value{s}
		return s
	}
	for _, n := range path { // reverse order
		dy := make([]*ir.Value, len(n.Outputs))
		any := false
		for i, o := range n.Outputs {
			if o != nil {
				dy[i] = total(o)
				any = any || dy[i] != nil
			}
		}
		if !any {
			continue
		}
		need := make([]bool, len(n.Inputs))
		needAny := false
		for i, v := range n.Inputs {
			need[i] = v != nil && depends[v] && wanted[v] && v.Type.Elem.IsFloat()
			needAny = needAny || need[i]
		}
		if !needAny {
			continue
		}
		rule, why, ok := Lookup(n.Domain, n.OpType)
		if !ok {
			return nil, fmt.Errorf("%s: autodiff has no rule for %s", n, qualified(n.Domain, n.OpType))
		}
		if rule == nil {
			return nil, fmt.Errorf("%s: %s is not differentiable: %s", n, qualified(n.Domain, n.OpType), why)
		}
		s, err := b.Opsets.Schema(n)
		if err != nil {
			return nil, err
		}
		consts := make([]*ir.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			if v != nil {
				consts[i] = b.known[v]
			}
		}
		c := &Ctx{Builder: b, KernelContext: ops.NewKernelContext(s, n, b.Opsets[n.Domain], consts), Node: n,
			Opset: b.Opsets[n.Domain], DY: dy, Need: need}
		dx, err := rule(c)
		if err != nil {
			return nil, err
		}
		if b.err != nil {
			return nil, fmt.Errorf("the gradient of %s: %w", n, b.err)
		}
		for i, d := range dx {
			if d != nil && i < len(need) && need[i] {
				grads[n.Inputs[i]] = append(grads[n.Inputs[i]], d)
			}
		}
	}
	out := make([]*ir.Value, len(xs))
	for i, x := range xs {
		out[i] = total(x)
	}
	return out, b.err
}
