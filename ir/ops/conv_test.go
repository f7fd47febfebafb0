package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// eachCoord calls f with every coordinate of dims in row-major order.
func eachCoord(dims []int64, f func(c []int64)) {
	if ir.Product(dims) == 0 {
		return
	}
	c := make([]int64, len(dims))
	for {
		f(c)
		a := len(c) - 1
		for ; a >= 0; a-- {
			if c[a]++; c[a] < dims[a] {
				break
			}
			c[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

// flatAt is the row-major flat index of coordinate c in dims.
func flatAt(dims, c []int64) int {
	var f int64
	for i, st := range Strides(dims) {
		f += c[i] * st
	}
	return int(f)
}

// naiveConv is the convolution formula written out over n-d coordinates,
// with explicit pads (begins, then ends):
// y[b, m, o] = bias[m] + Σ_{c,k} x[b, g·cg+c, o·s + k·d - pad] · w[m, c, k].
func naiveConv(x []float64, xd []int64, w []float64, wd []int64, bias []float64, group int64, strides, dil, pads []int64) ([]float64, []int64) {
	n := len(xd) - 2
	yd := []int64{xd[0], wd[0]}
	for i := range n {
		yd = append(yd, (xd[2+i]+pads[i]+pads[n+i]-(wd[2+i]-1)*dil[i]-1)/strides[i]+1)
	}
	cg, mg := wd[1], wd[0]/group
	y := make([]float64, ir.Product(yd))
	eachCoord(yd, func(o []int64) {
		var sum float64
		if bias != nil {
			sum = bias[o[1]]
		}
		eachCoord(wd[1:], func(k []int64) {
			xc := []int64{o[0], o[1]/mg*cg + k[0]}
			for i := range n {
				p := o[2+i]*strides[i] + k[1+i]*dil[i] - pads[i]
				if p < 0 || p >= xd[2+i] {
					return
				}
				xc = append(xc, p)
			}
			sum += x[flatAt(xd, xc)] * w[flatAt(wd, append([]int64{o[1]}, k...))]
		})
		y[flatAt(yd, o)] = sum
	})
	return y, yd
}

func TestConvAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name               string
		xd, wd             []int64
		group              int64
		strides, dil, pads []int64
		bias               bool
	}{
		{"2d groups strides dilations asymmetric pads", []int64{2, 4, 7, 6}, []int64{6, 2, 3, 2}, 2, []int64{2, 1}, []int64{1, 2}, []int64{1, 0, 2, 1}, true},
		{"1d", []int64{1, 3, 10}, []int64{2, 3, 4}, 1, []int64{3}, []int64{1}, []int64{2, 1}, true},
		{"3d", []int64{1, 2, 5, 4, 6}, []int64{3, 2, 2, 3, 2}, 1, []int64{1, 2, 1}, []int64{1, 1, 2}, []int64{0, 1, 1, 1, 0, 0}, false},
		{"depthwise", []int64{1, 4, 5, 5}, []int64{4, 1, 3, 3}, 4, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, true},
		{"resnet stem", []int64{1, 3, 20, 20}, []int64{8, 3, 7, 7}, 1, []int64{2, 2}, []int64{1, 1}, []int64{3, 3, 3, 3}, false},
		{"pointwise", []int64{2, 8, 5, 3}, []int64{4, 8, 1, 1}, 1, []int64{1, 1}, []int64{1, 1}, []int64{0, 0, 0, 0}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, w := randTensor(rng, ir.Float64, tc.xd...), randTensor(rng, ir.Float64, tc.wd...)
			ins := []*ir.Tensor{x, w}
			var bias []float64
			if tc.bias {
				b := randTensor(rng, ir.Float64, tc.wd[0])
				ins, bias = append(ins, b), Float64s(b)
			}
			want, wantDims := naiveConv(Float64s(x), tc.xd, Float64s(w), tc.wd, bias, tc.group, tc.strides, tc.dil, tc.pads)
			out, err := callKernel(t, "Conv", 11, ins, 1, ir.AttrI("group", tc.group), ir.AttrIs("strides", tc.strides...),
				ir.AttrIs("dilations", tc.dil...), ir.AttrIs("pads", tc.pads...))
			require.NoError(t, err)
			assert.Equal(t, wantDims, out[0].Dims)
			assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12)
		})
	}
}

