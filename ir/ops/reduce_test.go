package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// The reduce family's own tests.

// naiveReduce groups the input by output element with coordinate
// arithmetic and folds each group: an oracle independent of the
// reduction helper.
func naiveReduce(x []float64, dims []int64, reduced []bool, keep bool, fold func([]float64) float64) ([]float64, []int64) {
	outDims := []int64{}
	for i, d := range dims {
		switch {
		case !reduced[i]:
			outDims = append(outDims, d)
		case keep:
			outDims = append(outDims, 1)
		}
	}
	groups := make([][]float64, ir.Product(outDims))
	for flat := range x {
		rem, out := flat, 0
		var coord []int
		for a := len(dims) - 1; a >= 0; a-- {
			coord = append([]int{rem % int(dims[a])}, coord...)
			rem /= int(dims[a])
		}
		for a, c := range coord {
			if !reduced[a] {
				out = out*int(dims[a]) + c
			}
		}
		groups[out] = append(groups[out], x[flat])
	}
	res := make([]float64, len(groups))
	for i, g := range groups {
		res[i] = fold(g)
	}
	return res, outDims
}

var naiveFolds = map[string]func([]float64) float64{
	"ReduceSum": func(xs []float64) float64 { return sumNaive(xs, func(x float64) float64 { return x }) },
	"ReduceMean": func(xs []float64) float64 {
		return sumNaive(xs, func(x float64) float64 { return x }) / float64(len(xs))
	},
	"ReduceProd": func(xs []float64) float64 {
		p := 1.0
		for _, x := range xs {
			p *= x
		}
		return p
	},
	"ReduceMax":       func(xs []float64) float64 { return slices.Max(xs) },
	"ReduceMin":       func(xs []float64) float64 { return slices.Min(xs) },
	"ReduceL1":        func(xs []float64) float64 { return sumNaive(xs, math.Abs) },
	"ReduceL2":        func(xs []float64) float64 { return math.Sqrt(sumNaive(xs, func(x float64) float64 { return x * x })) },
	"ReduceSumSquare": func(xs []float64) float64 { return sumNaive(xs, func(x float64) float64 { return x * x }) },
	"ReduceLogSum":    func(xs []float64) float64 { return math.Log(sumNaive(xs, func(x float64) float64 { return x })) },
	"ReduceLogSumExp": func(xs []float64) float64 { return math.Log(sumNaive(xs, math.Exp)) },
}

func sumNaive(xs []float64, f func(float64) float64) float64 {
	var s float64
	for _, x := range xs {
		s += f(x)
	}
	return s
}

func TestReduceAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dims := []int64{2, 3, 4, 5}
	axesCases := [][]int64{{1}, {0, 2}, {-1, 1}, {3, 0, 1}, nil}
	for op, fold := range naiveFolds {
		for _, axes := range axesCases {
			for _, keep := range []int64{0, 1} {
				x := randTensor(rng, ir.Float32, dims...)
				if op == "ReduceLogSum" {
					// positive sums
					v := Float64s(x)
					for i := range v {
						v[i] = math.Abs(v[i]) + 0.1
					}
					x = FromFloat64s(ir.Float32, dims, v)
				}
				mask := make([]bool, len(dims))
				for _, a := range axes {
					mask[(int(a)+len(dims))%len(dims)] = true
				}
				if axes == nil {
					for i := range mask {
						mask[i] = true
					}
				}
				want, wantDims := naiveReduce(Float64s(x), dims, mask, keep == 1, fold)
				name := fmt.Sprintf("%s axes=%v keepdims=%d", op, axes, keep)
				// Opset 13: axes attribute (input for ReduceSum); 18: input.
				for _, opset := range []int64{13, 18} {
					ins := []*ir.Tensor{x}
					attrs := []*ir.Attribute{ir.AttrI("keepdims", keep)}
					if opset == 18 || op == "ReduceSum" {
						if axes != nil {
							ins = append(ins, i64s(axes...))
						}
					} else if axes != nil {
						attrs = append(attrs, ir.AttrIs("axes", axes...))
					}
					out, err := callKernel(t, op, opset, ins, 1, attrs...)
					require.NoError(t, err, name)
					assert.Equal(t, wantDims, out[0].Dims, name)
					assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6, name)
				}
			}
		}
	}
}

