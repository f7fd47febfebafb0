package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of what cc reads: nothing outside a model's folder through its
// external data, and no file that would block (a named pipe).

// randomWeights writes externalModel's w (three random floats) to path.
func randomWeights(t *testing.T, path string, seed int64) []byte {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	var b []byte
	for range 3 {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(r.NormFloat64())))
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return b
}

// Issue 32 (the path traversal onnx/onnx#7686 closed): external data
// reached through a symbolic link, a linked file or a linked folder on
// the way, was read from outside the model's folder, and `cc convert`
// copied the secret into its output. Each is refused in one line naming
// the model, the tensor and where the link leads; nothing is written. A
// link that stays inside the folder is followed.
func TestConvertRefusesExternalDataOutsideFolder(t *testing.T) {
	outside := t.TempDir()
	secret := randomWeights(t, filepath.Join(outside, "secret"), 1)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "w.bin")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "shards")))
	out := t.TempDir()

	for _, loc := range []string{"w.bin", "shards/secret"} {
		model := filepath.Join(dir, "model.onnx")
		require.NoError(t, os.WriteFile(model, externalModel(loc), 0o644))
		for _, output := range []string{"m.onnxtxt", "m.onnx"} {
			r := cc(t, "convert", model, filepath.Join(out, output))
			requireOneErrorLine(t, r, model)
			for _, part := range []string{`tensor "w"`, `external data "` + loc + `"`, filepath.Join(dir, loc) + " resolves to", "outside the folder"} {
				assert.Contains(t, r.stderr, part, "%s → %s", loc, output)
			}
		}
		r := cc(t, "inspect", model)
		requireOneErrorLine(t, r, model)
		assert.Contains(t, r.stderr, "outside the folder")
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written")

	// A link inside the folder is fine, and its weights are converted.
	inside := t.TempDir()
	weights := randomWeights(t, filepath.Join(inside, "weights.bin"), 2)
	require.NoError(t, os.Symlink("weights.bin", filepath.Join(inside, "w.bin")))
	model := filepath.Join(inside, "model.onnx")
	require.NoError(t, os.WriteFile(model, externalModel("w.bin"), 0o644))
	r := cc(t, "convert", model, filepath.Join(out, "m.onnx"))
	require.Equal(t, 0, r.code, r.stderr)
	converted, err := os.ReadFile(filepath.Join(out, "m.onnx"))
	require.NoError(t, err)
	assert.True(t, bytes.Contains(converted, weights), "the linked weights are in the output")
	assert.False(t, bytes.Contains(converted, secret))
}

// ccBounded runs cc like cc(), failing the test if cc has not exited
// within 30 seconds (a reader blocked on a named pipe), and killing it.
func ccBounded(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ccPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("cc %s did not exit within 30 s", strings.Join(args, " "))
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running cc %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// Issue 32: a named pipe as the model, its external data, an engine to
// inspect or the timing cache hung cc forever. Each is refused at once,
// naming the pipe as not a regular file.
func TestReadersRefuseNamedPipes(t *testing.T) {
	dir := t.TempDir()
	fifo := func(name string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		return path
	}
	pipeModel := fifo("pipe.onnx")
	pipeText := fifo("pipe.onnxtxt")
	pipeEngine := fifo("pipe.kiln")
	pipeCache := fifo("cache.json")
	fifo("w.bin")
	model := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(model, externalModel("w.bin"), 0o644))
	out := filepath.Join(dir, "out.kiln")

	for _, tc := range []struct {
		args []string
		pipe string
	}{
		{[]string{"build", pipeModel, "-o", out}, pipeModel},
		{[]string{"inspect", pipeText}, pipeText},
		{[]string{"convert", pipeModel, filepath.Join(dir, "m.onnxtxt")}, pipeModel},
		{[]string{"inspect", pipeEngine}, pipeEngine},
		{[]string{"convert", model, filepath.Join(dir, "m.onnxtxt")}, filepath.Join(dir, "w.bin")},
		{[]string{"build", mlpModel, "--timing-cache", pipeCache, "-o", out}, pipeCache},
	} {
		r := ccBounded(t, tc.args...)
		assert.Equal(t, 1, r.code, "cc %s: %s", strings.Join(tc.args, " "), r.stderr)
		assert.Contains(t, r.stderr, tc.pipe+": not a regular file but a named pipe", "cc %s", strings.Join(tc.args, " "))
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	}
}

// Issue 32: `--timing-cache package.json` replaced any JSON object that
// is not a kiln timing cache. The build is refused, naming the file, and
// the file is left as it was.
func TestBuildRefusesForeignTimingCache(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "package.json")
	body := []byte(`{"name": "app", "private": true, "dependencies": {"left-pad": "^1.3.0"}}` + "\n")
	require.NoError(t, os.WriteFile(pkg, body, 0o644))
	r := cc(t, "build", mlpModel, "--timing-cache", pkg, "-o", filepath.Join(dir, "m.kiln"))
	require.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "timing cache "+pkg+" is not a kiln timing cache")
	assert.Contains(t, r.stderr, "--timing-cache")
	got, err := os.ReadFile(pkg)
	require.NoError(t, err)
	assert.Equal(t, body, got)
	assert.NoFileExists(t, filepath.Join(dir, "m.kiln"))
}
