package onnx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ReadFileSources names the external data files a model was read from, so
// that cc can refuse to write over them.
func TestReadFileSources(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	require.NoError(t, os.WriteFile(model, externalModel("weights/w.bin"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "weights"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "weights", "w.bin"), append(make([]byte, 8), le32(1, 2, 3)...), 0o644))
	m, files, err := ReadFileSources(model)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "weights", "w.bin")}, files)
	assert.Equal(t, []float32{1, 2, 3}, m.Graph.Initializers[0].Const.Float32s())

	// A model with its weights inline has none.
	b, err := Write(m)
	require.NoError(t, err)
	inline := filepath.Join(dir, "inline.onnx")
	require.NoError(t, os.WriteFile(inline, b, 0o644))
	_, files, err = ReadFileSources(inline)
	require.NoError(t, err)
	assert.Empty(t, files)
}