func TestReduceIntegers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dtype := range []ir.DType{ir.Int32, ir.Int64, ir.Uint32, ir.Uint64} {
		for _, op := range []string{"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare", "ReduceMean"} {
			x := randTensor(rng, dtype, 3, 4)
			out, err := callKernel(t, op, 18, []*ir.Tensor{x, i64s(1)}, 1, ir.AttrI("keepdims", 0))
			require.NoError(t, err)
			want, _ := naiveReduce(Float64s(x), x.Dims, []bool{false, true}, false, naiveFolds[op])
			for i := range want {
				// The integer mean truncates toward zero, as numpy's astype.
				want[i] = math.Trunc(want[i])
			}
			assert.Equal(t, want, Float64s(out[0]), "%s %s", op, dtype)
		}
	}
	// uint64 beyond MaxInt64 must still order correctly.
	big := ir.FromSlice(ir.Uint64, []int64{3}, []uint64{1, math.MaxUint64 - 5, 7})
	out, err := callKernel(t, "ReduceMax", 18, []*ir.Tensor{big}, 1, ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	assert.Equal(t, []uint64{math.MaxUint64 - 5}, ir.Data[uint64](out[0]))
	out, err = callKernel(t, "ReduceMin", 18, []*ir.Tensor{big}, 1, ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, ir.Data[uint64](out[0]))
}

func TestReduceEmptyAndNoop(t *testing.T) {
	x := f32([]int64{2, 3}, 1, -2, 3, 4, 5, -6)
	// No axes: all axes, unless noop_with_empty_axes.
	out, err := callKernel(t, "ReduceSum", 13, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, out[0].Dims)
	assert.Equal(t, []float32{5}, out[0].Float32s())
	out, err = callKernel(t, "ReduceSum", 13, []*ir.Tensor{x, i64s()}, 1, ir.AttrI("noop_with_empty_axes", 1))
	require.NoError(t, err)
	assert.Equal(t, x.Float32s(), out[0].Float32s())
	assert.Equal(t, x.Dims, out[0].Dims)

	// Reductions over an empty axis give the op's identity.
	empty := ir.NewTensor(ir.Float32, 2, 0)
	ident := map[string]float64{
		"ReduceSum": 0, "ReduceProd": 1, "ReduceMax": math.Inf(-1), "ReduceMin": math.Inf(1),
		"ReduceL1": 0, "ReduceL2": 0, "ReduceSumSquare": 0, "ReduceLogSum": math.Inf(-1),
		"ReduceLogSumExp": math.Inf(-1), "ReduceMean": math.NaN(),
	}
	for op, want := range ident {
		out, err := callKernel(t, op, 18, []*ir.Tensor{empty, i64s(1)}, 1, ir.AttrI("keepdims", 0))
		require.NoError(t, err, op)
		assert.Equal(t, []int64{2}, out[0].Dims, op)
		assertClose(t, []float64{want, want}, Float64s(out[0]), 0, 0, op)
	}
	emptyInt := ir.NewTensor(ir.Int32, 0)
	out, err = callKernel(t, "ReduceMax", 18, []*ir.Tensor{emptyInt}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int32{math.MinInt32}, ir.Data[int32](out[0]))
	out, err = callKernel(t, "ReduceMin", 18, []*ir.Tensor{ir.NewTensor(ir.Uint8, 0)}, 1, ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	assert.Equal(t, []uint8{math.MaxUint8}, ir.Data[uint8](out[0]))
}

func TestReduceErrors(t *testing.T) {
	x := f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)
	_, err := callKernel(t, "ReduceSum", 13, []*ir.Tensor{x, i64s(2)}, 1)
	assert.ErrorContains(t, err, "out of range")
	_, err = callKernel(t, "ReduceMean", 13, []*ir.Tensor{x}, 1, ir.AttrIs("axes", 1, -1))
	assert.ErrorContains(t, err, "twice")
	// The axes attribute is gone in ReduceMean-18.
	_, err = callKernel(t, "ReduceMean", 18, []*ir.Tensor{x}, 1, ir.AttrIs("axes", 1))
	assert.ErrorContains(t, err, "unknown attribute")
	_, err = callKernel(t, "ReduceSum", 13, []*ir.Tensor{ir.NewTensor(ir.String, 2)}, 1)
	assert.ErrorAs(t, err, new(*UnsupportedError))
}

