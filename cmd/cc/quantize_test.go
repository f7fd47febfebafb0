package main

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

const cnnModel = "../../testdata/models/digits_cnn.onnx"

// writeDigits writes n random 8×8 "digits" in [0, 1] as a [n,1,8,8]
// TensorProto file.
func writeDigits(t *testing.T, dir string, n int64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	x := ir.NewTensor(ir.Float32, n, 1, 8, 8)
	for i := range ir.Data[float32](x) {
		ir.Data[float32](x)[i] = rng.Float32()
	}
	buf, err := onnx.WriteTensor(x)
	require.NoError(t, err)
	path := filepath.Join(dir, "calib.pb")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	return path
}

func TestQuantizeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"quantize", cnnModel}, "--calib DATA is required"},
		{[]string{"quantize", cnnModel, "--calib", "x.pb", "--method", "kl"}, `--method: unknown calibration method "kl"`},
		{[]string{"quantize", cnnModel, "--calib", "x.pb", "--method", "percentile=0"}, "0 < P <= 100"},
		{[]string{"quantize", cnnModel, "--calib", "x.pb", "--per-tensor", "--per-channel"}, "exclude each other"},
		{[]string{"build", cnnModel, "--calib", "x.pb"}, "--calib quantizes: it needs --precision int8"},
		{[]string{"build", cnnModel, "--strict"}, "--strict quantizes: it needs --precision int8"},
		{[]string{"quantize", cnnModel, "--calib-cache", "c.json", "--strict"}, "--strict checks the INT8 model on the calibration data: it needs --calib DATA"},
		{[]string{"build", cnnModel, "--precision", "int4"}, `--precision must be fp32 or int8, not "int4"`},
		{[]string{"build", cnnModel, "--precision", "int8"}, "--calib DATA is required"},
	} {
		r := cc(t, c.args...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.msg, c.args)
	}
}

// cc quantize writes a QDQ model and the calibration cache, reads the
// cache back instead of calibrating, and refuses another model's; cc
// build --precision int8 does both steps and records the precision. With
// stderr not a terminal there is no progress bar: stderr stays empty.
func TestQuantizeCommand(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	calib := writeDigits(t, dir, 8)
	out := filepath.Join(dir, "q.onnx")
	cache := filepath.Join(dir, "calib.json")

	r := cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--calib-cache", cache)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "wrote "+out+": 7 of 12 nodes quantized (Conv 3, Gemm 2, MaxPool 2)"), r.stdout)
	assert.Contains(t, r.stdout, "entropy ranges from 8 samples in 8 runs")
	assert.Contains(t, r.stdout, "cached in "+cache)
	m, err := onnx.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, m.Verify())
	ops := map[string]int{}
	for _, n := range m.Graph.Nodes {
		ops[n.OpType]++
	}
	assert.Equal(t, 9, ops["QuantizeLinear"])
	assert.Equal(t, 9+5+5, ops["DequantizeLinear"], "activations, weights and biases")

	// From the cache: no --calib, another method.
	r = cc(t, "quantize", cnnModel, "-o", out, "--calib-cache", cache, "--method", "minmax")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "minmax ranges from the calibration cache "+cache+" (8 samples)")

	// Another model's cache: refused before anything is written.
	r = cc(t, "quantize", mlpModel, "-o", filepath.Join(dir, "mlp.onnx"), "--calib-cache", cache)
	requireOneErrorLine(t, r, mlpModel)
	assert.Contains(t, r.stderr, "calibration cache "+cache+" was made for model sha256 ")
	assert.NoFileExists(t, filepath.Join(dir, "mlp.onnx"))

	// Outputs that are inputs are refused.
	r = cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--calib-cache", calib)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "the calibration cache is the same file as calibration data")
	r = cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--calib-cache", out)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "the same file as")

	// One step: quantize and build.
	engine := filepath.Join(dir, "q.kiln")
	r = cc(t, "build", "--precision", "int8", "--calib", calib, "--method", "percentile=99.9", "--timing-cache", "none", "-o", engine, cnnModel)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "quantized "+cnnModel+": 7 of 12 nodes quantized")
	r = cc(t, "inspect", engine)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "precision    int8")
	assert.Contains(t, r.stdout, "--precision=int8 --method=percentile=99.9")
}

// writeCalib writes 8 random digits changed by edit as a [8,1,8,8]
// TensorProto file in dir.
func writeCalib(t *testing.T, dir string, edit func(x []float32)) string {
	t.Helper()
	path := writeDigits(t, dir, 8)
	buf, err := os.ReadFile(path)
	require.NoError(t, err)
	x, err := onnx.ReadTensor(buf)
	require.NoError(t, err)
	edit(ir.Data[float32](x))
	buf, err = onnx.WriteTensor(x)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	return path
}

