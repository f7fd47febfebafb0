package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func TestQuantizeLinearRoundingAndSaturation(t *testing.T) {
	x := f32([]int64{8}, 0.5, 1.5, 2.5, -0.5, -1.5, 300, -300, 3.49)
	for _, tc := range []struct {
		zp   *ir.Tensor
		want []float64
	}{
		{ir.Scalar(ir.Int8, int8(0)), []float64{0, 2, 2, 0, -2, 127, -128, 3}},
		{ir.Scalar(ir.Uint8, uint8(10)), []float64{10, 12, 12, 10, 8, 255, 0, 13}},
		{nil, []float64{0, 2, 2, 0, 0, 255, 0, 3}},
	} {
		ins := []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(1))}
		if tc.zp != nil {
			ins = append(ins, tc.zp)
		}
		out, err := callKernel(t, "QuantizeLinear", 13, ins, 1)
		require.NoError(t, err)
		assert.Equal(t, tc.want, Float64s(out[0]))
	}
	// int16 outputs (v21) saturate to their own range.
	out, err := callKernel(t, "QuantizeLinear", 21, []*ir.Tensor{f32([]int64{2}, 1e6, -2.5), ir.Scalar(ir.Float32, float32(0.5))}, 1,
		ir.AttrI("output_dtype", int64(ir.Int16)))
	require.NoError(t, err)
	assert.Equal(t, []int16{32767, -5}, ir.Data[int16](out[0]))
	// float8 outputs round x / scale as Cast does: 300 and -300 lie beyond
	// float8e4m3fnuz's 240, saturated by default and NaN without.
	out, err = callKernel(t, "QuantizeLinear", 21, []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(1))}, 1,
		ir.AttrI("output_dtype", int64(ir.Float8E4M3FNUZ)))
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5, 1.5, 2.5, -0.5, -1.5, 240, -240, 3.5}, Float64s(out[0]))
	out, err = callKernel(t, "QuantizeLinear", 21, []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(1))}, 1,
		ir.AttrI("output_dtype", int64(ir.Float8E4M3FNUZ)), ir.AttrI("saturate", 0))
	require.NoError(t, err)
	assert.Equal(t, []byte{0x80, 0x80}, out[0].Raw[5:7], "out of range without saturation is NaN")
}

func TestQuantizeDequantizeAxisAndBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	x := randTensor(rng, ir.Float32, 2, 6, 3)
	xv := Float64s(x)
	scales := []float32{0.01, 0.02, 0.05, 0.1, 0.2, 0.5}
	zps := []int8{-3, 0, 1, 2, -1, 5}
	// Per axis 1: element (i, j, k) uses scale j.
	perAxis := []*ir.Tensor{ir.FromSlice(ir.Float32, []int64{6}, scales), ir.FromSlice(ir.Int8, []int64{6}, zps)}
	// Blocks of 4 along axis 1: [2, 2, 3] scales, element (i, j, k) uses (i, j/4, k).
	bs := randTensor(rng, ir.Float32, 2, 2, 3)
	bsv := ir.Data[float32](bs)
	for i := range bsv {
		bsv[i] = 0.01 + float32(math.Abs(float64(bsv[i])))/10
	}
	bz := FromFloat64s(ir.Int8, []int64{2, 2, 3}, []float64{1, -2, 3, 0, 4, -5, 6, 0, -1, 2, 0, 7})
	for _, tc := range []struct {
		name   string
		opset  int64
		params []*ir.Tensor
		attrs  []*ir.Attribute
		at     func(i, j, k int) int
	}{
		{"per axis", 13, perAxis, nil, func(_, j, _ int) int { return j }},
		{"per axis negative", 13, perAxis, []*ir.Attribute{ir.AttrI("axis", -2)}, func(_, j, _ int) int { return j }},
		{"blocked", 21, []*ir.Tensor{bs, bz}, []*ir.Attribute{ir.AttrI("block_size", 4)}, func(i, j, k int) int { return (i*2+j/4)*3 + k }},
	} {
		q, err := callKernel(t, "QuantizeLinear", tc.opset, append([]*ir.Tensor{x}, tc.params...), 1, tc.attrs...)
		require.NoError(t, err, tc.name)
		dq, err := callKernel(t, "DequantizeLinear", tc.opset, append([]*ir.Tensor{q[0]}, tc.params...), 1, tc.attrs...)
		require.NoError(t, err, tc.name)
		sv, zv, qv, dv := Float64s(tc.params[0]), Float64s(tc.params[1]), Float64s(q[0]), Float64s(dq[0])
		for i := range 2 {
			for j := range 6 {
				for k := range 3 {
					e, p := (i*6+j)*3+k, tc.at(i, j, k)
					s, z := float32(sv[p]), zv[p]
					want := min(127, max(-128, math.RoundToEven(float64(float32(xv[e])/s))+z))
					require.Equal(t, want, qv[e], "%s: quantized (%d,%d,%d)", tc.name, i, j, k)
					assert.Equal(t, float64(float32(qv[e]-z)*s), dv[e], "%s: dequantized (%d,%d,%d)", tc.name, i, j, k)
					if want > -128 && want < 127 {
						assert.InDelta(t, xv[e], dv[e], float64(s)/2*1.0001, "%s: round trip", tc.name)
					}
				}
			}
		}
	}
	_, err := callKernel(t, "QuantizeLinear", 13, []*ir.Tensor{x, ir.FromSlice(ir.Float32, []int64{3}, scales[:3])}, 1)
	assert.ErrorContains(t, err, "want a scalar or [6] for axis 1")
	_, err = callKernel(t, "DequantizeLinear", 21, []*ir.Tensor{FromFloat64s(ir.Int8, x.Dims, xv), bs}, 1, ir.AttrI("block_size", 2))
	assert.ErrorContains(t, err, "want [2 3 3] for blocks of 2")
}

func TestDequantizeLinearTypes(t *testing.T) {
	x := ir.FromSlice(ir.Int32, []int64{3}, []int32{-1000, 0, 123456})
	out, err := callKernel(t, "DequantizeLinear", 10, []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(0.5))}, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{-500, 0, 61728}, ir.Data[float32](out[0]))
	// From v19 the output has the scale's type.
	h := FromFloat64s(ir.Float16, nil, []float64{0.25})
	out, err = callKernel(t, "DequantizeLinear", 19, []*ir.Tensor{x, h}, 1)
	require.NoError(t, err)
	assert.Equal(t, []float64{-250, 0, 30864}, Float64s(out[0]))
	out, err = callKernel(t, "DequantizeLinear", 21, []*ir.Tensor{ir.FromSlice(ir.Uint16, []int64{2}, []uint16{65535, 7}),
		ir.Scalar(ir.Float32, float32(2)), ir.FromSlice(ir.Uint16, nil, []uint16{7})}, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{2 * 65528, 0}, ir.Data[float32](out[0]))
}

func TestDynamicQuantizeLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, x := range []*ir.Tensor{
		randTensor(rng, ir.Float32, 4, 5),
		f32([]int64{4}, 1, 2, 3, 4),     // all positive: the range widens to 0
		f32([]int64{3}, -1, -2.5, -0.1), // all negative
	} {
		out, err := callKernel(t, "DynamicQuantizeLinear", 11, []*ir.Tensor{x}, 3)
		require.NoError(t, err)
		xv, y := ir.Data[float32](x), ir.Data[uint8](out[0])
		scale, zp := ir.Data[float32](out[1])[0], float64(ir.Data[uint8](out[2])[0])
		lo, hi := float32(0), float32(0)
		for _, v := range xv {
			lo, hi = min(lo, v), max(hi, v)
		}
		assert.Equal(t, (hi-lo)/255, scale)
		for i, v := range xv {
			assert.InDelta(t, float64(v), (float64(y[i])-zp)*float64(scale), float64(scale)*0.5001+1e-7, "element %d", i)
		}
	}
	out, err := callKernel(t, "DynamicQuantizeLinear", 11, []*ir.Tensor{f32([]int64{2}, 0, 0)}, 3)
	require.NoError(t, err)
	assert.Equal(t, []uint8{0, 0}, ir.Data[uint8](out[0]))
}

