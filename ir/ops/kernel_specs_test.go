package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// Direct tests of kernel_specs.go's resolutions, each against an oracle
// written here from the ONNX spec (formulas, brute-force counts) or
// against the reference kernel's own output.

// specContext is a kernel context for a node of op at opset with attrs,
// as a backend builds one to read a spec.
func specContext(t *testing.T, op string, opset int64, attrs ...*ir.Attribute) *KernelContext {
	t.Helper()
	s, err := Lookup("", op, opset)
	require.NoError(t, err)
	return NewKernelContext(s, &ir.Node{Name: op + "_node", OpType: op, Attrs: attrs}, opset, nil)
}

func TestGeluTanh(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randTensor(rng, ir.Float64, 16)
	exact := func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
	tanhForm := func(v float64) float64 {
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	for _, approx := range []string{"", "none", "tanh"} {
		var attrs []*ir.Attribute
		if approx != "" {
			attrs = append(attrs, ir.AttrS("approximate", approx))
		}
		tanh, err := specContext(t, "Gelu", 20, attrs...).GeluTanh()
		require.NoError(t, err, approx)
		assert.Equal(t, approx == "tanh", tanh, approx)
		// The reference kernel computes the form the spec names.
		out, err := callKernel(t, "Gelu", 20, []*ir.Tensor{x}, 1, attrs...)
		require.NoError(t, err)
		want := make([]float64, x.Len())
		for i, v := range Float64s(x) {
			want[i] = exact(v)
			if tanh {
				want[i] = tanhForm(v)
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12, approx)
	}
	_, err := specContext(t, "Gelu", 20, ir.AttrS("approximate", "erf")).GeluTanh()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"erf"`)
}

func TestBitShiftLeft(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	xs, shifts := make([]uint32, 12), make([]uint32, 12)
	for i := range xs {
		xs[i], shifts[i] = rng.Uint32(), uint32(rng.IntN(32))
	}
	x, y := ir.FromSlice(ir.Uint32, []int64{12}, xs), ir.FromSlice(ir.Uint32, []int64{12}, shifts)
	for _, dir := range []string{"LEFT", "RIGHT"} {
		left, err := specContext(t, "BitShift", 11, ir.AttrS("direction", dir)).BitShiftLeft()
		require.NoError(t, err)
		assert.Equal(t, dir == "LEFT", left)
		out, err := callKernel(t, "BitShift", 11, []*ir.Tensor{x, y}, 1, ir.AttrS("direction", dir))
		require.NoError(t, err)
		for i, got := range ir.Data[uint32](out[0]) {
			want := xs[i] >> shifts[i]
			if left {
				want = xs[i] << shifts[i]
			}
			assert.Equal(t, want, got, "%s: %d by %d", dir, xs[i], shifts[i])
		}
	}
	_, err := specContext(t, "BitShift", 11, ir.AttrS("direction", "left")).BitShiftLeft()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"left"`)
}

func TestGroupNormSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 20 {
		groups := int64(1 + rng.IntN(6))
		channels := groups * int64(1+rng.IntN(5))
		eps := float32(rng.Float64() * 1e-3)
		for _, opset := range []int64{18, 21} {
			s, err := specContext(t, "GroupNormalization", opset, ir.AttrI("num_groups", groups), ir.AttrF("epsilon", eps)).GroupNormSpec(channels)
			require.NoError(t, err)
			// ONNX: scale and bias per group at 18, per channel from 21.
			assert.Equal(t, &GroupNorm{Groups: groups, Epsilon: float64(eps), PerChannel: opset >= 21}, s)
		}
	}
	s, err := specContext(t, "GroupNormalization", 21, ir.AttrI("num_groups", 2)).GroupNormSpec(4)
	require.NoError(t, err)
	assert.InDelta(t, 1e-5, s.Epsilon, 1e-12, "epsilon's default")
	for _, bad := range []struct{ groups, channels int64 }{{3, 4}, {0, 4}, {-2, 4}} {
		_, err := specContext(t, "GroupNormalization", 21, ir.AttrI("num_groups", bad.groups)).GroupNormSpec(bad.channels)
		assert.Error(t, err, "%d groups of %d channels", bad.groups, bad.channels)
	}
}

