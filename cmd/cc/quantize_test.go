package main

import (
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
