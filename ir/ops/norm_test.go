package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func TestSoftmaxFamily(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dims := []int64{2, 3, 4}
	x := randTensor(rng, ir.Float32, dims...)
	xv := Float64s(x)
	// Opset 13: along axis 1, so every (i, k) line over j sums to 1.
	sm, err := callKernel(t, "Softmax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	lsm, err := callKernel(t, "LogSoftmax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	hm, err := callKernel(t, "Hardmax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	s, l, h := Float64s(sm[0]), Float64s(lsm[0]), Float64s(hm[0])
	for i := range 2 {
		for k := range 4 {
			var sum float64
			best := 0
			for j := range 3 {
				at := (i*3+j)*4 + k
				sum += s[at]
				assert.InDelta(t, math.Log(s[at]), l[at], 1e-5, "LogSoftmax == log(Softmax)")
				if xv[at] > xv[(i*3+best)*4+k] {
					best = j
				}
			}
			assert.InDelta(t, 1, sum, 1e-6)
			for j := range 3 {
				want := 0.0
				if j == best {
					want = 1
				}
				assert.Equal(t, want, h[(i*3+j)*4+k])
			}
		}
	}
	// Before opset 13 the input is coerced to 2-D at axis: with axis 1 each
	// of the 2 rows of 12 sums to 1, and Hardmax has a single 1 per row.
	sm, err = callKernel(t, "Softmax", 11, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	hm, err = callKernel(t, "Hardmax", 11, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	s, h = Float64s(sm[0]), Float64s(hm[0])
	for i := range 2 {
		var sum, ones float64
		for j := range 12 {
			sum += s[i*12+j]
			ones += h[i*12+j]
			// Softmax is exp(x) normalized: ratios match exp differences.
			assert.InDelta(t, math.Exp(xv[i*12+j]-xv[i*12]), s[i*12+j]/s[i*12], 1e-4)
		}
		assert.InDelta(t, 1, sum, 1e-6)
		assert.Equal(t, 1.0, ones)
	}
	// Large inputs must not overflow.
	big := f32([]int64{3}, 1000, 1001, 1002)
	sm, err = callKernel(t, "Softmax", 13, []*ir.Tensor{big}, 1)
	require.NoError(t, err)
	assertClose(t, []float64{0.09003057, 0.24472847, 0.66524096}, Float64s(sm[0]), 1e-5, 0)
	// float16 works through the same kernel.
	half := FromFloat64s(ir.Float16, []int64{2}, []float64{0, math.Log(3)})
	sm, err = callKernel(t, "Softmax", 13, []*ir.Tensor{half}, 1)
	require.NoError(t, err)
	assertClose(t, []float64{0.25, 0.75}, Float64s(sm[0]), 1e-3, 0)

	_, err = callKernel(t, "Softmax", 13, []*ir.Tensor{x}, 1, ir.AttrI("axis", 3))
	assert.ErrorContains(t, err, "out of range")
	_, err = callKernel(t, "Softmax", 13, []*ir.Tensor{ir.NewTensor(ir.Int32, 2)}, 1)
	assert.ErrorAs(t, err, new(*UnsupportedError))
}

func TestBatchNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x := randTensor(rng, ir.Float32, 2, 3, 2, 2)
	scale, bias, mean := randTensor(rng, ir.Float32, 3), randTensor(rng, ir.Float32, 3), randTensor(rng, ir.Float32, 3)
	variance := FromFloat64s(ir.Float32, []int64{3}, []float64{0.5, 1.5, 2})
	xv, s, b, m, v := Float64s(x), Float64s(scale), Float64s(bias), Float64s(mean), Float64s(variance)
	ins := []*ir.Tensor{x, scale, bias, mean, variance}
	for _, opset := range []int64{7, 9, 15} {
		out, err := callKernel(t, "BatchNormalization", opset, ins, 1, ir.AttrF("epsilon", 1e-3))
		require.NoError(t, err)
		want := make([]float64, len(xv))
		for i := range want {
			c := (i / 4) % 3
			want[i] = s[c]*(xv[i]-m[c])/math.Sqrt(v[c]+1e-3) + b[c]
		}
		assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6, "opset", opset)
	}

	// Training mode: batch statistics per channel, running statistics
	// moved towards them by 1 - momentum.
	out, err := callKernel(t, "BatchNormalization", 15, ins, 3, ir.AttrI("training_mode", 1), ir.AttrF("momentum", 0.8))
	require.NoError(t, err)
	var bm, bv [3]float64
	for i, x := range xv {
		bm[(i/4)%3] += x / 8
	}
	for i, x := range xv {
		c := (i / 4) % 3
		bv[c] += (x - bm[c]) * (x - bm[c]) / 8
	}
	want := make([]float64, len(xv))
	for i := range want {
		c := (i / 4) % 3
		want[i] = s[c]*(xv[i]-bm[c])/math.Sqrt(bv[c]+1e-5) + b[c]
	}
	assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6)
	var rm, rv []float64
	for c := range 3 {
		rm = append(rm, 0.8*m[c]+0.2*bm[c])
		rv = append(rv, 0.8*v[c]+0.2*bv[c])
	}
	assertClose(t, rm, Float64s(out[1]), 1e-5, 1e-6)
	assertClose(t, rv, Float64s(out[2]), 1e-5, 1e-6)

	// spatial=0 (opset 7): per-activation parameters of shape [C, H, W].
	ps := make([]*ir.Tensor, 4)
	for i := range ps {
		ps[i] = randTensor(rng, ir.Float32, 3, 2, 2)
	}
	ps[3] = FromFloat64s(ir.Float32, ps[3].Dims, func() []float64 {
		v := Float64s(ps[3])
		for i := range v {
			v[i] = math.Abs(v[i]) + 0.1
		}
		return v
	}())
	out, err = callKernel(t, "BatchNormalization", 7, append([]*ir.Tensor{x}, ps...), 1, ir.AttrI("spatial", 0))
	require.NoError(t, err)
	p := [4][]float64{Float64s(ps[0]), Float64s(ps[1]), Float64s(ps[2]), Float64s(ps[3])}
	for i := range want {
		j := i % 12
		want[i] = p[0][j]*(xv[i]-p[2][j])/math.Sqrt(p[3][j]+1e-5) + p[1][j]
	}
	assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6)

	_, err = callKernel(t, "BatchNormalization", 9, ins, 5)
	assert.ErrorAs(t, err, new(*UnsupportedError), "legacy training outputs")
	_, err = callKernel(t, "BatchNormalization", 15, []*ir.Tensor{x, scale, bias, mean, randTensor(rng, ir.Float32, 4)}, 1)
	assert.ErrorContains(t, err, "want 3 values")
}

func TestInstanceNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := randTensor(rng, ir.Float32, 2, 3, 5)
	scale, bias := randTensor(rng, ir.Float32, 3), randTensor(rng, ir.Float32, 3)
	out, err := callKernel(t, "InstanceNormalization", 6, []*ir.Tensor{x, scale, bias}, 1, ir.AttrF("epsilon", 0))
	require.NoError(t, err)
	// With epsilon 0 each (n, c) row has mean B[c] and variance scale[c]^2.
	y, s, b := Float64s(out[0]), Float64s(scale), Float64s(bias)
	for g := range 6 {
		row := y[g*5 : (g+1)*5]
		c := g % 3
		assert.InDelta(t, b[c], meanOf(row), 1e-5)
		assert.InDelta(t, s[c]*s[c], varianceOf(row), 1e-4)
	}
	_, err = callKernel(t, "InstanceNormalization", 6, []*ir.Tensor{randTensor(rng, ir.Float32, 2, 3), scale, bias}, 1)
	assert.ErrorContains(t, err, "N x C x D1")
}

func TestLayerNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	x := randTensor(rng, ir.Float32, 2, 3, 4)
	xv := Float64s(x)
	for _, axis := range []int64{1, -1} {
		a := int((axis + 3) % 3)
		normDims := x.Dims[a:]
		scale, bias := randTensor(rng, ir.Float32, normDims...), randTensor(rng, ir.Float32, normDims...)
		out, err := callKernel(t, "LayerNormalization", 17, []*ir.Tensor{x, scale, bias}, 3, ir.AttrI("axis", axis))
		require.NoError(t, err)
		n := int(ir.Product(normDims))
		s, b := Float64s(scale), Float64s(bias)
		var want, means, invs []float64
		for g := range len(xv) / n {
			row := xv[g*n : (g+1)*n]
			var mu, sq float64
			for _, v := range row {
				mu += v / float64(n)
			}
			for _, v := range row {
				sq += (v - mu) * (v - mu) / float64(n)
			}
			inv := 1 / math.Sqrt(sq+1e-5)
			for k, v := range row {
				want = append(want, (v-mu)*inv*s[k]+b[k])
			}
			means, invs = append(means, mu), append(invs, inv)
		}
		assertClose(t, want, Float64s(out[0]), 1e-5, 1e-6)
		assertClose(t, means, Float64s(out[1]), 1e-5, 1e-6)
		assertClose(t, invs, Float64s(out[2]), 1e-5, 1e-6)
	}
	// Scale broadcasts over the normalized axes; B is optional.
	scale := f32([]int64{4}, 1, 2, 3, 4)
	out, err := callKernel(t, "LayerNormalization", 17, []*ir.Tensor{x, scale}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	y := Float64s(out[0])
	for g := range 2 {
		row := make([]float64, 12)
		for k := range row {
			row[k] = y[g*12+k] / float64(k%4+1)
		}
		assert.InDelta(t, 0, meanOf(row), 1e-5)
		assert.InDelta(t, 1, varianceOf(row), 1e-3)
	}
	_, err = callKernel(t, "LayerNormalization", 17, []*ir.Tensor{x, f32([]int64{3}, 1, 2, 3)}, 1)
	assert.ErrorContains(t, err, "does not broadcast")
}

