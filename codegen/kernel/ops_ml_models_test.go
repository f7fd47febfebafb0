package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// TestLinearClassifierRefusesStrings: string labels, which an engine
// cannot bind, are refused naming why (codegen/cpu's op cases cannot
// declare a refusal, so it is held here).
func TestLinearClassifierRefusesStrings(t *testing.T) {
	g := ir.NewGraph("labels")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 2)))
	n := g.AddNode("LinearClassifier", []*ir.Value{x}, 2, ir.AttrFs("coefficients", 1, -2, 0.5, 0.25),
		ir.AttrFs("intercepts", 0.5, 1), ir.AttrSs("classlabels_strings", "a", "b"))
	n.Domain = ops.MLDomain
	g.SetOutputs(n.Outputs...)
	m := ir.NewModel(g, 17)
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ops.MLDomain, Version: 1})
	if _, err := ops.InferShapes(m); err != nil {
		t.Fatal(err)
	}
	in := ir.FromSlice(ir.Float32, []int64{2, 2}, []float32{1, 2, -3, 0.5})
	_, err := RunNode(n, ops.OpsetsOf(m), []*ir.Tensor{in}, nil, nil)
	var ue *ops.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.Error(), "string labels") {
		t.Fatalf("got %v, want an unsupported error naming the string labels", err)
	}
}