func TestConvAutoPad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, w := randTensor(rng, ir.Float32, 1, 2, 7, 8), randTensor(rng, ir.Float32, 3, 2, 4, 3)
	// H: in 7, k 4, s 2 -> out 4, total pad 3; W: in 8, k 3, s 2 -> out 4, total pad 1.
	for autoPad, pads := range map[string][]int64{
		"SAME_UPPER": {1, 0, 2, 1},
		"SAME_LOWER": {2, 1, 1, 0},
		"VALID":      {0, 0, 0, 0},
	} {
		got, err := callKernel(t, "Conv", 11, []*ir.Tensor{x, w}, 1, ir.AttrS("auto_pad", autoPad), ir.AttrIs("strides", 2, 2))
		require.NoError(t, err)
		want, err := callKernel(t, "Conv", 11, []*ir.Tensor{x, w}, 1, ir.AttrIs("pads", pads...), ir.AttrIs("strides", 2, 2))
		require.NoError(t, err)
		assert.Equal(t, want[0].Dims, got[0].Dims, autoPad)
		assertClose(t, Float64s(want[0]), Float64s(got[0]), 0, 0, autoPad)
	}
}

func TestConvTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x, w := randTensor(rng, ir.Float64, 1, 2, 5, 5), randTensor(rng, ir.Float64, 2, 2, 3, 3)
	want, _ := naiveConv(Float64s(x), x.Dims, Float64s(w), w.Dims, nil, 1, []int64{1, 1}, []int64{1, 1}, []int64{0, 0, 0, 0})
	for _, tc := range []struct {
		dt    ir.DType
		opset int64
		tol   float64
	}{{ir.Float32, 11, 1e-5}, {ir.Float16, 11, 1e-2}, {ir.BFloat16, 22, 5e-2}} {
		xs, ws := FromFloat64s(tc.dt, x.Dims, Float64s(x)), FromFloat64s(tc.dt, w.Dims, Float64s(w))
		out, err := callKernel(t, "Conv", tc.opset, []*ir.Tensor{xs, ws}, 1)
		require.NoError(t, err, tc.dt)
		assert.Equal(t, tc.dt, out[0].DType)
		assertClose(t, want, Float64s(out[0]), tc.tol, tc.tol, tc.dt)
	}
	s, err := Lookup("", "Conv", 21)
	require.NoError(t, err)
	assert.False(t, s.SupportsType(ir.BFloat16), "bfloat16 Conv arrived in opset 22")
}

// naiveConvTranspose scatters every input element through every kernel tap:
// y[b, g·mg+m, i·s + k·d - pad] += x[b, g·cg+c, i] · w[g·cg+c, m, k].
func naiveConvTranspose(x []float64, xd []int64, w []float64, wd []int64, group int64, strides, dil, pads, outPad []int64) ([]float64, []int64) {
	n := len(xd) - 2
	yd := []int64{xd[0], wd[1] * group}
	for i := range n {
		yd = append(yd, strides[i]*(xd[2+i]-1)+outPad[i]+(wd[2+i]-1)*dil[i]+1-pads[i]-pads[n+i])
	}
	cg, mg := xd[1]/group, wd[1]
	y := make([]float64, ir.Product(yd))
	eachCoord(xd, func(i []int64) {
		eachCoord(wd[1:], func(k []int64) {
			o := []int64{i[0], i[1]/cg*mg + k[0]}
			for a := range n {
				p := i[2+a]*strides[a] + k[1+a]*dil[a] - pads[a]
				if p < 0 || p >= yd[2+a] {
					return
				}
				o = append(o, p)
			}
			y[flatAt(yd, o)] += x[flatAt(xd, i)] * w[flatAt(wd, append([]int64{i[1]}, k...))]
		})
	})
	return y, yd
}

func TestConvTransposeAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []struct {
		name                       string
		xd, wd                     []int64
		group                      int64
		strides, dil, pads, outPad []int64
	}{
		{"2d groups strides dilations pads output_padding", []int64{2, 4, 4, 3}, []int64{4, 3, 3, 2}, 2, []int64{2, 3}, []int64{1, 2}, []int64{1, 0, 2, 1}, []int64{1, 2}},
		{"1d", []int64{1, 2, 6}, []int64{2, 3, 4}, 1, []int64{3}, []int64{1}, []int64{1, 2}, []int64{0}},
		{"3d", []int64{1, 2, 3, 2, 3}, []int64{2, 2, 2, 3, 2}, 1, []int64{2, 1, 2}, []int64{1, 1, 1}, []int64{0, 1, 0, 1, 0, 1}, []int64{1, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, w := randTensor(rng, ir.Float64, tc.xd...), randTensor(rng, ir.Float64, tc.wd...)
			want, wantDims := naiveConvTranspose(Float64s(x), tc.xd, Float64s(w), tc.wd, tc.group, tc.strides, tc.dil, tc.pads, tc.outPad)
			out, err := callKernel(t, "ConvTranspose", 11, []*ir.Tensor{x, w}, 1, ir.AttrI("group", tc.group), ir.AttrIs("strides", tc.strides...),
				ir.AttrIs("dilations", tc.dil...), ir.AttrIs("pads", tc.pads...), ir.AttrIs("output_padding", tc.outPad...))
			require.NoError(t, err)
			assert.Equal(t, wantDims, out[0].Dims)
			assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12)
		})
	}
}

func TestConvTransposeOutputShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x, w := randTensor(rng, ir.Float32, 1, 1, 3, 3), randTensor(rng, ir.Float32, 1, 2, 3, 3)
	b := randTensor(rng, ir.Float32, 2)
	// The full output is 9x7; asking for 8x6 crops one row and column,
	// from the end with SAME_UPPER and from the start otherwise.
	for autoPad, pads := range map[string][]int64{"SAME_UPPER": {0, 0, 1, 1}, "NOTSET": {1, 1, 0, 0}} {
		got, err := callKernel(t, "ConvTranspose", 11, []*ir.Tensor{x, w, b}, 1, ir.AttrS("auto_pad", autoPad),
			ir.AttrIs("strides", 3, 2), ir.AttrIs("output_shape", 8, 6))
		require.NoError(t, err)
		want, err := callKernel(t, "ConvTranspose", 11, []*ir.Tensor{x, w, b}, 1, ir.AttrIs("pads", pads...), ir.AttrIs("strides", 3, 2))
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 2, 8, 6}, got[0].Dims, autoPad)
		assertClose(t, Float64s(want[0]), Float64s(got[0]), 0, 0, autoPad)
	}
	// A larger output than the full one extends it with bias-only positions.
	got, err := callKernel(t, "ConvTranspose", 11, []*ir.Tensor{x, w, b}, 1, ir.AttrIs("strides", 3, 2), ir.AttrIs("output_shape", 10, 8))
	require.NoError(t, err)
	full, err := callKernel(t, "ConvTranspose", 11, []*ir.Tensor{x, w, b}, 1, ir.AttrIs("strides", 3, 2))
	require.NoError(t, err)
	g, f, bias := Float64s(got[0]), Float64s(full[0]), Float64s(b)
	for m := range 2 {
		for h := range 10 {
			for x := range 8 {
				want := bias[m]
				if h < 9 && x < 7 {
					want = f[(m*9+h)*7+x]
				}
				assert.Equal(t, want, g[(m*10+h)*8+x])
			}
		}
	}
}

func TestConvErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ins    []ir.Type
		attrs  []*ir.Attribute
		errMsg string
	}{
		{"channels", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 2, 3, 3)}, nil, "input has 3 channels"},
		{"group split", []ir.Type{tt(ir.Float32, 1, 4, 8, 8), tt(ir.Float32, 3, 2, 3, 3)}, []*ir.Attribute{ir.AttrI("group", 2)}, "do not split"},
		{"rank", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3)}, nil, "weights have rank 3"},
		{"too small", []ir.Type{tt(ir.Float32, 1, 3, 2, 8), tt(ir.Float32, 4, 3, 3, 3)}, nil, "wider than the padded input"},
		{"strides length", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3, 3)}, []*ir.Attribute{ir.AttrIs("strides", 1)}, "strides has 1 values"},
		{"zero stride", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3, 3)}, []*ir.Attribute{ir.AttrIs("strides", 1, 0)}, "stride 0"},
		{"auto_pad", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3, 3)}, []*ir.Attribute{ir.AttrS("auto_pad", "FULL")}, "unknown auto_pad"},
		{"kernel_shape", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3, 3)}, []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 2)}, "differs from the weights"},
		{"dtypes", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float64, 4, 3, 3, 3)}, nil, "input 0 is float, input 1 double"},
		{"bias", []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 3, 3, 3), tt(ir.Float32, 5)}, nil, "bias has 5 elements"},
	} {
		_, err := callInfer("Conv", 11, tc.ins, nil, 1, tc.attrs...)
		assert.ErrorContains(t, err, tc.errMsg, tc.name)
	}
	_, err := callInfer("ConvTranspose", 11, []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 4, 2, 3, 3)}, nil, 1)
	assert.ErrorContains(t, err, "input has 3 channels, the weights 4")
	_, err = callInfer("ConvTranspose", 11, []ir.Type{tt(ir.Float32, 1, 3, 8, 8), tt(ir.Float32, 3, 2, 3, 3)}, nil, 1, ir.AttrIs("output_shape", 1, 2, 3))
	assert.ErrorContains(t, err, "output_shape [1 2 3] for 2 spatial axes")
	// The kernels run 1-3 spatial axes and say so for more.
	rng := rand.New(rand.NewPCG(1, 1))
	_, err = callKernel(t, "Conv", 11, []*ir.Tensor{randTensor(rng, ir.Float32, 1, 1, 2, 2, 2, 2), randTensor(rng, ir.Float32, 1, 1, 1, 1, 1, 1)}, 1)
	assert.ErrorContains(t, err, "1 to 3 spatial axes")
}

