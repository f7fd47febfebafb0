package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// TestMovingOpsMoveCodes: a moving op on an 8-, 4- or 2-bit type moves the
// codes that the same op moves as Uint8s (random codes, NaN codes among
// them, at odd element counts), a packed output's unused bits 0; a node
// of a moving op that computes (a linear Resize) is refused.
func TestMovingOpsMoveCodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	i64 := func(v ...int64) *ir.Tensor { return ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v) }
	for _, d := range smallTypes {
		codes := func(dims ...int64) (*ir.Tensor, *ir.Tensor) {
			x, u := ir.NewTensor(d, dims...), ir.NewTensor(ir.Uint8, dims...)
			n := 256
			if b := d.PackedBits(); b > 0 {
				n = 1 << b
			}
			for i := range u.Raw {
				u.Raw[i] = uint8(rng.IntN(n))
				x.SetCode(i, u.Raw[i])
			}
			return x, u
		}
		x, ux := codes(3, 5)
		y, uy := codes(3, 2)
		fill, ufill := codes()
		cases := []struct {
			op        string
			ins, uins []*ir.Tensor
			nOut      int
			attrs     []*ir.Attribute
		}{
			{"Transpose", []*ir.Tensor{x}, []*ir.Tensor{ux}, 1, nil},
			{"Reshape", []*ir.Tensor{x, i64(5, 3)}, []*ir.Tensor{ux, i64(5, 3)}, 1, nil},
			{"Concat", []*ir.Tensor{x, y}, []*ir.Tensor{ux, uy}, 1, []*ir.Attribute{ir.AttrI("axis", 1)}},
			{"Slice", []*ir.Tensor{x, i64(1), i64(-1), i64(1), i64(2)}, []*ir.Tensor{ux, i64(1), i64(-1), i64(1), i64(2)}, 1, nil},
			{"Pad", []*ir.Tensor{x, i64(1, 0, 0, 2), fill}, []*ir.Tensor{ux, i64(1, 0, 0, 2), ufill}, 1, nil},
			{"Split", []*ir.Tensor{x, i64(2, 3)}, []*ir.Tensor{ux, i64(2, 3)}, 2, []*ir.Attribute{ir.AttrI("axis", 1)}},
			{"Gather", []*ir.Tensor{x, i64(2, -3, 0)}, []*ir.Tensor{ux, i64(2, -3, 0)}, 1, nil},
		}
		for _, c := range cases {
			got, err := callKernel(t, c.op, 25, c.ins, c.nOut, c.attrs...)
			require.NoError(t, err, "%s of %s", c.op, d)
			want, err := callKernel(t, c.op, 25, c.uins, c.nOut, c.attrs...)
			require.NoError(t, err, "%s of uint8", c.op)
			for k := range want {
				g, w := got[k], want[k]
				require.Equal(t, d, g.DType, "%s of %s: output %d", c.op, d, k)
				require.Equal(t, w.Dims, g.Dims, "%s of %s: output %d", c.op, d, k)
				require.Len(t, g.Raw, ir.RawLen(d, g.Len()), "%s of %s: output %d", c.op, d, k)
				for i, code := range w.Raw {
					assert.Equal(t, code, g.Code(i), "%s of %s: output %d, element %d", c.op, d, k, i)
				}
				if per := int(d.PerByte()); per > 0 && len(w.Raw)%per != 0 {
					used := uint(len(w.Raw)%per) * uint(d.PackedBits())
					assert.Zero(t, g.Raw[len(g.Raw)-1]>>used, "%s of %s: the last byte's unused bits", c.op, d)
				}
			}
		}
		img, _ := codes(1, 1, 2, 3)
		scales := ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 2, 2})
		_, err := callKernel(t, "Resize", 19, []*ir.Tensor{img, nil, scales}, 1, ir.AttrS("mode", "linear"))
		requireUnsupportedType(t, err, d)
	}
}
