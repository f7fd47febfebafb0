package cuda_test

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// residualModel is a ResNet basic block and a head: Conv+Relu,
// Conv+Add(x)+Relu, a layer-norm-like elementwise tail over a reduction,
// and MatMul with a bias Add, with random weights.
func residualModel(rng *rand.Rand) *ir.Model {
	g := ir.NewGraph("block")
	rnd := func(name string, dims ...int64) *ir.Value {
		d := make([]float32, ir.Product(dims))
		for i := range d {
			d[i] = float32(rng.NormFloat64() * 0.2)
		}
		return g.AddInitializer(name, ir.FromSlice(ir.Float32, dims, d))
	}
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 20, 20)))
	conv := func(in *ir.Value, name string) *ir.Value {
		n := g.AddNode("Conv", []*ir.Value{in, rnd(name+".w", 16, 16, 3, 3), rnd(name+".b", 16)}, 1, ir.AttrIs("pads", 1, 1, 1, 1))
		return n.Outputs[0]
	}
	r1 := g.AddNode("Relu", []*ir.Value{conv(x, "c1")}, 1).Outputs[0]
	sum := g.AddNode("Add", []*ir.Value{conv(r1, "c2"), x}, 1).Outputs[0]
	r2 := g.AddNode("Relu", []*ir.Value{sum}, 1).Outputs[0]
	flat := g.AddNode("Reshape", []*ir.Value{r2, g.AddInitializer("shape", ir.FromSlice(ir.Int64, []int64{2}, []int64{16, 400}))}, 1).Outputs[0]
	mm := g.AddNode("MatMul", []*ir.Value{flat, rnd("fc.w", 400, 64)}, 1).Outputs[0]
	y := g.AddNode("Add", []*ir.Value{mm, rnd("fc.b", 64)}, 1).Outputs[0]
	s := g.AddNode("Sigmoid", []*ir.Value{y}, 1).Outputs[0]
	out := g.AddNode("Mul", []*ir.Value{y, s}, 1).Outputs[0]
	out.Name = "y"
	g.SetOutputs(out)
	return ir.NewModel(g, 17)
}

// TestFusedSteps: the shared driver (codegen/lower) runs each fusion group
// as one launch, its epilogue (bias, residual Add, activation) stored by
// the tiled GEMM: the block is four launches, and computes what the
// reference does.
func TestFusedSteps(t *testing.T) {
	needLLC(t)
	rng := rand.New(rand.NewSource(3))
	m := residualModel(rng)
	src, err := onnx.Write(m)
	require.NoError(t, err)
	ref, err := reference.New(m)
	require.NoError(t, err)
	xs := make([]float32, 16*20*20)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	feed := ir.FromSlice(ir.Float32, []int64{1, 16, 20, 20}, xs)
	feeds := map[string]*ir.Tensor{"x": feed}
	want, err := ref.Run(feeds)
	require.NoError(t, err)

	out, err := build.BuildModel(m, src, build.Options{Target: build.TargetCUDASim, OptLevel: 2})
	require.NoError(t, err)
	// Conv+Relu, Conv+Add+Relu, MatMul+Add+SiLU: one launch each; the
	// Reshape is a view.
	assert.Len(t, out.GPU.Kernels, 3, "%s", out.GPU.Program)
	assert.Equal(t, 3, strings.Count(out.GPU.Program.String(), "epilogue"), "%s", out.GPU.Program)
	e, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	defer e.Close()
	ctx, err := e.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	got, err := ctx.Run(feeds)
	require.NoError(t, err)
	w, gt := want["y"], got["y"]
	require.Equal(t, w.Dims, gt.Dims)
	for i := 0; i < int(w.Len()); i++ {
		a, b := gt.Float64At(i), w.Float64At(i)
		require.LessOrEqual(t, math.Abs(a-b), 1e-4+1e-4*math.Abs(b), "y[%d]: got %g, want %g", i, a, b)
	}
}
