package text

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
)

// randomFloats writes n random float32s to path and returns them.
func randomFloats(t *testing.T, path string, n int, seed int64) []float32 {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	vs := make([]float32, n)
	var b []byte
	for i := range vs {
		vs[i] = float32(r.NormFloat64())
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(vs[i]))
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return vs
}

// externalText is a text model whose initializer w: float[2] lives in loc.
func externalText(loc string) []byte {
	return []byte(`g () => () <float[2] w = ["location": "` + loc + `"]> {}`)
}

// Issue 32 (onnx/onnx#7686): a text model's external data reached through
// a symbolic link, to a file or on a folder on the way, was read from
// outside the model's folder. It is refused, naming the location, the
// initializer and where it leads; a link inside the folder is followed.
func TestExternalDataStaysInside(t *testing.T) {
	outside := t.TempDir()
	randomFloats(t, filepath.Join(outside, "secret"), 2, 1)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "weights"), 0o755))
	want := randomFloats(t, filepath.Join(dir, "weights", "w.bin"), 2, 2)
	require.NoError(t, os.Symlink("weights/w.bin", filepath.Join(dir, "inside.bin")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "secret.bin")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "shards")))
	model := filepath.Join(dir, "m.onnxtxt")

	m, err := Parse(model, externalText("inside.bin"))
	require.NoError(t, err)
	assert.Equal(t, want, m.Graph.Initializers[0].Const.Float32s())
	for _, loc := range []string{"secret.bin", "shards/secret"} {
		_, err := Parse(model, externalText(loc))
		require.Error(t, err, loc)
		for _, part := range []string{`external data "` + loc + `"`, `(initializer "w")`, "outside the folder", filepath.Join(dir, loc)} {
			assert.Contains(t, err.Error(), part, loc)
		}
	}
	for _, loc := range []string{filepath.Join(outside, "secret"), "../" + filepath.Base(outside) + "/secret"} {
		_, err := Parse(model, externalText(loc))
		assert.ErrorContains(t, err, "must be a relative path inside the model's directory", loc)
	}
}

// Issue 32: a named pipe as a text model or its external data hung the
// reader forever; each is refused at once, by name.
func TestReadRefusesNamedPipes(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "pipe.onnxtxt")
	fifotest.Make(t, model)
	fifotest.Returns(t, model, func() error { _, err := ParseFile(model); return err })

	weights := filepath.Join(dir, "w.bin")
	fifotest.Make(t, weights)
	fifotest.Returns(t, weights, func() error { _, err := Parse(filepath.Join(dir, "m.onnxtxt"), externalText("w.bin")); return err })
}