func TestArgMaxArgMin(t *testing.T) {
	x := f32([]int64{2, 4}, 1, 5, 5, -2, 3, -7, 0, -7)
	for _, c := range []struct {
		op    string
		axis  int64
		last  int64
		keep  int64
		dims  []int64
		index []int64
	}{
		{"ArgMax", 1, 0, 1, []int64{2, 1}, []int64{1, 0}},
		{"ArgMax", 1, 1, 0, []int64{2}, []int64{2, 0}},
		{"ArgMin", -1, 0, 0, []int64{2}, []int64{3, 1}},
		{"ArgMin", 1, 1, 1, []int64{2, 1}, []int64{3, 3}},
		{"ArgMax", 0, 0, 1, []int64{1, 4}, []int64{1, 0, 0, 0}},
		{"ArgMin", 0, 1, 0, []int64{4}, []int64{0, 1, 1, 1}},
	} {
		name := fmt.Sprintf("%+v", c)
		out, err := callKernel(t, c.op, 13, []*ir.Tensor{x}, 1,
			ir.AttrI("axis", c.axis), ir.AttrI("keepdims", c.keep), ir.AttrI("select_last_index", c.last))
		require.NoError(t, err, name)
		assert.Equal(t, c.dims, out[0].Dims, name)
		assert.Equal(t, c.index, out[0].Int64s(), name)
	}
	// Random data against a direct scan, for integer types too.
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dtype := range []ir.DType{ir.Float32, ir.Int8, ir.Uint16, ir.Float16} {
		x := randTensor(rng, dtype, 3, 5, 2)
		v := Float64s(x)
		out, err := callKernel(t, "ArgMax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 1), ir.AttrI("keepdims", 0))
		require.NoError(t, err)
		for i := range 3 {
			for k := range 2 {
				best := 0
				for j := range 5 {
					if v[(i*5+j)*2+k] > v[(i*5+best)*2+k] {
						best = j
					}
				}
				assert.Equal(t, int64(best), out[0].Int64s()[i*2+k], dtype)
			}
		}
	}
	// select_last_index does not exist before opset 12.
	_, err := callKernel(t, "ArgMax", 11, []*ir.Tensor{x}, 1, ir.AttrI("select_last_index", 1))
	assert.ErrorContains(t, err, "unknown attribute")
	_, err = callKernel(t, "ArgMax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 2))
	assert.ErrorContains(t, err, "out of range")
}

func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := randTensor(rng, ir.Float32, 3, 6, 2)
	v := Float64s(x)
	for _, largest := range []int64{1, 0} {
		out, err := callKernel(t, "TopK", 11, []*ir.Tensor{x, i64s(4)}, 2, ir.AttrI("axis", 1), ir.AttrI("largest", largest))
		require.NoError(t, err)
		assert.Equal(t, []int64{3, 4, 2}, out[0].Dims)
		vals, idx := Float64s(out[0]), out[1].Int64s()
		for i := range 3 {
			for k := range 2 {
				line := make([]int, 6)
				for j := range line {
					line[j] = j
				}
				sort.SliceStable(line, func(a, b int) bool {
					va, vb := v[(i*6+line[a])*2+k], v[(i*6+line[b])*2+k]
					if largest == 1 {
						return va > vb
					}
					return va < vb
				})
				for j := range 4 {
					o := (i*4+j)*2 + k
					assert.Equal(t, int64(line[j]), idx[o])
					assert.Equal(t, v[(i*6+line[j])*2+k], vals[o])
				}
			}
		}
	}
	// Ties keep index order; k as attribute before opset 10.
	ties := ir.FromSlice(ir.Int32, []int64{6}, []int32{2, 7, 2, 7, 1, 7})
	out, err := callKernel(t, "TopK", 1, []*ir.Tensor{ties}, 2, ir.AttrI("k", 4))
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 7, 7, 2}, ir.Data[int32](out[0]))
	assert.Equal(t, []int64{1, 3, 5, 0}, out[1].Int64s())
	out, err = callKernel(t, "TopK", 11, []*ir.Tensor{ties, i64s(3)}, 2, ir.AttrI("largest", 0))
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2, 2}, ir.Data[int32](out[0]))
	assert.Equal(t, []int64{4, 0, 2}, out[1].Int64s())
	// uint64 above MaxInt64.
	big := ir.FromSlice(ir.Uint64, []int64{3}, []uint64{1, math.MaxUint64, 7})
	out, err = callKernel(t, "TopK", 10, []*ir.Tensor{big, i64s(2)}, 2)
	require.NoError(t, err)
	assert.Equal(t, []uint64{math.MaxUint64, 7}, ir.Data[uint64](out[0]))

	_, err = callKernel(t, "TopK", 11, []*ir.Tensor{x, i64s(7)}, 2, ir.AttrI("axis", 1))
	assert.ErrorContains(t, err, "exceeds")
	_, err = callKernel(t, "TopK", 11, []*ir.Tensor{x, i64s(-1)}, 2)
	assert.ErrorContains(t, err, "negative")
}

func TestCumSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dtype := range []ir.DType{ir.Float32, ir.Int32, ir.Float64, ir.Uint64} {
		x := randTensor(rng, dtype, 2, 5, 3)
		if dtype == ir.Uint64 {
			x = FromInt64s(dtype, x.Dims, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30})
		}
		v := Float64s(x)
		for _, axis := range []int64{1, -1} {
			for _, excl := range []int64{0, 1} {
				for _, rev := range []int64{0, 1} {
					axisT := ir.Scalar(ir.Int32, int32(axis))
					out, err := callKernel(t, "CumSum", 14, []*ir.Tensor{x, axisT}, 1, ir.AttrI("exclusive", excl), ir.AttrI("reverse", rev))
					require.NoError(t, err)
					want := make([]float64, len(v))
					stride, n := 3, 5
					if axis == -1 {
						stride, n = 1, 3
					}
					for i := range want {
						pos := (i / stride) % n
						for j := range n {
							include := j <= pos
							if rev == 1 {
								include = j >= pos
							}
							if include && !(excl == 1 && j == pos) {
								want[i] += v[i+(j-pos)*stride]
							}
						}
					}
					assertClose(t, want, Float64s(out[0]), 1e-6, 1e-6, dtype, axis, excl, rev)
				}
			}
		}
	}
	_, err := callKernel(t, "CumSum", 14, []*ir.Tensor{f32([]int64{2}, 1, 2), i64s(0, 1)}, 1)
	assert.ErrorContains(t, err, "axis")
}

func TestReduceShapes(t *testing.T) {
	f := ir.Float32
	x := tt(f, 2, 3, 4)
	xs := sym(f, "N", 3, -1)
	axes := tt(ir.Int64, 2)
	cases := []shapeCase{
		{op: "ReduceSum", opset: 11, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 1)}},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{x, axes}, consts: []*ir.Tensor{nil, i64s(0, -1)}, nOut: 1},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{x, axes}, consts: []*ir.Tensor{nil, i64s(0, -1)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("keepdims", 0)}},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{x, axes}, nOut: 1},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{x, axes}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("keepdims", 0)}},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{x, tt(ir.Int64, 0)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("noop_with_empty_axes", 1)}},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{xs}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("keepdims", 0)}},
		{op: "ReduceMean", opset: 13, ins: []ir.Type{xs}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", -1)}},
		{op: "ReduceMean", opset: 18, ins: []ir.Type{xs, axes}, consts: []*ir.Tensor{nil, i64s(1, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("keepdims", 0)}},
		{op: "ReduceMax", opset: 18, ins: []ir.Type{ir.TensorType(f, ir.Shape{}), axes}, consts: []*ir.Tensor{nil, i64s(1)}, nOut: 1},
		{op: "ReduceL2", opset: 13, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 3)}},
		{op: "ReduceProd", opset: 13, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 0, -3)}},
		{op: "ReduceLogSumExp", opset: 18, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 0)}},
		{op: "ArgMax", opset: 13, ins: []ir.Type{xs}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", -1)}},
		{op: "ArgMin", opset: 13, ins: []ir.Type{xs}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 0), ir.AttrI("keepdims", 0)}},
		{op: "ArgMin", opset: 11, ins: []ir.Type{xs}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 3)}},
		{op: "TopK", opset: 11, ins: []ir.Type{xs, tt(ir.Int64, 1)}, consts: []*ir.Tensor{nil, i64s(2)}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "TopK", opset: 11, ins: []ir.Type{xs, tt(ir.Int64, 1)}, nOut: 2},
		{op: "TopK", opset: 1, ins: []ir.Type{x}, nOut: 2, attrs: []*ir.Attribute{ir.AttrI("k", 4)}},
		{op: "TopK", opset: 10, ins: []ir.Type{x, tt(ir.Int64, 1)}, consts: []*ir.Tensor{nil, i64s(5)}, nOut: 2},
		{op: "TopK", opset: 11, ins: []ir.Type{sym(f, "B", "S"), tt(ir.Int64, 1)}, syms: []*SymTensor{nil, symInts("min(10, S)")}, nOut: 2},
		{op: "ReduceSum", opset: 13, ins: []ir.Type{sym(f, "B", "S", 8), tt(ir.Int64, 1)}, consts: []*ir.Tensor{nil, i64s(1)}, nOut: 1},
		{op: "CumSum", opset: 14, ins: []ir.Type{xs, tt(ir.Int32)}, nOut: 1},
		{op: "CumSum", opset: 14, ins: []ir.Type{xs, tt(ir.Float32)}, nOut: 1},
	}
	checkShapeGolden(t, "reduce", cases)
}
