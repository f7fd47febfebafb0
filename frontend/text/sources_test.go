package text

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// ParseFileSources names the external data file a text model was read
// from: the .bin that WriteFile puts beside it.
func TestParseFileSources(t *testing.T) {
	g := ir.NewGraph("big")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(100)))
	w := ir.NewTensor(ir.Float32, 100)
	for i := range w.Float32s() {
		w.Float32s()[i] = float32(i)*0.25 - 3
	}
	y := g.Apply("Add", []*ir.Value{x, g.AddInitializer("w", w)})
	y.Name = "y"
	g.SetOutputs(y)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnxtxt")
	require.NoError(t, WriteFile(path, ir.NewModel(g, 17)))
	_, files, err := ParseFileSources(path)
	require.NoError(t, err)
	assert.Equal(t, []string{path + ".bin"}, files)

	small := filepath.Join(dir, "small.onnxtxt")
	require.NoError(t, os.WriteFile(small, []byte("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2] X) => (float[2] Y) {\n  Y = Relu(X)\n}\n"), 0o644))
	_, files, err = ParseFileSources(small)
	require.NoError(t, err)
	assert.Empty(t, files)
}
