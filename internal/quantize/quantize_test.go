package quantize

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// randn is a tensor of N(0, sd²) values.
func randn(rng *rand.Rand, sd float64, dims ...int64) *ir.Tensor {
	t := ir.NewTensor(ir.Float32, dims...)
	for i := range ir.Data[float32](t) {
		ir.Data[float32](t)[i] = float32(rng.NormFloat64() * sd)
	}
	return t
}

// convNet is a small network with every pattern the quantizer places
// pairs for: Conv → BatchNormalization → Relu (BN folded first), a 1×1
// Conv with a residual Add and Relu, MaxPool, two Convs into a Concat,
// GlobalAveragePool, Flatten, Gemm (transB) and Gemm's output as the graph
// output. x is [1,3,8,8]; y [1,10].
func convNet(seed uint64) *ir.Model {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := ir.NewGraph("convnet")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 3, 8, 8)))
	init := func(name string, t *ir.Tensor) *ir.Value { return g.AddInitializer(name, t) }
	conv := func(name string, in *ir.Value, w *ir.Tensor, b *ir.Tensor, attrs ...*ir.Attribute) *ir.Value {
		ins := []*ir.Value{in, init(name+".weight", w)}
		if b != nil {
			ins = append(ins, init(name+".bias", b))
		}
		n := g.AddNode("Conv", ins, 1, attrs...)
		n.Name = name
		return n.Outputs[0]
	}
	pad1 := ir.AttrIs("pads", 1, 1, 1, 1)
	c1 := conv("conv1", x, randn(rng, 0.3, 8, 3, 3, 3), nil, pad1)
	scale, bias, mean := randn(rng, 0.2, 8), randn(rng, 0.1, 8), randn(rng, 0.1, 8)
	for i := range ir.Data[float32](scale) {
		ir.Data[float32](scale)[i] += 1
	}
	v := ir.NewTensor(ir.Float32, 8)
	for i := range ir.Data[float32](v) {
		ir.Data[float32](v)[i] = 0.5 + rng.Float32()
	}
	bn := g.AddNode("BatchNormalization", []*ir.Value{c1, init("bn.scale", scale), init("bn.bias", bias), init("bn.mean", mean), init("bn.var", v)}, 1)
	bn.Name = "bn1"
	r1 := g.Apply("Relu", []*ir.Value{bn.Outputs[0]})
	c2 := conv("conv2", r1, randn(rng, 0.3, 8, 8, 1, 1), randn(rng, 0.1, 8))
	add := g.Apply("Add", []*ir.Value{c2, r1})
	r2 := g.Apply("Relu", []*ir.Value{add})
	mp := g.Apply("MaxPool", []*ir.Value{r2}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
	ca := g.Apply("Relu", []*ir.Value{conv("conv3a", mp, randn(rng, 0.3, 4, 8, 1, 1), randn(rng, 0.1, 4))})
	cb := g.Apply("Relu", []*ir.Value{conv("conv3b", mp, randn(rng, 0.2, 4, 8, 3, 3), randn(rng, 0.1, 4), pad1)})
	cat := g.Apply("Concat", []*ir.Value{ca, cb}, ir.AttrI("axis", 1))
	gap := g.Apply("GlobalAveragePool", []*ir.Value{cat})
	flat := g.Apply("Flatten", []*ir.Value{gap})
	fc := g.AddNode("Gemm", []*ir.Value{flat, init("fc.weight", randn(rng, 0.5, 10, 8)), init("fc.bias", randn(rng, 0.1, 10))}, 1, ir.AttrI("transB", 1))
	fc.Name = "fc"
	fc.Outputs[0].Name = "y"
	g.SetOutputs(fc.Outputs[0])
	return ir.NewModel(g, 13)
}

// modelBytes is m as an ONNX file's bytes, and a fresh copy of m read
// back from them.
func modelBytes(t *testing.T, m *ir.Model) ([]byte, *ir.Model) {
	t.Helper()
	buf, err := onnx.Write(m)
	require.NoError(t, err)
	c, err := onnx.Read(buf, "")
	require.NoError(t, err)
	return buf, c
}

// writeTensor writes t as a TensorProto file in dir.
func writeTensor(t *testing.T, dir, name string, x *ir.Tensor) string {
	t.Helper()
	buf, err := onnx.WriteTensor(x)
	require.NoError(t, err)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	return path
}

// quantizeOnReference quantizes m calibrated on the reference executor.
func quantizeOnReference(t *testing.T, m *ir.Model, src []byte, opts Options) *Result {
	t.Helper()
	opts.reference = true
	if opts.Method.Name == "" {
		opts.Method = Method{Name: "entropy"}
	}
	res, err := Quantize(m, src, opts)
	require.NoError(t, err)
	return res
}

