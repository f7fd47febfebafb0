package passes

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

func inferPass(c *Context, m *ir.Model) error {
	_, err := ops.InferShapesWithin(m, c.Limits)
	return err
}

// maxFoldBytes bounds what folding may materialise, so a Tile or Expand of
// a constant cannot blow up the engine.
const maxFoldBytes = 64 << 20

// foldPass turns into initializers the outputs of every node whose result
// is known at compile time: nodes whose inputs are all initializers
// (evaluated with the reference kernels), and nodes shape inference already
// evaluated (Shape of a static shape and the arithmetic on it). The outputs
// keep their *Value (and name), so no reader needs rewriting.
//
// DequantizeLinear of an integer constant waits for fold-dequantize: the
// integer kernels (fuse-qdq) read the int8 weights, not their floats.
func foldPass(c *Context, m *ir.Model) error { return fold(c, m, false) }

// foldDequantizePass folds what foldPass left: the DequantizeLinear of
// constants that no quantized group took.
func foldDequantizePass(c *Context, m *ir.Model) error { return fold(c, m, true) }

func fold(c *Context, m *ir.Model, dequantize bool) error {
	g := m.Graph
	opsets := ops.OpsetsOf(m)
	known, err := ops.InferShapesWithin(m, c.Limits)
	if err != nil {
		return err
	}
	isInput := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		isInput[v] = true
	}
	deferred := map[*ir.Value]bool{} // computed from a DequantizeLinear left for later
	var kept []*ir.Node
	for _, n := range g.Nodes {
		if !dequantize && (dequantizesInteger(n) || slices.ContainsFunc(n.Inputs, func(v *ir.Value) bool { return deferred[v] })) {
			for _, o := range n.Outputs {
				deferred[o] = true
			}
			kept = append(kept, n)
			continue
		}
		if slices.ContainsFunc(n.Outputs, func(o *ir.Value) bool { return o != nil && !o.Type.IsTensor() }) {
			kept = append(kept, n) // an initializer is a tensor: sequences and optionals stay computed
			continue
		}
		outs, err := knownOutputs(n, known)
		if outs == nil {
			outs, err = tryFold(n, opsets, isInput)
		}
		if err != nil {
			return err
		}
		if outs == nil {
			kept = append(kept, n)
			continue
		}
		setFolded(g, n, outs)
	}
	g.Nodes = kept
	return nil
}

// setFolded turns n's outputs into initializers holding outs (n leaves the
// graph: the caller drops it).
func setFolded(g *ir.Graph, n *ir.Node, outs []*ir.Tensor) {
	for i, o := range n.Outputs {
		if o == nil {
			continue
		}
		t := outs[i]
		t.Name = o.Name
		o.Const, o.Producer, o.Type = t, nil, t.Type()
		g.Initializers = append(g.Initializers, o)
	}
}

// dequantizesInteger reports whether n is a DequantizeLinear of integers.
func dequantizesInteger(n *ir.Node) bool {
	if n.OpType != "DequantizeLinear" || n.Domain != "" {
		return false
	}
	switch n.Inputs[0].Type.Elem {
	case ir.Int8, ir.Uint8, ir.Int16, ir.Uint16, ir.Int32:
		return true
	}
	return false
}

// knownOutputs returns the node's outputs when inference knows them all.
func knownOutputs(n *ir.Node, known map[*ir.Value]*ir.Tensor) ([]*ir.Tensor, error) {
	if !ops.Evaluable(n) {
		return nil, nil
	}
	outs := make([]*ir.Tensor, len(n.Outputs))
	for i, o := range n.Outputs {
		if o == nil {
			continue
		}
		if outs[i] = known[o]; outs[i] == nil {
			return nil, nil
		}
		outs[i] = outs[i].Clone()
	}
	return outs, nil
}

