package cpu

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/cpuabi"
)

// TestMapLive: the live weights MapLive lays out hold the file's stored
// bytes, then a zeroed, writable derived area, whatever the section's
// offset and length are against page boundaries; the mapping's address
// matches the file offset modulo 2 MiB (so cached huge folios map as huge
// pages); a record whose derived ranges lie inside the stored bytes is
// left to the copying loader.
func TestMapLive(t *testing.T) {
	ps := int64(os.Getpagesize())
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct{ off, stored, derived int64 }{
		{64, 1000, 0},             // one partial page, nothing derived
		{ps, 3 * ps, 5 * ps},      // page-aligned section and end
		{ps + 192, 2*ps + 64, 64}, // a partial first and last page
		{3*ps - 64, 64, 3 * hugePage},
		{hugePage - ps, 2*hugePage + 128, hugePage + 64},
	} {
		file := make([]byte, c.off+c.stored+4096) // a trailer after the section
		r.Read(file)
		path := filepath.Join(t.TempDir(), "e.kiln")
		require.NoError(t, os.WriteFile(path, file, 0o644))
		f, err := os.Open(path)
		require.NoError(t, err)
		a := &cpuabi.ABI{StoredBytes: c.stored, WeightsBytes: c.stored + c.derived}
		if c.derived > 0 {
			a.Derived = []cpuabi.Derived{{Off: c.stored, Bytes: c.derived}}
		}
		live, err := MapLive(f, c.off, a)
		f.Close()
		require.NoError(t, err, "%+v", c)
		b := live.Buf.Bytes
		require.Len(t, b, int(a.WeightsBytes))
		assert.Equal(t, file[c.off:c.off+c.stored], b[:c.stored], "%+v: stored bytes", c)
		assert.Zero(t, uintptr(unsafe.Pointer(&b[0]))%64, "%+v: 64-byte aligned", c)
		assert.Equal(t, uintptr(c.off)%hugePage, uintptr(unsafe.Pointer(&b[0]))%hugePage, "%+v: address ≡ offset (mod 2 MiB)", c)
		for i, v := range b[c.stored:] {
			if v != 0 {
				t.Fatalf("%+v: derived byte %d is %d, want 0", c, i, v)
			}
		}
		for i := c.stored; i < a.WeightsBytes; i += 512 {
			b[i] = 7 // the derived area is writable
		}
		live.Buf.CollapseLater()
		live.Buf.Free()
	}

	path := filepath.Join(t.TempDir(), "old.kiln")
	require.NoError(t, os.WriteFile(path, make([]byte, 8192), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	inside := &cpuabi.ABI{StoredBytes: 4096, WeightsBytes: 4096 + 1024, Derived: []cpuabi.Derived{{Off: 1024, Bytes: 1024}}}
	_, err = MapLive(f, 0, inside)
	assert.ErrorIs(t, err, ErrNoMap)
}
