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
