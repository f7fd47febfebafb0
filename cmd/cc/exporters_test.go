package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
)

// The PyTorch 1.13 exports in testdata/exporters/torch113 (gen.py: a
// scripted If, for and while loop, a transformer encoder, LSTM and GRU,
// GroupNorm/InstanceNorm/PixelShuffle/bilinear interpolation, masked
// attention with einsum, cumsum/topk/argmax, and issue 27's must-shows in
// torch_must_test.go) match PyTorch's outputs on the reference and compiled
// for the CPU; cuda-sim compiles all but the control flow, which it reports
// UNSUPPORTED.
func TestTorchExports(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dirs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "exporters", "torch113", "*", "model.onnx"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 12)
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	summary := regexp.MustCompile(`(\d+) passed, (\d+) failed, (\d+) skipped`)
	for _, c := range []struct {
		backend   string
		unsupport string
	}{{"reference", "0"}, {"cpu", "0"}, {"cuda-sim", "6"}} {
		r := cc(t, append([]string{"test", "--backend", c.backend}, dirs...)...)
		m := summary.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, "%s: %s %s", c.backend, r.stdout, r.stderr)
		assert.Equal(t, "0", m[2], "%s failed:\n%s", c.backend, r.stdout)
		assert.Equal(t, c.unsupport, m[3], "%s unsupported:\n%s", c.backend, r.stdout)
	}
}
