package ops

import (
	"errors"
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// maxFoldElements bounds the constant values inference computes on the
// side: shape arithmetic is small, and weights are folded by passes.
const maxFoldElements = 1 << 16

// Evaluable reports whether a node may be computed at compile time (by
// inference or constant folding) and merged with an equal node: not a
// random op, and not one holding subgraphs.
func Evaluable(n *ir.Node) bool {
	return !randomOp(n) && len(n.Subgraphs()) == 0
}

// InferShapes runs type and shape inference over the model's graph and sets
// every node output's Type. Where the model declared a type (value_info,
// graph outputs), the declaration and the inference are merged: a static or
// named dim wins over an unknown one, and a conflict is an error. Small
// values computable at compile time (shape subgraphs) are propagated so
// Reshape/Expand/Slice get static shapes. It returns the known values,
// those inside If, Loop and Scan bodies included where they hold in every
// run of the body (keepBody).
//
// It checks the model's opset imports against the registry (CheckOpsets)
// and every value with a static shape (inputs, initializers, each node's
// outputs as soon as they are inferred) against the default limits: a size
// that overflows int64 or exceeds ir.Limits.MaxTensorBytes is an
// *ir.LimitError naming the value and its type. InferShapesWithin takes
// other limits.
func InferShapes(m *ir.Model) (map[*ir.Value]*ir.Tensor, error) {
	return InferShapesWithin(m, ir.DefaultLimits())
}

// InferShapesWithin is InferShapes under the given limits (zero fields take
// their defaults).
func InferShapesWithin(m *ir.Model, lim ir.Limits) (map[*ir.Value]*ir.Tensor, error) {
	known, _, err := InferShapesSym(m, lim)
	return known, err
}

// InferShapesSym is InferShapesWithin that also returns the values it
// knows as expressions over the model's symbols (shape subgraphs whose
// value depends on symbolic dims: the Concat feeding a Reshape holds
// [N, -1]). A value in the first map is not in the second.
func InferShapesSym(m *ir.Model, lim ir.Limits) (map[*ir.Value]*ir.Tensor, map[*ir.Value]*SymTensor, error) {
	known := map[*ir.Value]*ir.Tensor{}
	syms := map[*ir.Value]*SymTensor{}
	if err := CheckOpsets(m); err != nil {
		return known, syms, err
	}
	err := inferGraph(m.Graph, OpsetsOf(m), lim.OrDefaults(), known, syms)
	return known, syms, err
}

func inferGraph(g *ir.Graph, opsets Opsets, lim ir.Limits, known map[*ir.Value]*ir.Tensor, syms map[*ir.Value]*SymTensor) error {
	for _, v := range g.Inputs {
		if err := lim.CheckType(fmt.Sprintf("input %q", v.Name), v.Type); err != nil {
			return err
		}
	}
	for _, v := range g.Initializers {
		if _, err := lim.CheckTensor(fmt.Sprintf("initializer %q", v.Name), v.Const.DType, v.Const.Dims); err != nil {
			return err
		}
		if v.Const.Len() <= maxFoldElements {
			known[v] = v.Const
		}
	}
	for _, v := range g.Inputs {
		delete(known, v) // an initializer that is also an input is overridable
	}
	for _, n := range g.Nodes {
		if err := inferNode(n, opsets, lim, known, syms); err != nil {
			return err
		}
	}
	return nil
}

func inferNode(n *ir.Node, opsets Opsets, lim ir.Limits, known map[*ir.Value]*ir.Tensor, syms map[*ir.Value]*SymTensor) error {
	s, err := opsets.Schema(n)
	if err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	if err := s.CheckNode(n); err != nil {
		return err
	}
	if err := checkTensorInputs(n, s); err != nil {
		return err
	}
	types := make([]ir.Type, len(n.Inputs))
	consts := make([]*ir.Tensor, len(n.Inputs))
	symIns := make([]*SymTensor, len(n.Inputs))
	allConst := true
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		types[i] = v.Type
		consts[i] = known[v]
		symIns[i] = syms[v]
		allConst = allConst && consts[i] != nil
	}
	opset := opsets[n.Domain]
	c := NewInferContext(s, n, opset, types, consts)
	c.Opsets = opsets
	c.limits = lim
	c.known, c.syms = known, syms
	c.SymInputs = symIns
	if err := s.Infer(c); err != nil {
		return err
	}
	// Before anything is evaluated: a static shape past the limit (or
	// past int64) stops here, naming the value.
	for i, o := range n.Outputs {
		if o != nil && i < len(c.Outputs) {
			if err := lim.CheckType(fmt.Sprintf("%s: output %q", n, o.Name), c.Outputs[i]); err != nil {
				return err
			}
		}
	}
	if allConst && Evaluable(n) && smallOutputs(c.Outputs) {
		kc := NewKernelContext(s, n, opset, consts)
		if err := s.Run(kc); err == nil {
			for i, t := range kc.Outputs {
				if t != nil && t.Len() <= maxFoldElements {
					c.Values[i] = t
				}
			}
		} else if !errors.As(err, new(*UnsupportedError)) {
			return err
		}
	}
	inferSymValues(c)
	for i, o := range n.Outputs {
		if o == nil {
			continue
		}
		if sv := c.SymValues[i]; sv != nil && c.Values[i] == nil {
			if t := sv.Const(); t != nil {
				c.Values[i] = t // every element turned out constant
			} else {
				syms[o] = sv
			}
		}
		if val := c.Values[i]; val != nil {
			known[o] = val
			c.Outputs[i] = val.Type()
		}
		merged, err := MergeTypes(o.Type, c.Outputs[i])
		if err != nil {
			return fmt.Errorf("%s: output %q: %w", n, o.Name, err)
		}
		// A declared shape can make a dynamic inferred one static.
		if err := lim.CheckType(fmt.Sprintf("%s: output %q", n, o.Name), merged); err != nil {
			return err
		}
		o.Type = merged
	}
	return nil
}