// quantTensor makes a random 8-bit tensor.
func quantTensor(rng *rand.Rand, dt ir.DType, dims ...int64) *ir.Tensor {
	v := make([]float64, ir.Product(dims))
	for i := range v {
		v[i] = float64(rng.IntN(256))
		if dt == ir.Int8 {
			v[i] -= 128
		}
	}
	return FromFloat64s(dt, dims, v)
}

func TestMatMulIntegerAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	const M, K, N = 3, 7, 4
	a, b := quantTensor(rng, ir.Uint8, 2, M, K), quantTensor(rng, ir.Int8, K, N)
	azp := quantTensor(rng, ir.Uint8, M) // per row
	bzp := quantTensor(rng, ir.Int8, N)  // per column
	out, err := callKernel(t, "MatMulInteger", 10, []*ir.Tensor{a, b, azp, bzp}, 1)
	require.NoError(t, err)
	av, bv, az, bz := Float64s(a), Float64s(b), Float64s(azp), Float64s(bzp)
	got := ir.Data[int32](out[0])
	for q := range 2 {
		for i := range M {
			for j := range N {
				var want int32
				for p := range K {
					want += int32(av[(q*M+i)*K+p]-az[i]) * int32(bv[p*N+j]-bz[j])
				}
				assert.Equal(t, want, got[(q*M+i)*N+j])
			}
		}
	}
	_, err = callKernel(t, "MatMulInteger", 10, []*ir.Tensor{a, b, quantTensor(rng, ir.Uint8, 5)}, 1)
	assert.ErrorContains(t, err, "a_zero_point")
}

func TestQLinearMatMulAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	const M, K, N = 4, 6, 3
	a, b := quantTensor(rng, ir.Int8, M, K), quantTensor(rng, ir.Int8, K, N)
	as, bs, ys := ir.Scalar(ir.Float32, float32(0.02)), ir.FromSlice(ir.Float32, []int64{N}, []float32{0.01, 0.03, 0.05}), ir.Scalar(ir.Float32, float32(0.4))
	azp, bzp, yzp := ir.Scalar(ir.Int8, int8(3)), ir.FromSlice(ir.Int8, []int64{N}, []int8{0, -2, 1}), ir.Scalar(ir.Int8, int8(-7))
	out, err := callKernel(t, "QLinearMatMul", 10, []*ir.Tensor{a, as, azp, b, bs, bzp, ys, yzp}, 1)
	require.NoError(t, err)
	// v21 takes float16 scales; these three are exact in float16.
	half := func(v float32) *ir.Tensor { return FromFloat64s(ir.Float16, nil, []float64{float64(v)}) }
	out21, err := callKernel(t, "QLinearMatMul", 21, []*ir.Tensor{a, half(0.5), azp, b, half(0.25), ir.Scalar(ir.Int8, int8(0)), half(2), yzp}, 1)
	require.NoError(t, err)
	for i, v := range ir.Data[int8](out21[0]) {
		var acc float64
		for p := range K {
			acc += (Float64s(a)[i/N*K+p] - 3) * Float64s(b)[p*N+i%N]
		}
		assert.Equal(t, int8(min(127, max(-128, math.RoundToEven(acc/16)-7))), v, "v21 element %d", i)
	}
	av, bv, got := Float64s(a), Float64s(b), ir.Data[int8](out[0])
	for i := range M {
		for j := range N {
			var acc float64
			for p := range K {
				acc += (av[i*K+p] - 3) * (bv[p*N+j] - Float64s(bzp)[j])
			}
			m := float32(0.02) * ir.Data[float32](bs)[j] / float32(0.4)
			want := min(127, max(-128, math.RoundToEven(acc*float64(m))-7))
			assert.Equal(t, int8(want), got[i*N+j], "(%d,%d)", i, j)
		}
	}
}

func TestConvIntegerAndQLinearConvAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	x, w := quantTensor(rng, ir.Uint8, 1, 4, 6, 5), quantTensor(rng, ir.Int8, 6, 2, 3, 3)
	xzp, wzp := ir.Scalar(ir.Uint8, uint8(120)), quantTensor(rng, ir.Int8, 6) // per output channel
	attrs := []*ir.Attribute{ir.AttrI("group", 2), ir.AttrIs("pads", 1, 0, 1, 2), ir.AttrIs("strides", 2, 1)}
	xc := Float64s(x)
	for i := range xc {
		xc[i] -= 120
	}
	wc, wz := Float64s(w), Float64s(wzp)
	for i := range wc {
		wc[i] -= wz[i/18]
	}
	acc, yd := naiveConv(xc, x.Dims, wc, w.Dims, nil, 2, []int64{2, 1}, []int64{1, 1}, []int64{1, 0, 1, 2})
	out, err := callKernel(t, "ConvInteger", 10, []*ir.Tensor{x, w, xzp, wzp}, 1, attrs...)
	require.NoError(t, err)
	assert.Equal(t, yd, out[0].Dims)
	assert.Equal(t, acc, Float64s(out[0]))

	bias := FromFloat64s(ir.Int32, []int64{6}, []float64{100, -50, 0, 7, 3000, -3000})
	ws := FromFloat64s(ir.Float32, []int64{6}, []float64{0.01, 0.02, 0.005, 0.03, 0.01, 0.02})
	xs, ys, yzp := ir.Scalar(ir.Float32, float32(0.05)), ir.Scalar(ir.Float32, float32(0.3)), ir.Scalar(ir.Uint8, uint8(128))
	q, err := callKernel(t, "QLinearConv", 10, []*ir.Tensor{x, xs, xzp, w, ws, wzp, ys, yzp, bias}, 1, attrs...)
	require.NoError(t, err)
	got, plane := ir.Data[uint8](q[0]), int(yd[2]*yd[3])
	for i, a := range acc {
		m := i / plane
		scale := float32(0.05) * ir.Data[float32](ws)[m] / float32(0.3)
		want := min(255, max(0, math.RoundToEven((a+Float64s(bias)[m])*float64(scale))+128))
		assert.Equal(t, uint8(want), got[i], "element %d", i)
	}
}

