package passes

// liveIndex holds the placed buffers by live range, so that place finds
// those overlapping a buffer's range in time proportional to how many
// there are, not to how many are placed (a scan of every placed buffer
// per buffer took 5 s of a 10^5-node graph's build). A buffer overlaps
// [first, last] when it is live at first, found by a stabbing query on a
// segment tree over the steps, or starts within (first, last], found in
// starts; the two sets are disjoint.
type liveIndex struct {
	leaves int         // a power of two, above every step
	cover  [][]*Buffer // the segment tree, heap order: buffers live over a node's whole span
	starts [][]*Buffer // by First
}

func newLiveIndex(bufs []*Buffer) *liveIndex {
	steps := 1
	for _, b := range bufs {
		steps = max(steps, b.Last+1)
	}
	leaves := 1
	for leaves < steps {
		leaves *= 2
	}
	return &liveIndex{leaves: leaves, cover: make([][]*Buffer, 2*leaves), starts: make([][]*Buffer, leaves)}
}

// add indexes placed buffer b: in starts, and in the tree nodes whose
// spans make up [b.First, b.Last].
func (x *liveIndex) add(b *Buffer) {
	x.starts[b.First] = append(x.starts[b.First], b)
	for lo, hi := b.First+x.leaves, b.Last+x.leaves+1; lo < hi; lo, hi = lo/2, hi/2 {
		if lo%2 == 1 {
			x.cover[lo] = append(x.cover[lo], b)
			lo++
		}
		if hi%2 == 1 {
			hi--
			x.cover[hi] = append(x.cover[hi], b)
		}
	}
}

// overlapping appends to dst every indexed buffer live at some step of
// [first, last].
func (x *liveIndex) overlapping(dst []*Buffer, first, last int) []*Buffer {
	for i := first + x.leaves; i >= 1; i /= 2 {
		dst = append(dst, x.cover[i]...)
	}
	for t := first + 1; t <= last; t++ {
		dst = append(dst, x.starts[t]...)
	}
	return dst
}
