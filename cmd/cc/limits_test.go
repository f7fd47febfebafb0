package main

import (
	"math/rand"
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

// hugeInput is y = Relu(x) for x: float[dims], which once built ("tensors
// total 0") and crashed the runtime.
func hugeInput(dims ...int64) *ir.Model {
	g := ir.NewGraph("huge")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(dims...)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	return ir.NewModel(g, 17)
}

// expandTo is y = Expand(x, shape) for x: float[1]; the shape is an
// initializer, or with runtimeShape an input the test data gives.
func expandTo(runtimeShape bool, shape ...int64) *ir.Model {
	g := ir.NewGraph("expand")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	var s *ir.Value
	if runtimeShape {
		s = g.AddInput("shape", ir.TensorType(ir.Int64, ir.S(int64(len(shape)))))
	} else {
		s = g.AddInitializer("shape", ir.FromSlice(ir.Int64, []int64{int64(len(shape))}, shape))
	}
	y := g.Apply("Expand", []*ir.Value{x, s})
	y.Name = "y"
	g.SetOutputs(y)
	return ir.NewModel(g, 17)
}

func writeTensor(t *testing.T, path string, tensor *ir.Tensor) {
	t.Helper()
	b, err := onnx.WriteTensor(tensor)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestBuildRefusesHugeModels(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		m    *ir.Model
		want string
	}{
		{"input", hugeInput(2147483648, 2147483648), `input "x" (float[2147483648,2147483648]): its size in bytes overflows int64 (the tensor limit is 17179869184 bytes (16 GiB); --max-tensor-bytes raises it)`},
		{"expand", expandTo(false, 2147483648, 2147483648), `output "y" (float[2147483648,2147483648]): its size in bytes overflows int64`},
		{"2^33", hugeInput(1 << 33), `input "x" (float[8589934592]) is 34359738368 bytes (32 GiB), over the tensor limit of 17179869184 bytes (16 GiB) (--max-tensor-bytes raises it)`},
		{"2^61", hugeInput(1 << 61), "overflows int64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, "^", "")+".onnx")
			require.NoError(t, onnx.WriteFile(path, tc.m))
			out := filepath.Join(dir, "out.kiln")
			r := cc(t, "build", path, "-o", out)
			requireOneErrorLine(t, r, path)
			assert.Contains(t, r.stderr, tc.want)
			assert.NoFileExists(t, out)
		})
	}
	// A lowered limit is a flag, and the error says which value.
	path := filepath.Join(dir, "small.onnx")
	require.NoError(t, onnx.WriteFile(path, hugeInput(1024)))
	r := cc(t, "build", "--emit", "ir", "--max-tensor-bytes", "1K", path, "-o", filepath.Join(dir, "small.onnxtxt"))
	requireOneErrorLine(t, r, path)
	assert.Contains(t, r.stderr, `input "x" (float[1024]) is 4096 bytes (4 KiB), over the tensor limit of 1024 bytes (1 KiB)`)
	r = cc(t, "build", "--emit", "ir", "--max-tensor-bytes", "4K", path, "-o", filepath.Join(dir, "small.onnxtxt"))
	assert.Equal(t, 0, r.code, r.stderr)
	r = cc(t, "build", "--max-tensor-bytes", "lots", path)
	assert.Equal(t, 2, r.code, "a bad limit is a usage error: %s", r.stderr)
}