func runReference(t *testing.T, m *ir.Model, feeds map[string]*ir.Tensor) map[string]*ir.Tensor {
	t.Helper()
	ex, err := reference.New(m)
	require.NoError(t, err)
	out, err := ex.Run(feeds)
	require.NoError(t, err)
	return out
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// producer is v's producing node's op, "" for inputs and initializers.
func producer(v *ir.Value) string {
	if v == nil || v.Producer == nil {
		return ""
	}
	return v.Producer.OpType
}

// The QDQ form of a small conv net: a valid ONNX model (written, read
// back, verified, its shapes inferred), in int8-contract.md's layout,
// whose reference output agrees with the float model's on new data.
func TestQDQConvNet(t *testing.T) {
	src, m := modelBytes(t, convNet(1))
	_, float := modelBytes(t, convNet(1))
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2, 2))
	calib := writeTensor(t, dir, "x.pb", randn(rng, 1, 16, 3, 8, 8))

	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, QuantizeAll: true})
	assert.Equal(t, map[string]int{"Conv": 4, "Gemm": 1, "MaxPool": 1, "Concat": 1, "GlobalAveragePool": 1}, res.Units)
	assert.Equal(t, 16, res.Samples)

	buf, err := onnx.Write(res.Model)
	require.NoError(t, err)
	q, err := onnx.Read(buf, "")
	require.NoError(t, err)
	require.NoError(t, q.Verify())
	_, err = ops.InferShapes(q)
	require.NoError(t, err)

	g := q.Graph
	convs := 0
	for _, n := range g.Nodes {
		assert.NotEqual(t, "BatchNormalization", n.OpType, "folded into conv1 before quantizing")
		switch n.OpType {
		case "Conv", "Gemm":
			convs++
			x, w := n.Inputs[0], n.Inputs[1]
			require.Equal(t, "DequantizeLinear", producer(x), "%s input", n)
			assert.Equal(t, "QuantizeLinear", producer(x.Producer.Inputs[0]), "%s input", n)
			assert.Equal(t, ir.Uint8, x.Producer.Inputs[0].Type.Elem)
			require.Equal(t, "DequantizeLinear", producer(w), "%s weight", n)
			wq := w.Producer.Inputs[0].Const
			require.NotNil(t, wq)
			assert.Equal(t, ir.Int8, wq.DType)
			for _, q := range ir.Data[int8](wq) {
				assert.GreaterOrEqual(t, q, int8(-127))
			}
			// Conv's W and Gemm's B with transB ([N,K]): axis 0.
			assert.Equal(t, int64(0), w.Producer.Attr("axis").I)
			assert.Equal(t, []int64{wq.Dims[0]}, w.Producer.Inputs[1].Const.Dims, "a scale per output channel")
			b := n.Inputs[2]
			require.Equal(t, "DequantizeLinear", producer(b), "%s bias", n)
			assert.Equal(t, ir.Int32, b.Producer.Inputs[0].Const.DType)
		}
	}
	assert.Equal(t, 5, convs)
	y := g.Outputs[0]
	assert.Equal(t, "y", y.Name)
	assert.Equal(t, "DequantizeLinear", producer(y), "graph outputs stay float, after a DequantizeLinear")
	assert.Equal(t, ir.Float32, y.Type.Elem)

	// Residual: conv2's output goes straight into the Add, whose other
	// input is dequantized; the Relu after it is followed by the pair.
	for _, n := range g.Nodes {
		if n.OpType == "Add" {
			assert.ElementsMatch(t, []string{"Conv", "DequantizeLinear"}, []string{producer(n.Inputs[0]), producer(n.Inputs[1])})
		}
	}

	// The reference runs the QDQ model; it agrees with the float model.
	for seed := range uint64(3) {
		x := randn(rand.New(rand.NewPCG(100+seed, 0)), 1, 1, 3, 8, 8)
		want := runReference(t, float, map[string]*ir.Tensor{"x": x})["y"]
		got := runReference(t, q, map[string]*ir.Tensor{"x": x})["y"]
		assert.GreaterOrEqual(t, cosine(want.Float32s(), got.Float32s()), 0.99, "seed %d", seed)
	}

	// The lead's passes take every Conv and Gemm into an integer group.
	require.NoError(t, passes.Run(&passes.Context{OptLevel: 2, Verify: true}, passes.O2, q))
	kinds := map[string]int{}
	for _, n := range q.Graph.Nodes {
		if n.OpType == "FusionGroup" {
			kinds[n.Attr("kind").S]++
		}
	}
	assert.Equal(t, 4, kinds["qconv"], "groups: %v", kinds)
	assert.Equal(t, 1, kinds["qgemm"], "groups: %v", kinds)
}