// TestCenterCropPadShift holds the shift to the reference kernel: output
// i of a 1-D CenterCropPad is input i + shift, or 0 outside the input.
func TestCenterCropPadShift(t *testing.T) {
	for _, c := range []struct{ in, out, shift int64 }{
		{5, 5, 0}, {5, 3, 1}, {6, 3, 1}, {7, 4, 1}, {3, 6, -1}, {4, 7, -1}, {2, 7, -2}, {1, 1, 0},
	} {
		assert.Equal(t, c.shift, CenterCropPadShift(c.in, c.out), "%d to %d", c.in, c.out)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for range 30 {
		in, out := int64(1+rng.IntN(9)), int64(1+rng.IntN(9))
		x := randTensor(rng, ir.Float32, in)
		got, err := callKernel(t, "CenterCropPad", 18, []*ir.Tensor{x, i64s(out)}, 1)
		require.NoError(t, err)
		shift := CenterCropPadShift(in, out)
		xs := Float64s(x)
		for i, v := range Float64s(got[0]) {
			want := 0.0
			if src := int64(i) + shift; src >= 0 && src < in {
				want = xs[src]
			}
			assert.Equal(t, want, v, "%d to %d, output %d", in, out, i)
		}
	}
}

func TestWindowValues(t *testing.T) {
	// ONNX's window definitions, N the period: size when periodic, else
	// size - 1.
	forms := map[string]func(n, N float64) float64{
		"HannWindow": func(n, N float64) float64 { return math.Pow(math.Sin(math.Pi*n/N), 2) },
		"HammingWindow": func(n, N float64) float64 {
			const alpha = 25.0 / 46
			return alpha - (1-alpha)*math.Cos(2*math.Pi*n/N)
		},
		"BlackmanWindow": func(n, N float64) float64 {
			return 0.42 - 0.5*math.Cos(2*math.Pi*n/N) + 0.08*math.Cos(4*math.Pi*n/N)
		},
	}
	for op, form := range forms {
		for _, size := range []int64{0, 1, 2, 5, 16} {
			for _, periodic := range []int64{0, 1} {
				v, err := specContext(t, op, 17, ir.AttrI("periodic", periodic)).WindowValues(size)
				require.NoError(t, err)
				require.Len(t, v, int(size))
				period := float64(size)
				if periodic == 0 {
					period--
				}
				want := make([]float64, size)
				for n := range want {
					want[n] = form(float64(n), period)
				}
				// (A symmetric window of size 1 has a period of 0: NaN,
				// 0/0 as in ONNX's reference.)
				msg := fmt.Sprintf("%s size %d periodic %d", op, size, periodic)
				assertClose(t, want, v, 1e-12, 1e-12, msg)
				// The reference kernel outputs the same window.
				out, err := callKernel(t, op, 17, []*ir.Tensor{ir.Scalar(ir.Int64, size)}, 1, ir.AttrI("periodic", periodic))
				require.NoError(t, err)
				assertClose(t, v, Float64s(out[0]), 1e-6, 1e-7, msg+": kernel")
			}
		}
	}
	_, err := specContext(t, "HannWindow", 17).WindowValues(-1)
	assert.Error(t, err)
	_, err = specContext(t, "Relu", 14).WindowValues(4)
	assert.ErrorContains(t, err, "not a window function")
}

func TestAttentionSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 20 {
		b, kvHeads, group := int64(1+rng.IntN(3)), int64(1+rng.IntN(3)), int64(1+rng.IntN(3))
		qSeq, kvSeq, head, vHead, past := int64(1+rng.IntN(5)), int64(1+rng.IntN(5)), int64(1+rng.IntN(8)), int64(1+rng.IntN(8)), int64(rng.IntN(4))
		qHeads := kvHeads * group
		want := &Attention{Rank: 4, Batch: b, QHeads: qHeads, KVHeads: kvHeads, QSeq: qSeq, KVSeq: kvSeq, Head: head, VHead: vHead,
			Scale: 1 / math.Sqrt(float64(head)), Causal: true}
		pastDims := []int64{b, kvHeads, past, head}
		a, err := specContext(t, "Attention", 23, ir.AttrI("is_causal", 1)).AttentionSpec(
			[]int64{b, qHeads, qSeq, head}, []int64{b, kvHeads, kvSeq, head}, []int64{b, kvHeads, kvSeq, vHead}, pastDims)
		require.NoError(t, err)
		want.Past = past
		assert.Equal(t, want, a, "4-D")
		assert.Equal(t, past+kvSeq, a.Total())

		// The same as 3-D inputs [B, S, heads·head], with an explicit
		// scale and softcap.
		scale, softcap := float32(0.1+rng.Float64()), float32(rng.Float64())
		a, err = specContext(t, "Attention", 24, ir.AttrI("q_num_heads", qHeads), ir.AttrI("kv_num_heads", kvHeads),
			ir.AttrF("scale", scale), ir.AttrF("softcap", softcap), ir.AttrI("qk_matmul_output_mode", 2)).AttentionSpec(
			[]int64{b, qSeq, qHeads * head}, []int64{b, kvSeq, kvHeads * head}, []int64{b, kvSeq, kvHeads * vHead}, nil)
		require.NoError(t, err)
		want3 := *want
		want3.Rank, want3.Past, want3.Causal = 3, 0, false
		want3.Scale, want3.Softcap, want3.Mode = float64(scale), float64(softcap), 2
		assert.Equal(t, &want3, a, "3-D")
	}
	bad := []struct {
		name          string
		attrs         []*ir.Attribute
		q, k, v, past []int64
	}{
		{"ranks differ", nil, []int64{1, 2, 3, 4}, []int64{1, 2, 3}, []int64{1, 2, 3, 4}, nil},
		{"2-D", nil, []int64{2, 4}, []int64{2, 4}, []int64{2, 4}, nil},
		{"heads not a multiple", nil, []int64{1, 3, 2, 4}, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, nil},
		{"head sizes differ", nil, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 5}, []int64{1, 2, 2, 4}, nil},
		{"batches differ", nil, []int64{1, 2, 2, 4}, []int64{2, 2, 2, 4}, []int64{2, 2, 2, 4}, nil},
		{"3-D without heads", nil, []int64{1, 2, 8}, []int64{1, 2, 8}, []int64{1, 2, 8}, nil},
		{"3-D heads do not divide", []*ir.Attribute{ir.AttrI("q_num_heads", 3), ir.AttrI("kv_num_heads", 3)},
			[]int64{1, 2, 8}, []int64{1, 2, 8}, []int64{1, 2, 8}, nil},
		{"past does not fit", nil, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, []int64{1, 2, 3, 5}},
		{"mode out of range", []*ir.Attribute{ir.AttrI("qk_matmul_output_mode", 4)},
			[]int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, nil},
		{"scale not positive", []*ir.Attribute{ir.AttrF("scale", 0)},
			[]int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, []int64{1, 2, 2, 4}, nil},
	}
	for _, c := range bad {
		_, err := specContext(t, "Attention", 23, c.attrs...).AttentionSpec(c.q, c.k, c.v, c.past)
		assert.Error(t, err, c.name)
	}
}

func TestRotarySpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for range 20 {
		heads, head := int64(1+rng.IntN(4)), 2*int64(1+rng.IntN(6))
		rot := 2 * int64(rng.IntN(int(head/2)+1)) // 0: the whole head
		wantRot := rot
		if rot == 0 {
			wantRot = head
		}
		interleaved := int64(rng.IntN(2))
		attrs := []*ir.Attribute{ir.AttrI("rotary_embedding_dim", rot), ir.AttrI("interleaved", interleaved)}
		want := &Rotary{Heads: heads, Head: head, Rot: wantRot, Interleaved: interleaved == 1}
		r, err := specContext(t, "RotaryEmbedding", 23, attrs...).RotarySpec([]int64{2, heads, 3, head})
		require.NoError(t, err)
		assert.Equal(t, want, r, "4-D")
		r, err = specContext(t, "RotaryEmbedding", 23, append(attrs, ir.AttrI("num_heads", heads))...).RotarySpec([]int64{2, 3, heads * head})
		require.NoError(t, err)
		assert.Equal(t, want, r, "3-D")
	}
	for _, c := range []struct {
		name  string
		attrs []*ir.Attribute
		x     []int64
	}{
		{"odd rotary dim", []*ir.Attribute{ir.AttrI("rotary_embedding_dim", 3)}, []int64{1, 2, 3, 8}},
		{"rotary dim above the head", []*ir.Attribute{ir.AttrI("rotary_embedding_dim", 10)}, []int64{1, 2, 3, 8}},
		{"3-D without num_heads", nil, []int64{1, 3, 8}},
		{"num_heads does not divide", []*ir.Attribute{ir.AttrI("num_heads", 3)}, []int64{1, 3, 8}},
		{"2-D", nil, []int64{3, 8}},
	} {
		_, err := specContext(t, "RotaryEmbedding", 23, c.attrs...).RotarySpec(c.x)
		assert.Error(t, err, c.name)
	}
}