func TestFileAndNestingLimitsOnTheCLI(t *testing.T) {
	dir := t.TempDir()
	zeros := filepath.Join(dir, "zeros.onnx")
	f, err := os.Create(zeros)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30)) // sparse: no disk space
	require.NoError(t, f.Close())
	for _, cmd := range [][]string{{"inspect", zeros}, {"convert", zeros, filepath.Join(dir, "z.onnxtxt")}, {"build", zeros}} {
		r := cc(t, cmd...)
		requireOneErrorLine(t, r, zeros)
		assert.Contains(t, r.stderr, "not an ONNX model: byte 0: field number 0", cmd[0])
	}
	r := cc(t, "inspect", "--max-file-bytes", "1M", zeros)
	requireOneErrorLine(t, r, zeros)
	assert.Contains(t, r.stderr, "over the file limit of 1048576 bytes (1 MiB) (--max-file-bytes raises it)")

	deep := filepath.Join(dir, "deep.onnxtxt")
	src := "<ir_version: 8, opset_import: [\"\" : 17]>\ng (" + strings.Repeat("seq(", 100) + "float" + strings.Repeat(")", 100) + " x) => () {}\n"
	require.NoError(t, os.WriteFile(deep, []byte(src), 0o644))
	r = cc(t, "inspect", deep)
	requireOneErrorLine(t, r, deep)
	assert.Contains(t, r.stderr, ":2:263: nested deeper than 64 levels (the nesting limit; --max-nesting raises it)")
	r = cc(t, "inspect", "--max-nesting", "100", deep)
	assert.Equal(t, 0, r.code, r.stderr)
}

// A cc test batch with hostile models reports each as a failure, with its
// message, and goes on: the huge ones once took the whole batch down
// (SIGSEGV in the runtime, Go's fatal "out of memory").
func TestConformanceBatchSurvivesHugeModels(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(8))
	x := ir.FromSlice(ir.Float32, []int64{1}, []float32{float32(rng.NormFloat64())})
	small := []int64{3, 2}
	want := ir.NewTensor(ir.Float32, small...)
	for i := range want.Float32s() {
		want.Float32s()[i] = x.Float32s()[0]
	}
	tests := []struct {
		name string
		m    *ir.Model
		feed []*ir.Tensor
	}{
		{"a_static_expand", expandTo(false, 2147483648, 2147483648), []*ir.Tensor{x}},
		{"b_runtime_expand", expandTo(true, 2, 1<<32), []*ir.Tensor{x, ir.FromSlice(ir.Int64, []int64{2}, []int64{2, 1 << 32})}},
		{"c_input", hugeInput(2147483648, 2147483648), []*ir.Tensor{x}},
		{"d_opset99", expandTo(false, small...), []*ir.Tensor{x}},
		{"e_pass", expandTo(false, small...), []*ir.Tensor{x}},
	}
	tests[3].m.OpsetImports[0].Version = 99
	for _, tc := range tests {
		writeTest(t, filepath.Join(dir, tc.name), tc.m, nil)
		for i, feed := range tc.feed {
			writeTensor(t, filepath.Join(dir, tc.name, "test_data_set_0", "input_"+string(rune('0'+i))+".pb"), feed)
		}
		writeTensor(t, filepath.Join(dir, tc.name, "test_data_set_0", "output_0.pb"), want)
	}
	backends := []string{"reference"}
	if cpu.Available() == nil {
		backends = append(backends, "cpu")
	}
	for _, backend := range backends {
		r := cc(t, "test", "--backend", backend, dir)
		assert.Equal(t, 1, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, 6, r.stdout)
		assert.Regexp(t, `^FAIL a_static_expand: .*output "y" \(float\[2147483648,2147483648\]\): its size in bytes overflows int64`, lines[0], backend)
		if backend == "reference" {
			assert.Regexp(t, `^FAIL b_runtime_expand: .*output "y" \(float\[2,4294967296\]\) is 34359738368 bytes \(32 GiB\), over the tensor limit`, lines[1])
		} else {
			// The engine is compiled for the test data's shapes; a shape
			// given as data leaves the output's shape unknown to it.
			assert.Regexp(t, `^(FAIL|UNSUPPORTED) b_runtime_expand: `, lines[1])
		}
		assert.Regexp(t, `^FAIL c_input: `, lines[2], backend)
		assert.Regexp(t, `^UNSUPPORTED d_opset99: .*opset 99 for domain "": kiln supports up to 26`, lines[3], backend)
		assert.Equal(t, "PASS e_pass", lines[4], backend)
		assert.Equal(t, "1 passed, 3 failed, 1 skipped", lines[5], backend)
	}
}
