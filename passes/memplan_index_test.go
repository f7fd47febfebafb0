package passes

import (
	"math/rand"
	"slices"
	"testing"
)

// TestLiveIndexFindsEveryOverlap: the index returns exactly the placed
// buffers whose live ranges overlap a query's, each once, as the scan of
// every placed buffer it replaces did.
func TestLiveIndexFindsEveryOverlap(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	const steps = 300
	var bufs []*Buffer
	for range 500 {
		first := r.Intn(steps)
		last := first + r.Intn(min(steps-first, 1+r.Intn(40)))
		bufs = append(bufs, &Buffer{First: first, Last: last})
	}
	x := newLiveIndex(bufs)
	for i, b := range bufs {
		got := x.overlapping(nil, b.First, b.Last)
		var want []*Buffer
		for _, q := range bufs[:i] {
			if q.First <= b.Last && b.First <= q.Last {
				want = append(want, q)
			}
		}
		byAddress := func(a, b *Buffer) int { return slices.Index(bufs, a) - slices.Index(bufs, b) }
		slices.SortFunc(got, byAddress)
		if !slices.Equal(got, want) {
			t.Fatalf("buffer %d [%d,%d]: found %d overlapping, want %d", i, b.First, b.Last, len(got), len(want))
		}
		x.add(b)
	}
}
