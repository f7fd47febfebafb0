package atomicfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/cleanup"
	"github.com/kiln-ml/kiln/internal/smallfs"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// names lists a folder's entries: no temporary or backup file may remain.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileNewAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	first, second := randomBytes(5000), randomBytes(3000)
	require.NoError(t, WriteFile(path, first, 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	// Replacing keeps the old file's mode, whatever perm says.
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, WriteFile(path, second, 0o644))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, second, got)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Equal(t, []string{"out.bin"}, names(t, dir))
}

// The data is invisible until Commit; Abort leaves the old file and no
// temporary one, and the temporary file is registered for an interrupt
// until then.
func TestAbortLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.onnx")
	old := randomBytes(1000)
	require.NoError(t, os.WriteFile(path, old, 0o644))
	f, err := Create(path, 0o644)
	require.NoError(t, err)
	_, err = f.Write(randomBytes(2000))
	require.NoError(t, err)
	require.Len(t, names(t, dir), 2)
	assert.True(t, slices.Contains(cleanup.Registered(), f.tmp), "the temporary file is registered for cleanup")
	got, _ := os.ReadFile(path)
	assert.Equal(t, old, got, "nothing is visible before Commit")
	f.Abort()
	got, _ = os.ReadFile(path)
	assert.Equal(t, old, got)
	assert.Equal(t, []string{"model.onnx"}, names(t, dir))
	assert.False(t, slices.Contains(cleanup.Registered(), f.tmp))
	assert.Error(t, f.Commit(), "an aborted file cannot be committed")
}

// A symbolic link is written through: the link stays a link.
func TestSymlinkTarget(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	require.NoError(t, os.WriteFile(real, []byte("old"), 0o644))
	require.NoError(t, os.Symlink("real", link))
	require.NoError(t, WriteFile(link, []byte("new"), 0o644))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, st.Mode()&os.ModeSymlink)
	got, _ := os.ReadFile(real)
	assert.Equal(t, "new", string(got))
}

// A read-only file stays protected, as with os.WriteFile.
func TestReadOnlyTarget(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write any file: the read-only case needs another user")
	}
	path := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o444))
	err := WriteFile(path, []byte("new"), 0o644)
	assert.ErrorIs(t, err, os.ErrPermission)
	got, _ := os.ReadFile(path)
	assert.Equal(t, "old", string(got))
}

func TestSpecialTargets(t *testing.T) {
	err := WriteFile(t.TempDir(), []byte("x"), 0o644)
	assert.ErrorIs(t, err, syscall.EISDIR)
	// A device is written in place, never replaced.
	require.NoError(t, WriteFile(os.DevNull, []byte("x"), 0o644))
	st, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	assert.NotZero(t, st.Mode()&os.ModeCharDevice)
}

// When the second of a set cannot be renamed into place, the first gets
// its old content back (or is removed if it was new) and nothing else is
// left behind.
func TestCommitAllRollsBack(t *testing.T) {
	for _, existed := range []bool{true, false} {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "m.onnxtxt.bin"), filepath.Join(dir, "m.onnxtxt")
		old := randomBytes(100)
		if existed {
			require.NoError(t, os.WriteFile(a, old, 0o644))
		}
		fa, err := Create(a, 0o644)
		require.NoError(t, err)
		fb, err := Create(b, 0o644)
		require.NoError(t, err)
		fa.Write(randomBytes(200))
		fb.Write(randomBytes(300))
		// b's target turns into a non-empty folder: its rename must fail.
		require.NoError(t, os.MkdirAll(filepath.Join(b, "x"), 0o755))
		require.Error(t, CommitAll(fa, fb))
		if existed {
			got, err := os.ReadFile(a)
			require.NoError(t, err)
			assert.Equal(t, old, got)
			assert.ElementsMatch(t, []string{"m.onnxtxt", "m.onnxtxt.bin"}, names(t, dir))
		} else {
			assert.NoFileExists(t, a)
			assert.Equal(t, []string{"m.onnxtxt"}, names(t, dir))
		}
		for _, p := range cleanup.Registered() {
			assert.NotEqual(t, dir, filepath.Dir(p), "left registered: %s", p)
		}
	}
}

func TestCommitAllWritesBoth(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("old a"), 0o644))
	fa, err := Create(a, 0o644)
	require.NoError(t, err)
	fb, err := Create(b, 0o644)
	require.NoError(t, err)
	fa.Write([]byte("new a"))
	fb.Write([]byte("new b"))
	require.NoError(t, CommitAll(fa, fb))
	ga, _ := os.ReadFile(a)
	gb, _ := os.ReadFile(b)
	assert.Equal(t, "new a", string(ga))
	assert.Equal(t, "new b", string(gb))
	assert.ElementsMatch(t, []string{"a", "b"}, names(t, dir))
}

// On a full disk the write fails, the old file is byte-identical and no
// temporary file is left.
func TestFullDisk(t *testing.T) {
	dir := smallfs.Mount(t, 256<<10)
	path := filepath.Join(dir, "engine.kiln")
	old := randomBytes(100 << 10)
	require.NoError(t, WriteFile(path, old, 0o644))
	err := WriteFile(path, randomBytes(200<<10), 0o644)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(old, got), "the old file is intact")
	assert.Equal(t, []string{"engine.kiln"}, names(t, dir))
}