func TestGridSampleSpec(t *testing.T) {
	for _, c := range []struct {
		opset                  int64
		mode                   string
		nearest, linear, cubic bool
	}{
		{16, "bilinear", false, true, false}, {16, "nearest", true, false, false}, {16, "bicubic", false, false, true},
		{20, "linear", false, true, false}, {20, "nearest", true, false, false}, {22, "cubic", false, false, true},
	} {
		for _, padding := range []string{"zeros", "border", "reflection"} {
			for _, align := range []int64{0, 1} {
				s, err := specContext(t, "GridSample", c.opset, ir.AttrS("mode", c.mode), ir.AttrS("padding_mode", padding),
					ir.AttrI("align_corners", align)).GridSampleSpec()
				require.NoError(t, err)
				assert.Equal(t, &GridSample{Nearest: c.nearest, Linear: c.linear, Cubic: c.cubic, Padding: padding, AlignCorners: align == 1}, s)
				// Reflection mirrors at the corner pixels' centres with
				// align_corners, else at the image's edges.
				for _, d := range []int64{1, 2, 7} {
					lo, hi := s.Bounds(d)
					if align == 1 {
						assert.Equal(t, [2]float64{0, float64(d - 1)}, [2]float64{lo, hi})
					} else {
						assert.Equal(t, [2]float64{-0.5, float64(d) - 0.5}, [2]float64{lo, hi})
					}
				}
			}
		}
	}
	s, err := specContext(t, "GridSample", 20).GridSampleSpec()
	require.NoError(t, err)
	assert.Equal(t, &GridSample{Linear: true, Padding: "zeros"}, s, "the defaults")
	for _, c := range []struct {
		opset         int64
		mode, padding string
	}{{16, "linear", "zeros"}, {20, "bilinear", "zeros"}, {20, "linear", "wrap"}} {
		_, err := specContext(t, "GridSample", c.opset, ir.AttrS("mode", c.mode), ir.AttrS("padding_mode", c.padding)).GridSampleSpec()
		assert.Error(t, err, "%v", c)
	}
}

