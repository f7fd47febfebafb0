package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDynamicBatch builds digits_cnn with a dynamic batch axis once, with
// no flags, and checks it at batch 1 (PyTorch's outputs) and 4 (the
// reference's); a batch beyond the profile is refused, naming the input,
// the dim, what it got and the range.
func TestDynamicBatch(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := "../../testdata/models/digits_cnn_dynamic"
	out, err := build.Build(filepath.Join(dir, "model.onnx"), build.Options{OptLevel: 2})
	require.NoError(t, err)
	eng := filepath.Join(t.TempDir(), "dyn.kiln")
	require.NoError(t, os.WriteFile(eng, out.Engine, 0o644))
	bin := buildInfer(t)
	run := func(args ...string) (int, string, string) {
		r := runInfer(t, bin, args...)
		return r.code, r.stdout, r.stderr
	}
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		code, stdout, stderr := run("check", eng, "--test-data", filepath.Join(dir, set))
		assert.Equal(t, 0, code, "%s: %s%s", set, stdout, stderr)
		assert.Contains(t, stdout, "PASS output")
	}
	big := ir.NewTensor(ir.Float32, 40, 1, 8, 8)
	data, err := onnx.WriteTensor(big)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "big.pb")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	code, _, stderr := run("run", eng, "--input", "input="+file)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `input "input" dim 0: dim batch is 40, the engine takes 1 to 32`)
	code, stdout, _ := run("run", eng, "--shape", "input=3x1x8x8")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "output float[3 10]")
}
