package lower

import (
	"bytes"
	"hash/maphash"

	"github.com/kiln-ml/kiln/ir"
)

// Weights is an engine's weights blob: every tensor at an aligned offset,
// identical contents stored once. A weight several layers share (PyTorch
// exports repeated layers' equal weights as one initializer behind
// Identity nodes, or as copies) would otherwise be stored once per use.
type Weights struct {
	align int64
	data  []byte
	seen  map[uint64][]int64 // blobs stored, by hash: their offsets
	seed  maphash.Seed
	of    map[*ir.Tensor]int64
}

// dedupFrom is the size from which blobs are looked up before they are
// stored: smaller ones cost less to store again than to hash.
const dedupFrom = 64

// NewWeights returns an empty blob whose offsets are multiples of align.
func NewWeights(align int64) *Weights {
	return &Weights{align: align, seen: map[uint64][]int64{}, seed: maphash.MakeSeed(), of: map[*ir.Tensor]int64{}}
}

// Add stores t's bytes (once per tensor and per contents) and returns
// their offset.
func (w *Weights) Add(t *ir.Tensor) int64 {
	if off, ok := w.of[t]; ok {
		return off
	}
	off := w.AddBytes(t.Raw)
	w.of[t] = off
	return off
}

// AddBytes stores b (once per contents) and returns its offset.
func (w *Weights) AddBytes(b []byte) int64 {
	if len(b) < dedupFrom {
		return w.Append(b)
	}
	h := maphash.Bytes(w.seed, b)
	for _, off := range w.seen[h] {
		if bytes.Equal(w.data[off:off+int64(len(b))], b) {
			return off
		}
	}
	off := w.Append(b)
	w.seen[h] = append(w.seen[h], off)
	return off
}

// Append stores b at the next aligned offset, without looking for a copy.
func (w *Weights) Append(b []byte) int64 {
	off := w.Pad()
	w.data = append(w.data, b...)
	return off
}

// Pad pads the blob to the alignment and returns its length.
func (w *Weights) Pad() int64 {
	off := alignUp(int64(len(w.data)), w.align)
	w.data = append(w.data, make([]byte, off-int64(len(w.data)))...)
	return off
}

// Bytes is the blob.
func (w *Weights) Bytes() []byte { return w.data }

// Len is the blob's length.
func (w *Weights) Len() int64 { return int64(len(w.data)) }
