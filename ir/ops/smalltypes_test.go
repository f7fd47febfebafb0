package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// Cast and the quantizers on the 8-, 4- and 2-bit types (ir's
// smallfloat.go, tested there against the spec's definitions): here, that
// the kernels reach those conversions with the node's options.

// allCodes is a tensor of every code of a small type, in order.
func allCodes(d ir.DType) *ir.Tensor {
	n := 1 << 8
	if b := d.PackedBits(); b > 0 {
		n = 1 << b
	}
	t := ir.NewTensor(d, int64(n))
	for i := range n {
		t.SetCode(i, uint8(i))
	}
	return t
}

func TestCastSmallTypesRoundTrip(t *testing.T) {
	for _, d := range smallTypes {
		codes := allCodes(d)
		for _, wide := range []ir.DType{ir.Float32, ir.Float64} {
			up, err := callKernel(t, "Cast", 25, []*ir.Tensor{codes}, 1, ir.AttrI("to", int64(wide)))
			require.NoError(t, err, "%s to %s", d, wide)
			for i, v := range Float64s(up[0]) {
				w := codes.Float64At(i)
				assert.True(t, v == w || math.IsNaN(v) && math.IsNaN(w), "%s code %#x to %s: %v, want %v", d, i, wide, v, w)
			}
			back, err := callKernel(t, "Cast", 25, []*ir.Tensor{up[0]}, 1, ir.AttrI("to", int64(d)), ir.AttrI("saturate", 0))
			require.NoError(t, err, "%s back from %s", d, wide)
			for i := range int(codes.Len()) {
				if v := codes.Float64At(i); !math.IsNaN(v) {
					assert.Equal(t, codes.Code(i), back[0].Code(i), "%s code %#x back from %s", d, i, wide)
				}
			}
		}
	}
}

func TestCastSmallTypesOptions(t *testing.T) {
	x := vec(ir.Float32, float32(1e6), float32(math.Inf(-1)), 0.3, float32(math.NaN()))
	cast := func(to ir.DType, attrs ...*ir.Attribute) []byte {
		t.Helper()
		out, err := callKernel(t, "Cast", 25, []*ir.Tensor{x}, 1, append(attrs, ir.AttrI("to", int64(to)))...)
		require.NoError(t, err)
		return out[0].Raw
	}
	// 0.3 rounds to 0.3125 in e4m3fn (0x2a) and to 0.3125 in e5m2 (0x35).
	assert.Equal(t, []byte{0x7e, 0xfe, 0x2a, 0x7f}, cast(ir.Float8E4M3FN))
	assert.Equal(t, []byte{0x7f, 0xff, 0x2a, 0x7f}, cast(ir.Float8E4M3FN, ir.AttrI("saturate", 0)))
	assert.Equal(t, []byte{0x7c, 0xfc, 0x35, 0x7e}, cast(ir.Float8E5M2, ir.AttrI("saturate", 0)))
	assert.Equal(t, []byte{0x92, 0xfe, 0x7d, 0xff}, cast(ir.Float8E8M0, ir.AttrS("round_mode", "down")), "e8m0: 2^19, the top, 2^-2, NaN")
	// CastLike takes its options as Cast does.
	like := ir.NewTensor(ir.Float8E4M3FNUZ, 1)
	out, err := callKernel(t, "CastLike", 25, []*ir.Tensor{x, like}, 1, ir.AttrI("saturate", 0))
	require.NoError(t, err)
	assert.Equal(t, []byte{0x80, 0x80, 0x2a + 8, 0x80}, out[0].Raw, "e4m3fnuz: bias 8")

	// Integers wrap into the packed types, which sign-extend back.
	ints := vec(ir.Int32, int32(-9), -8, 7, 8, 15, 16, 1)
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{ints}, 1, ir.AttrI("to", int64(ir.Int4)))
	require.NoError(t, err)
	assert.Equal(t, []byte{0x87, 0x87, 0x0f, 0x01}, out[0].Raw, "odd lengths pad the last byte")
	wide, err := callKernel(t, "Cast", 25, []*ir.Tensor{out[0]}, 1, ir.AttrI("to", int64(ir.Int8)))
	require.NoError(t, err)
	assert.Equal(t, "[7 -8 7 -8 -1 0 1]", elems(wide[0]))
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{ints}, 1, ir.AttrI("to", int64(ir.Uint2)))
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 0, 3, 0, 3, 0, 1}, Float64s(out[0]))

	// Strings in and out.
	s := strs([]int64{3}, "1e6", "-0.3", "2")
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{s}, 1, ir.AttrI("to", int64(ir.Float8E4M3FN)), ir.AttrI("saturate", 0))
	require.NoError(t, err)
	assert.Equal(t, []byte{0x7f, 0xaa, 0x40}, out[0].Raw)
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{out[0]}, 1, ir.AttrI("to", int64(ir.String)))
	require.NoError(t, err)
	assert.Equal(t, []string{"NaN", "-0.3125", "2"}, out[0].Strings)
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{strs([]int64{2}, "-3", "7")}, 1, ir.AttrI("to", int64(ir.Int4)))
	require.NoError(t, err)
	assert.Equal(t, "[-3 7]", elems(wideInts(t, out[0])))

	// Empty tensors keep their shape.
	out, err = callKernel(t, "Cast", 25, []*ir.Tensor{ir.NewTensor(ir.Float32, 2, 0)}, 1, ir.AttrI("to", int64(ir.Float4E2M1)))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 0}, out[0].Dims)
	assert.Empty(t, out[0].Raw)
}

// wideInts casts a packed integer tensor to int64 for printing.
func wideInts(t *testing.T, x *ir.Tensor) *ir.Tensor {
	t.Helper()
	out, err := callKernel(t, "Cast", 25, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.Int64)))
	require.NoError(t, err)
	return out[0]
}

// QuantizeLinear into each small type is Cast's rounding of x / scale +
// zero point (saturated for the packed integers), and DequantizeLinear
// undoes it exactly on those values.
func TestQuantizeSmallTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	x := randTensor(rng, ir.Float32, 2, 6)
	scale := ir.FromSlice(ir.Float32, []int64{2}, []float32{0.125, 0.5})
	for _, d := range smallTypes {
		zp := ir.NewTensor(d, 2)
		zp.SetCode(1, 1) // the second row's zero point: the type's code 1
		q, err := callKernel(t, "QuantizeLinear", 25, []*ir.Tensor{x, scale, zp}, 1, ir.AttrI("axis", 0))
		require.NoError(t, err, d.String())
		require.Equal(t, d, q[0].DType)
		deq, err := callKernel(t, "DequantizeLinear", 25, []*ir.Tensor{q[0], scale, zp}, 1, ir.AttrI("axis", 0))
		require.NoError(t, err, d.String())
		for i, v := range Float64s(x) {
			row := i / 6
			s, z := float64(Float64s(scale)[row]), zp.Float64At(row)
			y := float64(float32(v)/float32(s)) + z
			var want float64
			if d.IsPackedInt() {
				lo, hi := ir.PackedIntRange(d)
				want = min(max(math.RoundToEven(float64(float32(v)/float32(s)))+z, float64(lo)), float64(hi))
			} else {
				want = ir.DecodeSmallFloat(d, ir.EncodeSmallFloat(d, y, true))
			}
			assert.Equal(t, want, q[0].Float64At(i), "%s element %d (%v)", d, i, v)
			assert.Equal(t, float64(float32(want-z)*float32(s)), Float64s(deq[0])[i], "%s element %d dequantized", d, i)
		}
	}
}