func TestAffineGridCoords(t *testing.T) {
	for _, d := range []int64{1, 2, 3, 8} {
		for _, align := range []bool{false, true} {
			got := AffineGridCoords(d, align)
			require.Len(t, got, int(d))
			for i, v := range got {
				// numpy: linspace(-1, 1, d), or pixel centres
				// (2i+1)/d - 1 between edges at -1 and 1.
				want := (2*float64(i)+1)/float64(d) - 1
				if align {
					want = -1
					if d > 1 {
						want = -1 + 2*float64(i)/float64(d-1)
					}
				}
				assert.InDelta(t, want, v, 1e-15, "d %d align %v i %d", d, align, i)
			}
		}
	}
}

// blockPositions counts the positions l ≥ 0 of a block spanning span
// with stride s inside an axis of length n, one by one.
func blockPositions(n, span, s int64) int64 {
	count := int64(0)
	for l := int64(0); l*s+span <= n; l++ {
		count++
	}
	return count
}

func TestCol2ImSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 30 {
		k := 1 + rng.IntN(2)
		image, block, dil, strides, pads := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, 2*k)
		blocks := make([]int64, k)
		for i := range k {
			image[i], block[i], dil[i], strides[i] = int64(3+rng.IntN(6)), int64(1+rng.IntN(3)), int64(1+rng.IntN(2)), int64(1+rng.IntN(3))
			pads[i], pads[k+i] = int64(rng.IntN(2)), int64(rng.IntN(2))
			blocks[i] = blockPositions(image[i]+pads[i]+pads[k+i], dil[i]*(block[i]-1)+1, strides[i])
		}
		attrs := []*ir.Attribute{ir.AttrIs("dilations", dil...), ir.AttrIs("strides", strides...), ir.AttrIs("pads", pads...)}
		g, err := specContext(t, "Col2Im", 18, attrs...).Col2ImSpec(image, block)
		if blocks[0] == 0 || k == 2 && blocks[1] == 0 {
			assert.Error(t, err, "a block larger than the padded image")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, &Col2Im{Image: image, Block: block, Blocks: blocks, Dilations: dil, Strides: strides, Pads: pads}, g)
		// The reference kernel takes exactly prod(Blocks) columns.
		cols := ir.Product(blocks)
		x := randTensor(rng, ir.Float32, 1, 2*ir.Product(block), cols)
		_, err = callKernel(t, "Col2Im", 18, []*ir.Tensor{x, i64s(image...), i64s(block...)}, 1, attrs...)
		assert.NoError(t, err)
		x = randTensor(rng, ir.Float32, 1, 2*ir.Product(block), cols+1)
		_, err = callKernel(t, "Col2Im", 18, []*ir.Tensor{x, i64s(image...), i64s(block...)}, 1, attrs...)
		assert.Error(t, err, "a column count other than prod(Blocks)")
	}
	_, err := specContext(t, "Col2Im", 18).Col2ImSpec([]int64{4, 4}, []int64{2})
	assert.Error(t, err, "image and block of different ranks")
	_, err = specContext(t, "Col2Im", 18).Col2ImSpec([]int64{4}, []int64{0})
	assert.Error(t, err, "an empty block")
}

func TestMaxUnpoolShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for range 20 {
		k := 1 + rng.IntN(2)
		in := []int64{1, 1}
		kernel, strides := make([]int64, k), make([]int64, k)
		want := []int64{1, 1}
		for i := range k {
			in = append(in, int64(1+rng.IntN(4)))
			kernel[i], strides[i] = int64(1+rng.IntN(3)), int64(1+rng.IntN(3))
			// ONNX: (in - 1)·stride - pads + kernel, no pads here.
			want = append(want, (in[2+i]-1)*strides[i]+kernel[i])
		}
		attrs := []*ir.Attribute{ir.AttrIs("kernel_shape", kernel...), ir.AttrIs("strides", strides...)}
		got, err := specContext(t, "MaxUnpool", 11, attrs...).MaxUnpoolShape(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		// The reference kernel's output without output_shape has it.
		x := randTensor(rng, ir.Float32, in...)
		idx := make([]int64, x.Len())
		for i := range idx {
			idx[i] = int64(i) // distinct positions inside the larger output
		}
		out, err := callKernel(t, "MaxUnpool", 11, []*ir.Tensor{x, ir.FromSlice(ir.Int64, in, idx)}, 1, attrs...)
		require.NoError(t, err)
		assert.Equal(t, want, out[0].Dims)
	}
	got, err := specContext(t, "MaxUnpool", 11, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("pads", 1, 0, 0, 1)).MaxUnpoolShape([]int64{2, 3, 4, 5})
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3, 4, 5}, got, "pads shrink it: (4-1)+2-1, (5-1)+2-1")
	_, err = specContext(t, "MaxUnpool", 11, ir.AttrIs("kernel_shape", 2)).MaxUnpoolShape([]int64{1, 1, 4, 4})
	assert.Error(t, err, "a rank that does not fit kernel_shape")
}

