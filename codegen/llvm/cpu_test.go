package llvm

import (
	"testing"

	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
	"github.com/stretchr/testify/assert"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
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

// TestGatherRows: lanes that gather (strided loads) go in blocks of rows
// along an axis the loads read contiguously; contiguous lanes, scalar
// lanes, short axes and no contiguous axis leave the rows alone.
func TestGatherRows(t *testing.T) {
	f := &Fn{}
	x := kernel.NewBuffer("x", ir.Float32, 28, 28, 96)   // NHWC, batch dropped
	out := kernel.NewBuffer("y", ir.Float32, 96, 28, 28) // NCHW
	transposed := &kernel.Kernel{Out: out, Space: out.Dims, Value: kernel.Load(x, kernel.Var(1), kernel.Var(2), kernel.Var(0))}
	space := []value.Value{I64(96), I64(28), I64(28)}
	assert.Equal(t, 0, gatherRows(f, transposed, space, 2, 16), "channels: contiguous in x")
	assert.Equal(t, -1, gatherRows(f, transposed, space, 2, 0), "scalar lanes")
	assert.Equal(t, -1, gatherRows(f, transposed, []value.Value{I64(20), I64(28), I64(28)}, 2, 16), "20 channels: under two blocks")

	copied := &kernel.Kernel{Out: x, Space: x.Dims, Value: kernel.Load(x, kernel.Var(0), kernel.Var(1), kernel.Var(2))}
	assert.Equal(t, -1, gatherRows(f, copied, []value.Value{I64(28), I64(28), I64(96)}, 2, 16), "contiguous lanes")

	strided := &kernel.Kernel{Out: out, Space: out.Dims, Value: kernel.Load(x, kernel.Var(1), kernel.Var(2), kernel.Mul(kernel.Var(0), kernel.Const(ir.Int64, 2)))}
	assert.Equal(t, -1, gatherRows(f, strided, space, 2, 16), "no axis reads contiguously")
}
