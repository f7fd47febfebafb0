package ops

import (
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Structural inputs are the inputs whose values a compiler must know to
// lay out an op: they set its output's shape (Reshape's shape, Slice's
// starts, TopK's K, Range's bounds, ...) or the axes it works along
// (CumSum's axis, a Reduce's axes). An interpreter reads them at run time;
// a compiler that plans memory and loops ahead of time takes them as
// constants, as TensorRT takes "shape tensors".
var structuralInputs = map[string][]int{
	"Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 3},
	"Resize": {1, 2, 3}, "Upsample": {1}, "TopK": {1}, "CumSum": {1}, "Range": {0, 1, 2},
	"ConstantOfShape": {0}, "OneHot": {1}, "Split": {1}, "Squeeze": {1}, "Unsqueeze": {1},
	"ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1},
	"ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1},
}

// StructuralInputs lists node n's structural inputs (see above) that it
// has.
func StructuralInputs(n *ir.Node) []int {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return nil
	}
	var out []int
	for _, i := range structuralInputs[n.OpType] {
		if n.Input(i) != nil {
			out = append(out, i)
		}
	}
	return out
}

// ShapeTensorInputs finds the graph inputs whose values reach a node's
// structural input (directly or through other ops, not through Shape or
// Size, whose outputs depend on their input's shape only): a compiler
// must know them. Each maps to the first use found, for messages.
func ShapeTensorInputs(g *ir.Graph) map[*ir.Value]string {
	isInput := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		isInput[v] = true
	}
	found := map[*ir.Value]string{}
	seen := map[*ir.Value]bool{}
	var back func(v *ir.Value, use string)
	back = func(v *ir.Value, use string) {
		if v == nil || seen[v] {
			return
		}
		seen[v] = true
		if isInput[v] && v.Const == nil {
			found[v] = use
			return
		}
		p := v.Producer
		if p == nil || p.OpType == "Shape" || p.OpType == "Size" {
			return
		}
		for _, in := range p.Inputs {
			back(in, use)
		}
		// A branch or body computes p's outputs from what it reads of
		// the enclosing graphs (AffineGrid's expansion splits its size
		// input inside an If).
		for _, sg := range p.Subgraphs() {
			for _, in := range sg.FreeValues() {
				back(in, use)
			}
		}
	}
	for _, n := range g.Nodes {
		for _, i := range StructuralInputs(n) {
			back(n.Inputs[i], fmt.Sprintf("%s input %d", n, i))
		}
	}
	return found
}

// ShapeTensorError names a graph input a compiler needs the value of.
type ShapeTensorError struct {
	Input string
	Use   string
}

func (e *ShapeTensorError) Error() string {
	return fmt.Sprintf("input %q sets shapes (it reaches %s): its value must be known when compiling (cc build --value %s=...)",
		e.Input, strings.TrimSpace(e.Use), e.Input)
}
