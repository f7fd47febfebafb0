package onnx

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/ir"
)

// weightsFile writes 8 bytes of padding and three random floats, as
// externalModel's w expects them at offset 8, and returns the floats.
func weightsFile(t *testing.T, path string, seed int64) []float32 {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	w := []float32{r.Float32(), -r.Float32(), r.Float32() * 10}
	require.NoError(t, os.WriteFile(path, append(make([]byte, 8), le32(w...)...), 0o644))
	return w
}

// Issue 32 (onnx/onnx#7686): external data reached through a symbolic
// link, to a file or on a folder on the way, was read from outside the
// model's folder. It is refused, naming the tensor, the location and
// where it leads, for a model and for a TensorProto file alike; links
// that stay inside the folder are followed.
func TestExternalDataStaysInside(t *testing.T) {
	outside := t.TempDir()
	weightsFile(t, filepath.Join(outside, "secret"), 1)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "weights"), 0o755))
	want := weightsFile(t, filepath.Join(dir, "weights", "w.bin"), 2)
	require.NoError(t, os.Symlink("weights/w.bin", filepath.Join(dir, "inside.bin")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "secret.bin")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "shards")))

	readModel := func(loc string) (*ir.Tensor, error) {
		path := filepath.Join(dir, "m.onnx")
		require.NoError(t, os.WriteFile(path, externalModel(loc), 0o644))
		m, err := ReadFile(path)
		if err != nil {
			return nil, err
		}
		return m.Graph.Initializers[0].Const, nil
	}
	readTensorFile := func(loc string) (*ir.Tensor, error) {
		path := filepath.Join(dir, "input_0.pb")
		require.NoError(t, os.WriteFile(path, tensorProto(ir.Float32, []int64{3}, external(loc, 8, 12)), 0o644))
		return ReadTensorFile(path)
	}
	for name, read := range map[string]func(string) (*ir.Tensor, error){"model": readModel, "tensor file": readTensorFile} {
		got, err := read("inside.bin")
		require.NoError(t, err, "%s: a link inside the folder", name)
		assert.Equal(t, want, got.Float32s(), name)
		for _, loc := range []string{"secret.bin", "shards/secret"} {
			_, err := read(loc)
			require.Error(t, err, "%s: %s", name, loc)
			for _, part := range []string{`tensor "`, `external data "` + loc + `"`, "outside the folder", filepath.Join(dir, loc)} {
				assert.Contains(t, err.Error(), part, "%s: %s", name, loc)
			}
		}
		_, err = read(filepath.Join(outside, "secret"))
		assert.ErrorContains(t, err, "is outside the model's folder", name)
	}
}

// Issue 32: a named pipe as the model, its external data or a tensor file
// hung the reader forever; each is refused at once, by name.
func TestReadRefusesNamedPipes(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "pipe.onnx")
	fifotest.Make(t, model)
	fifotest.Returns(t, model, func() error { _, err := ReadFile(model); return err })

	tensorFile := filepath.Join(dir, "input_0.pb")
	fifotest.Make(t, tensorFile)
	fifotest.Returns(t, tensorFile, func() error { _, err := ReadTensorFile(tensorFile); return err })

	weights := filepath.Join(dir, "w.bin")
	fifotest.Make(t, weights)
	m := filepath.Join(dir, "m.onnx")
	require.NoError(t, os.WriteFile(m, externalModel("w.bin"), 0o644))
	fifotest.Returns(t, weights, func() error { _, err := ReadFile(m); return err })
}