// inferBody types the values of a subgraph of c's node (an If branch, a
// Loop or Scan body; name is its attribute) in place: its inputs get the
// given types merged with those the model declares, then each of its
// nodes, nested subgraphs included, is inferred as in the enclosing graph.
// The body sees the values the enclosing graphs know (it reads them
// directly) but adds none to them: it returns the values known in the
// body, which its op's rule keeps (keepBody) once it knows they hold in
// every run of the body.
func inferBody(c *InferContext, name string, g *ir.Graph, inputs []ir.Type) (map[*ir.Value]*ir.Tensor, error) {
	if c.Opsets == nil {
		return nil, c.Errorf("no opsets to resolve the %s's ops", name)
	}
	lim := c.limits.OrDefaults()
	known := make(map[*ir.Value]*ir.Tensor, len(c.known)+len(g.Initializers))
	for v, t := range c.known {
		known[v] = t
	}
	syms := make(map[*ir.Value]*SymTensor, len(c.syms))
	for v, t := range c.syms {
		syms[v] = t
	}
	for _, v := range g.Initializers {
		if _, err := lim.CheckTensor(fmt.Sprintf("%s %s: initializer %q", c.Node, name, v.Name), v.Const.DType, v.Const.Dims); err != nil {
			return nil, err
		}
		if v.Const.Len() <= maxFoldElements {
			known[v] = v.Const
		}
	}
	for i, v := range g.Inputs {
		delete(known, v)
		if i < len(inputs) {
			t, err := MergeTypes(v.Type, inputs[i])
			if err != nil {
				return nil, c.Errorf("%s input %q: %v", name, v.Name, err)
			}
			v.Type = t
		}
	}
	for _, n := range g.Nodes {
		if err := inferNode(n, c.Opsets, lim, known, syms); err != nil {
			return nil, fmt.Errorf("%s %s: %w", c.Node, name, err)
		}
	}
	return known, nil
}

// keepBody adds to the enclosing graph's known values those a body's
// inference found (known, inferBody's result), so that a compiler folds
// them there as it folds the graph's. The body's inputs are never among
// them (inferBody forgets them), so nothing kept depends on an iteration
// number, a condition, a carried value's or a scanned slice's data: only
// on the body's constants, the graphs around it and its inputs' types,
// which the caller vouches hold in every run of the body.
func keepBody(c *InferContext, known map[*ir.Value]*ir.Tensor) {
	if c.known == nil {
		return
	}
	for v, t := range known {
		if _, outer := c.known[v]; !outer {
			c.known[v] = t
		}
	}
}

// checkTensorInputs refuses a sequence, optional or map fed to an op that
// computes on tensors only (its kernel would read the container as an
// empty tensor).
func checkTensorInputs(n *ir.Node, s *Schema) error {
	if s.Containers {
		return nil
	}
	for i, v := range n.Inputs {
		if v != nil && v.Type.Kind != ir.TensorKind && v.Type.Kind != ir.UnknownKind {
			return fmt.Errorf("%s: input %d (%s) is %s, but %s takes tensors only", n, i, ir.QuoteName(v.Name), v.Type, n.OpType)
		}
	}
	return nil
}

