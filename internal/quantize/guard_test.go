package quantize

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// guardNet is a 3×3 Conv with a GlobalAveragePool (millions of
// multiply-adds: INT8 pays) and, after a float Tanh, a 64→10 Gemm (640:
// its quantize and dequantize steps cost more than it saves).
func guardNet(rng *rand.Rand) *ir.Model {
	g := ir.NewGraph("guard")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 64, 16, 16)))
	conv := g.AddNode("Conv", []*ir.Value{x, g.AddInitializer("w", randn(rng, 0.05, 64, 64, 3, 3))}, 1, ir.AttrIs("pads", 1, 1, 1, 1))
	conv.Name = "conv"
	r := g.Apply("Relu", []*ir.Value{conv.Outputs[0]})
	gap := g.Apply("GlobalAveragePool", []*ir.Value{r})
	tanh := g.Apply("Tanh", []*ir.Value{g.Apply("Flatten", []*ir.Value{gap})})
	fc := g.AddNode("Gemm", []*ir.Value{tanh, g.AddInitializer("fc.weight", randn(rng, 0.3, 10, 64))}, 1, ir.AttrI("transB", 1))
	fc.Name = "fc"
	g.SetOutputs(fc.Outputs[0])
	return ir.NewModel(g, 13)
}

func TestGuardKeepsSlowIslandsFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	src, m := modelBytes(t, guardNet(rng))
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rng, 1, 4, 64, 16, 16))

	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, Method: Method{Name: "minmax"}})
	assert.Equal(t, map[string]int{"Conv": 1, "GlobalAveragePool": 1}, res.Units)
	require.Len(t, res.KeptFloat, 1)
	assert.Contains(t, res.KeptFloat[0], "Gemm fc:")
	for _, n := range res.Model.Graph.Nodes {
		if n.OpType == "Gemm" {
			assert.Equal(t, ir.Float32, n.Inputs[1].Type.Elem, "the kept Gemm's weights stay float")
			assert.NotEqual(t, "DequantizeLinear", producer(n.Inputs[0]), "no pair before the kept Gemm")
		}
	}

	_, m = modelBytes(t, guardNet(rand.New(rand.NewPCG(9, 9))))
	all := quantizeOnReference(t, m, src, Options{Data: []string{calib}, Method: Method{Name: "minmax"}, QuantizeAll: true})
	assert.Equal(t, map[string]int{"Conv": 1, "GlobalAveragePool": 1, "Gemm": 1}, all.Units)
	assert.Empty(t, all.KeptFloat)
}
