package kernel

import (
	"testing"

	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
	"github.com/stretchr/testify/assert"
)

// TestRowPiece: rows too few for the threads are cut into pieces of whole
// vectors, about piecesPerSplit of them in all; enough rows, short rows,
// an empty space or a dimension known only at run time leave the rows
// whole.
func TestRowPiece(t *testing.T) {
	dims := func(ds ...int64) []value.Value {
		vs := make([]value.Value, len(ds))
		for i, d := range ds {
			vs[i] = I64(d)
		}
		return vs
	}
	for _, c := range []struct {
		name  string
		space []value.Value
		inner int
		vl    int
		want  int64
	}{
		{"1-D", dims(100003), 0, 16, 1568},          // 64 pieces: 100003/64 rounded up to vectors
		{"three rows", dims(3, 50000), 1, 16, 2288}, // 22 pieces a row
		{"scalar lanes", dims(1, 70000), 1, 0, 1094},
		{"few pieces fit", dims(2, 4096), 1, 16, 1024}, // minPiece bounds the count
		{"enough rows", dims(64, 100000), 1, 16, 0},
		{"short row", dims(2, 2047), 1, 16, 0},
		{"empty", dims(0, 100000), 1, 16, 0},
		{"symbolic rows", []value.Value{ll.NewParam("n", types.I64), I64(100000)}, 1, 16, 0},
	} {
		got := rowPiece(c.space, c.inner, c.vl)
		assert.Equal(t, c.want, got, c.name)
		if got > 0 {
			assert.Zero(t, got%int64(max(c.vl, 1)), "%s: pieces of whole vectors", c.name)
		}
	}
}