func tryFold(n *ir.Node, opsets ops.Opsets, isInput map[*ir.Value]bool) ([]*ir.Tensor, error) {
	if !ops.Evaluable(n) {
		return nil, nil
	}
	in := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		if v.Const == nil || isInput[v] {
			return nil, nil
		}
		in[i] = v.Const
	}
	for _, o := range n.Outputs {
		if o != nil && o.Type.Shape.IsStatic() && ir.RawLen(o.Type.Elem, o.Type.Shape.NumElements()) > maxFoldBytes {
			return nil, nil
		}
	}
	s, err := opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	c := ops.NewKernelContext(s, n, opsets[n.Domain], in)
	if err := s.Run(c); err != nil {
		if errors.As(err, new(*ops.UnsupportedError)) {
			return nil, nil // leave it for the backend to report
		}
		return nil, err
	}
	for i, o := range n.Outputs {
		if o != nil && c.Outputs[i] == nil {
			return nil, fmt.Errorf("%s: folding produced no output %d", n, i)
		}
	}
	return c.Outputs, nil
}

// dcePass removes nodes whose outputs nothing live reads, and initializers
// nothing reads (unless they are graph inputs).
func dcePass(_ *Context, m *ir.Model) error {
	g := m.Graph
	live := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		live[v] = true
	}
	keep := make([]bool, len(g.Nodes))
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		for _, o := range n.Outputs {
			keep[i] = keep[i] || (o != nil && live[o])
		}
		if !keep[i] {
			continue
		}
		for _, v := range n.Inputs {
			live[v] = true
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.FreeValues() {
				live[v] = true
			}
		}
	}
	var nodes []*ir.Node
	for i, n := range g.Nodes {
		if keep[i] {
			nodes = append(nodes, n)
		}
	}
	g.Nodes = nodes
	isInput := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		isInput[v] = true
	}
	var inits []*ir.Value
	for _, v := range g.Initializers {
		if live[v] || isInput[v] {
			inits = append(inits, v)
		}
	}
	g.Initializers = inits
	var infos []*ir.Value
	for _, v := range g.ValueInfo {
		if live[v] {
			infos = append(infos, v)
		}
	}
	g.ValueInfo = infos
	return nil
}

// csePass merges nodes that compute the same thing: same op, domain,
// attributes and inputs. A node whose output is a graph output is kept, so
// output names never change.
func csePass(_ *Context, m *ir.Model) error {
	g := m.Graph
	isOutput := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		isOutput[v] = true
	}
	seen := map[string]*ir.Node{}
	var kept []*ir.Node
	for _, n := range g.Nodes {
		key, ok := cseKey(n)
		first := seen[key]
		if !ok || first == nil || len(first.Outputs) != len(n.Outputs) || anyOutput(n, isOutput) {
			if ok && first == nil {
				seen[key] = n
			}
			kept = append(kept, n)
			continue
		}
		for i, o := range n.Outputs {
			if o != nil {
				if first.Outputs[i] == nil {
					first.Outputs[i] = o // the first node now also computes it
					o.Producer = first
					continue
				}
				g.ReplaceUses(o, first.Outputs[i])
			}
		}
	}
	g.Nodes = kept
	return nil
}

func anyOutput(n *ir.Node, isOutput map[*ir.Value]bool) bool {
	for _, o := range n.Outputs {
		if o != nil && isOutput[o] {
			return true
		}
	}
	return false
}

// cseKey describes a node's computation; ok is false for nodes that must
// never merge (random ops, subgraphs).
func cseKey(n *ir.Node) (string, bool) {
	if !ops.Evaluable(n) {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s.%s|", n.Domain, n.OpType)
	for _, v := range n.Inputs {
		fmt.Fprintf(&b, "%p,", v)
	}
	for _, a := range n.Attrs {
		fmt.Fprintf(&b, "|%s:%d:%x:%d:%q:%v:%v:%q", a.Name, a.Kind, math.Float32bits(a.F), a.I, a.S, a.Floats, a.Ints, a.Strings)
		if a.T != nil {
			fmt.Fprintf(&b, ":%s%v%x", a.T.DType, a.T.Dims, a.T.Raw)
		}
		if len(a.Tensors) > 0 {
			return "", false
		}
	}
	return b.String(), true
}