// Each Relu/Clip after a unit, a residual Add's Relu, and x·Sigmoid(x):
// the pair goes after the chain, never between its nodes.
func TestChainsKeepTheirPairOutside(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	g := ir.NewGraph("chains")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 16)))
	mm := g.Apply("MatMul", []*ir.Value{x, g.AddInitializer("w", randn(rng, 0.3, 16, 16))})
	lo, hi := g.AddInitializer("lo", ir.Scalar(ir.Float32, float32(0))), g.AddInitializer("hi", ir.Scalar(ir.Float32, float32(6)))
	clip := g.Apply("Clip", []*ir.Value{mm, lo, hi})
	sig := g.Apply("Sigmoid", []*ir.Value{clip})
	silu := g.Apply("Mul", []*ir.Value{clip, sig})
	prod := g.Apply("Mul", []*ir.Value{silu, x})
	g.SetOutputs(prod)
	src, m := modelBytes(t, ir.NewModel(g, 13))
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rng, 1, 32, 16))
	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, Method: Method{Name: "minmax"}, QuantizeAll: true})
	assert.Equal(t, map[string]int{"MatMul": 1, "Sigmoid": 1, "Mul": 1}, res.Units)
	for _, n := range res.Model.Graph.Nodes {
		switch n.OpType {
		case "MatMul":
			assert.Equal(t, int64(1), n.Inputs[1].Producer.Attr("axis").I, "MatMul's B [K,N]: per column")
			assert.Equal(t, "Clip", res.Model.Graph.Uses()[n.Outputs[0]][0].OpType, "no pair between MatMul and Clip")
		case "Sigmoid":
			assert.Equal(t, "DequantizeLinear", producer(n.Inputs[0]))
			uses := res.Model.Graph.Uses()[n.Outputs[0]]
			require.Len(t, uses, 1)
			assert.Equal(t, "Mul", uses[0].OpType, "SiLU's Sigmoid feeds its Mul unquantized")
		case "Mul":
			for _, in := range n.Inputs {
				assert.Contains(t, []string{"DequantizeLinear", "Sigmoid"}, producer(in))
			}
		}
	}
}

