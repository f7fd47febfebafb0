package readfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
	"github.com/kiln-ml/kiln/ir"
)

func TestWithin(t *testing.T) {
	data := make([]byte, 3*PrefixBytes+17)
	rand.New(rand.NewSource(1)).Read(data)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	var seenSize int64
	got, err := Within(path, ir.Limits{}, func(p []byte, size int64) error {
		seen, seenSize = append([]byte{}, p...), size
		return nil
	})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want the file's %d", len(got), err, len(data))
	}
	if !bytes.Equal(seen, data[:PrefixBytes]) || seenSize != int64(len(data)) {
		t.Errorf("check saw %d bytes of a %d-byte file", len(seen), seenSize)
	}
	bad := errors.New("bad prefix")
	if _, err := Within(path, ir.Limits{}, func([]byte, int64) error { return bad }); !errors.Is(err, bad) {
		t.Errorf("a failing check: %v", err)
	}
	if _, err := Within(path, ir.Limits{MaxFileBytes: int64(len(data)) - 1}, nil); !errors.Is(err, ir.ErrLimit) {
		t.Errorf("over the file limit: %v", err)
	}
	if _, err := Within(t.TempDir(), ir.Limits{}, nil); err == nil {
		t.Error("a folder read as a file")
	}
}

// Issue 32: a named pipe as any input hung its reader forever; a folder
// or a device is no file to read either. Each is refused by name, at once.
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.onnx")
	fifotest.Make(t, fifo)
	fifotest.Returns(t, fifo, func() error { _, err := Open(fifo); return err })
	err := fifotest.Returns(t, fifo, func() error { _, err := Within(fifo, ir.Limits{}, nil); return err })
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), "named pipe")

	// Through a symbolic link, too: the check follows it.
	link := filepath.Join(dir, "link.onnx")
	require.NoError(t, os.Symlink(fifo, link))
	fifotest.Returns(t, link, func() error { _, err := Open(link); return err })

	for path, what := range map[string]string{dir: "a folder", "/dev/null": "a device"} {
		_, err := Open(path)
		assert.ErrorIs(t, err, ErrNotRegular, path)
		assert.ErrorContains(t, err, path+": not a regular file but "+what)
	}
	_, err = Open(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// OpenInside reads a file below its folder, through links that stay
// inside, and refuses one a link leads out of (a linked file or a linked
// folder on the way), an absolute path or "..", naming the path and where
// it leads. Issue 32: external data read /…/secret through a link.
func TestOpenInside(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("the secret"), 0o600))
	dir := t.TempDir()
	data := make([]byte, 100)
	rand.New(rand.NewSource(2)).Read(data)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "weights"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "weights", "w.bin"), data, 0o644))
	require.NoError(t, os.Symlink("weights/w.bin", filepath.Join(dir, "inside.bin")))
	require.NoError(t, os.Symlink("weights", filepath.Join(dir, "shards")))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "out.bin")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "outdir")))
	require.NoError(t, os.Symlink("../../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "weights", "rel.bin")))

	for _, rel := range []string{"weights/w.bin", "inside.bin", "shards/w.bin"} {
		f, err := OpenInside(dir, rel)
		require.NoError(t, err, rel)
		got, err := io.ReadAll(f)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, data, got, rel)
	}
	realOutside, err := filepath.EvalSymlinks(outside)
	require.NoError(t, err)
	for _, rel := range []string{"out.bin", "outdir/secret", "weights/rel.bin"} {
		_, err := OpenInside(dir, rel)
		require.Error(t, err, rel)
		assert.Contains(t, err.Error(), filepath.Join(dir, rel), "names the path")
		assert.Contains(t, err.Error(), filepath.Join(realOutside, "secret")+", outside the folder", "says where it leads")
	}
	for _, rel := range []string{secret, "../" + filepath.Base(outside) + "/secret", "weights/../../x"} {
		_, err := OpenInside(dir, rel)
		assert.ErrorContains(t, err, "is not a relative path inside the folder", rel)
	}

	// From a relative folder, an absolute link inside it is inside.
	require.NoError(t, os.Symlink(filepath.Join(dir, "weights", "w.bin"), filepath.Join(dir, "absolute.bin")))
	t.Chdir(filepath.Dir(dir))
	f, err := OpenInside(filepath.Base(dir), "absolute.bin")
	require.NoError(t, err)
	f.Close()

	fifo := filepath.Join(dir, "weights", "pipe.bin")
	fifotest.Make(t, fifo)
	fifotest.Returns(t, fifo, func() error { _, err := OpenInside(dir, "weights/pipe.bin"); return err })
	_, err = OpenInside(dir, "weights")
	assert.ErrorIs(t, err, ErrNotRegular)
}
