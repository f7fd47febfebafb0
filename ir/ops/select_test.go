package ops

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// coords returns the row-major coordinates of flat index k in dims, by
// division: an oracle apart from the kernels' counters.
func coords(k int64, dims []int64) []int64 {
	c := make([]int64, len(dims))
	for a := len(dims) - 1; a >= 0; a-- {
		c[a] = k % dims[a]
		k /= dims[a]
	}
	return c
}

func TestNonZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 13))
	v := make([]float64, 60)
	for i := range v {
		if rng.IntN(3) > 0 { // a third zeros
			v[i] = float64(rng.IntN(9) - 4)
		}
	}
	x := FromFloat64s(ir.Int32, []int64{3, 4, 5}, v)
	out, err := callKernel(t, "NonZero", 13, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	var want [][]int64
	for k, v := range Float64s(x) {
		if v != 0 {
			want = append(want, coords(int64(k), x.Dims))
		}
	}
	require.NotEmpty(t, want)
	require.Equal(t, []int64{3, int64(len(want))}, out[0].Dims)
	got := out[0].Int64s()
	for col, c := range want {
		for a := range c {
			assert.Equal(t, c[a], got[a*len(want)+col], "nonzero %d, axis %d", col, a)
		}
	}

	for _, c := range []struct {
		x    *ir.Tensor
		dims []int64
		want []int64
	}{
		{ir.Scalar(ir.Float32, float32(2)), []int64{1, 1}, []int64{0}}, // a scalar counts as [1]
		{ir.Scalar(ir.Float32, float32(0)), []int64{1, 0}, []int64{}},
		{ir.NewTensor(ir.Float32, 2, 0), []int64{2, 0}, []int64{}},
		{vec(ir.Float64, 0, math.NaN(), -0.0, 1), []int64{1, 2}, []int64{1, 3}}, // NaN is nonzero, -0 is zero
		{strs([]int64{2, 2}, "a", "", "", "b"), []int64{2, 2}, []int64{0, 1, 0, 1}},
		{FromBools([]int64{3}, []bool{false, true, true}), []int64{1, 2}, []int64{1, 2}},
	} {
		out, err := callKernel(t, "NonZero", 13, []*ir.Tensor{c.x}, 1)
		require.NoError(t, err, elems(c.x))
		assert.Equal(t, c.dims, out[0].Dims, elems(c.x))
		assert.Equal(t, c.want, out[0].Int64s(), elems(c.x))
	}
	types, err := callInfer("NonZero", 9, []ir.Type{sym(ir.Float32, "N", 3)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "int64[2,count_out0]", types[0].String(), "the count is a symbol of its own (datadims.go)")
}

func TestCompress(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 9))
	x := randTensor(rng, ir.Float32, 3, 4, 2)
	cond := FromBools([]int64{4}, []bool{true, false, true, true})
	for _, axis := range []int64{1, -2} {
		out, err := callKernel(t, "Compress", 11, []*ir.Tensor{x, cond}, 1, ir.AttrI("axis", axis))
		require.NoError(t, err)
		// Gather of the true positions is the oracle.
		want, err := callKernel(t, "Gather", 13, []*ir.Tensor{x, i64s(0, 2, 3)}, 1, ir.AttrI("axis", 1))
		require.NoError(t, err)
		assert.Equal(t, want[0].Dims, out[0].Dims, "axis %d", axis)
		assert.Equal(t, Float64s(want[0]), Float64s(out[0]), "axis %d", axis)
	}
	// No axis: the flattened input; a shorter condition drops the rest.
	out, err := callKernel(t, "Compress", 11, []*ir.Tensor{x, FromBools([]int64{3}, []bool{false, true, true})}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, out[0].Dims)
	assert.Equal(t, Float64s(x)[1:3], Float64s(out[0]))
	// Nothing kept, strings, and false entries past the end.
	out, err = callKernel(t, "Compress", 11, []*ir.Tensor{x, FromBools([]int64{5}, []bool{false, false, false, false, false})}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 0, 2}, out[0].Dims)
	out, err = callKernel(t, "Compress", 9, []*ir.Tensor{strs([]int64{2, 2}, "a", "b", "c", "d"), FromBools([]int64{2}, []bool{false, true})}, 1, ir.AttrI("axis", 0))
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "d"}, out[0].Strings)

	_, err = callKernel(t, "Compress", 11, []*ir.Tensor{x, FromBools([]int64{5}, []bool{true, false, false, false, true})}, 1, ir.AttrI("axis", 1))
	assert.ErrorContains(t, err, "selects index 4 of an axis of length 4")
	_, err = callKernel(t, "Compress", 9, []*ir.Tensor{x, cond}, 1, ir.AttrI("axis", -2))
	assert.ErrorContains(t, err, "needs Compress-11")
	_, err = callKernel(t, "Compress", 11, []*ir.Tensor{x, cond}, 1, ir.AttrI("axis", 3))
	assert.ErrorContains(t, err, "out of range")
	_, err = callKernel(t, "Compress", 11, []*ir.Tensor{x, vec(ir.Int64, int64(1), 0)}, 1)
	assert.ErrorContains(t, err, "condition is int64")

	types, err := callInfer("Compress", 11, []ir.Type{sym(ir.Float32, "N", 4), tt(ir.Bool, 4)}, []*ir.Tensor{nil, cond}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.Equal(t, "float[N,3]", types[0].String())
	types, err = callInfer("Compress", 11, []ir.Type{tt(ir.Float32, 2, 4), tt(ir.Bool, 4)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[count_out0]", types[0].String())
}

func TestReverseSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	x := randTensor(rng, ir.Float32, 4, 3, 2) // time 4, batch 3
	lens := i64s(4, 0, 3)
	out, err := callKernel(t, "ReverseSequence", 10, []*ir.Tensor{x, lens}, 1)
	require.NoError(t, err)
	xv, got := Float64s(x), Float64s(out[0])
	for k := range got {
		c := coords(int64(k), x.Dims)
		src := c[0]
		if l := lens.Int64s()[c[1]]; c[0] < l {
			src = l - 1 - c[0]
		}
		assert.Equal(t, xv[(src*3+c[1])*2+c[2]], got[k], "element %v", c)
	}
	// batch_axis 0, time_axis 1, on strings.
	s := strs([]int64{2, 3}, "a", "b", "c", "d", "e", "f")
	out, err = callKernel(t, "ReverseSequence", 10, []*ir.Tensor{s, i64s(3, 2)}, 1, ir.AttrI("batch_axis", 0), ir.AttrI("time_axis", 1))
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "b", "a", "e", "d", "f"}, out[0].Strings)

	for _, c := range []struct {
		ins   []*ir.Tensor
		attrs []*ir.Attribute
		want  string
	}{
		{[]*ir.Tensor{x, i64s(5, 0, 0)}, nil, "sequence_lens[0] is 5, outside [0, 4]"},
		{[]*ir.Tensor{x, i64s(-1, 0, 0)}, nil, "outside [0, 4]"},
		{[]*ir.Tensor{x, i64s(1, 1)}, nil, "want int64[3]"},
		{[]*ir.Tensor{x, vec(ir.Int32, int32(1), 1, 1)}, nil, "sequence_lens is int32"},
		{[]*ir.Tensor{x, lens}, []*ir.Attribute{ir.AttrI("batch_axis", 0)}, "must be 0 and 1"},
		{[]*ir.Tensor{x, lens}, []*ir.Attribute{ir.AttrI("time_axis", 2)}, "must be 0 and 1"},
		{[]*ir.Tensor{vec(ir.Float32, float32(1)), i64s(1)}, nil, "want rank 2 or more"},
	} {
		_, err := callKernel(t, "ReverseSequence", 10, c.ins, 1, c.attrs...)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestScatterIsScatterElements(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	data := randTensor(rng, ir.Float32, 3, 4)
	idx := ir.FromSlice(ir.Int64, []int64{2, 4}, []int64{2, 0, -1, 1, 0, 1, 2, 0})
	upd := randTensor(rng, ir.Float32, 2, 4)
	for _, axis := range []int64{0, 1, -1} {
		got, err := callKernel(t, "Scatter", 9, []*ir.Tensor{data, idx, upd}, 1, ir.AttrI("axis", axis))
		require.NoError(t, err)
		want, err := callKernel(t, "ScatterElements", 11, []*ir.Tensor{data, idx, upd}, 1, ir.AttrI("axis", axis))
		require.NoError(t, err)
		assert.Equal(t, Float64s(want[0]), Float64s(got[0]), "axis %d", axis)
	}
	_, err := callKernel(t, "Scatter", 11, []*ir.Tensor{data, idx, upd}, 1)
	var ue *UnsupportedError
	require.True(t, errors.As(err, &ue), "got %v", err)
	assert.ErrorContains(t, err, "deprecated since opset 11: use ScatterElements")
}

func TestUpsample(t *testing.T) {
	x := f32([]int64{1, 1, 2, 2}, 1, 2, 3, 4)
	scales := []float32{1, 1, 2, 1.5}
	nine, err := callKernel(t, "Upsample", 9, []*ir.Tensor{x, ir.FromSlice(ir.Float32, []int64{4}, scales)}, 1)
	require.NoError(t, err)
	seven, err := callKernel(t, "Upsample", 7, []*ir.Tensor{x}, 1, ir.AttrFs("scales", scales...))
	require.NoError(t, err)
	// Nearest: output (i, j) reads input (floor(i/2), floor(j/1.5)).
	want := []float64{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4}
	for _, out := range []*ir.Tensor{nine[0], seven[0]} {
		assert.Equal(t, []int64{1, 1, 4, 3}, out.Dims)
		assert.Equal(t, want, Float64s(out))
	}
	// Linear, asymmetric: output j samples input j/2, clamped at the end.
	lin, err := callKernel(t, "Upsample", 7, []*ir.Tensor{f32([]int64{1, 3}, 0, 4, 8)}, 1, ir.AttrFs("scales", 1, 2), ir.AttrS("mode", "linear"))
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 2, 4, 6, 8, 8}, Float64s(lin[0]))

	_, err = callKernel(t, "Upsample", 7, []*ir.Tensor{x}, 1, ir.AttrFs("scales", 1, 1, 0.5, 1))
	assert.ErrorContains(t, err, "scale 0.5 is below 1")
	_, err = callKernel(t, "Upsample", 7, []*ir.Tensor{x}, 1, ir.AttrFs("scales", 2, 2))
	assert.ErrorContains(t, err, "want 4 floats")
	_, err = callKernel(t, "Upsample", 9, []*ir.Tensor{x, ir.FromSlice(ir.Float32, []int64{4}, scales)}, 1, ir.AttrS("mode", "cubic"))
	assert.ErrorContains(t, err, `mode "cubic" is not supported`)
	_, err = callKernel(t, "Upsample", 10, []*ir.Tensor{x, ir.FromSlice(ir.Float32, []int64{4}, scales)}, 1)
	assert.ErrorContains(t, err, "deprecated since opset 10: use Resize")

	types, err := callInfer("Upsample", 9, []ir.Type{tt(ir.Float32, 1, 1, 2, 2), tt(ir.Float32, 4)}, []*ir.Tensor{nil, ir.FromSlice(ir.Float32, []int64{4}, scales)}, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[1,1,4,3]", types[0].String())
}