func TestConvShapesGolden(t *testing.T) {
	f := ir.Float32
	checkShapeGolden(t, "conv", []shapeCase{
		{op: "Conv", opset: 11, ins: []ir.Type{tt(f, 1, 3, 224, 224), tt(f, 64, 3, 7, 7)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 3, 3, 3, 3)}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 64, "H", "W"), tt(f, 64, 64, 3, 3), tt(f, 64)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrS("auto_pad", "SAME_UPPER")}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 64, "H", 56), tt(f, 128, 64, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrS("auto_pad", "SAME_LOWER"), ir.AttrIs("strides", 2, 2)}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 32, 10), sym(f, 16, 8, "K")}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("group", 4)}},
		{op: "Conv", opset: 11, ins: []ir.Type{ir.TensorType(f, ir.Shape{}), tt(f, 8, 3, 3, 3, 3)}, nOut: 1},
		{op: "Conv", opset: 22, ins: []ir.Type{tt(ir.BFloat16, 2, 4, 9, 9, 9), tt(ir.BFloat16, 4, 1, 3, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("group", 4), ir.AttrIs("dilations", 2, 2, 2), ir.AttrS("auto_pad", "VALID")}},
		{op: "Conv", opset: 11, ins: []ir.Type{tt(f, 1, 3, 8, 8), tt(f, 4, 2, 3, 3)}, nOut: 1},
		{op: "Conv", opset: 11, ins: []ir.Type{tt(f, 1, 3, 2, 8), tt(f, 4, 3, 3, 3)}, nOut: 1},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{tt(f, 1, 8, 7, 7), tt(f, 8, 4, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrIs("output_padding", 1, 1)}},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{sym(f, "N", 8, "H", 5), tt(f, 8, 2, 3, 3), tt(f, 4)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrI("group", 2), ir.AttrS("auto_pad", "SAME_UPPER"), ir.AttrIs("strides", 2, 2)}},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{sym(f, "N", 1, "H", "W"), tt(f, 1, 2, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("output_shape", 10, 8), ir.AttrIs("strides", 3, 2)}},
		{op: "ConvTranspose", opset: 22, ins: []ir.Type{tt(ir.BFloat16, 1, 2, 5), tt(ir.BFloat16, 2, 3, 4)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("dilations", 2), ir.AttrIs("pads", 1, 2)}},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{tt(f, 1, 2, 5, 5), tt(f, 3, 3, 3, 3)}, nOut: 1},
		// Symbolic spatial dims: the output sizes as floor divisions.
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 3, "H", "W"), tt(f, 64, 3, 7, 7)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 3, 3, 3, 3)}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 8, "H", "W"), tt(f, 8, 8, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("dilations", 2, 3), ir.AttrIs("strides", 1, 2)}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 8, "(H + 1)//2"), tt(f, 8, 8, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("strides", 2), ir.AttrIs("pads", 1, 1)}},
		{op: "Conv", opset: 11, ins: []ir.Type{sym(f, "N", 8, "L"), tt(f, 4, 8, 5)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("auto_pad", "VALID"), ir.AttrIs("strides", 3)}},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{sym(f, "N", 8, "H", "W"), tt(f, 8, 4, 3, 3)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrIs("output_padding", 1, 0)}},
		{op: "ConvTranspose", opset: 11, ins: []ir.Type{sym(f, "N", 8, "L"), tt(f, 8, 4, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("auto_pad", "VALID"), ir.AttrIs("strides", 2)}},
	})
}

// BenchmarkConvResNet3x3 is a ResNet-50 stage-1 3x3 convolution (64 to 64
// channels over 56x56, pad 1): 116 MMAC.
func BenchmarkConvResNet3x3(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, w := randTensor(rng, ir.Float32, 1, 64, 56, 56), randTensor(rng, ir.Float32, 64, 64, 3, 3)
	s, err := Lookup("", "Conv", 11)
	require.NoError(b, err)
	n := &ir.Node{OpType: "Conv", Inputs: make([]*ir.Value, 2), Outputs: make([]*ir.Value, 1),
		Attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1)}}
	b.SetBytes(64 * 64 * 9 * 56 * 56) // one "byte" per multiply-add: MB/s reads as MMAC/s
	for b.Loop() {
		require.NoError(b, s.Run(NewKernelContext(s, n, 11, []*ir.Tensor{x, w})))
	}
}
