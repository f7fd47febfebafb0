package cpu

import (
	"fmt"
	"math/rand"
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

// TestRunParts: an engine with more work than runPartMACs runs in parts,
// each a native call the runtime makes in turn on every thread; the
// outputs match the reference at 1 and 2 threads, through kiln_run and
// through the profiling entry point, which runs the same parts.
func TestRunParts(t *testing.T) {
	r := rand.New(rand.NewSource(31))
	chain := func(convs int, batch ir.Dim) (*ir.Model, map[string]*ir.Tensor) {
		r := rand.New(rand.NewSource(int64(convs)))
		g := ir.NewGraph("chain")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(batch, ir.D(32), ir.D(40), ir.D(40))))
		y := x
		for i := range convs {
			w := g.AddInitializer(fmt.Sprintf("w%d", i), randTensor(r, 32, 32, 3, 3))
			y = g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{y, w}, ir.AttrIs("pads", 1, 1, 1, 1))})
		}
		y.Name = "y"
		g.SetOutputs(y)
		return ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, 32, 40, 40)}
	}
	// Each conv is 32·40·40·32·9 = 14.7M multiply-adds.
	small, in := chain(1, ir.D(1))
	assert.Equal(t, 1, checkO2(t, small, in, 1e-4).Parts)

	m, in := chain(12, ir.D(1))
	want := runRef(t, m, in)
	res := checkO2(t, m, in, 1e-4)
	assert.Equal(t, 3, res.Parts, "12 × 14.7M multiply-adds in parts of 64M or more")
	e, err := Load(res)
	require.NoError(t, err)
	defer e.Close()
	for _, threads := range []int{1, 2} {
		got, err := e.RunProfiled(in, threads)
		require.NoError(t, err)
		assert.Less(t, relL2(got["y"], want["y"]), 1e-4, "threads=%d", threads)
	}

	// A dynamic batch: the convs run per sample, a loop each, and their
	// cost counts at the largest batch, 8 × 14.7M a conv.
	m, _ = chain(3, ir.Sym("N"))
	res, err = Compile(optimize(t, m), Options{Winograd: WinogradOn, Profile: map[string]DimRange{"N": {Min: 1, Opt: 2, Max: 8}}})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Parts, "3 × 118M multiply-adds")
	e, err = Load(res)
	require.NoError(t, err)
	defer e.Close()
	for _, batch := range []int64{1, 3, 8} {
		in := map[string]*ir.Tensor{"x": randTensor(r, batch, 32, 40, 40)}
		ref, _ := chain(3, ir.Sym("N"))
		want := runRef(t, ref, in)
		for _, threads := range []int{1, 2} {
			got, err := e.Run(in, threads, nil)
			require.NoError(t, err)
			assert.Less(t, relL2(got["y"], want["y"]), 1e-4, "batch %d, threads=%d", batch, threads)
		}
	}
}
