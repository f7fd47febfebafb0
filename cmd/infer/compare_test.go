package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

const cnnModel = "../../testdata/models/digits_cnn.onnx"

// perturbedModel is digits_cnn with noise of 5% of each weight's size
// added to its second convolution's weights: everything from that layer on
// differs from the original, everything before it is the same.
func perturbedModel(t *testing.T) *ir.Model {
	m, err := build.ReadModel(cnnModel)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(7))
	for _, v := range m.Graph.Initializers {
		if v.Name == "onnx::Conv_45" {
			w := ir.Data[float32](v.Const)
			for i := range w {
				w[i] += 0.05 * w[i] * float32(rng.NormFloat64())
			}
		}
	}
	return m
}

// buildEngine compiles m (marking tensors with marks) into the engine
// file path, through an .onnx file beside it.
func buildEngine(t *testing.T, m *ir.Model, path string, marks ...string) {
	model := strings.TrimSuffix(path, ".kiln") + ".onnx"
	require.NoError(t, onnx.WriteFile(model, m))
	// One timing cache per folder: engines compared bit for bit make the
	// same Winograd choices however busy the machine is.
	cache := filepath.Join(filepath.Dir(path), "timing.cache")
	out, err := build.Build(model, build.Options{OptLevel: 2, MarkOutputs: marks, TimingCache: cache})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))
}

// referenceOutputs runs the reference executor over the samples of x
// (leading dim) with the named values as extra outputs, concatenating each
// value's elements over the samples.
func referenceOutputs(t *testing.T, m *ir.Model, x *ir.Tensor, values []string) map[string][]float64 {
	m.Graph.Outputs = m.Graph.Outputs[:1]
	for _, n := range m.Graph.Nodes {
		for _, v := range n.Outputs {
			if slices.Contains(values, v.Name) {
				m.Graph.Outputs = append(m.Graph.Outputs, v)
			}
		}
	}
	ref, err := reference.New(m)
	require.NoError(t, err)
	out := map[string][]float64{}
	per := int(ir.Product(x.Dims[1:]))
	for s := range int(x.Dims[0]) {
		in := ir.FromSlice(ir.Float32, append([]int64{1}, x.Dims[1:]...), slices.Clone(x.Float32s()[s*per:(s+1)*per]))
		got, err := ref.Run(map[string]*ir.Tensor{"input": in})
		require.NoError(t, err)
		for name, v := range got {
			for i := range int(v.Len()) {
				out[name] = append(out[name], v.Float64At(i))
			}
		}
	}
	return out
}

// sqnrOf is the oracle's SQNR: 10·log10(Σa²/Σ(a−b)²).
func sqnrOf(a, b []float64) float64 {
	var s, n float64
	for i := range a {
		s += a[i] * a[i]
		n += (a[i] - b[i]) * (a[i] - b[i])
	}
	return 10 * math.Log10(s/n)
}

