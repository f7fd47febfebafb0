package cpu

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/llir/llvm/ir/value"
	"github.com/stretchr/testify/assert"

	"github.com/kiln-ml/kiln/ir"
)

// TestConvShapes covers the convolution and pooling kernels' edges: rows
// wider than a vector, odd sizes, strides 1-3, dilation, asymmetric
// padding, groups, ceil mode.
func TestConvShapes(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	pads := func(p ...int64) *ir.Attribute { return ir.AttrIs("pads", p...) }
	cases := []opCase{
		{name: "dw_wide", op: "Conv", inputs: [][]int64{{1, 5, 9, 37}}, consts: []*ir.Tensor{w(5, 1, 3, 3), w(5)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 5)}},
		{name: "dw_s2_odd", op: "Conv", inputs: [][]int64{{2, 3, 11, 35}}, consts: []*ir.Tensor{w(3, 1, 3, 3), w(3)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 3), ir.AttrIs("strides", 2, 2)}},
		{name: "dw_s3", op: "Conv", inputs: [][]int64{{1, 2, 10, 40}}, consts: []*ir.Tensor{w(2, 1, 3, 3)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 2), ir.AttrIs("strides", 3, 3)}},
		{name: "dw_5x5_dil", op: "Conv", inputs: [][]int64{{1, 4, 12, 20}}, consts: []*ir.Tensor{w(4, 1, 5, 5), w(4)}, attrs: []*ir.Attribute{pads(4, 3, 2, 1), ir.AttrI("group", 4), ir.AttrIs("dilations", 2, 2)}},
		{name: "dw_mult", op: "Conv", inputs: [][]int64{{1, 3, 7, 18}}, consts: []*ir.Tensor{w(6, 1, 3, 3), w(6)}, attrs: []*ir.Attribute{pads(0, 1, 2, 1), ir.AttrI("group", 3)}},
		// Rows narrower than a vector at stride 1: flat planes (masked
		// taps across rows; fewer output rows than input rows; groups of
		// two channels).
		{name: "dw_flat_5x5", op: "Conv", inputs: [][]int64{{1, 6, 7, 7}}, consts: []*ir.Tensor{w(6, 1, 5, 5), w(6)}, attrs: []*ir.Attribute{pads(2, 2, 2, 2), ir.AttrI("group", 6)}},
		{name: "dw_flat_dil_asym", op: "Conv", inputs: [][]int64{{2, 4, 9, 11}}, consts: []*ir.Tensor{w(4, 1, 3, 3), w(4)}, attrs: []*ir.Attribute{pads(0, 1, 2, 3), ir.AttrI("group", 4), ir.AttrIs("dilations", 2, 2)}},
		{name: "dw_narrow_tall", op: "Conv", inputs: [][]int64{{1, 3, 40, 9}}, consts: []*ir.Tensor{w(3, 1, 3, 3), w(3)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 3)}}, // over 16 vectors: rows
		{name: "grouped_flat", op: "Conv", inputs: [][]int64{{1, 6, 5, 13}}, consts: []*ir.Tensor{w(6, 2, 3, 3)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 3)}},
		{name: "grouped_wide", op: "Conv", inputs: [][]int64{{1, 8, 6, 150}}, consts: []*ir.Tensor{w(4, 4, 3, 3), w(4)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrI("group", 2)}},
		{name: "wino", op: "Conv", inputs: [][]int64{{2, 16, 13, 30}}, consts: []*ir.Tensor{w(20, 16, 3, 3), w(20)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1)}},
		{name: "wino_wide_valid", op: "Conv", inputs: [][]int64{{1, 17, 16, 75}}, consts: []*ir.Tensor{w(33, 17, 3, 3)}},
		// F(2×2,3×3): planes too small for F(4×4), odd sizes, a partial
		// last tile row and column, two images.
		{name: "wino2_7x7", op: "Conv", inputs: [][]int64{{1, 32, 7, 7}}, consts: []*ir.Tensor{w(24, 32, 3, 3), w(24)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1)}},
		{name: "wino2_odd", op: "Conv", inputs: [][]int64{{2, 16, 5, 9}}, consts: []*ir.Tensor{w(16, 16, 3, 3), w(16)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1)}},
		{name: "wino2_valid", op: "Conv", inputs: [][]int64{{1, 20, 9, 11}}, consts: []*ir.Tensor{w(18, 20, 3, 3)}},
		{name: "wino_asym", op: "Conv", inputs: [][]int64{{1, 24, 14, 14}}, consts: []*ir.Tensor{w(16, 24, 3, 3), w(16)}, attrs: []*ir.Attribute{pads(0, 1, 2, 1)}},
		{name: "maxpool_wide", op: "MaxPool", inputs: [][]int64{{1, 3, 21, 45}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), pads(1, 1, 1, 1)}},
		{name: "maxpool_ceil_wide", op: "MaxPool", inputs: [][]int64{{1, 2, 20, 36}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), ir.AttrI("ceil_mode", 1)}},
		{name: "avgpool_wide", op: "AveragePool", inputs: [][]int64{{1, 2, 9, 35}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 2), pads(1, 1, 1, 0)}},
		{name: "avgpool_incpad_s3", op: "AveragePool", inputs: [][]int64{{1, 2, 9, 50}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 3, 3), pads(1, 1, 1, 1), ir.AttrI("count_include_pad", 1)}},
		// Banded im2col: a stem (7×7 stride 2, a short last band), two
		// images, and dilated asymmetric padding.
		{name: "banded_stem", op: "Conv", inputs: [][]int64{{2, 3, 130, 130}}, consts: []*ir.Tensor{w(4, 3, 7, 7), w(4)}, attrs: []*ir.Attribute{pads(3, 3, 3, 3), ir.AttrIs("strides", 2, 2)}},
		{name: "banded_dil", op: "Conv", inputs: [][]int64{{1, 2, 66, 90}}, consts: []*ir.Tensor{w(5, 2, 3, 3)}, attrs: []*ir.Attribute{pads(0, 2, 3, 1), ir.AttrIs("dilations", 2, 2)}},
		{name: "banded_short_last", op: "Conv", inputs: [][]int64{{1, 72, 57, 57}}, consts: []*ir.Tensor{w(13, 72, 3, 3)}, attrs: []*ir.Attribute{pads(1, 1, 1, 1), ir.AttrIs("strides", 2, 2)}},
		// Stride 2 outside the bands: im2col rows from even lanes of pairs
		// of masked loads (odd and even widths, asymmetric pads, tails).
		{name: "im2col_s2_asym", op: "Conv", inputs: [][]int64{{1, 8, 13, 37}}, consts: []*ir.Tensor{w(5, 8, 3, 3), w(5)}, attrs: []*ir.Attribute{pads(0, 1, 1, 0), ir.AttrIs("strides", 2, 2)}},
		{name: "im2col_s2_5x5_even", op: "Conv", inputs: [][]int64{{2, 3, 12, 40}}, consts: []*ir.Tensor{w(4, 3, 5, 5)}, attrs: []*ir.Attribute{pads(2, 2, 2, 2), ir.AttrIs("strides", 2, 2)}},
		// One pixel, weights of 64 KB and more: threads split the rows
		// (a squeeze-excitation's 1×1 convs).
		{name: "gemv_1x1_squeeze", op: "Conv", inputs: [][]int64{{1, 1152, 1, 1}}, consts: []*ir.Tensor{w(48, 1152, 1, 1), w(48)}},
		{name: "gemv_1x1_excite", op: "Conv", inputs: [][]int64{{1, 48, 1, 1}}, consts: []*ir.Tensor{w(1152, 48, 1, 1), w(1152)}},
		{name: "grouped_s2", op: "Conv", inputs: [][]int64{{1, 6, 9, 21}}, consts: []*ir.Tensor{w(9, 2, 3, 2)}, attrs: []*ir.Attribute{pads(1, 0, 1, 1), ir.AttrI("group", 3), ir.AttrIs("strides", 2, 2)}},
	}
	checkCases(t, r, cases)
}

