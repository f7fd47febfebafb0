package ops

import (
	"fmt"
	"hash/crc32"
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

func dataDimOf(v *ir.Value) ir.Dim {
	name := v.Name
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
	sym := "count_" + clean
	if clean != name {
		sym += fmt.Sprintf("_%08x", crc32.ChecksumIEEE([]byte(name)))
	}
	return ir.Sym(sym)
}

// DataDimMax returns the largest value of the data-dependent dim node n
// gives its outputs, for inputs of the given static dims, and false for a
// node whose output dims all follow from its inputs' shapes.
func DataDimMax(n *ir.Node, opset int64, in [][]int64) (int64, bool) {
	if n.Domain != "" && n.Domain != "ai.onnx" || len(in) == 0 || in[0] == nil {
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
		if o != nil && dataDimOf(o).Param == d.Param {
			return true
		}
	}
	return false
}
