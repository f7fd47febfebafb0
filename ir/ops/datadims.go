package ops

import (
	"fmt"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Data-dependent dims: how many elements NonZero finds, Compress keeps or
// NonMaxSuppression selects depends on the values, not the shapes. Inference names each such dim
// with a symbol of its own (dataDim), so that what is computed from the
// output carries a shape over it ([2, n] → Transpose → [n, 2]) as a
// model's input symbols are carried; a compiler plans memory for the most
// the dim can be (DataDimMax) and has the node's kernel write its value
// at run time.

// dataDim is the symbol inference gives the data-dependent dim of node
// output out: named after the value (a symbol the model's inputs are
// unlikely to use, one per value).
func dataDim(c *InferContext, out int) ir.Dim {
	if out >= len(c.Node.Outputs) || c.Node.Outputs[out] == nil {
		return ir.UnknownDim()
	}
	return dataDimOf(c.Node.Outputs[out])
}

func dataDimOf(v *ir.Value) ir.Dim { return ir.Sym(dimName("count_", v.Name, "")) }

// branchDim is the symbol inference gives dim axis of If output v when the
// branches give it different sizes.
func branchDim(v *ir.Value, axis int) ir.Dim {
	return ir.Sym(dimName("branch_", v.Name, fmt.Sprintf("_%d", axis)))
}

// dimName is prefix, name made an identifier, and suffix: unique per name.
func dimName(prefix, name, suffix string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
	sym := prefix + clean + suffix
	if clean != name {
		sym += fmt.Sprintf("_%08x", crc32.ChecksumIEEE([]byte(name)))
	}
	return sym
}

// DataDimMax returns the largest value of the data-dependent dim d node n
// gives its outputs, for inputs of the given static dims (an If's, the
// larger of its branches' dims, which eval sizes), and false for a dim n
// does not decide.
func DataDimMax(n *ir.Node, opset int64, in [][]int64, d ir.Dim, eval func(ir.Dim) (int64, error)) (int64, bool) {
	if n.Domain != "" && n.Domain != "ai.onnx" || !DataDimOf(n, d) {
		return 0, false
	}
	if n.OpType == "If" {
		return branchDimMax(n, d, eval)
	}
	if len(in) == 0 || in[0] == nil {
		return 0, false
	}
	s, err := Lookup("", n.OpType, opset)
	if err != nil {
		return 0, false
	}
	switch n.OpType {
	case "NonZero":
		return ir.Product(in[0]), true
	case "Compress":
		axis, err := compressAxis(attrs{node: n, schema: s}, opset, len(in[0]))
		if err != nil {
			return 0, false
		}
		if axis < 0 {
			return ir.Product(in[0]), true
		}
		return in[0][axis], true
	case "Unique":
		if a := n.Attr("axis"); a != nil {
			axis, err := NormAxis(a.I, len(in[0]))
			if err != nil {
				return 0, false
			}
			return in[0][axis], true
		}
		return ir.Product(in[0]), true
	case "NonMaxSuppression": // every box of every class of every batch
		if len(in) < 2 || len(in[1]) != 3 {
			return 0, false
		}
		return ir.Product(in[1]), true
	}
	return 0, false
}

// DataDimOf reports whether d is a dim inference gave a value of node n
// because it depends on n's data.
func DataDimOf(n *ir.Node, d ir.Dim) bool {
	if !d.IsSymbolic() {
		return false
	}
	for _, o := range n.Outputs {
		if o == nil {
			continue
		}
		if n.OpType != "If" && dataDimOf(o).Param == d.Param {
			return true
		}
		if n.OpType == "Unique" { // one length for Y, indices and counts: Y's
			return dataDimOf(n.Outputs[0]).Param == d.Param
		}
		if n.OpType == "If" && o.Type.Shape.Ranked && slices.Contains(o.Type.Shape.Dims, d) && strings.HasPrefix(d.Param, "branch_") {
			for j := range o.Type.Shape.Dims {
				if branchDim(o, j).Param == d.Param {
					return true
				}
			}
		}
	}
	return false
}

// BranchDim returns, for the dim d If node n's branches decide, which
// output and axis it is, so that a compiler can have the branch that runs
// set it from the size its output has there.
func BranchDim(n *ir.Node, d ir.Dim) (out, axis int, ok bool) {
	if n.OpType != "If" {
		return 0, 0, false
	}
	for i, o := range n.Outputs {
		if o == nil || !o.Type.Shape.Ranked {
			continue
		}
		for j := range o.Type.Shape.Dims {
			if branchDim(o, j).Param == d.Param {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// branchDimMax is the larger of the sizes If node n's branches give the
// dim d.
func branchDimMax(n *ir.Node, d ir.Dim, eval func(ir.Dim) (int64, error)) (int64, bool) {
	i, j, ok := BranchDim(n, d)
	if !ok || eval == nil {
		return 0, false
	}
	most := int64(0)
	for _, name := range []string{"then_branch", "else_branch"} {
		a := n.Attr(name)
		if a == nil || a.G == nil || i >= len(a.G.Outputs) || !a.G.Outputs[i].Type.Shape.Ranked || j >= a.G.Outputs[i].Type.Shape.Rank() {
			return 0, false
		}
		v, err := eval(a.G.Outputs[i].Type.Shape.Dims[j])
		if err != nil {
			return 0, false
		}
		most = max(most, v)
	}
	return most, true
}