// TestResidualEpilogue checks that Conv → Add(residual) → Relu and a
// depthwise Conv → Add (no activation) each fold into the convolution's
// store.
func TestResidualEpilogue(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	g := ir.NewGraph("residual")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 8, 9, 9)))
	w1 := g.AddInitializer("w1", randTensor(r, 8, 8, 3, 3))
	b1 := g.AddInitializer("b1", randTensor(r, 8))
	h := g.Apply("Conv", []*ir.Value{x, w1, b1}, ir.AttrIs("pads", 1, 1, 1, 1))
	h = g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{x, h})})
	w2 := g.AddInitializer("w2", randTensor(r, 8, 1, 3, 3))
	h2 := g.Apply("Conv", []*ir.Value{h, w2}, ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 8))
	y := g.Apply("Add", []*ir.Value{h2, h})
	y.Name = "y"
	g.SetOutputs(y)
	res := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, 8, 9, 9)}, 1e-5)
	for _, k := range res.Kernels {
		if strings.Contains(k, "Add") || strings.Contains(k, "Relu") {
			t.Errorf("kernel %s: the Add/Relu should be fused into the convolutions (kernels %v)", k, res.Kernels)
		}
	}
}

// TestBandedEpilogue checks the residual Add and Relu fused into a banded
// convolution read the residual at each band's offset.
func TestBandedEpilogue(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	g := ir.NewGraph("banded")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 3, 130, 130)))
	res := g.AddInput("res", ir.TensorType(ir.Float32, ir.S(1, 12, 65, 65)))
	h := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 12, 3, 3, 3)), g.AddInitializer("b", randTensor(r, 12))},
		ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrIs("strides", 2, 2))
	y := g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{h, res})})
	y.Name = "y"
	g.SetOutputs(y)
	out := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, 3, 130, 130), "res": randTensor(r, 1, 12, 65, 65)}, 1e-5)
	if kernelsWith(out, "ConvBanded") != 1 || len(out.Kernels) != 1 {
		t.Errorf("kernels %v, want one ConvBanded with the Add and Relu fused", out.Kernels)
	}
}