func TestQuantShapesGolden(t *testing.T) {
	f, u8, i8 := ir.Float32, ir.Uint8, ir.Int8
	s := ir.TensorType(f, ir.S())
	checkShapeGolden(t, "quant", []shapeCase{
		{op: "QuantizeLinear", opset: 10, ins: []ir.Type{sym(f, "N", 3), s}, nOut: 1},
		{op: "QuantizeLinear", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(f, 3), tt(i8, 3)}, nOut: 1},
		{op: "QuantizeLinear", opset: 21, ins: []ir.Type{sym(ir.Float16, "N", 8), sym(ir.Float16, "N", 2)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("block_size", 4), ir.AttrI("output_dtype", int64(ir.Int16))}},
		{op: "QuantizeLinear", opset: 21, ins: []ir.Type{tt(f, 2, 8), tt(f, 2, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("block_size", 4)}},
		{op: "QuantizeLinear", opset: 21, ins: []ir.Type{tt(f, 4), s, ir.TensorType(u8, ir.S())}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("output_dtype", int64(ir.Int8))}},
		{op: "QuantizeLinear", opset: 13, ins: []ir.Type{tt(f, 4, 5), tt(f, 4)}, nOut: 1},
		{op: "DequantizeLinear", opset: 10, ins: []ir.Type{sym(u8, "N", 3), s, ir.TensorType(u8, ir.S())}, nOut: 1},
		{op: "DequantizeLinear", opset: 19, ins: []ir.Type{sym(i8, "N", 3), ir.TensorType(ir.Float16, ir.S())}, nOut: 1},
		{op: "DequantizeLinear", opset: 23, ins: []ir.Type{tt(i8, 3), s}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("output_dtype", int64(ir.BFloat16))}},
		{op: "DequantizeLinear", opset: 13, ins: []ir.Type{tt(i8, 3), s, ir.TensorType(u8, ir.S())}, nOut: 1},
		{op: "DynamicQuantizeLinear", opset: 11, ins: []ir.Type{sym(f, "N", 768)}, nOut: 3},
		{op: "MatMulInteger", opset: 10, ins: []ir.Type{sym(u8, "N", 4, 5), tt(i8, 5, 6), tt(u8, 4)}, nOut: 1},
		{op: "QLinearMatMul", opset: 10, ins: []ir.Type{sym(u8, "N", 4, 5), s, ir.TensorType(u8, ir.S()), tt(i8, 5, 6), s,
			ir.TensorType(i8, ir.S()), s, ir.TensorType(i8, ir.S())}, nOut: 1},
		{op: "ConvInteger", opset: 10, ins: []ir.Type{sym(u8, "N", 3, 32, 32), tt(u8, 8, 3, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1)}},
		{op: "QLinearConv", opset: 10, ins: []ir.Type{sym(u8, "N", 3, 32, 32), s, ir.TensorType(u8, ir.S()), tt(i8, 8, 3, 3, 3),
			tt(f, 8), tt(i8, 8), s, ir.TensorType(u8, ir.S()), tt(ir.Int32, 8)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2)}},
		{op: "QLinearConv", opset: 10, ins: []ir.Type{tt(u8, 1, 3, 8, 8), s, ir.TensorType(u8, ir.S()), tt(i8, 8, 3, 3, 3),
			tt(f, 8), tt(i8, 8), s, ir.TensorType(u8, ir.S()), tt(ir.Int32, 4)}, nOut: 1},
	})
}

// quantCtx is a kernel context for a node of op with attrs and nIn inputs
// (no values: backends resolve parameters from dims alone).
func quantCtx(t *testing.T, op string, opset int64, nIn int, attrs ...*ir.Attribute) *KernelContext {
	t.Helper()
	s, err := Lookup("", op, opset)
	require.NoError(t, err)
	n := &ir.Node{OpType: op, Attrs: attrs, Outputs: []*ir.Value{{Name: "y"}}}
	for i := range nIn {
		n.Inputs = append(n.Inputs, &ir.Value{Name: string(rune('a' + i))})
	}
	return NewKernelContext(s, n, opset, make([]*ir.Tensor, nIn))
}