// relL2OnDigits is the largest ‖q − f‖ / ‖f‖ between the outputs of the
// model file q and digits_cnn on random non-zero digits, on the reference
// executor.
func relL2OnDigits(t *testing.T, q string) float64 {
	t.Helper()
	var runs [2]func(map[string]*ir.Tensor) (map[string]*ir.Tensor, error)
	for i, path := range []string{cnnModel, q} {
		m, err := onnx.ReadFile(path)
		require.NoError(t, err)
		ex, err := reference.New(m)
		require.NoError(t, err)
		runs[i] = ex.Run
	}
	rng := rand.New(rand.NewPCG(77, 7))
	worst := 0.0
	for range 4 {
		x := ir.NewTensor(ir.Float32, 1, 1, 8, 8)
		for i := range ir.Data[float32](x) {
			ir.Data[float32](x)[i] = 0.05 + 0.95*rng.Float32()
		}
		var outs [2][]float32
		for i, run := range runs {
			out, err := run(map[string]*ir.Tensor{"input": x})
			require.NoError(t, err)
			outs[i] = out["output"].Float32s()
		}
		var ff, dd float64
		for i, f := range outs[0] {
			d := float64(f) - float64(outs[1][i])
			ff, dd = ff+float64(f)*float64(f), dd+d*d
		}
		worst = max(worst, math.Sqrt(dd/ff))
	}
	return worst
}

// Degenerate calibration (issue 32): all-zero data and one 1e30 among 8
// samples give warnings naming the tensor, and models that agree with the
// float one on real inputs (before: relative L2 1.0, at most a bias
// warning); an edited cache with min above max is refused, naming it and
// the tensor; a range that is valid but wrong is caught by the check on
// the calibration data, an error with --strict.
func TestQuantizeDegenerateRanges(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "q.onnx")

	zeros := writeCalib(t, dir, func(x []float32) { clear(x) })
	r := cc(t, "quantize", cnnModel, "--calib", zeros, "-o", out, "--method", "minmax")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, `tensor "input" (calibration data `+zeros+`): every calibration value of it is 0;`)
	assert.Contains(t, r.stderr, "stay float")
	assert.Contains(t, r.stdout, "none of 12 nodes quantized")
	assert.Less(t, relL2OnDigits(t, out), 1e-5)

	outlier := writeCalib(t, dir, func(x []float32) { x[3*64+37] = 1e30 })
	r = cc(t, "quantize", cnnModel, "--calib", outlier, "-o", out, "--method", "minmax")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, `tensor "input" (calibration data `+outlier+`): its minmax range [`)
	assert.Contains(t, r.stderr, ", 1e+30] quantizes 99.8% of its nonzero calibration values to 0")
	assert.Contains(t, r.stderr, `rather than quantize it, node "/features/features.0/Conv" (Conv) stays float`)
	assert.Contains(t, r.stderr, "remove the samples that hold them from the calibration data")
	assert.NotContains(t, r.stderr, "agrees badly")
	assert.Less(t, relL2OnDigits(t, out), 0.2)

	// A good calibration, cached; the check's result is in the summary.
	calib := writeDigits(t, dir, 8)
	cache := filepath.Join(dir, "calib.json")
	r = cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--method", "minmax", "--calib-cache", cache, "--strict")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "on the calibration data its outputs differ from the float model's by relative L2 ")
	good, err := os.ReadFile(cache)
	require.NoError(t, err)
	// edit rewrites the input's line of the cache (one line per tensor),
	// replacing each old by its new.
	edit := func(oldNew ...string) {
		lines := strings.Split(string(good), "\n")
		for i, line := range lines {
			if strings.HasPrefix(line, `  "input": {`) {
				lines[i] = strings.NewReplacer(oldNew...).Replace(line)
				require.NotEqual(t, line, lines[i])
			}
		}
		require.NoError(t, os.WriteFile(cache, []byte(strings.Join(lines, "\n")), 0o644))
	}

	edit(`"min":`, `"min":5,"was_min":`, `"max":`, `"max":1,"was_max":`)
	require.NoError(t, os.Remove(out))
	r = cc(t, "quantize", cnnModel, "-o", out, "--method", "minmax", "--calib-cache", cache)
	requireOneErrorLine(t, r, cnnModel)
	assert.Contains(t, r.stderr, "calibration cache "+cache+`: tensor "input": min 5 is above max 1: delete the cache or recalibrate`)
	assert.NoFileExists(t, out)

	edit(`"range":[`, `"range":[0,0.001],"was":[`)
	r = cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--method", "minmax", "--calib-cache", cache)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the INT8 model agrees badly with the float model on the calibration data ("+calib+`): output "output" differs by relative L2 `)
	require.NoError(t, os.Remove(out))
	r = cc(t, "quantize", cnnModel, "--calib", calib, "-o", out, "--method", "minmax", "--calib-cache", cache, "--strict")
	requireOneErrorLine(t, r, cnnModel)
	assert.Contains(t, r.stderr, "--strict: nothing written")
	assert.NoFileExists(t, out)

	r = cc(t, "quantize", cnnModel, "-o", out, "--calib-cache", cache, "--strict")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--strict checks the INT8 model on the calibration data: it needs --calib DATA")
}

// A model at an opset before 13 (digits_cnn's import rewritten to 11) is
// quantized per channel at 13, and the summary line says so.
func TestQuantizeOldOpset(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	m, err := onnx.ReadFile(cnnModel)
	require.NoError(t, err)
	m.OpsetImports = []ir.OpsetImport{{Domain: "", Version: 11}}
	buf, err := onnx.Write(m)
	require.NoError(t, err)
	model := filepath.Join(dir, "cnn11.onnx")
	require.NoError(t, os.WriteFile(model, buf, 0o644))
	out := filepath.Join(dir, "q.onnx")
	r := cc(t, "quantize", model, "--calib", writeDigits(t, dir, 8), "-o", out)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "per-channel weights")
	assert.Contains(t, r.stdout, "; its ONNX opset 11 raised to 13 for QuantizeLinear's per-channel axis")
	q, err := onnx.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, int64(13), q.Opset(""))
}