func TestCompare(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildInfer(t)
	run := func(args ...string) (int, string, string) {
		r := runInfer(t, bin, args...)
		return r.code, r.stdout, r.stderr
	}
	dir := t.TempDir()
	orig, err := build.ReadModel(cnnModel)
	require.NoError(t, err)
	a, plain, b := filepath.Join(dir, "a.kiln"), filepath.Join(dir, "plain.kiln"), filepath.Join(dir, "b.kiln")
	buildEngine(t, orig, a, build.MarkAll)
	buildEngine(t, orig, plain)
	buildEngine(t, perturbedModel(t), b, build.MarkAll)
	mlp, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	mlpPath := filepath.Join(dir, "mlp.kiln")
	require.NoError(t, os.WriteFile(mlpPath, mlp.Engine, 0o644))

	// 24 random samples, and labels: the original model's classes for
	// the first 20, then wrong ones (the class after it) for the last 4.
	rng := rand.New(rand.NewSource(3))
	x := ir.NewTensor(ir.Float32, 24, 1, 8, 8)
	for i := range ir.Data[float32](x) {
		ir.Data[float32](x)[i] = float32(rng.NormFloat64())
	}
	xPath, yPath := filepath.Join(dir, "x.pb"), filepath.Join(dir, "y.pb")
	data, err := onnx.WriteTensor(x)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(xPath, data, 0o644))

	values := []string{"/features/features.2/Relu_output_0", "/features/features.5/Relu_output_0", "/features/features.6/MaxPool_output_0",
		"/features/features.9/Relu_output_0", "/features/features.10/MaxPool_output_0", "/flatten/Flatten_output_0", "/classifier/classifier.1/Relu_output_0"}
	want := referenceOutputs(t, orig, x, values)
	got := referenceOutputs(t, perturbedModel(t), x, values)
	labels := make([]int64, 24)
	for s := range labels {
		labels[s] = int64(argmax(want["output"][s*10 : (s+1)*10]))
		if s >= 20 {
			labels[s] = (labels[s] + 1) % 10
		}
	}
	data, err = onnx.WriteTensor(ir.FromSlice(ir.Int64, []int64{24}, labels))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(yPath, data, 0o644))

	t.Run("self", func(t *testing.T) {
		// An engine against itself (and against its build without debug
		// outputs): equal outputs, SQNR +Inf, printed as such.
		for _, other := range []string{a, plain} {
			code, stdout, stderr := run("compare", a, other, "--duration", "0.2", "--warmup", "0", "--threads", "1",
				"--data", xPath, "--labels", yPath)
			require.Equal(t, 0, code, stderr)
			t.Logf("infer compare a.kiln %s:\n%s", filepath.Base(other), stdout)
			for _, line := range []string{"top-1 agreement  1.0000 (24 of 24)", "cosine           1.000000", "SQNR             +Inf dB", "max abs error    0\n"} {
				assert.Contains(t, stdout, line)
			}
			assert.Regexp(t, `\nA +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +0\.8333\n`, stdout, "20 of 24 labels are the model's classes")
		}
		code, stdout, stderr := run("compare", a, a, "--json", "--duration", "0.1", "--warmup", "0", "--per-layer")
		require.Equal(t, 0, code, stderr)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &r))
		assert.Equal(t, map[string]any{"top1": 1.0, "cosine": 1.0, "sqnr_db": "+Inf", "max_abs_err": 0.0}, r["agreement"])
		require.Len(t, r["layers"], 7)
		for _, l := range r["layers"].([]any) {
			assert.Equal(t, "+Inf", l.(map[string]any)["sqnr_db"])
		}
	})

	t.Run("perturbed", func(t *testing.T) {
		code, stdout, stderr := run("compare", a, b, "--json", "--per-layer", "--duration", "0.2", "--warmup", "0",
			"--data", xPath, "--labels", yPath)
		require.Equal(t, 0, code, stderr)
		var r struct {
			A, B struct {
				Latency  map[string]float64 `json:"latency_ms"`
				Accuracy float64
			}
			Speedup   float64
			Agreement struct {
				Top1, Cosine float64
				SQNR         float64 `json:"sqnr_db"`
				MaxAbsErr    float64 `json:"max_abs_err"`
			}
			Layers []struct {
				Name string
				SQNR any `json:"sqnr_db"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &r))

		// The oracle: the reference executor's outputs of both models.
		var top1 int
		var dot, aa, bb, maxAbs float64
		for s := range 24 {
			wa, wb := want["output"][s*10:(s+1)*10], got["output"][s*10:(s+1)*10]
			if argmax(wa) == argmax(wb) {
				top1++
			}
			for i := range wa {
				dot, aa, bb = dot+wa[i]*wb[i], aa+wa[i]*wa[i], bb+wb[i]*wb[i]
				maxAbs = max(maxAbs, math.Abs(wa[i]-wb[i]))
			}
		}
		sqnr := sqnrOf(want["output"], got["output"])
		t.Logf("oracle: top-1 %d/24, cosine %.6f, SQNR %.3f dB, max abs err %.4g", top1, dot/math.Sqrt(aa*bb), sqnr, maxAbs)
		assert.Less(t, sqnr, 60.0, "the perturbation must show")
		assert.InDelta(t, float64(top1)/24, r.Agreement.Top1, 1e-9)
		assert.InDelta(t, dot/math.Sqrt(aa*bb), r.Agreement.Cosine, 1e-6)
		assert.Less(t, r.Agreement.Cosine, 1.0)
		assert.InDelta(t, sqnr, r.Agreement.SQNR, 0.05)
		assert.InDelta(t, maxAbs, r.Agreement.MaxAbsErr, 1e-3*maxAbs)
		assert.InDelta(t, 20.0/24, r.A.Accuracy, 1e-9)
		for _, k := range []string{"median", "p90", "p99"} {
			assert.Positive(t, r.A.Latency[k])
			assert.Positive(t, r.B.Latency[k])
		}
		assert.InDelta(t, r.A.Latency["median"]/r.B.Latency["median"], r.Speedup, 1e-9)

		// Per layer: the tensor before the perturbed conv is equal (+Inf,
		// listed last); the rest match the oracle's SQNR, worst first.
		require.Len(t, r.Layers, 7)
		last := r.Layers[6]
		assert.Equal(t, "/features/features.2/Relu_output_0", last.Name)
		assert.Equal(t, "+Inf", last.SQNR)
		prev := math.Inf(-1)
		for _, l := range r.Layers[:6] {
			db, ok := l.SQNR.(float64)
			require.True(t, ok, "%s: %v", l.Name, l.SQNR)
			assert.InDelta(t, sqnrOf(want[l.Name], got[l.Name]), db, 0.05, l.Name)
			assert.GreaterOrEqual(t, db, prev, "worst first")
			prev = db
		}

		// The text report says the same.
		code, stdout, stderr = run("compare", a, b, "--per-layer", "--duration", "0.1", "--warmup", "0", "--data", xPath)
		require.Equal(t, 0, code, stderr)
		t.Logf("infer compare a.kiln b.kiln --per-layer:\n%s", stdout)
		assert.Contains(t, stdout, "per-layer SQNR of B's tensors (B has no quantized ones) against A, worst first")
		assert.NotContains(t, stdout, "--keep-fp32", "no quantized tensors: keeping a node in float is no remedy")
	})

	t.Run("html", func(t *testing.T) {
		page := filepath.Join(dir, "report.html")
		code, stdout, stderr := run("compare", a, b, "--per-layer", "--duration", "0.2", "--warmup", "0", "--html", page)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "wrote "+page)
		html, err := os.ReadFile(page)
		require.NoError(t, err)
		s := string(html)
		assert.Equal(t, 2, strings.Count(s, `<img alt=`), "the latency and per-layer charts")
		assert.Equal(t, 2, strings.Count(s, `src="data:image/png;base64,`), "charts are embedded")
		assert.Contains(t, s, `alt="Latency distribution`)
		assert.Contains(t, s, `alt="SQNR of B against A per tensor`)
		assert.Contains(t, s, "/features/features.9/Relu_output_0")
		assert.NotRegexp(t, `(?i)<(script|link)\b|src="http`, s, "self-contained")
		// --html may not overwrite an input.
		code, _, stderr = run("compare", a, b, "--duration", "0.1", "--html", a)
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "engine A")
	})

	t.Run("refused", func(t *testing.T) {
		code, _, stderr := run("compare", a, mlpPath, "--duration", "0.1")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, `the engines are not of the same model: input "input" is float[1,1,8,8] in `+a+`, float[1,64] in `+mlpPath)
		code, _, stderr = run("compare", plain, a, "--per-layer", "--duration", "0.1")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, plain+" has no debug outputs to compare per layer: build it with cc build --mark-outputs all")
		code, _, stderr = run("compare", a, b, "--labels", yPath)
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "--labels needs --data")
		code, _, stderr = run("compare", a, b, "--data", xPath, "--labels", xPath, "--duration", "0.1")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "labels must be integers")
	})

	// Debug outputs stay out of run and check unless asked for.
	t.Run("debug outputs", func(t *testing.T) {
		code, stdout, stderr := run("run", a, "--threads", "1")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
		code, stdout, stderr = run("run", a, "--threads", "1", "--debug-outputs")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 8, strings.Count(stdout, "\n"), stdout)
		out := t.TempDir()
		code, _, stderr = run("run", a, "--debug-outputs", "--output-dir", out)
		require.Equal(t, 0, code, stderr)
		for _, f := range []string{"output_0.pb", "debug_0.pb", "debug_6.pb"} {
			assert.FileExists(t, filepath.Join(out, f))
		}
		code, stdout, stderr = run("check", a, "--test-data", "../../testdata/models/digits_cnn/test_data_set_0")
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 1, strings.Count(stdout, "PASS"), stdout)
	})
}