func TestQuantLayoutResolves(t *testing.T) {
	c := quantCtx(t, "QuantizeLinear", 21, 2, ir.AttrI("axis", -2), ir.AttrI("block_size", 4))
	l, err := c.QuantLayout([]int64{-1, 10, 3}, []int64{7, 3, 3}) // the first dim known only at run time
	require.NoError(t, err)
	assert.Equal(t, QuantLayout{Axis: 1, Block: 4}, l)
	_, err = c.QuantLayout([]int64{-1, 10, 3}, []int64{7, 2, 3})
	assert.ErrorContains(t, err, "blocks of 4")

	c = quantCtx(t, "DequantizeLinear", 13, 2, ir.AttrI("axis", -1))
	l, err = c.QuantLayout([]int64{2, 5}, []int64{5})
	require.NoError(t, err)
	assert.Equal(t, QuantLayout{Axis: 1}, l)
	l, err = c.QuantLayout([]int64{2, 5}, []int64{1})
	require.NoError(t, err)
	assert.Equal(t, -1, l.Axis, "one element is per tensor")
	_, err = c.QuantLayout([]int64{2, 5}, []int64{2})
	assert.ErrorContains(t, err, "want a scalar or [5]")

	// The output type: the zero point's, else output_dtype, else uint8;
	// the division's precision: v23's attribute, else the scale's type.
	c = quantCtx(t, "QuantizeLinear", 23, 2, ir.AttrI("output_dtype", int64(ir.Int16)), ir.AttrI("precision", int64(ir.Float16)))
	d, err := c.QuantizedType(ir.Undefined, false)
	require.NoError(t, err)
	assert.Equal(t, ir.Int16, d)
	_, err = c.QuantizedType(ir.Int8, true)
	assert.ErrorContains(t, err, "differs from the zero point's")
	assert.Equal(t, ir.Float16, c.QuantPrecision(ir.Float32))
	c = quantCtx(t, "QuantizeLinear", 13, 2)
	d, err = c.QuantizedType(ir.Undefined, false)
	require.NoError(t, err)
	assert.Equal(t, ir.Uint8, d)
	assert.Equal(t, ir.BFloat16, c.QuantPrecision(ir.BFloat16))
	assert.Equal(t, ir.Float32, quantCtx(t, "DequantizeLinear", 13, 2).DequantizedType(ir.Float16))
	assert.Equal(t, ir.Float16, quantCtx(t, "DequantizeLinear", 19, 2).DequantizedType(ir.Float16))
}

func TestQuantParamDims(t *testing.T) {
	for _, tc := range []struct {
		op     string
		input  int
		pd, xd []int64
		want   []int64
		err    string
	}{
		{"MatMulInteger", 2, []int64{4}, []int64{-1, 4, 7}, []int64{1, 4, 1}, ""},    // a's rows
		{"MatMulInteger", 3, []int64{6}, []int64{7, 6}, []int64{1, 6}, ""},           // b's columns
		{"MatMulInteger", 2, []int64{1, 1, 1}, []int64{4, 7}, nil, ""},               // one element: per tensor
		{"MatMulInteger", 2, []int64{4, 1}, []int64{2, 4, 7}, []int64{4, 1}, ""},     // full shape, broadcast
		{"MatMulInteger", 2, []int64{5}, []int64{4, 7}, nil, "a_zero_point"},         // not a's rows
		{"MatMulInteger", 2, []int64{4}, []int64{7}, nil, "a_zero_point"},            // a 1-D a has no rows
		{"QLinearMatMul", 6, []int64{4}, []int64{4, 9}, []int64{4, 1}, ""},           // y's scale per row
		{"QLinearMatMul", 4, []int64{9}, []int64{4, 9}, []int64{1, 9}, ""},           // b's scale per column
		{"QLinearConv", 4, []int64{8}, []int64{1, 8, 5, 5}, []int64{1, 8, 1, 1}, ""}, // w's scale per output channel
		{"QLinearConv", 5, []int64{8}, []int64{8, 3, 3, 3}, []int64{8, 1, 1, 1}, ""}, // w's zero point on w
		{"ConvInteger", 3, []int64{3}, []int64{8, 3, 3, 3}, nil, "w_zero_point"},
		{"ConvInteger", 1, []int64{3}, []int64{8, 3, 3, 3}, nil, "not a quantization parameter"},
	} {
		c := quantCtx(t, tc.op, 10, 9)
		got, err := c.QuantParamDims(tc.input, tc.pd, tc.xd)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "%s input %d", tc.op, tc.input)
			continue
		}
		require.NoError(t, err, "%s input %d", tc.op, tc.input)
		assert.Equal(t, tc.want, got, "%s input %d of %v on %v", tc.op, tc.input, tc.pd, tc.xd)
	}
}
