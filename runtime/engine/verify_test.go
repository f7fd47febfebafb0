package engine

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunked is a file whose weights span several chunks, the last one short.
func chunked(t *testing.T, n int) (buf, weights []byte) {
	e := sample(t)
	e.Weights = make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(e.Weights)
	return encode(t, e), e.Weights
}

// A damaged byte in any chunk of a large section is found and named with
// the chunk's span, whether the sections are verified in place or copied
// out; the sizes put chunk boundaries at the first and last bytes.
func TestChunkDamageIsNamed(t *testing.T) {
	for _, n := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 100} {
		buf, weights := chunked(t, n)
		f, err := Unmarshal(buf)
		require.NoError(t, err, "%d bytes", n)
		require.Len(t, f.Section(SectionWeights), n)
		require.Len(t, f.sums[slicesIndex(f, SectionWeights)], int(chunks(uint64(n))))
		if n == 0 {
			continue
		}
		start := uintptrOffset(buf, f.Section(SectionWeights))
		for _, at := range []int{0, n / 2, n - 1, min(n-1, ChunkSize), min(n-1, ChunkSize-1)} {
			bad := append([]byte(nil), buf...)
			bad[start+at] ^= 0x10
			want := `section "weights"`
			if n > ChunkSize {
				lo := at / ChunkSize * ChunkSize
				want = fmt.Sprintf(`section "weights", its bytes %d to %d (file offset %d)`, lo, min(lo+ChunkSize, n), start+lo)
			}
			_, err := Decode(bad)
			assert.ErrorIs(t, err, ErrChecksum, "%d bytes, damage at %d", n, at)
			assert.ErrorContains(t, err, want, "%d bytes, damage at %d", n, at)

			pf, err := Parse(bad)
			require.NoError(t, err, "Parse reads no section data")
			var mu sync.Mutex
			got := map[int]bool{}
			err = pf.Read(SectionWeights, func(off int, chunk []byte) {
				mu.Lock()
				got[off] = true
				mu.Unlock()
				assert.Equal(t, weights[off:off+len(chunk)], chunk, "only verified chunks are put")
			})
			assert.ErrorContains(t, err, want)
			assert.False(t, got[at/ChunkSize*ChunkSize], "the damaged chunk is not put")
		}
	}
}

func slicesIndex(f *File, name string) int {
	for i, s := range f.Sections {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Read puts every byte of a section exactly once, and Detach leaves no
// section but the kept ones referring to the parsed buffer.
func TestReadAndDetach(t *testing.T) {
	buf, weights := chunked(t, 5*ChunkSize+7)
	f, err := Parse(buf)
	require.NoError(t, err)
	out := make([]byte, len(weights))
	seen := make([]int, len(weights))
	var mu sync.Mutex
	require.NoError(t, f.Read(SectionWeights, func(off int, chunk []byte) {
		copy(out[off:], chunk)
		mu.Lock()
		for i := range chunk {
			seen[off+i]++
		}
		mu.Unlock()
	}))
	assert.Equal(t, weights, out)
	for i, c := range seen {
		require.Equal(t, 1, c, "byte %d put %d times", i, c)
	}
	require.ErrorIs(t, f.Read("calib", func(int, []byte) {}), ErrBadSection)

	require.NoError(t, f.Detach(SectionWeights))
	for _, s := range f.Sections {
		inBuf := uintptrOffset(buf, s.Data) >= 0 && len(s.Data) > 0
		assert.Equal(t, s.Name == SectionWeights, inBuf, "section %q", s.Name)
	}
	e, err := DecodeFile(f)
	require.NoError(t, err)
	assert.Equal(t, sample(t).Meta, e.Meta)

	// A damaged small section fails Detach, naming it.
	plan := uintptrOffset(buf, mustParse(t, buf).Section(SectionPlan))
	bad := append([]byte(nil), buf...)
	bad[plan] ^= 1
	f, err = Parse(bad)
	require.NoError(t, err)
	err = f.Detach(SectionWeights)
	assert.True(t, errors.Is(err, ErrChecksum), "%v", err)
	assert.ErrorContains(t, err, `section "plan"`)
}

func mustParse(t *testing.T, buf []byte) *File {
	f, err := Parse(buf)
	require.NoError(t, err)
	return f
}
