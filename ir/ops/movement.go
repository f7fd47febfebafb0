package ops

import "github.com/kiln-ml/kiln/ir"

// Movement says how an op's outputs relate to its inputs' elements. It is
// the one statement of which ops only move data, read by memory planning
// (views alias their input), by the QDQ passes (a per-tensor quantization
// with a positive scale commutes with every moving op) and by INT8
// calibration and marking (a moved tensor keeps its input's scale).
type Movement int

const (
	// Computes: the outputs are new values.
	Computes Movement = iota
	// View: output 0 is input 0's bytes under another shape (Reshape,
	// Flatten, Squeeze, Unsqueeze, Identity).
	View
	// Permute: output 0 holds every element of input 0, rearranged
	// (Transpose, DepthToSpace, SpaceToDepth).
	Permute
	// Select: each output element is a copy of an input element or of a
	// padding constant (Slice, Gather, Split, Expand, Tile, Concat, Pad,
	// nearest Resize, and MaxPool, whose maximum is one of its inputs).
	Select
)

var movements = map[string]func(n *ir.Node) Movement{
	"Reshape":      always(View),
	"Flatten":      always(View),
	"Squeeze":      always(View),
	"Unsqueeze":    always(View),
	"Identity":     always(View),
	"Transpose":    always(Permute),
	"DepthToSpace": always(Permute),
	"SpaceToDepth": always(Permute),
	"Slice":        always(Select),
	"Gather":       always(Select),
	"Split":        always(Select),
	"Expand":       always(Select),
	"Tile":         always(Select),
	"Concat":       always(Select),
	"MaxPool":      always(Select),
	"Pad": func(n *ir.Node) Movement {
		switch a := n.Attr("mode"); {
		case a == nil, a.S == "constant", a.S == "reflect", a.S == "edge", a.S == "wrap":
			return Select
		}
		return Computes
	},
	"Resize":   nearestOnly,
	"Upsample": nearestOnly,
}

func always(m Movement) func(*ir.Node) Movement { return func(*ir.Node) Movement { return m } }

// nearestOnly: a Resize picks input elements only in nearest mode; the
// other modes interpolate.
func nearestOnly(n *ir.Node) Movement {
	if a := n.Attr("mode"); a == nil || a.S == "nearest" {
		return Select
	}
	return Computes
}

// MovementOf is node n's Movement; nodes outside the ONNX domain compute.
func MovementOf(n *ir.Node) Movement {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return Computes
	}
	if f := movements[n.OpType]; f != nil {
		return f(n)
	}
	return Computes
}

// MovedInputs are the inputs whose elements a moving node's outputs copy:
// every input of a Concat, input 0 of the others (the rest are shapes,
// indices, pads or scales); nil for a node that computes.
func MovedInputs(n *ir.Node) []int {
	switch {
	case MovementOf(n) == Computes:
		return nil
	case n.OpType == "Concat":
		ins := make([]int, len(n.Inputs))
		for i := range ins {
			ins[i] = i
		}
		return ins
	}
	return []int{0}
}

// MovedOutputs are the outputs of a moving node that hold moved elements:
// all but MaxPool's indices (positions, not elements); nil for a node that
// computes.
func MovedOutputs(n *ir.Node) []int {
	switch {
	case MovementOf(n) == Computes:
		return nil
	case n.OpType == "MaxPool":
		return []int{0}
	}
	outs := make([]int, len(n.Outputs))
	for i := range outs {
		outs[i] = i
	}
	return outs
}

// movesCodes makes a moving op's row take the 8-, 4- and 2-bit types
// (ir/smallfloat.go): which elements it moves does not depend on their
// values, so on these types it moves their codes, as it moves Uint8s.
// MaxPool, which compares values, keeps its types.
func movesCodes(s *Schema) *Schema {
	if s.Domain != "" || movements[s.Name] == nil || s.Name == "MaxPool" {
		return s
	}
	types := s.Types
	if types == nil {
		types = concatTypes(numericTypes, []ir.DType{ir.Bool}) // what nil means (SupportsType)
	}
	s.Types = concatTypes(types, smallTypes)
	s.Run = runOnCodes(s.Run)
	return s
}

// runOnCodes runs a moving op's kernel on a small type as on Uint8 codes,
// one a byte: each input of input 0's type is unpacked into its codes, and
// each moved output is packed back into that type. A node of the op that
// computes (a Resize that interpolates) is refused.
func runOnCodes(run func(*KernelContext) error) func(*KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if x == nil || !x.DType.IsSmallFloat() && !x.DType.IsPackedInt() {
			return run(c)
		}
		d := x.DType
		if MovementOf(c.Node) == Computes {
			return c.Unsupported(d)
		}
		given := c.Inputs
		c.Inputs = make([]*ir.Tensor, len(given))
		for i, t := range given {
			c.Inputs[i] = t
			if t != nil && t.DType == d {
				c.Inputs[i] = codesOf(t)
			}
		}
		err := run(c)
		c.Inputs = given
		if err != nil {
			return err
		}
		for _, k := range MovedOutputs(c.Node) {
			if k < len(c.Outputs) && c.Outputs[k] != nil && c.Outputs[k].DType == ir.Uint8 {
				c.Outputs[k] = fromCodes(c.Outputs[k], d)
			}
		}
		return nil
	}
}

// codesOf is t's element codes, one a byte, as a Uint8 tensor.
func codesOf(t *ir.Tensor) *ir.Tensor {
	u := ir.NewTensor(ir.Uint8, t.Dims...)
	u.Name = t.Name
	for i := range u.Raw {
		u.Raw[i] = t.Code(i)
	}
	return u
}

// fromCodes is the tensor of type d whose element codes are u's bytes.
func fromCodes(u *ir.Tensor, d ir.DType) *ir.Tensor {
	t := ir.NewTensor(d, u.Dims...)
	t.Name = u.Name
	for i, code := range u.Raw {
		t.SetCode(i, code)
	}
	return t
}
