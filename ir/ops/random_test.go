package ops

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// The generator is SplitMix64: word i of key k is its (i+1)th output from
// state k (Vigna's splitmix64.c gives these for states 0 and 1234567).
func TestRandomWordIsSplitMix64(t *testing.T) {
	var a goArith
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), randomWord[uint64](a, 0, 0))
	for i, want := range []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821} {
		assert.Equal(t, want, randomWord[uint64](a, 1234567, uint64(i)), "word %d", i)
	}
}

// ln and cos (Box–Muller's) and e^x (Multinomial's weights) are built from
// basic operations; they agree with package math to a few ulps.
func TestRandomPolynomials(t *testing.T) {
	var a goArith
	for _, x := range []float64{0x1p-53, 1e-300 * 1e290, 1e-5, 0.1, 0.5, 0.70710678, 0.7071068, 0.9, 1 - 0x1p-53, 1} {
		got := fl(arithLog[uint64](a, bt(x)))
		assert.InDelta(t, math.Log(x), got, 4e-16*math.Max(1, math.Abs(math.Log(x))), "ln %g", x)
	}
	for x := 0.0; x <= math.Pi/2; x += 0.01 {
		assert.InDelta(t, math.Cos(x), fl(cosQuarter[uint64](a, bt(x))), 3e-16, "cos %g", x)
	}
	for _, d := range []float64{0, -1e-9, -0.3, -1, -20.5, -300, -707.9} {
		want := math.Exp(d)
		assert.InDelta(t, want, fl(MultinomialWeight[uint64](a, bt(d), bt(0))), 4e-16*want, "exp %g", d)
	}
	assert.Equal(t, 0.0, fl(MultinomialWeight[uint64](a, bt(-709), bt(0))))
	assert.Equal(t, 0.0, fl(MultinomialWeight[uint64](a, bt(math.Inf(-1)), bt(0))))
	assert.True(t, math.IsNaN(fl(MultinomialWeight[uint64](a, bt(math.NaN()), bt(0)))))
}

func TestRandomInference(t *testing.T) {
	f := ir.Float32
	for _, c := range []struct {
		op    string
		opset int64
		ins   []ir.Type
		attrs []*ir.Attribute
		want  string
	}{
		{"RandomUniform", 1, nil, []*ir.Attribute{ir.AttrIs("shape", 2, 3)}, "float[2,3]"},
		{"RandomNormal", 22, nil, []*ir.Attribute{ir.AttrIs("shape", 4), ir.AttrI("dtype", int64(ir.BFloat16))}, "bfloat16[4]"},
		{"RandomUniformLike", 1, []ir.Type{sym(f, "N", 3)}, nil, "float[N,3]"},
		{"RandomNormalLike", 22, []ir.Type{tt(ir.Int64, 5)}, []*ir.Attribute{ir.AttrI("dtype", int64(ir.Float64))}, "double[5]"},
		{"Bernoulli", 15, []ir.Type{tt(ir.Float64, 10)}, nil, "double[10]"},
		{"Bernoulli", 22, []ir.Type{tt(f, 10)}, []*ir.Attribute{ir.AttrI("dtype", int64(ir.Bool))}, "bool[10]"},
		{"Multinomial", 7, []ir.Type{sym(f, "B", 6)}, []*ir.Attribute{ir.AttrI("sample_size", 4)}, "int32[B,4]"},
		{"Multinomial", 22, []ir.Type{tt(f, 2, 6)}, []*ir.Attribute{ir.AttrI("dtype", int64(ir.Int64))}, "int64[2,1]"},
	} {
		out, err := callInfer(c.op, c.opset, c.ins, nil, 1, c.attrs...)
		if assert.NoError(t, err, c.op) {
			assert.Equal(t, c.want, out[0].String(), c.op)
		}
	}
	for _, c := range []struct {
		op    string
		opset int64
		ins   []ir.Type
		attrs []*ir.Attribute
	}{
		{"RandomUniform", 1, nil, nil}, // shape is required
		{"RandomUniform", 1, nil, []*ir.Attribute{ir.AttrIs("shape", 2), ir.AttrI("dtype", int64(ir.BFloat16))}}, // bfloat16 from 22
		{"RandomUniform", 22, nil, []*ir.Attribute{ir.AttrIs("shape", -1)}},
		{"RandomUniformLike", 22, []ir.Type{tt(ir.Int32, 3)}, nil}, // an int32 output
		{"Bernoulli", 15, []ir.Type{tt(ir.Int32, 3)}, nil},
		{"Multinomial", 7, []ir.Type{tt(f, 6)}, nil},
		{"Multinomial", 7, []ir.Type{tt(f, 2, 6)}, []*ir.Attribute{ir.AttrI("dtype", int64(ir.Float32))}},
	} {
		_, err := callInfer(c.op, c.opset, c.ins, nil, 1, c.attrs...)
		assert.Error(t, err, "%s-%d %v %v", c.op, c.opset, c.ins, c.attrs)
	}
}

