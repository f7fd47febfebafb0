package conformance

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// drawnTest writes a test folder: model m, one input x and the expected y.
func drawnTest(t *testing.T, m *ir.Model, x, y *ir.Tensor) string {
	dir := t.TempDir()
	require.NoError(t, onnx.WriteFile(filepath.Join(dir, "model.onnx"), m))
	set := filepath.Join(dir, "test_data_set_0")
	require.NoError(t, os.MkdirAll(set, 0o755))
	for name, v := range map[string]*ir.Tensor{"input_0.pb": x, "output_0.pb": y} {
		data, err := onnx.WriteTensor(v)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(set, name), data, 0o644))
	}
	return dir
}

// fixedOutput is a backend whose every run gives y.
type fixedOutput struct{ y *ir.Tensor }

func (b fixedOutput) Prepare(*ir.Model) (Runner, error) { return b, nil }

func (b fixedOutput) Run(map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	return map[string]*ir.Tensor{"y": b.y}, nil
}

// bernoulliData draws p and y ~ Bernoulli(p) with Go's generator, as
// ONNX's tests draw theirs with numpy's.
func bernoulliData(n int, r *rand.Rand) (p, y []float64) {
	p, y = make([]float64, n), make([]float64, n)
	for i := range p {
		p[i] = r.Float64()
		if r.Float64() < p[i] {
			y[i] = 1
		}
	}
	return p, y
}

// An output drawn by a random op is judged by its law: the reference's own
// draw passes; a wrong shape or dtype, a value outside the support, and a
// mean many standard errors off fail, for the random node's own output
// and for one computed from a draw (ONNX's expanded Bernoulli).
func TestDrawnOutputs(t *testing.T) {
	const n = 400
	p, y := bernoulliData(n, rand.New(rand.NewPCG(1, 2)))
	x := ir.FromSlice(ir.Float64, []int64{n}, p)
	want := ir.FromSlice(ir.Float64, []int64{n}, y)

	direct := ir.NewGraph("bernoulli")
	in := direct.AddInput("x", ir.TensorType(ir.Float64, ir.S(n)))
	out := direct.Apply("Bernoulli", []*ir.Value{in})
	out.Name, out.Type = "y", ir.TensorType(ir.Float64, ir.S(n))
	direct.SetOutputs(out)

	expanded := ir.NewGraph("bernoulli_expanded")
	in = expanded.AddInput("x", ir.TensorType(ir.Float64, ir.S(n)))
	u := expanded.Apply("RandomUniformLike", []*ir.Value{in}, ir.AttrI("dtype", int64(ir.Float64)))
	out = expanded.Apply("Cast", []*ir.Value{expanded.Apply("Less", []*ir.Value{u, in})}, ir.AttrI("to", int64(ir.Float64)))
	out.Name, out.Type = "y", ir.TensorType(ir.Float64, ir.S(n))
	expanded.SetOutputs(out)

	filled := func(d ir.DType, dims []int64, v float64) *ir.Tensor {
		vals := make([]float64, ir.Product(dims))
		for i := range vals {
			vals[i] = v
		}
		return ops.FromFloat64s(d, dims, vals)
	}
	half := filled(ir.Float64, []int64{n}, 0)
	for i := range n / 2 {
		ir.Data[float64](half)[2*i] = 1
	}
	for _, g := range []*ir.Graph{direct, expanded} {
		dir := drawnTest(t, ir.NewModel(g, 22), x, want)
		r := RunTest(dir, Reference{}, DefaultTolerance)
		assert.Equal(t, Pass, r.Status, "%s: %s", g.Name, r.Detail)
		assert.Contains(t, r.Detail, "integers in [0, 1]", g.Name)
		r = RunTest(dir, fixedOutput{half}, DefaultTolerance) // mean 1/2, as p's
		assert.Equal(t, Pass, r.Status, "%s: %s", g.Name, r.Detail)

		for _, c := range []struct {
			y   *ir.Tensor
			why string
		}{
			{filled(ir.Float64, []int64{n + 1}, 0), "shape"},
			{filled(ir.Float32, []int64{n}, 0), "dtype"},
			{filled(ir.Float64, []int64{n}, 0.5), "outside the draw's support"},
			{filled(ir.Float64, []int64{n}, 2), "outside the draw's support"},
			{filled(ir.Float64, []int64{n}, 1), "standard error"}, // mean 1, not 1/2
		} {
			r := RunTest(dir, fixedOutput{c.y}, DefaultTolerance)
			assert.Equal(t, Fail, r.Status, "%s, %s: %s", g.Name, c.why, r.Detail)
			assert.Contains(t, r.Detail, c.why, g.Name)
		}
	}
}

// A uniform draw's support is [low, high], in the output's precision.
func TestDrawnUniformSupport(t *testing.T) {
	g := ir.NewGraph("uniform")
	in := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4)))
	out := g.Apply("RandomUniformLike", []*ir.Value{in}, ir.AttrF("low", -1), ir.AttrF("high", 1))
	out.Name, out.Type = "y", ir.TensorType(ir.Float32, ir.S(4))
	g.SetOutputs(out)
	x := ir.FromSlice(ir.Float32, []int64{4}, []float32{0, 0, 0, 0})
	dir := drawnTest(t, ir.NewModel(g, 22), x, ir.FromSlice(ir.Float32, []int64{4}, []float32{0.5, -0.25, 0.75, -0.9}))
	r := RunTest(dir, Reference{}, DefaultTolerance)
	assert.Equal(t, Pass, r.Status, r.Detail)
	r = RunTest(dir, fixedOutput{ir.FromSlice(ir.Float32, []int64{4}, []float32{0.5, 1.5, 0, 0})}, DefaultTolerance)
	assert.Equal(t, Fail, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "element 1 is 1.5, outside the draw's support ([-1, 1])")
}