// --keep-fp32 leaves a node float; a name no node has is an error naming it.
func TestKeepFP32(t *testing.T) {
	src, m := modelBytes(t, convNet(2))
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(3, 3)), 1, 4, 3, 8, 8))
	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, KeepFP32: []string{"conv3b", "fc"}, QuantizeAll: true})
	assert.Equal(t, 3, res.Units["Conv"])
	assert.Zero(t, res.Units["Gemm"])
	for _, n := range res.Model.Graph.Nodes {
		if n.Name == "conv3b" || n.Name == "fc" {
			assert.NotNil(t, n.Inputs[1].Const, "%s keeps its float weights", n)
			assert.Equal(t, ir.Float32, n.Inputs[1].Const.DType)
		}
	}

	_, m = modelBytes(t, convNet(2))
	_, err := Quantize(m, src, Options{Data: []string{calib}, KeepFP32: []string{"bn1", "nope"}, reference: true, Method: Method{Name: "minmax"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no node named "bn1", "nope"`)
}

// --per-tensor: one scale per weight.
func TestPerTensor(t *testing.T) {
	src, m := modelBytes(t, convNet(3))
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(3, 3)), 1, 4, 3, 8, 8))
	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, PerTensor: true, QuantizeAll: true})
	for _, n := range res.Model.Graph.Nodes {
		if n.OpType == "Conv" || n.OpType == "Gemm" {
			dq := n.Inputs[1].Producer
			assert.Empty(t, dq.Inputs[1].Const.Dims, "%s: a scalar scale", n)
			assert.Nil(t, dq.Attr("axis"))
		}
	}
}

// Weights: per channel, the largest |w| maps to ±127 and every value
// comes back within half a step.
func TestWeightParams(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct {
		dims []int64
		axis int
	}{{[]int64{6, 3, 3, 3}, 0}, {[]int64{16, 5}, 1}, {[]int64{16, 5}, -1}} {
		w := randn(rng, 1, c.dims...)
		if c.axis == 0 {
			for i := range 27 { // an all-zero channel gets scale 1
				ir.Data[float32](w)[27*2+i] = 0
			}
		}
		q, scales := weightParams(w, c.axis)
		channels, inner := 1, int(ir.Product(c.dims))
		if c.axis >= 0 {
			channels, inner = int(c.dims[c.axis]), int(ir.Product(c.dims[c.axis+1:]))
		}
		require.Len(t, scales, channels)
		peak := make([]int, channels)
		for i, x := range ir.Data[float32](w) {
			ch := i / inner % channels
			qi := ir.Data[int8](q)[i]
			peak[ch] = max(peak[ch], int(math.Abs(float64(qi))))
			assert.InDelta(t, x, float32(qi)*scales[ch], float64(scales[ch])/2+1e-7)
		}
		for ch, p := range peak {
			if c.axis == 0 && ch == 2 {
				assert.Equal(t, 0, p)
				assert.Equal(t, float32(1), scales[ch])
				continue
			}
			assert.Equal(t, 127, p, "dims %v axis %d channel %d", c.dims, c.axis, ch)
		}
	}
}

// Biases: int32 at scale sx·sw[c], saturating (and saying so) beyond it.
func TestBiasParams(t *testing.T) {
	b := ir.FromSlice(ir.Float32, []int64{3}, []float32{0.5, -0.25, 3})
	sx, sw := float32(0.01), []float32{0.001, 0.002, 0.004}
	q, scales, clipped := biasParams(b, sx, sw)
	assert.False(t, clipped)
	assert.Equal(t, []float32{sx * sw[0], sx * sw[1], sx * sw[2]}, scales, "products in float32")
	for i, x := range ir.Data[float32](b) {
		assert.InDelta(t, x, float32(ir.Data[int32](q)[i])*scales[i], float64(scales[i]))
	}
	_, _, clipped = biasParams(ir.FromSlice(ir.Float32, []int64{1}, []float32{1e6}), 1e-4, []float32{1e-4})
	assert.True(t, clipped)
}

// A model already in QDQ form, or too old for per-channel scales, is
// refused with the reason.
func TestRefusedModels(t *testing.T) {
	src, m := modelBytes(t, convNet(4))
	calib := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(3, 3)), 1, 2, 3, 8, 8))
	res := quantizeOnReference(t, m, src, Options{Data: []string{calib}})
	_, err := Quantize(res.Model, src, Options{Data: []string{calib}, reference: true, Method: Method{Name: "minmax"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "quantized already")

	_, m = modelBytes(t, convNet(4))
	_, err = Quantize(m, src, Options{reference: true, Method: Method{Name: "minmax"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no calibration data")
}

// Every data form gives the same statistics: one file of all samples
// (.pb, .npy), a folder splitting them, test_data_set folders (one run
// each) and NAME=FILE.
func TestDataForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	all := randn(rng, 1, 6, 3, 8, 8)
	dir := t.TempDir()
	pb := writeTensor(t, dir, "x.pb", all)
	npy := filepath.Join(dir, "x.npy")
	require.NoError(t, os.WriteFile(npy, npyBytes(all), 0o644))
	split := filepath.Join(dir, "split")
	sets := filepath.Join(dir, "sets")
	require.NoError(t, os.MkdirAll(split, 0o755))
	per := len(all.Raw) / 6
	for i := range 6 {
		one := ir.FromRaw(ir.Float32, []int64{1, 3, 8, 8}, slices.Clone(all.Raw[i*per:(i+1)*per]))
		set := filepath.Join(sets, "test_data_set_"+string(rune('0'+i)))
		require.NoError(t, os.MkdirAll(set, 0o755))
		writeTensor(t, set, "input_0.pb", one)
	}
	writeTensor(t, split, "a.pb", ir.FromRaw(ir.Float32, []int64{2, 3, 8, 8}, slices.Clone(all.Raw[:2*per])))
	writeTensor(t, split, "b.pb", ir.FromRaw(ir.Float32, []int64{4, 3, 8, 8}, slices.Clone(all.Raw[2*per:])))

	var first *Cache
	for _, spec := range []string{pb, npy, split, sets, "x=" + pb} {
		src, m := modelBytes(t, convNet(5))
		cache := filepath.Join(t.TempDir(), "cache.json")
		res := quantizeOnReference(t, m, src, Options{Data: []string{spec}, CacheFile: cache})
		assert.Equal(t, 6, res.Samples, spec)
		assert.Equal(t, 6, res.Runs, spec)
		c, err := readCache(cache, sha(src), ir.Limits{})
		require.NoError(t, err)
		if first == nil {
			first = c
			continue
		}
		assert.Equal(t, first.Tensors, c.Tensors, spec)
	}
}

// npyBytes is t as a version 1 .npy file.
func npyBytes(t *ir.Tensor) []byte {
	shape := ""
	for _, d := range t.Dims {
		shape += strconv.FormatInt(d, 10) + ", "
	}
	header := "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }"
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	return append(append(out, header...), t.Raw...)
}

// TestSelectionsShareParameters: an op that passes 8-bit data through
// (ops.Int8Of) between two quantized convolutions takes its input's
// parameters, so after qdq-propagate and qdq-cleanup it moves uint8 from
// one integer group to the next with no requantization between. cc
// quantize used to share only through views and permutations (and
// MaxPool), while qdq-propagate moves through every selection: a Slice
// left a DequantizeLinear → QuantizeLinear of two scales.
func TestSelectionsShareParameters(t *testing.T) {
	for _, c := range []struct {
		op    string
		apply func(g *ir.Graph, x *ir.Value) *ir.Value
	}{
		{"Slice", func(g *ir.Graph, x *ir.Value) *ir.Value {
			ints := func(name string, v ...int64) *ir.Value {
				return g.AddInitializer(name, ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v))
			}
			return g.Apply("Slice", []*ir.Value{x, ints("starts", 3, 2), ints("ends", 6, 5), ints("axes", 2, 3)})
		}},
		{"Resize", func(g *ir.Graph, x *ir.Value) *ir.Value {
			scales := g.AddInitializer("scales", ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 0.5, 0.5}))
			return g.Apply("Resize", []*ir.Value{x, nil, scales}, ir.AttrS("mode", "nearest"))
		}},
		{"Pad", func(g *ir.Graph, x *ir.Value) *ir.Value {
			pads := g.AddInitializer("pads", ir.FromSlice(ir.Int64, []int64{8}, []int64{0, 0, 1, 1, 0, 0, 1, 1}))
			return g.Apply("Pad", []*ir.Value{x, pads})
		}},
		{"Gather", func(g *ir.Graph, x *ir.Value) *ir.Value {
			idx := g.AddInitializer("channels", ir.FromSlice(ir.Int64, []int64{3}, []int64{5, 0, 2}))
			return g.Apply("Gather", []*ir.Value{x, idx}, ir.AttrI("axis", 1))
		}},
	} {
		t.Run(c.op, func(t *testing.T) {
			build := func() *ir.Model {
				rng := rand.New(rand.NewPCG(9, 9))
				g := ir.NewGraph("selection")
				x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 3, 8, 8)))
				c1 := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w1", randn(rng, 0.3, 6, 3, 3, 3)), g.AddInitializer("b1", randn(rng, 0.1, 6))}, ir.AttrIs("pads", 1, 1, 1, 1))
				mid := c.apply(g, c1) // a selection of c1's values: a narrower range
				channels := int64(6)
				if c.op == "Gather" {
					channels = 3
				}
				y := g.Apply("Conv", []*ir.Value{mid, g.AddInitializer("w2", randn(rng, 0.3, 4, channels, 3, 3))})
				y.Name = "y"
				g.SetOutputs(y)
				return ir.NewModel(g, 13)
			}
			src, m := modelBytes(t, build())
			calib := writeTensor(t, t.TempDir(), "x.pb", randn(rand.New(rand.NewPCG(2, 2)), 1, 8, 3, 8, 8))
			res := quantizeOnReference(t, m, src, Options{Data: []string{calib}, Method: Method{Name: "minmax"}, QuantizeAll: true})
			q := res.Model
			_, float := modelBytes(t, build())
			x := randn(rand.New(rand.NewPCG(3, 3)), 1, 1, 3, 8, 8)
			want := runReference(t, float, map[string]*ir.Tensor{"x": x})["y"]
			got := runReference(t, q, map[string]*ir.Tensor{"x": x})["y"]
			assert.GreaterOrEqual(t, cosine(want.Float32s(), got.Float32s()), 0.99)

			require.NoError(t, passes.Run(&passes.Context{OptLevel: 2, Verify: true}, passes.O2, q))
			groups := 0
			for _, n := range q.Graph.Nodes {
				switch {
				case n.OpType == "FusionGroup":
					groups++
				case n.OpType == c.op:
					assert.Equal(t, ir.Uint8, n.Inputs[0].Type.Elem, "%s moves uint8", n)
				case n.OpType == "QuantizeLinear":
					assert.NotEqual(t, "DequantizeLinear", producer(n.Inputs[0]), "%s requantizes a dequantized tensor", n)
				}
			}
			assert.Equal(t, 2, groups, "both convolutions are integer groups")
			got = runReference(t, q, map[string]*ir.Tensor{"x": x})["y"]
			assert.GreaterOrEqual(t, cosine(want.Float32s(), got.Float32s()), 0.99, "after the passes")
		})
	}
}