func TestTensorScatterSpec(t *testing.T) {
	for _, c := range []struct {
		attrs    []*ir.Attribute
		rank     int
		axis     int
		circular bool
	}{
		{nil, 4, 2, false}, // axis -2 by default
		{nil, 3, 1, false},
		{[]*ir.Attribute{ir.AttrS("mode", "circular")}, 4, 2, true},
		{[]*ir.Attribute{ir.AttrI("axis", 1)}, 4, 1, false},
		{[]*ir.Attribute{ir.AttrI("axis", -1), ir.AttrS("mode", "linear")}, 3, 2, false},
	} {
		s, err := specContext(t, "TensorScatter", 24, c.attrs...).TensorScatterSpec(c.rank)
		require.NoError(t, err)
		assert.Equal(t, &TensorScatter{Axis: c.axis, Circular: c.circular}, s)
	}
	for _, c := range []struct {
		attrs []*ir.Attribute
		rank  int
	}{
		{[]*ir.Attribute{ir.AttrI("axis", 0)}, 3},  // the batch axis
		{[]*ir.Attribute{ir.AttrI("axis", -3)}, 3}, // the batch axis, counted back
		{[]*ir.Attribute{ir.AttrI("axis", 3)}, 3},
		{[]*ir.Attribute{ir.AttrS("mode", "wrap")}, 3},
	} {
		_, err := specContext(t, "TensorScatter", 24, c.attrs...).TensorScatterSpec(c.rank)
		assert.Error(t, err, "%v rank %d", c.attrs, c.rank)
	}
}

func TestDFTTwiddles(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 4, 7, 12, 64, 100} {
		cos, sin := DFTTwiddles(n)
		require.Len(t, cos, int(n))
		require.Len(t, sin, int(n))
		for w := range n {
			angle := 2 * math.Pi * float64(w) / float64(n)
			assert.InDelta(t, math.Cos(angle), cos[w], 1e-14, "n %d w %d", n, w)
			assert.InDelta(t, math.Sin(angle), sin[w], 1e-14, "n %d w %d", n, w)
			assert.InDelta(t, 1, cos[w]*cos[w]+sin[w]*sin[w], 1e-14)
		}
		assert.Equal(t, 1.0, cos[0])
		assert.Equal(t, 0.0, sin[0])
	}
	// The twiddles of a transform of 2^k points repeat the quarter-turn
	// symmetry: cos[w] = sin[w + n/4].
	cos, sin := DFTTwiddles(1 << 6)
	for w := range 48 {
		assert.InDelta(t, cos[w], sin[w+16], 1e-15)
	}
}

