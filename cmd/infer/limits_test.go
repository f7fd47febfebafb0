package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// The arena and binding limits reach the runtime: an engine whose arena is
// over --max-arena-bytes is refused before its arena is allocated, naming
// the flag, and raising the flag runs it.
func TestArenaAndTensorLimitFlags(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildInfer(t)
	out, err := build.Build("../../testdata/models/digits_cnn.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	dec, err := engine.Decode(out.Engine)
	require.NoError(t, err)
	arena := dec.Meta.ArenaBytes
	require.Positive(t, arena)
	path := filepath.Join(t.TempDir(), "cnn.kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))

	for _, cmd := range []string{"run", "bench"} {
		args := []string{cmd, path, "--max-arena-bytes", strconv.FormatInt(arena-1, 10)}
		if cmd == "bench" {
			args = append(args, "--iterations", "1", "--warmup", "0")
		}
		r := runInfer(t, bin, args...)
		assert.Equal(t, 1, r.code, r.stdout)
		assert.Contains(t, r.stderr, "the engine's arena is "+strconv.FormatInt(arena, 10)+" bytes", cmd)
		assert.Contains(t, r.stderr, "--max-arena-bytes raises it", cmd)
	}
	r := runInfer(t, bin, "run", path, "--max-arena-bytes", strconv.FormatInt(arena, 10))
	assert.Equal(t, 0, r.code, r.stderr)
	r = runInfer(t, bin, "run", path, "--max-tensor-bytes", "100") // the 8x8 float input is 256 bytes
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, "over the tensor limit of 100 bytes")
	r = runInfer(t, bin, "run", path, "--max-arena-bytes", "0")
	assert.Equal(t, 2, r.code, "a zero limit is a usage error: %s", r.stderr)
}