// TestTurnedColumns covers GEMM tiles whose last few columns are computed
// turned (rows in the lanes): 1×1 convolutions and a conv-dw group on 7×7
// planes (49 pixels: three vectors and one turned column), with bias,
// residual and activation; a Gemm whose bias runs along the columns; and
// a MatMul whose rows come from an activation (not a packed panel).
func TestTurnedColumns(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	cases := []opCase{
		{name: "1x1_7x7", op: "Conv", inputs: [][]int64{{1, 40, 7, 7}}, consts: []*ir.Tensor{w(30, 40, 1, 1), w(30)}},
		// 14×14: four column tiles of three vectors and a turned column,
		// not three of four vectors and one of 4 columns.
		{name: "1x1_14x14", op: "Conv", inputs: [][]int64{{1, 24, 14, 14}}, consts: []*ir.Tensor{w(40, 24, 1, 1), w(40)}},
		{name: "1x1_14x14_batch2", op: "Conv", inputs: [][]int64{{2, 70, 14, 14}}, consts: []*ir.Tensor{w(33, 70, 1, 1)}},
		{name: "1x1_6x3_batch2", op: "Conv", inputs: [][]int64{{2, 24, 6, 3}}, consts: []*ir.Tensor{w(20, 24, 1, 1)}},
		{name: "gemm_18_cols", op: "Gemm", inputs: [][]int64{{5, 33}}, consts: []*ir.Tensor{w(18, 33), w(18)}, attrs: []*ir.Attribute{ir.AttrI("transB", 1)}},
		{name: "matmul_50_cols", op: "MatMul", inputs: [][]int64{{11, 30}}, consts: []*ir.Tensor{w(30, 50)}},
	}
	checkCases(t, r, cases)
	t.Run("expand_dw_residual_relu_7x7", func(t *testing.T) {
		g := ir.NewGraph("turned")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 24, 7, 7)))
		h := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("we", w(72, 24, 1, 1)), g.AddInitializer("be", w(72))})
		h = g.Apply("Clip", []*ir.Value{h, g.AddInitializer("lo", ir.Scalar(ir.Float32, float32(0))), g.AddInitializer("hi", ir.Scalar(ir.Float32, float32(6)))})
		h = g.Apply("Conv", []*ir.Value{h, g.AddInitializer("wd", w(72, 1, 3, 3)), g.AddInitializer("bd", w(72))}, ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 72))
		h = g.Apply("Relu", []*ir.Value{h})
		h = g.Apply("Conv", []*ir.Value{h, g.AddInitializer("wp", w(24, 72, 1, 1)), g.AddInitializer("bp", w(24))})
		y := g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{x, h})})
		y.Name = "y"
		g.SetOutputs(y)
		res := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, 24, 7, 7)}, 1e-5)
		t.Logf("kernels %v", res.Kernels)
	})
}

