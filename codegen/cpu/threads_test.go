package cpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

func TestMaxThreads(t *testing.T) {
	m, err := onnx.ReadFile("../../testdata/models/digits_cnn.onnx")
	require.NoError(t, err)
	_, err = ops.InferShapes(m)
	require.NoError(t, err)
	assert.Equal(t, 1, maxThreads(m), "the digits CNN is too small to split")

	// One resnet-sized 3×3 conv: 64→64 channels on 56×56 is 115M MACs.
	g := ir.NewGraph("conv")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 64, 56, 56)))
	w := g.AddInitializer("w", ir.NewTensor(ir.Float32, 64, 64, 3, 3))
	y := g.Apply("Conv", []*ir.Value{x, w}, ir.AttrIs("pads", 1, 1, 1, 1))
	g.SetOutputs(y)
	big := ir.NewModel(g, 13)
	_, err = ops.InferShapes(big)
	require.NoError(t, err)
	assert.Equal(t, int64(64*56*56*64*9), nodeMACs(g.Nodes[0]))
	assert.Equal(t, 0, maxThreads(big))
}
