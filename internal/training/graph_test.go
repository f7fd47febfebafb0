package training

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

func readModel(t *testing.T, name string) *ir.Model {
	m, err := onnx.ReadFile(filepath.Join("..", "..", "testdata", "models", name))
	require.NoError(t, err)
	return m
}

// toFloat64 makes a float32 model compute in float64: initializers and
// inputs converted, every other type inferred again.
func toFloat64(t *testing.T, m *ir.Model) {
	for _, v := range m.Graph.Initializers {
		if v.Const.DType == ir.Float32 {
			c := ops.FromFloat64s(ir.Float64, v.Const.Dims, ops.Float64s(v.Const))
			c.Name = v.Const.Name
			v.Const, v.Type = c, c.Type()
		}
	}
	for _, v := range m.Graph.Inputs {
		if v.Type.Elem == ir.Float32 {
			v.Type.Elem = ir.Float64
		}
	}
	m.Graph.ValueInfo = nil
	for _, n := range m.Graph.Nodes {
		for _, o := range n.Outputs {
			o.Type = ir.Type{}
		}
	}
	for _, v := range m.Graph.Outputs {
		v.Type = ir.Type{}
	}
	_, err := ops.InferShapes(m)
	require.NoError(t, err)
}

func randomTensor(rng *rand.Rand, d ir.DType, dims ...int64) *ir.Tensor {
	vals := make([]float64, ir.Product(dims))
	for i := range vals {
		vals[i] = rng.Float64()
	}
	return ops.FromFloat64s(d, dims, vals)
}

func labels(rng *rand.Rand, n, classes int64) *ir.Tensor {
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = rng.Int63n(classes)
	}
	return ir.FromSlice(ir.Int64, []int64{n}, vals)
}

// The whole model's gradients, on the reference executor in float64,
// match central differences of its loss: sampled elements of every
// parameter, relative L2 error ≤ 1e-6 per parameter.
func TestGradMatchesFiniteDifferences(t *testing.T) {
	for _, c := range []struct{ model, loss, input string }{
		{"digits_cnn.onnx", SoftmaxCrossEntropy, "input"},
		{"digits_mlp.onnx", SoftmaxCrossEntropy, "input"},
		{"digits_mlp.onnx", MSE, "input"},
	} {
		t.Run(c.model+"/"+c.loss, func(t *testing.T) {
			rng := rand.New(rand.NewSource(7))
			m := readModel(t, c.model)
			require.NoError(t, SetBatch(m, 3))
			toFloat64(t, m)
			g, err := Grad(m, GradOptions{Loss: c.loss, Label: "label"})
			require.NoError(t, err)
			require.Greater(t, len(g.Params), 3)
			x := m.Graph.Inputs[0]
			dims, _ := x.Type.Shape.Ints()
			feeds := map[string]*ir.Tensor{c.input: randomTensor(rng, ir.Float64, dims...)}
			if c.loss == MSE {
				ydims, _ := g.Label.Type.Shape.Ints()
				feeds["label"] = randomTensor(rng, ir.Float64, ydims...)
			} else {
				feeds["label"] = labels(rng, 3, 10)
			}
			e, err := reference.New(m)
			require.NoError(t, err)
			got, err := e.Run(feeds)
			require.NoError(t, err)
			for _, p := range g.Params {
				w := ir.Data[float64](p.Value.Const)
				ad := ir.Data[float64](got[GradPrefix+p.Name])
				require.Len(t, ad, len(w))
				var num, den float64
				for k := 0; k < 6; k++ {
					i := rng.Intn(len(w))
					const h = 1e-6
					w0 := w[i]
					w[i] = w0 + h
					up, err := e.Run(feeds)
					require.NoError(t, err)
					w[i] = w0 - h
					down, err := e.Run(feeds)
					require.NoError(t, err)
					w[i] = w0
					fd := (up[LossName].Float64At(0) - down[LossName].Float64At(0)) / (2 * h)
					num += (ad[i] - fd) * (ad[i] - fd)
					den += fd * fd
				}
				if den == 0 {
					continue // every sampled weight feeds only dead units
				}
				rel := math.Sqrt(num / den)
				assert.LessOrEqual(t, rel, 1e-6, "%s: gradient of %s: relative error %.3g", c.model, p.Name, rel)
			}
		})
	}
}

// ortScript runs a model in ONNX Runtime on inputs given as JSON and
// prints its outputs as JSON.
const ortScript = `
const ort = require(process.argv[2]);
const fs = require('fs');
(async () => {
  const spec = JSON.parse(fs.readFileSync(process.argv[4]));
  const feeds = {};
  for (const [name, t] of Object.entries(spec)) {
    feeds[name] = t.type === 'int64'
      ? new ort.Tensor('int64', BigInt64Array.from(t.data.map(BigInt)), t.dims)
      : new ort.Tensor('float32', Float32Array.from(t.data), t.dims);
  }
  const s = await ort.InferenceSession.create(process.argv[3]);
  const out = await s.run(feeds);
  const res = {};
  for (const [name, t] of Object.entries(out)) res[name] = Array.from(t.data, Number);
  console.log(JSON.stringify(res));
})().catch(e => { console.error(e.message); process.exit(1); });
`