// TestStreamedOperands covers the GEMM paths for operands that stream
// from beyond L2: a column operand too large for L2 with few column tiles
// (column tiles outermost), the K loop's prefetches of packed weights, of
// an unpacked 1×1 input whose rows lie a plane apart and of a packed B
// panel, and the residual rows a tile prefetches before its K loop.
func TestStreamedOperands(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	// 2304 × 196 floats (1.8 MB) in 4 column tiles, half of a 2 MiB L2:
	// columns outermost; 256 × 196 (200 KB) stays, rows outermost.
	assert.False(t, (&gemm{M: 16, N: 196, K: 2304, nv: 4, vl: 16, l2Share: 1 << 20}).rowsOuter())
	assert.True(t, (&gemm{M: 16, N: 196, K: 256, nv: 4, vl: 16, l2Share: 1 << 20}).rowsOuter())
	// 3136 columns (49 tiles): columns outermost, unless the tiles add a
	// residual.
	assert.False(t, (&gemm{M: 256, N: 3136, K: 64, nv: 4, vl: 16, l2Share: 1 << 20}).rowsOuter())
	residual := func(*kfn) value.Value { return nil }
	assert.True(t, (&gemm{M: 256, N: 3136, K: 64, nv: 4, vl: 16, l2Share: 1 << 20, add: residual}).rowsOuter())
	for in, want := range map[string]int64{"2048K\n": 2 << 20, "1M": 1 << 20, "512K": 512 << 10, "": 0, "x": 0, "-1K": 0} {
		assert.Equal(t, want, cacheSize(in), "cacheSize(%q)", in)
	}
	cases := []opCase{
		{name: "1x1_K2304_14x14", op: "Conv", inputs: [][]int64{{1, 2304, 14, 14}}, consts: []*ir.Tensor{w(16, 2304, 1, 1), w(16)}},
		{name: "matmul_packed_b_K130", op: "MatMul", inputs: [][]int64{{9, 130}}, consts: []*ir.Tensor{w(130, 70)}},
	}
	checkCases(t, r, cases)
	// Residual 1×1 convs in few column tiles (20×20) and in many (40×40,
	// rows outermost for the residual).
	for _, c := range []struct{ k, hw int64 }{{96, 20}, {64, 40}} {
		t.Run(fmt.Sprintf("1x1_K%d_%dx%d_residual_relu", c.k, c.hw, c.hw), func(t *testing.T) {
			g := ir.NewGraph("streamed")
			x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, c.k, c.hw, c.hw)))
			res := g.AddInput("res", ir.TensorType(ir.Float32, ir.S(1, 40, c.hw, c.hw)))
			h := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", w(40, c.k, 1, 1)), g.AddInitializer("b", w(40))})
			y := g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{h, res})})
			y.Name = "y"
			g.SetOutputs(y)
			out := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, c.k, c.hw, c.hw), "res": randTensor(r, 1, 40, c.hw, c.hw)}, 1e-5)
			assert.Equal(t, 1, kernelsWith(out, "Conv1x1"), "kernels %v", out.Kernels)
		})
	}
}

