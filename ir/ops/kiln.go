package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// kiln-domain ops.
//
// kiln.FusionGroup is a set of nodes a fusion pass decided a backend
// computes as one kernel (chainer-compiler's fusion groups). Its "body"
// attribute holds the original nodes, verbatim and in order; like an ONNX
// If branch the body has no formal inputs and reads outer values by
// reference. The node's inputs are the body's free values in order of first
// use (so liveness and ordering see them) and its one output is the body's
// one output. "kind" says which pattern the pass matched (a GroupKind), so
// a backend need not search for it again, and "roles" what each body node
// is in it (Roles); inference and the reference kernel refuse a kind or a
// role they do not know (GroupOf).
//
// Its semantics are the body's: inference types the body and takes its
// output's type, and the reference kernel runs the body node by node.

// FusionGroup is the op type of a fusion group.
const FusionGroup = "FusionGroup"

var kilnOps = []*Schema{{
	Domain: ir.KilnDomain, Name: FusionGroup, Since: 1,
	MinInputs: 0, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{
		{Name: "kind", Kind: ir.AttrString, Required: true},
		{Name: "body", Kind: ir.AttrGraph, Required: true},
		// algorithm is a convolution group's kernel, chosen by the
		// conv-layout pass for the target (no effect on the semantics).
		{Name: "algorithm", Kind: ir.AttrString},
		// roles names each body node's part in the pattern (one Role per
		// node, in order), so that backends read the structure instead of
		// inferring it from positions; GroupKind.Roles lists each kind's.
		// Elementwise groups have none (a DAG).
		{Name: "roles", Kind: ir.AttrStrings},
	},
	Infer: inferFusionGroup,
	Run:   runFusionGroup,
}}

func init() { register(kilnOps) }

// groupBody returns a fusion group's body after checking that its free
// values are the node's inputs, in order: the kernel binds them by
// position.
func groupBody(n *ir.Node, opsets Opsets) (*ir.Graph, error) {
	if opsets == nil {
		return nil, fmt.Errorf("%s: no opsets to resolve the body's ops", n)
	}
	if _, _, err := GroupOf(n); err != nil {
		return nil, err
	}
	body := n.Attr("body").G
	if len(body.Outputs) != 1 {
		return nil, fmt.Errorf("%s: body has %d outputs, want 1", n, len(body.Outputs))
	}
	free := body.FreeValues()
	if len(free) != len(n.Inputs) {
		return nil, fmt.Errorf("%s: body reads %d outer values but the node has %d inputs", n, len(free), len(n.Inputs))
	}
	for i, v := range free {
		if n.Inputs[i] != v {
			return nil, fmt.Errorf("%s: input %d is %q but the body's free value %d is %q", n, i, n.Inputs[i].Name, i, v.Name)
		}
	}
	return body, nil
}

func inferFusionGroup(c *InferContext) error {
	body, err := groupBody(c.Node, c.Opsets)
	if err != nil {
		return err
	}
	// The body sees what is known of the node's inputs, not more: the
	// outer known-values map is not the node's to read.
	known := map[*ir.Value]*ir.Tensor{}
	for i, v := range c.Node.Inputs {
		if t := c.Const(i); t != nil {
			known[v] = t
		}
	}
	syms := map[*ir.Value]*SymTensor{}
	for i, v := range c.Node.Inputs {
		if i < len(c.SymInputs) && c.SymInputs[i] != nil {
			syms[v] = c.SymInputs[i]
		}
	}
	for _, n := range body.Nodes {
		if err := inferNode(n, c.Opsets, c.limits, known, syms); err != nil {
			return fmt.Errorf("%s body: %w", c.Node, err)
		}
	}
	c.Set(0, body.Outputs[0].Type)
	return nil
}

func runFusionGroup(c *KernelContext) error {
	body, err := groupBody(c.Node, c.Opsets)
	if err != nil {
		return err
	}
	env := map[*ir.Value]*ir.Tensor{}
	for i, v := range c.Node.Inputs {
		env[v] = c.In(i)
	}
	for _, n := range body.Nodes {
		s, err := c.Opsets.Schema(n)
		if err != nil {
			return fmt.Errorf("%s body: %w", c.Node, err)
		}
		in := make([]*ir.Tensor, len(n.Inputs))
		for i, v := range n.Inputs {
			if v != nil {
				in[i] = env[v]
			}
		}
		kc := NewKernelContext(s, n, c.Opsets[n.Domain], in)
		kc.Opsets = c.Opsets
		if err := s.Run(kc); err != nil {
			return err
		}
		for i, o := range n.Outputs {
			if o != nil {
				if kc.Outputs[i] == nil {
					return fmt.Errorf("%s body: %s produced no output %q", c.Node, n, o.Name)
				}
				env[o] = kc.Outputs[i]
			}
		}
	}
	out := env[body.Outputs[0]]
	if out == nil {
		return fmt.Errorf("%s: the body does not compute its output", c.Node)
	}
	c.Set(0, out)
	return nil
}
