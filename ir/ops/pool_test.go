package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// naivePool applies a pooling window over n-d coordinates with explicit
// pads: each output gets fold of the taps inside the input, and the count
// of taps inside the input (or, with includePad, inside the padded input).
// out gives the output spatial dims, so ceil_mode cases can be checked.
func naivePool(x []float64, xd, out, kernel, strides, dil, pads []int64, includePad bool, fold func(vals []float64, count int) float64) []float64 {
	n := len(kernel)
	yd := append([]int64{xd[0], xd[1]}, out...)
	y := make([]float64, ir.Product(yd))
	eachCoord(yd, func(o []int64) {
		var vals []float64
		count := 0
		eachCoord(kernel, func(k []int64) {
			xc, inside, padded := []int64{o[0], o[1]}, true, true
			for i := range n {
				p := o[2+i]*strides[i] + k[i]*dil[i] - pads[i]
				inside = inside && p >= 0 && p < xd[2+i]
				padded = padded && p >= -pads[i] && p < xd[2+i]+pads[n+i]
				xc = append(xc, p)
			}
			if inside {
				vals = append(vals, x[flatAt(xd, xc)])
			}
			if inside || includePad && padded {
				count++
			}
		})
		y[flatAt(yd, o)] = fold(vals, count)
	})
	return y
}

func naiveAvg(vals []float64, count int) float64 {
	var s float64
	for _, v := range vals {
		s += v
	}
	return s / float64(count)
}

func naiveMax(vals []float64, _ int) float64 {
	m := math.Inf(-1)
	for _, v := range vals {
		m = math.Max(m, v)
	}
	return m
}

type poolCase struct {
	name                          string
	xd, out, kernel, strides, dil []int64
	pads                          []int64
	ceil, includePad              bool
}

var poolCases = []poolCase{
	{"2d strides pads", []int64{2, 3, 7, 6}, []int64{4, 3}, []int64{3, 2}, []int64{2, 2}, []int64{1, 1}, []int64{1, 0, 1, 1}, false, false},
	{"2d count_include_pad", []int64{1, 2, 5, 5}, []int64{5, 5}, []int64{3, 3}, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, false, true},
	{"1d dilations", []int64{1, 2, 11}, []int64{3}, []int64{3}, []int64{3}, []int64{2}, []int64{0, 0}, false, false},
	{"3d", []int64{1, 2, 4, 5, 6}, []int64{2, 2, 3}, []int64{2, 3, 2}, []int64{2, 2, 2}, []int64{1, 1, 1}, []int64{0, 1, 0, 0, 0, 0}, false, false},
	// ceil_mode: 5 wide, kernel 2, stride 2 gives a third window that
	// overhangs the end.
	{"ceil overhang", []int64{1, 1, 5, 5}, []int64{3, 3}, []int64{2, 2}, []int64{2, 2}, []int64{1, 1}, []int64{0, 0, 0, 0}, true, false},
	// The last window (taps 5, 6, 7) reads one input, one end-pad tap and
	// one beyond the padding: count_include_pad counts two.
	{"ceil include pad", []int64{1, 1, 6, 6}, []int64{4, 4}, []int64{3, 3}, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, true, true},
	// 6 wide, kernel 2, stride 3, end pad 1: a third window would start
	// at the end pad and see no input, so it is dropped.
	{"ceil drops padding-only window", []int64{1, 1, 6, 6}, []int64{2, 2}, []int64{2, 2}, []int64{3, 3}, []int64{1, 1}, []int64{0, 0, 1, 1}, true, false},
}

func (p poolCase) attrs(withDilations bool) []*ir.Attribute {
	a := []*ir.Attribute{ir.AttrIs("kernel_shape", p.kernel...), ir.AttrIs("strides", p.strides...), ir.AttrIs("pads", p.pads...)}
	if p.ceil {
		a = append(a, ir.AttrI("ceil_mode", 1))
	}
	if withDilations {
		a = append(a, ir.AttrIs("dilations", p.dil...))
	}
	return a
}

func TestAveragePoolAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range poolCases {
		t.Run(tc.name, func(t *testing.T) {
			x := randTensor(rng, ir.Float64, tc.xd...)
			want := naivePool(Float64s(x), tc.xd, tc.out, tc.kernel, tc.strides, tc.dil, tc.pads, tc.includePad, naiveAvg)
			attrs := tc.attrs(true)
			if tc.includePad {
				attrs = append(attrs, ir.AttrI("count_include_pad", 1))
			}
			out, err := callKernel(t, "AveragePool", 19, []*ir.Tensor{x}, 1, attrs...)
			require.NoError(t, err)
			assert.Equal(t, append([]int64{tc.xd[0], tc.xd[1]}, tc.out...), out[0].Dims)
			assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12)
		})
	}
	// Before v19 AveragePool had no dilations, before v10 no ceil_mode.
	x := randTensor(rng, ir.Float32, 1, 1, 4, 4)
	_, err := callKernel(t, "AveragePool", 11, []*ir.Tensor{x}, 1, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("dilations", 2, 2))
	assert.ErrorContains(t, err, `unknown attribute "dilations"`)
	_, err = callKernel(t, "AveragePool", 7, []*ir.Tensor{x}, 1, ir.AttrIs("kernel_shape", 2, 2), ir.AttrI("ceil_mode", 1))
	assert.ErrorContains(t, err, `unknown attribute "ceil_mode"`)
}

func TestMaxPoolAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range poolCases {
		t.Run(tc.name, func(t *testing.T) {
			x := randTensor(rng, ir.Float64, tc.xd...)
			xv := Float64s(x)
			want := naivePool(xv, tc.xd, tc.out, tc.kernel, tc.strides, tc.dil, tc.pads, false, naiveMax)
			out, err := callKernel(t, "MaxPool", 12, []*ir.Tensor{x}, 2, tc.attrs(true)...)
			require.NoError(t, err)
			assertClose(t, want, Float64s(out[0]), 0, 0)
			// The indices point at the maxima in the flattened input.
			for i, at := range ir.Data[int64](out[1]) {
				assert.Equal(t, want[i], xv[at], "index %d", i)
			}
		})
	}
}

func TestMaxPoolIndicesColumnMajor(t *testing.T) {
	// x[c, h, w] = 100c + 10h + w, so each window's maximum is its last
	// tap; with storage_order=1 the index of (h, w) in plane c is
	// c·H·W + h + w·H.
	const C, H, W = 2, 4, 3
	x := make([]float32, C*H*W)
	for i := range x {
		x[i] = float32(100*(i/(H*W)) + 10*(i/W%H) + i%W)
	}
	out, err := callKernel(t, "MaxPool", 8, []*ir.Tensor{ir.FromSlice(ir.Float32, []int64{1, C, H, W}, x)}, 2,
		ir.AttrIs("kernel_shape", 2, 2), ir.AttrI("storage_order", 1))
	require.NoError(t, err)
	require.Equal(t, []int64{1, C, H - 1, W - 1}, out[1].Dims)
	idx := ir.Data[int64](out[1])
	for c := range C {
		for h := range H - 1 {
			for w := range W - 1 {
				assert.Equal(t, int64(c*H*W+(h+1)+(w+1)*H), idx[(c*(H-1)+h)*(W-1)+w])
			}
		}
	}
}

func TestPoolTypes(t *testing.T) {
	x := ir.FromSlice(ir.Int8, []int64{1, 1, 2, 3}, []int8{-128, 5, -7, 127, -1, 3})
	out, err := callKernel(t, "MaxPool", 12, []*ir.Tensor{x}, 1, ir.AttrIs("kernel_shape", 2, 2))
	require.NoError(t, err)
	assert.Equal(t, []int8{127, 5}, ir.Data[int8](out[0]))
	s, err := Lookup("", "MaxPool", 11)
	require.NoError(t, err)
	assert.False(t, s.SupportsType(ir.Int8), "int8 MaxPool arrived in opset 12")
	rng := rand.New(rand.NewPCG(15, 16))
	xb := randTensor(rng, ir.BFloat16, 1, 2, 4, 4)
	out, err = callKernel(t, "AveragePool", 22, []*ir.Tensor{xb}, 1, ir.AttrIs("kernel_shape", 4, 4))
	require.NoError(t, err)
	g, err := callKernel(t, "GlobalAveragePool", 22, []*ir.Tensor{xb}, 1)
	require.NoError(t, err)
	assert.Equal(t, ir.Data[uint16](out[0]), ir.Data[uint16](g[0]), "a whole-plane AveragePool is a GlobalAveragePool")
}

func TestGlobalPools(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, xd := range [][]int64{{2, 3, 5}, {2, 3, 4, 5}, {1, 2, 3, 2, 4}} {
		x := randTensor(rng, ir.Float64, xd...)
		xv, plane := Float64s(x), int(ir.Product(xd[2:]))
		avg, err := callKernel(t, "GlobalAveragePool", 1, []*ir.Tensor{x}, 1)
		require.NoError(t, err)
		mx, err := callKernel(t, "GlobalMaxPool", 1, []*ir.Tensor{x}, 1)
		require.NoError(t, err)
		for p := range int(xd[0] * xd[1]) {
			vals := xv[p*plane : (p+1)*plane]
			assert.InDelta(t, naiveAvg(vals, plane), Float64s(avg[0])[p], 1e-12)
			assert.Equal(t, naiveMax(vals, 0), Float64s(mx[0])[p])
		}
	}
}