func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// qdqModel is digits_cnn with a QuantizeLinear → DequantizeLinear pair
// (uint8, zero point 0, scale max/255 over x) after each Relu, and on the
// input (zero point 128): a model in the contract's QDQ form, made by hand
// so that the test does not depend on the quantizer. It returns the model
// and, per quantized value, the name of its DequantizeLinear's output.
func qdqModel(t *testing.T, x *ir.Tensor) (*ir.Model, map[string]string) {
	m, err := build.ReadModel(cnnModel)
	require.NoError(t, err)
	g := m.Graph
	var relus []string
	for _, n := range g.Nodes {
		if n.OpType == "Relu" {
			relus = append(relus, n.Outputs[0].Name)
		}
	}
	peak := map[string]float64{}
	for name, vals := range referenceOutputs(t, orig(t), x, relus) {
		for _, v := range vals {
			peak[name] = max(peak[name], v)
		}
	}
	dequantized := map[string]string{}
	pair := func(v *ir.Value, scale float32, zp uint8) {
		dq := &ir.Value{Name: v.Name + "_dq", Type: v.Type}
		g.ReplaceUses(v, dq)
		s := g.AddInitializer(v.Name+"_scale", ir.Scalar(ir.Float32, scale))
		z := g.AddInitializer(v.Name+"_zp", ir.Scalar(ir.Uint8, zp))
		qt := v.Type.Clone()
		qt.Elem = ir.Uint8
		q := &ir.Value{Name: v.Name + "_q", Type: qt}
		qn := &ir.Node{Name: v.Name + "_Q", OpType: "QuantizeLinear", Inputs: []*ir.Value{v, s, z}, Outputs: []*ir.Value{q}}
		dn := &ir.Node{Name: v.Name + "_DQ", OpType: "DequantizeLinear", Inputs: []*ir.Value{q, s, z}, Outputs: []*ir.Value{dq}}
		q.Producer, dq.Producer = qn, dn
		g.Nodes = append(g.Nodes, qn, dn)
		dequantized[v.Name] = dq.Name
	}
	pair(g.Inputs[0], 8.0/255, 128)
	for _, n := range slices.Clone(g.Nodes) {
		if n.OpType == "Relu" {
			pair(n.Outputs[0], float32(peak[n.Outputs[0].Name]/255), 0)
		}
	}
	require.NoError(t, g.TopoSort())
	return m, dequantized
}