func TestLRN(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	x := randTensor(rng, ir.Float32, 2, 5, 3)
	xv := Float64s(x)
	for _, size := range []int64{1, 2, 3} {
		out, err := callKernel(t, "LRN", 1, []*ir.Tensor{x}, 1, ir.AttrI("size", size), ir.AttrF("alpha", 0.5), ir.AttrF("bias", 2))
		require.NoError(t, err)
		want := make([]float64, len(xv))
		for n := range 2 {
			for c := range 5 {
				for s := range 3 {
					var sq float64
					lo := c - int(math.Floor(float64(size-1)/2))
					hi := c + int(math.Ceil(float64(size-1)/2))
					for k := max(lo, 0); k <= min(hi, 4); k++ {
						sq += xv[(n*5+k)*3+s] * xv[(n*5+k)*3+s]
					}
					i := (n*5+c)*3 + s
					want[i] = xv[i] / math.Pow(2+0.5/float64(size)*sq, 0.75)
				}
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-5, 1e-7, "size", size)
	}
	_, err := callKernel(t, "LRN", 13, []*ir.Tensor{x}, 1)
	assert.ErrorContains(t, err, "size")
}

func TestNormShapes(t *testing.T) {
	f := ir.Float32
	x := sym(f, "N", 3, "H", -1)
	c3 := tt(f, 3)
	cases := []shapeCase{
		{op: "Softmax", opset: 13, ins: []ir.Type{x}, nOut: 1},
		{op: "Softmax", opset: 11, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", -4)}},
		{op: "LogSoftmax", opset: 13, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 4)}},
		{op: "Hardmax", opset: 1, ins: []ir.Type{ir.TensorType(ir.Float16, ir.Shape{})}, nOut: 1},
		{op: "BatchNormalization", opset: 15, ins: []ir.Type{x, c3, c3, c3, c3}, nOut: 1},
		{op: "BatchNormalization", opset: 15, ins: []ir.Type{x, c3, c3, tt(ir.Float64, 3), tt(ir.Float64, 3)}, nOut: 3, attrs: []*ir.Attribute{ir.AttrI("training_mode", 1)}},
		{op: "BatchNormalization", opset: 9, ins: []ir.Type{x, c3, tt(f, 4), c3, c3}, nOut: 1},
		{op: "BatchNormalization", opset: 7, ins: []ir.Type{tt(f, 2, 3, 4), tt(f, 3, 4), tt(f, 3, 4), tt(f, 3, 4), tt(f, 3, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("spatial", 0)}},
		{op: "BatchNormalization", opset: 15, ins: []ir.Type{tt(f, 3), c3, c3, c3, c3}, nOut: 1},
		{op: "InstanceNormalization", opset: 6, ins: []ir.Type{x, c3, c3}, nOut: 1},
		{op: "InstanceNormalization", opset: 6, ins: []ir.Type{sym(f, "N", 3), c3, c3}, nOut: 1},
		{op: "LayerNormalization", opset: 17, ins: []ir.Type{x, sym(f, "H", -1)}, nOut: 3, attrs: []*ir.Attribute{ir.AttrI("axis", 2)}},
		{op: "LayerNormalization", opset: 17, ins: []ir.Type{sym(ir.Float16, "B", "S", 8), tt(ir.Float16, 8), tt(ir.Float16, 8)}, nOut: 3},
		{op: "LayerNormalization", opset: 17, ins: []ir.Type{tt(f, 2, 8), tt(f, 4)}, nOut: 1},
		{op: "LayerNormalization", opset: 17, ins: []ir.Type{tt(f, 2, 8), tt(f, 8)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("stash_type", 7)}},
		{op: "LRN", opset: 13, ins: []ir.Type{x}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("size", 3)}},
		{op: "LRN", opset: 13, ins: []ir.Type{tt(f, 5)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("size", 3)}},
	}
	checkShapeGolden(t, "norm", cases)
}