// MergeTypes combines a declared type with an inferred one, keeping the
// most precise information of each; conflicting facts are an error. Of a
// declared and an inferred symbolic dim the inferred one stays: it is an
// expression over the model's input symbols, which engines bind; so does an
// inferred symbolic dim against a declared static one.
func MergeTypes(declared, inferred ir.Type) (ir.Type, error) {
	if declared.Kind == ir.UnknownKind {
		return inferred, nil
	}
	if inferred.Kind == ir.UnknownKind {
		return declared, nil
	}
	if declared.Kind != inferred.Kind {
		return declared, fmt.Errorf("declared %s but inferred %s", declared, inferred)
	}
	out := inferred.Clone()
	if declared.Elem != ir.Undefined && inferred.Elem != ir.Undefined && declared.Elem != inferred.Elem {
		return declared, fmt.Errorf("declared %s but inferred %s", declared, inferred)
	}
	if out.Elem == ir.Undefined {
		out.Elem = declared.Elem
	}
	out.Denotation = declared.Denotation
	switch {
	case !declared.Shape.Ranked:
	case !inferred.Shape.Ranked:
		out.Shape = declared.Shape.Clone()
	case len(declared.Shape.Dims) != len(inferred.Shape.Dims):
		return declared, fmt.Errorf("declared %s but inferred %s", declared, inferred)
	default:
		for i, d := range declared.Shape.Dims {
			o := &out.Shape.Dims[i]
			switch {
			case d.IsStatic() && o.IsStatic() && d.Value != o.Value:
				return declared, fmt.Errorf("declared %s but inferred %s", declared, inferred)
			case d.IsStatic() && o.IsSymbolic():
				// An expression over the input symbols stays: a declared 1
				// where the batch flows is an exporter's trace of one run,
				// and taking it would truncate a batch of 2 (ONNX Runtime
				// too computes the inferred shape and only warns).
			case d.IsStatic() || o.Value < 0 && o.Param == "" && d.IsSymbolic():
				*o = d
			case d.IsSymbolic() && o.IsSymbolic():
				// The inferred expression is over the model's input
				// symbols; a declared name ("unk__12") is not.
				o.Denotation = d.Denotation
			}
		}
	}
	return out, nil
}

// inferSymValues applies the node's symbolic-value rule (symvalue.go) to
// the outputs inference did not find constant.
func inferSymValues(c *InferContext) {
	if c.Node.Domain != "" && c.Node.Domain != "ai.onnx" {
		return
	}
	rule := symRules[c.Node.OpType]
	if rule == nil {
		return
	}
	for _, v := range c.Values {
		if v == nil {
			rule(c)
			return
		}
	}
}

// smallOutputs reports whether every inferred output is static and small
// enough to evaluate at compile time, so a constant ConstantOfShape or
// Expand to a huge shape is never materialised here.
func smallOutputs(types []ir.Type) bool {
	for _, t := range types {
		if n := t.Shape.NumElements(); n < 0 || n > maxFoldElements {
			return false
		}
	}
	return true
}

// RunTypes infers node n's output types from the tensors it is about to
// run on: every shape is then known, and the small inputs (shapes, axes,
// repeats) are known values, so the outputs' shapes are static wherever
// they do not depend on the data. An executor checks them against its
// limits before the kernel allocates anything. Nodes holding subgraphs are
// not inferred (inference types their bodies' values in place, which a
// run must not do): RunTypes returns an error for them.
func RunTypes(s *Schema, n *ir.Node, opset int64, opsets Opsets, inputs []*ir.Tensor) ([]ir.Type, error) {
	if len(n.Subgraphs()) > 0 {
		return nil, fmt.Errorf("%s: run-time types of a node with subgraphs are not inferred", n)
	}
	types := make([]ir.Type, len(n.Inputs))
	consts := make([]*ir.Tensor, len(n.Inputs))
	for i, t := range inputs {
		if t == nil || i >= len(types) {
			continue
		}
		types[i] = t.Type()
		if n, err := ir.ElementCount(t.Dims); err == nil && n <= maxFoldElements {
			consts[i] = t
		}
	}
	c := NewInferContext(s, n, opset, types, consts)
	c.Opsets = opsets
	if err := s.Infer(c); err != nil {
		return nil, err
	}
	return c.Outputs, nil
}

// InferNode types one node's outputs from its inputs' types and the known
// values (initializers' and small computed ones), adding its outputs'
// values to known where inference computes them: for passes that build
// nodes and need their types at once (passes/autodiff).
func InferNode(n *ir.Node, opsets Opsets, known map[*ir.Value]*ir.Tensor) error {
	return inferNode(n, opsets, ir.DefaultLimits(), known, map[*ir.Value]*SymTensor{})
}