func TestPoolShapesGolden(t *testing.T) {
	f := ir.Float32
	k := func(v ...int64) *ir.Attribute { return ir.AttrIs("kernel_shape", v...) }
	checkShapeGolden(t, "pool", []shapeCase{
		{op: "MaxPool", opset: 12, ins: []ir.Type{tt(f, 1, 64, 112, 112)}, nOut: 1,
			attrs: []*ir.Attribute{k(3, 3), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{op: "MaxPool", opset: 12, ins: []ir.Type{sym(f, "N", "C", "H", "W")}, nOut: 2,
			attrs: []*ir.Attribute{k(3, 3), ir.AttrS("auto_pad", "SAME_UPPER")}},
		{op: "MaxPool", opset: 12, ins: []ir.Type{sym(f, "N", 3, 32)}, nOut: 2,
			attrs: []*ir.Attribute{k(5), ir.AttrIs("dilations", 2), ir.AttrIs("strides", 3), ir.AttrI("ceil_mode", 1)}},
		{op: "MaxPool", opset: 1, ins: []ir.Type{tt(f, 1, 1, 5, 5)}, nOut: 1, attrs: []*ir.Attribute{k(2, 2)}},
		{op: "MaxPool", opset: 1, ins: []ir.Type{tt(f, 1, 1, 5, 5)}, nOut: 2, attrs: []*ir.Attribute{k(2, 2)}},
		{op: "MaxPool", opset: 12, ins: []ir.Type{tt(f, 1, 1, 5, 5)}, nOut: 1},
		{op: "MaxPool", opset: 12, ins: []ir.Type{tt(f, 1, 1, 5)}, nOut: 1, attrs: []*ir.Attribute{k(2, 2)}},
		{op: "AveragePool", opset: 19, ins: []ir.Type{tt(ir.Float16, 1, 1, 5, 5)}, nOut: 1,
			attrs: []*ir.Attribute{k(2, 2), ir.AttrIs("strides", 2, 2), ir.AttrI("ceil_mode", 1), ir.AttrI("count_include_pad", 1)}},
		{op: "AveragePool", opset: 11, ins: []ir.Type{ir.TensorType(f, ir.Shape{})}, nOut: 1, attrs: []*ir.Attribute{k(3, 3, 3)}},
		{op: "AveragePool", opset: 11, ins: []ir.Type{sym(f, "N", 8, 10, 10, 10)}, nOut: 1,
			attrs: []*ir.Attribute{k(3, 3, 3), ir.AttrS("auto_pad", "VALID"), ir.AttrIs("strides", 2, 2, 2)}},
		{op: "AveragePool", opset: 11, ins: []ir.Type{tt(f, 1, 1, 2, 2)}, nOut: 1, attrs: []*ir.Attribute{k(3, 3)}},
		{op: "GlobalAveragePool", opset: 1, ins: []ir.Type{sym(f, "N", 2048, 7, 7)}, nOut: 1},
		{op: "GlobalMaxPool", opset: 22, ins: []ir.Type{sym(ir.BFloat16, "N", "C", "D", 3, 4)}, nOut: 1},
		{op: "GlobalMaxPool", opset: 1, ins: []ir.Type{tt(f, 5)}, nOut: 1},
		// Symbolic spatial dims.
		{op: "MaxPool", opset: 12, ins: []ir.Type{sym(f, "N", 64, "H", "W")}, nOut: 1,
			attrs: []*ir.Attribute{k(3, 3), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{op: "MaxPool", opset: 12, ins: []ir.Type{sym(f, "N", 64, "H", "W")}, nOut: 1,
			attrs: []*ir.Attribute{k(3, 3), ir.AttrIs("strides", 2, 2), ir.AttrI("ceil_mode", 1)}},
		{op: "MaxPool", opset: 12, ins: []ir.Type{sym(f, "N", 64, "H", "W")}, nOut: 1,
			attrs: []*ir.Attribute{k(2, 2), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 0, 0, 1, 1), ir.AttrI("ceil_mode", 1)}},
		{op: "AveragePool", opset: 19, ins: []ir.Type{sym(f, "N", 8, "L")}, nOut: 1,
			attrs: []*ir.Attribute{k(4), ir.AttrIs("strides", 4), ir.AttrS("auto_pad", "SAME_LOWER")}},
		{op: "GlobalAveragePool", opset: 1, ins: []ir.Type{sym(f, "N", 16, "(H + 7)//8", "(W + 7)//8")}, nOut: 1},
	})
}