// TestSqueezeExcitationScale compiles a MobileNet block with a
// squeeze-excitation gate, which the conv-scale pass moves into the
// projection's weights: no step multiplies the block's tensor, and the
// result is the reference's at 1 and 2 threads.
func TestSqueezeExcitationScale(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	silu := func(g *ir.Graph, v *ir.Value) *ir.Value {
		return g.Apply("Mul", []*ir.Value{v, g.Apply("Sigmoid", []*ir.Value{v})})
	}
	g := ir.NewGraph("se")
	in := g.AddInput("in", ir.TensorType(ir.Float32, ir.S(1, 16, 14, 14)))
	e := silu(g, g.Apply("Conv", []*ir.Value{in, g.AddInitializer("we", w(64, 16, 1, 1)), g.AddInitializer("be", w(64))}))
	x := silu(g, g.Apply("Conv", []*ir.Value{e, g.AddInitializer("wd", w(64, 1, 3, 3)), g.AddInitializer("bd", w(64))},
		ir.AttrI("group", 64), ir.AttrIs("pads", 1, 1, 1, 1)))
	s := g.Apply("GlobalAveragePool", []*ir.Value{x})
	s = g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{s, g.AddInitializer("w1", w(8, 64, 1, 1)), g.AddInitializer("b1", w(8))})})
	s = g.Apply("Sigmoid", []*ir.Value{g.Apply("Conv", []*ir.Value{s, g.AddInitializer("w2", w(64, 8, 1, 1)), g.AddInitializer("b2", w(64))})})
	y := g.Apply("Conv", []*ir.Value{g.Apply("Mul", []*ir.Value{x, s}), g.AddInitializer("wp", w(24, 64, 1, 1)), g.AddInitializer("bp", w(24))})
	y.Name = "y"
	g.SetOutputs(y)
	m := ir.NewModel(g, 13)
	checkO2(t, m, map[string]*ir.Tensor{"in": randTensor(r, 1, 16, 14, 14)}, 1e-5) // optimizes m in place
	for _, n := range m.Graph.Nodes {
		if n.OpType == "Mul" {
			assert.NotContains(t, n.Inputs, x, "%s still multiplies the block's tensor", n)
		}
	}
}

// TestWinogradPlanesApart: V's and M's matrices (one per transform point)
// lie an odd number of cache lines apart when their size is whole lines,
// so that a tile's 36 values, stored and loaded together, do not all map
// to one cache set (64 channels × 196 tiles: 784 lines, 785 apart).
func TestWinogradPlanesApart(t *testing.T) {
	for _, c := range []convGeom{
		{N: 1, C: 64, OC: 64, OH: 56, OW: 56},
		{N: 1, C: 128, OC: 256, OH: 28, OW: 28},
		{N: 2, C: 17, OC: 33, OH: 13, OW: 30},
	} {
		w := newWinoGeom(c, winoF4)
		for _, p := range []struct{ plane, floats int64 }{{w.vPlane, c.C * w.T}, {w.mPlane, c.OC * w.T}} {
			assert.GreaterOrEqual(t, p.plane, p.floats)
			assert.LessOrEqual(t, p.plane, p.floats+lineFloats)
			if p.plane%lineFloats == 0 {
				assert.Equal(t, int64(1), p.plane/lineFloats%2, "%+v: %d floats apart", c, p.plane)
			}
		}
	}
}
