//go:build unix

package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/readfile/fifotest"
)

// A mapped file cut short by another writer faults where its pages are
// gone (SIGBUS): Parse, Verify, Read and Detach return ErrTruncated
// instead of crashing.
func TestMappedFileCutShort(t *testing.T) {
	buf, _ := chunked(t, 3*ChunkSize+5)
	path := filepath.Join(t.TempDir(), "e.kiln")
	require.NoError(t, os.WriteFile(path, buf, 0o644))

	data, unmap, err := Map(path)
	require.NoError(t, err)
	defer unmap()
	f, err := Parse(data)
	require.NoError(t, err)
	require.NoError(t, f.Verify())

	require.NoError(t, os.Truncate(path, 4096))
	assert.ErrorIs(t, f.Verify(), ErrTruncated)
	err = f.Read(SectionWeights, func(int, []byte) {})
	assert.ErrorIs(t, err, ErrTruncated)
	assert.ErrorContains(t, err, "cut short or changed while it was read")
	assert.ErrorIs(t, f.Detach(), ErrTruncated)
	_, err = Parse(data) // the trailer is gone
	assert.ErrorIs(t, err, ErrTruncated)
}

// Map reads what it cannot map: an empty file is refused by Parse, not
// by mmap.
func TestMapEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.kiln")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	data, unmap, err := Map(path)
	require.NoError(t, err)
	defer unmap()
	_, err = Parse(data)
	assert.ErrorIs(t, err, ErrTruncated)
}

// Issue 32: a named pipe as an engine or key file hung its reader
// forever; Map and the key readers refuse it at once, by name.
func TestMapRefusesNamedPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "e.kiln")
	fifotest.Make(t, fifo)
	fifotest.Returns(t, fifo, func() error { _, _, err := Map(fifo); return err })
	fifotest.Returns(t, fifo, func() error { _, err := ReadPublicKeyFile(fifo); return err })
	fifotest.Returns(t, fifo, func() error { _, err := ReadPrivateKeyFile(fifo); return err })
}