func orig(t *testing.T) *ir.Model {
	m, err := build.ReadModel(cnnModel)
	require.NoError(t, err)
	return m
}

// A quantized engine against the FP32 one, tensor by tensor: each of B's
// quantized tensors pairs with A's tensor of the value it quantized, and
// its SQNR is the reference executor's, on the QDQ model, of that value
// after quantization.
func TestComparePerLayerQuantized(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(5))
	x := ir.NewTensor(ir.Float32, 12, 1, 8, 8)
	for i := range ir.Data[float32](x) {
		ir.Data[float32](x)[i] = float32(rng.Float64()) // digits' pixels are in [0, 1]
	}
	data, err := onnx.WriteTensor(x)
	require.NoError(t, err)
	xPath := filepath.Join(dir, "x.pb")
	require.NoError(t, os.WriteFile(xPath, data, 0o644))
	qdq, dequantized := qdqModel(t, x)
	a, b := filepath.Join(dir, "a.kiln"), filepath.Join(dir, "b.kiln")
	buildEngine(t, orig(t), a, build.MarkAll)
	buildEngine(t, qdq, b, build.MarkAll)

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(buildInfer(t), "compare", a, b, "--per-layer", "--json", "--duration", "0.1", "--warmup", "0", "--data", xPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	var r struct {
		Layers []struct {
			Name string
			SQNR float64 `json:"sqnr_db"`
		}
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r))
	t.Logf("%s", stdout.String())

	// The oracle: A's values from the FP32 model; B's from the QDQ model,
	// after quantization (a quantized value's DequantizeLinear output; a
	// layout op after it, such as a MaxPool, already reads dequantized data).
	var names, quantized []string
	for _, l := range r.Layers {
		names = append(names, l.Name)
		if dq, ok := dequantized[l.Name]; ok {
			quantized = append(quantized, dq)
		} else {
			quantized = append(quantized, l.Name)
		}
	}
	for name := range dequantized {
		assert.Contains(t, names, name, "every quantized value is compared")
	}
	want := referenceOutputs(t, orig(t), x, names)
	got := referenceOutputs(t, qdq, x, quantized)
	for _, v := range x.Float32s() {
		want["input"] = append(want["input"], float64(v))
	}
	for i, l := range r.Layers {
		require.Contains(t, want, l.Name)
		require.Contains(t, got, quantized[i])
		oracle := sqnrOf(want[l.Name], got[quantized[i]])
		assert.InDelta(t, oracle, l.SQNR, 0.1, l.Name)
		assert.Less(t, l.SQNR, 60.0, "%s is quantized", l.Name)
	}

	// The text report names the Conv and Gemm nodes of the worst tensors.
	stdout.Reset()
	cmd = exec.Command(buildInfer(t), "compare", a, b, "--per-layer", "--duration", "0.1", "--warmup", "0", "--data", xPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Contains(t, stdout.String(), "per-layer SQNR of B's quantized tensors against A, worst first")
	assert.Regexp(t, `to keep the worst in float: cc quantize --keep-fp32 /(features|classifier)/[a-z.0-9]+/(Conv|Gemm)(,/(features|classifier)/[a-z.0-9]+/(Conv|Gemm)){2}\n`, stdout.String())
}
