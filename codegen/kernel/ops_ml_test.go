package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// TestLabelEncoderRefusesStrings: a map to strings (LabelEncoder-1 from
// indices) is refused, naming why, rather than built.
func TestLabelEncoderRefusesStrings(t *testing.T) {
	g := ir.NewGraph("labels")
	x := g.AddInput("x", ir.TensorType(ir.Int64, ir.S(3)))
	n := g.AddNode("LabelEncoder", []*ir.Value{x}, 1, ir.AttrSs("classes_strings", "a", "b"))
	n.Domain = ops.MLDomain
	g.SetOutputs(n.Outputs[0])
	m := ir.NewModel(g, 17)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ops.MLDomain, Version: 1})
	if _, err := ops.InferShapes(m); err != nil {
		t.Fatal(err)
	}
	in := ir.FromSlice(ir.Int64, []int64{3}, []int64{0, 1, 5})
	_, err := RunNode(n, ops.OpsetsOf(m), []*ir.Tensor{in}, nil, nil)
	var ue *ops.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.Error(), "string") {
		t.Fatalf("got %v, want an unsupported error naming the strings", err)
	}
}