// ortModule is onnxruntime-node as ../shared/tools/ort/setup.sh installs it,
// or "" when it (or node) is absent.
func ortModule() string {
	if _, err := exec.LookPath("node"); err != nil {
		return ""
	}
	dir := os.Getenv("KILN_ORT_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "kiln-ort")
	}
	mod := filepath.Join(dir, "node_modules", "onnxruntime-node")
	if _, err := os.Stat(mod); err != nil {
		return ""
	}
	return mod
}

// The training graph cc grad writes loads and runs in ONNX Runtime, and
// ORT's loss and gradients agree with the reference executor's.
func TestGradRunsInONNXRuntime(t *testing.T) {
	mod := ortModule()
	if mod == "" {
		t.Skip("node or onnxruntime-node is absent (../shared/tools/ort/setup.sh installs it)")
	}
	rng := rand.New(rand.NewSource(3))
	m := readModel(t, "digits_cnn.onnx")
	g, err := Grad(m, GradOptions{Loss: SoftmaxCrossEntropy, Label: "label", Batch: 4})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "train.onnx")
	require.NoError(t, onnx.WriteFile(path, g.Model))
	x := randomTensor(rng, ir.Float32, 4, 1, 8, 8)
	y := labels(rng, 4, 10)
	spec := map[string]any{
		"input": map[string]any{"type": "float32", "dims": x.Dims, "data": ops.Float64s(x)},
		"label": map[string]any{"type": "int64", "dims": y.Dims, "data": ops.Int64s(y)},
	}
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.json"), js, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.js"), []byte(ortScript), 0o644))
	cmd := exec.Command("node", filepath.Join(dir, "run.js"), mod, path, filepath.Join(dir, "in.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "ONNX Runtime: %s", stderr.String())
	var ort map[string][]float64
	require.NoError(t, json.Unmarshal(out, &ort))

	e, err := reference.New(g.Model)
	require.NoError(t, err)
	ref, err := e.Run(map[string]*ir.Tensor{"input": x, "label": y})
	require.NoError(t, err)
	for _, v := range g.Model.Graph.Outputs {
		want := ops.Float64s(ref[v.Name])
		got := ort[v.Name]
		require.Len(t, got, len(want), v.Name)
		var num, den float64
		for i := range want {
			num += (got[i] - want[i]) * (got[i] - want[i])
			den += want[i] * want[i]
		}
		assert.LessOrEqual(t, math.Sqrt(num/math.Max(den, 1e-30)), 1e-4, fmt.Sprintf("%s: ORT and the reference differ", v.Name))
	}
}

// ifModel: scores = If(sum(x·w) > 0) then x·w else x·w·2, whose branches
// declare the batch they were exported with.
func ifModel() *ir.Model {
	rng := rand.New(rand.NewSource(1))
	g := ir.NewGraph("if")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 4)))
	w := g.AddInitializer("w", randomTensor(rng, ir.Float32, 4, 3))
	y := g.Apply("MatMul", []*ir.Value{x, w})
	cond := g.Apply("Greater", []*ir.Value{g.Apply("ReduceSum", []*ir.Value{y}, ir.AttrI("keepdims", 0)), g.AddInitializer("zero", ir.Scalar(ir.Float32, float32(0)))})
	then := ir.NewGraph("then")
	then.SetOutputs(then.Apply("Identity", []*ir.Value{y}))
	els := ir.NewGraph("else")
	e := els.Apply("Mul", []*ir.Value{y, els.AddInitializer("two", ir.Scalar(ir.Float32, float32(2)))})
	e.Type = ir.TensorType(ir.Float32, ir.S(2, 3)) // as exported, at batch 2
	els.SetOutputs(e)
	out := g.AddNode("If", []*ir.Value{cond}, 1, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els)).Outputs[0]
	g.SetOutputs(out)
	return ir.NewModel(g, 13)
}

// A new batch re-types the subgraphs too (their declared shapes were the
// old batch's), and a loss that reaches its weights only through an If
// is refused naming the If, not as a model without weights.
func TestGradThroughIf(t *testing.T) {
	m := ifModel()
	require.NoError(t, SetBatch(m, 8))
	els := m.Graph.Nodes[len(m.Graph.Nodes)-1].Attr("else_branch").G
	assert.Equal(t, "float[8,3]", els.Outputs[0].Type.String())
	_, err := Grad(ifModel(), GradOptions{Label: "label", Loss: SoftmaxCrossEntropy, Batch: 8})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `through node`)
	assert.Contains(t, err.Error(), `(If)`)
}