func TestRoiAlignSpec(t *testing.T) {
	s, err := specContext(t, "RoiAlign", 10).RoiAlignSpec()
	require.NoError(t, err)
	assert.Equal(t, &RoiAlign{OutHeight: 1, OutWidth: 1, SpatialScale: 1}, s, "opset 10's defaults: avg, no half pixel")
	s, err = specContext(t, "RoiAlign", 16).RoiAlignSpec()
	require.NoError(t, err)
	assert.Equal(t, &RoiAlign{HalfPixel: true, OutHeight: 1, OutWidth: 1, SpatialScale: 1}, s, "opset 16 defaults to half_pixel")
	s, err = specContext(t, "RoiAlign", 22, ir.AttrS("mode", "max"), ir.AttrS("coordinate_transformation_mode", "output_half_pixel"),
		ir.AttrI("output_height", 3), ir.AttrI("output_width", 5), ir.AttrI("sampling_ratio", 2), ir.AttrF("spatial_scale", 0.25)).RoiAlignSpec()
	require.NoError(t, err)
	assert.Equal(t, &RoiAlign{Max: true, OutHeight: 3, OutWidth: 5, SamplingRatio: 2, SpatialScale: 0.25}, s)
	for _, attrs := range [][]*ir.Attribute{
		{ir.AttrS("mode", "sum")},
		{ir.AttrS("coordinate_transformation_mode", "align_corners")},
		{ir.AttrI("output_height", 0)},
		{ir.AttrI("sampling_ratio", -1)},
	} {
		_, err := specContext(t, "RoiAlign", 16, attrs...).RoiAlignSpec()
		assert.Error(t, err, "%v", attrs)
	}
}

func TestDeformConvSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 30 {
		k := 1 + rng.IntN(2)
		groups, offsetGroups := int64(1+rng.IntN(2)), int64(1+rng.IntN(2))
		channels := groups * offsetGroups * int64(1+rng.IntN(2))
		x := []int64{2, channels}
		w := []int64{groups * int64(1+rng.IntN(3)), channels / groups}
		strides, dil, pads := make([]int64, k), make([]int64, k), make([]int64, 2*k)
		out := make([]int64, k)
		for i := range k {
			x = append(x, int64(3+rng.IntN(5)))
			w = append(w, int64(1+rng.IntN(3)))
			strides[i], dil[i] = int64(1+rng.IntN(2)), int64(1+rng.IntN(2))
			pads[i], pads[k+i] = int64(rng.IntN(2)), int64(rng.IntN(2))
			out[i] = blockPositions(x[2+i]+pads[i]+pads[k+i], dil[i]*(w[2+i]-1)+1, strides[i])
		}
		attrs := []*ir.Attribute{ir.AttrIs("strides", strides...), ir.AttrIs("dilations", dil...), ir.AttrIs("pads", pads...),
			ir.AttrI("group", groups), ir.AttrI("offset_group", offsetGroups)}
		s, err := specContext(t, "DeformConv", 19, attrs...).DeformConvSpec(x, w)
		if slices.Contains(out, 0) {
			assert.Error(t, err, "x %v w %v: a window wider than the padded input", x, w)
			continue
		}
		require.NoError(t, err, "x %v w %v", x, w)
		assert.Equal(t, &DeformConv{Kernel: w[2:], Strides: strides, Dilations: dil, PadBegin: pads[:k], Out: out,
			Groups: groups, OffsetGroups: offsetGroups}, s)
	}
	for _, c := range []struct {
		name  string
		attrs []*ir.Attribute
		x, w  []int64
	}{
		{"channels do not fit", nil, []int64{1, 4, 5, 5}, []int64{2, 3, 3, 3}},
		{"ranks differ", nil, []int64{1, 4, 5, 5}, []int64{2, 4, 3}},
		{"rank 2", nil, []int64{1, 4}, []int64{2, 4}},
		{"offset groups do not divide", []*ir.Attribute{ir.AttrI("offset_group", 3)}, []int64{1, 4, 5, 5}, []int64{2, 4, 3, 3}},
		{"kernel larger than the input", nil, []int64{1, 4, 2, 2}, []int64{2, 4, 3, 3}},
		{"kernel_shape disagrees", []*ir.Attribute{ir.AttrIs("kernel_shape", 2, 2)}, []int64{1, 4, 5, 5}, []int64{2, 4, 3, 3}},
	} {
		_, err := specContext(t, "DeformConv", 19, c.attrs...).DeformConvSpec(c.x, c.w)
		assert.Error(t, err, c.name)
	}
}
