package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func TestRMSNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	x := randTensor(rng, ir.Float64, 2, 3, 4)
	xv := Float64s(x)
	for _, axis := range []int64{1, -1, 0} {
		a, _ := NormAxis(axis, 3)
		normDims := x.Dims[a:]
		// A scale of the normalized shape's trailing axes broadcasts.
		scale := randTensor(rng, ir.Float64, normDims[len(normDims)-1])
		sv := Float64s(scale)
		out, err := callKernel(t, "RMSNormalization", 23, []*ir.Tensor{x, scale}, 1, ir.AttrI("axis", axis), ir.AttrF("epsilon", 0.01))
		require.NoError(t, err)
		group := int(ir.Product(normDims))
		want := make([]float64, len(xv))
		for g := 0; g < len(xv); g += group {
			var sq float64
			for _, v := range xv[g : g+group] {
				sq += v * v
			}
			rms := math.Sqrt(sq/float64(group) + float64(float32(0.01)))
			for k := range group {
				want[g+k] = xv[g+k] / rms * sv[k%len(sv)]
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-12, 0, "axis", axis)
	}
	// With unit scale and no epsilon, every group's mean square is 1.
	ones := FromFloat64s(ir.Float64, []int64{4}, []float64{1, 1, 1, 1})
	out, err := callKernel(t, "RMSNormalization", 23, []*ir.Tensor{x, ones}, 1, ir.AttrF("epsilon", 0))
	require.NoError(t, err)
	y := Float64s(out[0])
	for g := 0; g < len(y); g += 4 {
		assert.InDelta(t, 4, y[g]*y[g]+y[g+1]*y[g+1]+y[g+2]*y[g+2]+y[g+3]*y[g+3], 1e-12)
	}

	_, err = callKernel(t, "RMSNormalization", 23, []*ir.Tensor{x, randTensor(rng, ir.Float64, 3)}, 1)
	assert.ErrorContains(t, err, "does not broadcast")
	_, err = callKernel(t, "RMSNormalization", 23, []*ir.Tensor{x, ones}, 1, ir.AttrI("axis", 3))
	assert.ErrorContains(t, err, "out of range")
	_, err = callKernel(t, "RMSNormalization", 23, []*ir.Tensor{x, ones}, 1, ir.AttrI("stash_type", int64(ir.Int32)))
	assert.ErrorContains(t, err, "stash_type")
}

// GroupNormalization with one channel per group is InstanceNormalization;
// opset 18's per-group scale and bias apply to each of a group's channels.
func TestGroupNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	x := randTensor(rng, ir.Float32, 2, 4, 3, 2)
	scale, bias := randTensor(rng, ir.Float32, 4), randTensor(rng, ir.Float32, 4)
	got, err := callKernel(t, "GroupNormalization", 21, []*ir.Tensor{x, scale, bias}, 1, ir.AttrI("num_groups", 4))
	require.NoError(t, err)
	want, err := callKernel(t, "InstanceNormalization", 6, []*ir.Tensor{x, scale, bias}, 1)
	require.NoError(t, err)
	assertClose(t, Float64s(want[0]), Float64s(got[0]), 1e-6, 1e-7)

	// Two groups of two channels, against a naive loop.
	xv, sv, bv := Float64s(x), Float64s(scale), Float64s(bias)
	gScale, gBias := randTensor(rng, ir.Float32, 2), randTensor(rng, ir.Float32, 2)
	naive := func(perChannel bool) []float64 {
		out := make([]float64, len(xv))
		const group = 2 * 3 * 2
		for start := 0; start < len(xv); start += group {
			m := meanOf(xv[start : start+group])
			v := varianceOf(xv[start : start+group])
			for k := range group {
				ch := (start/6 + k/6) % 4
				s, b := Float64s(gScale)[ch/2], Float64s(gBias)[ch/2]
				if perChannel {
					s, b = sv[ch], bv[ch]
				}
				out[start+k] = (xv[start+k]-m)/math.Sqrt(v+float64(float32(1e-5)))*s + b
			}
		}
		return out
	}
	got, err = callKernel(t, "GroupNormalization", 21, []*ir.Tensor{x, scale, bias}, 1, ir.AttrI("num_groups", 2))
	require.NoError(t, err)
	assertClose(t, naive(true), Float64s(got[0]), 1e-5, 1e-6, "opset 21")
	got, err = callKernel(t, "GroupNormalization", 18, []*ir.Tensor{x, gScale, gBias}, 1, ir.AttrI("num_groups", 2))
	require.NoError(t, err)
	assertClose(t, naive(false), Float64s(got[0]), 1e-5, 1e-6, "opset 18")

	_, err = callKernel(t, "GroupNormalization", 21, []*ir.Tensor{x, gScale, gBias}, 1, ir.AttrI("num_groups", 2))
	assert.ErrorContains(t, err, "must have 4 values")
	_, err = callKernel(t, "GroupNormalization", 21, []*ir.Tensor{x, scale, bias}, 1, ir.AttrI("num_groups", 3))
	assert.ErrorContains(t, err, "does not split")
	_, err = callKernel(t, "GroupNormalization", 21, []*ir.Tensor{x, scale, bias}, 1)
	assert.ErrorContains(t, err, "num_groups")

	c := inferOne(t, "GroupNormalization", 21, []ir.Type{ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(4), ir.Sym("H"))), tt(ir.Float32, 4), tt(ir.Float32, 4)}, nil, ir.AttrI("num_groups", 2))
	assert.Equal(t, "[N,4,H]", c.Outputs[0].Shape.String())
	s18, err := Lookup("", "GroupNormalization", 18)
	require.NoError(t, err)
	n := &ir.Node{OpType: "GroupNormalization", Attrs: []*ir.Attribute{ir.AttrI("num_groups", 2)}, Inputs: []*ir.Value{{}, {}, {}}, Outputs: []*ir.Value{{Name: "y"}}}
	err = s18.Infer(NewInferContext(s18, n, 18, []ir.Type{tt(ir.Float32, 2, 4, 3), tt(ir.Float32, 4), tt(ir.Float32, 4)}, make([]*ir.Tensor, 3)))
	assert.ErrorContains(t, err, "want [2]", "opset 18's parameters are per group")
}