// A seed fixes the draw; without one, every run draws anew.
func TestRandomSeeds(t *testing.T) {
	x := ir.NewTensor(ir.Float32, 64)
	run := func(attrs ...*ir.Attribute) []float64 {
		out, err := callKernel(t, "RandomUniformLike", 22, []*ir.Tensor{x}, 1, attrs...)
		require.NoError(t, err)
		return Float64s(out[0])
	}
	seeded := run(ir.AttrF("seed", 3))
	assert.Equal(t, seeded, run(ir.AttrF("seed", 3)))
	assert.NotEqual(t, seeded, run(ir.AttrF("seed", 4)))
	assert.NotEqual(t, run(), run())
}

// moments returns the sample mean and variance.
func moments(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v)-1)
}

// ksDistance is the Kolmogorov–Smirnov statistic of v against cdf.
func ksDistance(v []float64, cdf func(float64) float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	d := 0.0
	for i, x := range s {
		f := cdf(x)
		d = math.Max(d, math.Max(f-float64(i)/float64(len(s)), float64(i+1)/float64(len(s))-f))
	}
	return d
}

// The draws follow their laws: uniform and normal by Kolmogorov–Smirnov
// against their CDFs (1.63/√n is the 1% critical value), Bernoulli's
// frequencies against p, Multinomial's against softmax of its input.
func TestRandomLaws(t *testing.T) {
	const n = 40000
	ks := 1.63 / math.Sqrt(n)
	out, err := callKernel(t, "RandomUniform", 22, nil, 1, ir.AttrIs("shape", 200, n/200), ir.AttrI("dtype", int64(ir.Float64)),
		ir.AttrF("low", -2), ir.AttrF("high", 3), ir.AttrF("seed", 1))
	require.NoError(t, err)
	u := Float64s(out[0])
	for _, v := range u {
		require.True(t, v >= -2 && v < 3, "uniform draw %v outside [-2, 3)", v)
	}
	assert.Less(t, ksDistance(u, func(x float64) float64 { return (x + 2) / 5 }), ks)

	out, err = callKernel(t, "RandomNormal", 1, nil, 1, ir.AttrIs("shape", n), ir.AttrF("mean", 1.5), ir.AttrF("scale", 0.5), ir.AttrF("seed", 2))
	require.NoError(t, err)
	z := Float64s(out[0])
	assert.Less(t, ksDistance(z, func(x float64) float64 { return 0.5 * math.Erfc(-(x-1.5)/0.5/math.Sqrt2) }), ks)
	mean, variance := moments(z)
	assert.InDelta(t, 1.5, mean, 4*0.5/math.Sqrt(n))
	assert.InDelta(t, 0.25, variance, 0.02)

	p := make([]float32, n)
	for i := range p {
		p[i] = []float32{0, 0.1, 0.5, 0.9, 1}[i%5]
	}
	out, err = callKernel(t, "Bernoulli", 22, []*ir.Tensor{ir.FromSlice(ir.Float32, []int64{n}, p)}, 1,
		ir.AttrF("seed", 5), ir.AttrI("dtype", int64(ir.Int32)))
	require.NoError(t, err)
	ones := make([]float64, 5)
	for i, v := range Int64s(out[0]) {
		require.True(t, v == 0 || v == 1)
		ones[i%5] += float64(v) / (n / 5)
	}
	for k, want := range []float64{0, 0.1, 0.5, 0.9, 1} {
		assert.InDelta(t, want, ones[k], 4*math.Sqrt(want*(1-want)/(n/5))+1e-12, "p = %g", want)
	}

	logits := []float32{0, float32(math.Log(2)), float32(math.Log(5)), float32(math.Inf(-1)), float32(math.Log(2))}
	x := ir.FromSlice(ir.Float32, []int64{2, 5}, append(append([]float32{}, logits...), 3, 3, 3, 3, 3))
	out, err = callKernel(t, "Multinomial", 22, []*ir.Tensor{x}, 1, ir.AttrI("sample_size", n/2), ir.AttrF("seed", 7), ir.AttrI("dtype", int64(ir.Int64)))
	require.NoError(t, err)
	require.Equal(t, []int64{2, n / 2}, out[0].Dims)
	for b, probs := range [][]float64{{0.1, 0.2, 0.5, 0, 0.2}, {0.2, 0.2, 0.2, 0.2, 0.2}} {
		counts := make([]float64, 5)
		for _, k := range Int64s(out[0])[b*n/2 : (b+1)*n/2] {
			require.True(t, k >= 0 && k < 5)
			counts[k]++
		}
		for k, q := range probs {
			assert.InDelta(t, q, counts[k]/(n/2), 4*math.Sqrt(q*(1-q)/(n/2))+1e-12, "row %d class %d", b, k)
		}
	}
}

