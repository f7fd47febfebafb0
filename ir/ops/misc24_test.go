package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func TestSwish(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 0))
	x := randTensor(rng, ir.Float64, 4, 5)
	for _, alpha := range []float32{1, 1.702, -0.5} {
		out, err := callKernel(t, "Swish", 24, []*ir.Tensor{x}, 1, ir.AttrF("alpha", alpha))
		require.NoError(t, err)
		xs := Float64s(x)
		want := make([]float64, len(xs))
		for i, v := range xs {
			want[i] = v / (1 + math.Exp(-float64(alpha)*v))
		}
		assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12, fmt.Sprintf("alpha %g", alpha))
	}
	_, err := Lookup("", "Swish", 23)
	assert.Error(t, err, "Swish is new in opset 24")
}

// naiveCumProd is CumProd along axis of a row-major [outer, n, inner]
// tensor, written as the definition reads.
func naiveCumProd(v []float64, outer, n, inner int, exclusive, reverse bool) []float64 {
	out := make([]float64, len(v))
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for j := 0; j < n; j++ {
				p := 1.0
				for k := 0; k < n; k++ {
					in := k < j || k == j && !exclusive
					if reverse {
						in = k > j || k == j && !exclusive
					}
					if in {
						p *= v[(o*n+k)*inner+i]
					}
				}
				out[(o*n+j)*inner+i] = p
			}
		}
	}
	return out
}

func TestCumProd(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 0))
	dims := []int64{2, 3, 4}
	for _, dt := range []ir.DType{ir.Float64, ir.Float32, ir.Int32, ir.Int64, ir.Uint64} {
		x := randTensor(rng, dt, dims...)
		for _, axis := range []int64{0, 1, -1} {
			a := int(axis+3) % 3
			outer, inner := int(ir.Product(dims[:a])), int(ir.Product(dims[a+1:]))
			for _, excl := range []int64{0, 1} {
				for _, rev := range []int64{0, 1} {
					out, err := callKernel(t, "CumProd", 26, []*ir.Tensor{x, ir.Scalar(ir.Int64, axis)}, 1, ir.AttrI("exclusive", excl), ir.AttrI("reverse", rev))
					require.NoError(t, err)
					want := naiveCumProd(Float64s(x), outer, int(dims[a]), inner, excl == 1, rev == 1)
					assertClose(t, Float64s(FromFloat64s(dt, dims, want)), Float64s(out[0]), 1e-6, 0, fmt.Sprintf("%s axis %d exclusive %d reverse %d", dt, axis, excl, rev))
				}
			}
		}
	}
	// CumSum shares the scan: still sums.
	out, err := callKernel(t, "CumSum", 14, []*ir.Tensor{f32([]int64{4}, 1, 2, 3, 4), ir.Scalar(ir.Int64, int64(0))}, 1, ir.AttrI("exclusive", 1))
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 1, 3, 6}, Float64s(out[0]))
	_, err = callKernel(t, "CumProd", 26, []*ir.Tensor{f32([]int64{2}, 1, 2), ir.Scalar(ir.Int64, int64(1))}, 1)
	assert.ErrorContains(t, err, "out of range")
}

func TestTensorScatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	// [batch 2, heads 3, max_seq 5, dim 4], updates of 3 positions.
	cache := randTensor(rng, ir.Float32, 2, 3, 5, 4)
	upd := randTensor(rng, ir.Float32, 2, 3, 3, 4)
	for _, tc := range []struct {
		mode   string
		starts []int64
	}{{"linear", []int64{0, 2}}, {"circular", []int64{4, -1}}, {"circular", []int64{3, 7}}} {
		out, err := callKernel(t, "TensorScatter", 24, []*ir.Tensor{cache, upd, i64s(tc.starts...)}, 1, ir.AttrS("mode", tc.mode))
		require.NoError(t, err, tc.mode)
		want := Float64s(cache)
		u := Float64s(upd)
		for b := 0; b < 2; b++ {
			for h := 0; h < 3; h++ {
				for s := 0; s < 3; s++ {
					pos := ((int(tc.starts[b])+s)%5 + 5) % 5
					for d := 0; d < 4; d++ {
						want[((b*3+h)*5+pos)*4+d] = u[((b*3+h)*3+s)*4+d]
					}
				}
			}
		}
		assert.Equal(t, want, Float64s(out[0]), "%s %v", tc.mode, tc.starts)
	}
	// No write_indices: every batch entry writes from 0. Axis -1, an int type.
	ic := randTensor(rng, ir.Int64, 2, 6)
	iu := randTensor(rng, ir.Int64, 2, 2)
	out, err := callKernel(t, "TensorScatter", 24, []*ir.Tensor{ic, iu}, 1, ir.AttrI("axis", -1))
	require.NoError(t, err)
	want := Int64s(ic)
	copy(want[0:2], Int64s(iu)[0:2])
	copy(want[6:8], Int64s(iu)[2:4])
	assert.Equal(t, want, Int64s(out[0]))

	for _, bad := range []struct {
		ins   []*ir.Tensor
		attrs []*ir.Attribute
		msg   string
	}{
		{[]*ir.Tensor{cache, upd, i64s(0, 3)}, nil, "outside the cache"},
		{[]*ir.Tensor{cache, upd}, []*ir.Attribute{ir.AttrI("axis", 0)}, "batch axis"},
		{[]*ir.Tensor{cache, upd}, []*ir.Attribute{ir.AttrS("mode", "ring")}, "neither linear nor circular"},
		{[]*ir.Tensor{cache, randTensor(rng, ir.Float32, 2, 3, 6, 4)}, nil, "does not fit"},
		{[]*ir.Tensor{cache, randTensor(rng, ir.Float32, 2, 2, 1, 4)}, nil, "does not fit"},
		{[]*ir.Tensor{cache, upd, i64s(0)}, nil, "write_indices"},
	} {
		_, err := callKernel(t, "TensorScatter", 24, bad.ins, 1, bad.attrs...)
		assert.ErrorContains(t, err, bad.msg)
	}
	// Inference keeps symbolic dims and checks what it can.
	outs, err := callInfer("TensorScatter", 24, []ir.Type{sym(ir.Float16, "B", 8, "S", 64), sym(ir.Float16, "B", 8, 1, 64), sym(ir.Int64, "B")}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, sym(ir.Float16, "B", 8, "S", 64).String(), outs[0].String())
	_, err = callInfer("TensorScatter", 24, []ir.Type{sym(ir.Float16, "B", 8, "S", 64), sym(ir.Float16, "B", 4, 1, 64)}, nil, 1)
	assert.ErrorContains(t, err, "does not fit")
}

func TestBitCast(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	x := randTensor(rng, ir.Float32, 3, 4)
	out, err := callKernel(t, "BitCast", 26, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.Int32)))
	require.NoError(t, err)
	for i, v := range ir.Data[float32](x) {
		assert.Equal(t, int32(math.Float32bits(v)), ir.Data[int32](out[0])[i])
	}
	back, err := callKernel(t, "BitCast", 26, out, 1, ir.AttrI("to", int64(ir.Float32)))
	require.NoError(t, err)
	assert.True(t, x.Equal(back[0]), "BitCast there and back is the identity")

	h := ir.FromSlice(ir.Uint16, []int64{2}, []uint16{0x3c00, 0xc000}) // 1 and -2 as float16
	out, err = callKernel(t, "BitCast", 26, []*ir.Tensor{h}, 1, ir.AttrI("to", int64(ir.Float16)))
	require.NoError(t, err)
	assert.Equal(t, []float64{1, -2}, Float64s(out[0]))

	_, err = callKernel(t, "BitCast", 26, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.Int64)))
	assert.ErrorContains(t, err, "widths differ")
	_, err = callKernel(t, "BitCast", 26, []*ir.Tensor{x}, 1, ir.AttrI("to", 999))
	assert.ErrorContains(t, err, "not a fixed-width")
	_, err = callKernel(t, "BitCast", 26, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.String)))
	assert.ErrorContains(t, err, "not a fixed-width")
	outs, err := callInfer("BitCast", 26, []ir.Type{sym(ir.Float64, "N", 3)}, nil, 1, ir.AttrI("to", int64(ir.Uint64)))
	require.NoError(t, err)
	assert.Equal(t, sym(ir.Uint64, "N", 3).String(), outs[0].String())
}