func TestLpNormalization(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 3))
	x := randTensor(rng, ir.Float32, 3, 4, 2)
	for _, p := range []int64{1, 2} {
		out, err := callKernel(t, "LpNormalization", 22, []*ir.Tensor{x}, 1, ir.AttrI("axis", 1), ir.AttrI("p", p))
		require.NoError(t, err)
		y, xv := Float64s(out[0]), Float64s(x)
		// Each line along axis 1 has unit norm and x's direction.
		for i := range 3 {
			for k := range 2 {
				var norm float64
				for j := range 4 {
					at := (i*4+j)*2 + k
					norm += math.Pow(math.Abs(y[at]), float64(p))
					assert.Equal(t, math.Signbit(xv[at]), math.Signbit(y[at]))
				}
				assert.InDelta(t, 1, norm, 1e-5, "p=%d", p)
				ratio := y[i*8+k] / xv[i*8+k]
				for j := range 4 {
					assert.InDelta(t, ratio, y[(i*4+j)*2+k]/xv[(i*4+j)*2+k], 1e-4)
				}
			}
		}
	}
	_, err := callKernel(t, "LpNormalization", 22, []*ir.Tensor{x}, 1, ir.AttrI("p", 3))
	assert.ErrorContains(t, err, "p must be 1 or 2")
	_, err = callKernel(t, "LpNormalization", 1, []*ir.Tensor{FromFloat64s(ir.BFloat16, []int64{2}, []float64{1, 2})}, 1)
	assert.Error(t, err, "bfloat16 came with opset 22")
}

func TestLpPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 4))
	x := randTensor(rng, ir.Float64, 1, 2, 5, 6)
	for _, p := range []int64{1, 2, 3} {
		kernel, strides, dil, pads := []int64{2, 3}, []int64{2, 1}, []int64{1, 2}, []int64{1, 0, 0, 1}
		out, err := callKernel(t, "LpPool", 18, []*ir.Tensor{x}, 1, ir.AttrI("p", p), ir.AttrIs("kernel_shape", kernel...),
			ir.AttrIs("strides", strides...), ir.AttrIs("dilations", dil...), ir.AttrIs("pads", pads...))
		require.NoError(t, err)
		want := naivePool(Float64s(x), x.Dims, out[0].Dims[2:], kernel, strides, dil, pads, false, func(vals []float64, _ int) float64 {
			var s float64
			for _, v := range vals {
				s += math.Pow(math.Abs(v), float64(p))
			}
			return math.Pow(s, 1/float64(p))
		})
		assert.Equal(t, []int64{1, 2, 3, 3}, out[0].Dims)
		assertClose(t, want, Float64s(out[0]), 1e-12, 0, "p", p)
	}
	_, err := callKernel(t, "LpPool", 18, []*ir.Tensor{x}, 1, ir.AttrI("p", 0), ir.AttrIs("kernel_shape", 2, 2))
	assert.ErrorContains(t, err, "p must be positive")
	_, err = callKernel(t, "LpPool", 11, []*ir.Tensor{x}, 1, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("dilations", 2, 2))
	assert.ErrorContains(t, err, "unknown attribute", "dilations came with opset 18")
}

func TestGelu(t *testing.T) {
	// Phi(1) = 0.8413447460685429; the tanh form is within 1e-3 of the
	// exact one.
	x := FromFloat64s(ir.Float64, []int64{3}, []float64{1, -2, 0.5})
	out, err := callKernel(t, "Gelu", 20, []*ir.Tensor{x}, 1)
	require.NoError(t, err)
	assert.InDelta(t, 0.8413447460685429, Float64s(out[0])[0], 1e-15)
	assert.InDelta(t, -2*(1-0.9772498680518208), Float64s(out[0])[1], 1e-15)
	rng := rand.New(rand.NewPCG(27, 5))
	r := randTensor(rng, ir.Float32, 50)
	exact, err := callKernel(t, "Gelu", 20, []*ir.Tensor{r}, 1)
	require.NoError(t, err)
	approx, err := callKernel(t, "Gelu", 20, []*ir.Tensor{r}, 1, ir.AttrS("approximate", "tanh"))
	require.NoError(t, err)
	assertClose(t, Float64s(exact[0]), Float64s(approx[0]), 0, 1e-3)
	_, err = callKernel(t, "Gelu", 20, []*ir.Tensor{r}, 1, ir.AttrS("approximate", "erf"))
	assert.ErrorContains(t, err, "approximate")
}