// Half-precision outputs round the float64 draw; Support says what each
// law's values can be.
func TestRandomSupport(t *testing.T) {
	n := &ir.Node{OpType: "RandomUniform", Attrs: []*ir.Attribute{ir.AttrIs("shape", 3), ir.AttrF("low", 0.1), ir.AttrF("high", 0.7),
		ir.AttrI("dtype", int64(ir.Float16))}, Outputs: []*ir.Value{{Name: "y"}}}
	s, err := RandomSpecOf(n, Opsets{"": 22})
	require.NoError(t, err)
	lo, hi, integral := s.Support()
	assert.Equal(t, float64(ir.HalfToFloat32(ir.Float32ToHalf(0.1))), lo)
	assert.Equal(t, float64(ir.HalfToFloat32(ir.Float32ToHalf(0.7))), hi)
	assert.False(t, integral)
	assert.False(t, s.Seeded)

	m := &ir.Node{OpType: "Multinomial", Inputs: []*ir.Value{{Name: "x", Type: tt(ir.Float32, 2, 6)}}, Outputs: []*ir.Value{{Name: "y"}},
		Attrs: []*ir.Attribute{ir.AttrF("seed", 0)}}
	s, err = RandomSpecOf(m, Opsets{"": 7})
	require.NoError(t, err)
	lo, hi, integral = s.Support()
	assert.Equal(t, []any{0.0, 5.0, true, true, ir.Int32}, []any{lo, hi, integral, s.Seeded, s.Out})
}

// A random node is never evaluated at compile time, though it has no
// inputs (so every input is "known"), nor merged with an equal one.
func TestRandomNodesAreNotFolded(t *testing.T) {
	for _, s := range randomOps {
		assert.True(t, s.Random, s.Name)
		assert.False(t, Evaluable(&ir.Node{OpType: s.Name}), s.Name)
	}
	assert.True(t, Evaluable(&ir.Node{OpType: "Add"}))
	g := ir.NewGraph("g")
	n := g.AddNode("RandomUniform", nil, 1)
	n.SetAttr(ir.AttrIs("shape", 2))
	n.SetAttr(ir.AttrF("seed", 1))
	g.Outputs = append(g.Outputs, n.Outputs[0])
	m := ir.NewModel(g, 22)
	known, err := InferShapes(m)
	require.NoError(t, err)
	assert.Nil(t, known[n.Outputs[0]])
	assert.Equal(t, "float[2]", n.Outputs[0].Type.String())
}
