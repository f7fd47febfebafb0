package cpu

import (
	"errors"
	"flag"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var dumpDir = flag.String("dump", "", "write each test's LLVM IR to this directory")

func needLLC(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
}

func randTensor(r *rand.Rand, dims ...int64) *ir.Tensor {
	t := ir.NewTensor(ir.Float32, dims...)
	f := t.Float32s()
	for i := range f {
		f[i] = float32(r.NormFloat64())
		if f[i] == 0 {
			f[i] = 0.5
		}
	}
	return t
}

func relL2(got, want *ir.Tensor) float64 {
	var num, den float64
	for i := 0; i < int(want.Len()); i++ {
		a, b := got.Float64At(i), want.Float64At(i)
		if math.IsInf(b, 0) && a == b || math.IsNaN(a) && math.IsNaN(b) {
			continue // an empty ReduceMax's -Inf, or NaN where the reference has it
		}
		num += (a - b) * (a - b)
		den += b * b
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// check compiles m, runs it at 1 and 2 threads and compares every output
// with the reference executor.
func check(t *testing.T, m *ir.Model, inputs map[string]*ir.Tensor, tol float64) *Result {
	t.Helper()
	needLLC(t)
	return compileAndCompare(t, m, inputs, runRef(t, m, inputs), tol)
}

// checkO2 is check after the O2 pipeline (fusion included), as cc build
// compiles; the reference runs the model as given, unfused.
func checkO2(t *testing.T, m *ir.Model, inputs map[string]*ir.Tensor, tol float64) *Result {
	t.Helper()
	needLLC(t)
	want := runRef(t, m, inputs)
	return compileAndCompare(t, optimize(t, m), inputs, want, tol)
}

// optimize runs the O2 pipeline on m in place.
func optimize(t testing.TB, m *ir.Model) *ir.Model {
	t.Helper()
	if err := passes.Run(&passes.Context{OptLevel: 2, Verify: true, Target: fusionOnly{}}, passes.O2, m); err != nil {
		t.Fatalf("passes: %v", err)
	}
	return m
}

func runRef(t *testing.T, m *ir.Model, inputs map[string]*ir.Tensor) map[string]*ir.Tensor {
	t.Helper()
	ref, err := reference.New(m)
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	want, err := ref.Run(inputs)
	if err != nil {
		t.Fatalf("reference run: %v", err)
	}
	return want
}

// compileAndCompare compiles with Winograd on wherever it fits, so the
// kernel tests do not depend on what measures faster here (tune_test.go
// tests the choice).
func compileAndCompare(t *testing.T, m *ir.Model, inputs, want map[string]*ir.Tensor, tol float64) *Result {
	t.Helper()
	res, err := Compile(m, Options{Winograd: WinogradOn})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if *dumpDir != "" {
		os.WriteFile(filepath.Join(*dumpDir, strings.ReplaceAll(t.Name(), "/", "_")+".ll"), []byte(res.LLVMIR), 0o644)
	}
	e, err := Load(res)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer e.Close()
	for _, threads := range []int{1, 2} {
		got, err := e.Run(inputs, threads, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range want {
			g := got[name]
			if g == nil {
				t.Fatalf("output %q missing", name)
			}
			if !slices.Equal(g.Dims, w.Dims) {
				t.Fatalf("output %q: dims %v, want %v", name, g.Dims, w.Dims)
			}
			if e := relL2(g, w); e > tol || math.IsNaN(e) {
				t.Errorf("threads=%d output %q: rel. L2 error %.3g > %.1g", threads, name, e, tol)
			}
		}
	}
	return res
}

// opModel builds a one-node model over float inputs of the given shapes;
// consts are added as initializers after the inputs.
type opCase struct {
	name     string
	op       string
	inputs   [][]int64
	consts   []*ir.Tensor // initializers, appended to the node's inputs
	attrs    []*ir.Attribute
	tol      float64
	opset    int64
	positive bool // inputs > 0 (Sqrt)
}

func (c opCase) model(r *rand.Rand) (*ir.Model, map[string]*ir.Tensor) {
	g := ir.NewGraph(c.name)
	feeds := map[string]*ir.Tensor{}
	var ins []*ir.Value
	for i, d := range c.inputs {
		name := string(rune('a' + i))
		ins = append(ins, g.AddInput(name, ir.TensorType(ir.Float32, ir.S(d...))))
		feeds[name] = randTensor(r, d...)
		if c.positive {
			f := feeds[name].Float32s()
			for j := range f {
				f[j] = float32(math.Abs(float64(f[j]))) + 0.01
			}
		}
	}
	for i, t := range c.consts {
		if t == nil {
			ins = append(ins, nil)
			continue
		}
		ins = append(ins, g.AddInitializer("c"+string(rune('0'+i)), t))
	}
	out := g.Apply(c.op, ins, c.attrs...)
	out.Name = "y"
	g.SetOutputs(out)
	opset := c.opset
	if opset == 0 {
		opset = 13
	}
	return ir.NewModel(g, opset), feeds
}

func i64s(v ...int64) *ir.Tensor { return ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v) }

func TestOps(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	cases := []opCase{
		{name: "add_bcast", op: "Add", inputs: [][]int64{{2, 3, 4, 5}, {3, 1, 5}}},
		{name: "add_big", op: "Add", inputs: [][]int64{{1, 64, 40, 40}, {1, 64, 40, 40}}},
		{name: "sub", op: "Sub", inputs: [][]int64{{4, 5}, {5}}},
		{name: "mul_scalar", op: "Mul", inputs: [][]int64{{3, 7}}, consts: []*ir.Tensor{ir.Scalar(ir.Float32, float32(1.5))}},
		{name: "div", op: "Div", inputs: [][]int64{{6, 7}, {6, 1}}},
		{name: "pow2", op: "Pow", inputs: [][]int64{{5, 9}}, consts: []*ir.Tensor{ir.Scalar(ir.Float32, float32(2))}},
		{name: "relu", op: "Relu", inputs: [][]int64{{3, 50}}},
		{name: "leakyrelu", op: "LeakyRelu", inputs: [][]int64{{3, 50}}, attrs: []*ir.Attribute{ir.AttrF("alpha", 0.2)}},
		{name: "hardswish", op: "HardSwish", inputs: [][]int64{{3, 50}}, opset: 14},
		{name: "clip", op: "Clip", inputs: [][]int64{{3, 50}}, consts: []*ir.Tensor{ir.Scalar(ir.Float32, float32(-0.5)), ir.Scalar(ir.Float32, float32(0.7))}},
		{name: "sqrt", op: "Sqrt", inputs: [][]int64{{4, 9}}, positive: true},
		{name: "erf", op: "Erf", inputs: [][]int64{{4, 100}}},
		{name: "exp", op: "Exp", inputs: [][]int64{{4, 33}}},
		{name: "sigmoid", op: "Sigmoid", inputs: [][]int64{{4, 33}}},
		{name: "tanh", op: "Tanh", inputs: [][]int64{{4, 33}}},
		{name: "identity", op: "Identity", inputs: [][]int64{{4, 5}}},
		{name: "flatten", op: "Flatten", inputs: [][]int64{{2, 3, 4}}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{name: "reshape", op: "Reshape", inputs: [][]int64{{2, 3, 4}}, consts: []*ir.Tensor{i64s(4, -1)}},
		{name: "unsqueeze", op: "Unsqueeze", inputs: [][]int64{{2, 3}}, consts: []*ir.Tensor{i64s(0, 3)}},
		{name: "transpose", op: "Transpose", inputs: [][]int64{{2, 3, 4, 5}}, attrs: []*ir.Attribute{ir.AttrIs("perm", 0, 2, 3, 1)}},
		// Gathering lanes in blocks of rows (kernel.gatherRows): NHWC to
		// NCHW with 40 channels (two blocks and a tail of 8) and rows of
		// 19 (a vector and a masked tail); a 2-D one of 70 × 37.
		{name: "transpose_blocked", op: "Transpose", inputs: [][]int64{{2, 5, 19, 40}}, attrs: []*ir.Attribute{ir.AttrIs("perm", 0, 3, 1, 2)}},
		{name: "transpose_blocked_2d", op: "Transpose", inputs: [][]int64{{70, 37}}, attrs: []*ir.Attribute{ir.AttrIs("perm", 1, 0)}},
		{name: "concat", op: "Concat", inputs: [][]int64{{2, 3, 4}, {2, 5, 4}}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{name: "slice", op: "Slice", inputs: [][]int64{{6, 10}}, consts: []*ir.Tensor{i64s(1, 2), i64s(5, 9), i64s(0, 1), i64s(2, 3)}},
		{name: "gather", op: "Gather", inputs: [][]int64{{5, 4, 3}}, consts: []*ir.Tensor{ir.FromSlice(ir.Int64, []int64{2, 2}, []int64{0, 4, -1, 2})}, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
		{name: "gather_axis1", op: "Gather", inputs: [][]int64{{5, 4, 3}}, consts: []*ir.Tensor{ir.Scalar(ir.Int64, int64(1))}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{name: "expand", op: "Expand", inputs: [][]int64{{3, 1}}, consts: []*ir.Tensor{i64s(2, 3, 4)}},
		{name: "softmax", op: "Softmax", inputs: [][]int64{{2, 3, 20}}},
		{name: "softmax_axis1", op: "Softmax", inputs: [][]int64{{2, 7, 5}}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{name: "reducemean", op: "ReduceMean", inputs: [][]int64{{2, 3, 16}}, attrs: []*ir.Attribute{ir.AttrIs("axes", -1)}},
		{name: "reducemean_mid", op: "ReduceMean", inputs: [][]int64{{2, 3, 4, 5}}, attrs: []*ir.Attribute{ir.AttrIs("axes", 1, 3), ir.AttrI("keepdims", 0)}},
		{name: "maxpool", op: "MaxPool", inputs: [][]int64{{1, 3, 11, 11}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{name: "maxpool_ceil", op: "MaxPool", inputs: [][]int64{{1, 2, 10, 10}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), ir.AttrI("ceil_mode", 1)}},
		{name: "avgpool", op: "AveragePool", inputs: [][]int64{{1, 3, 8, 8}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{name: "gap", op: "GlobalAveragePool", inputs: [][]int64{{1, 5, 7, 7}}},
		{name: "gemm", op: "Gemm", inputs: [][]int64{{3, 20}}, consts: []*ir.Tensor{w(30, 20), w(30)}, attrs: []*ir.Attribute{ir.AttrI("transB", 1)}, tol: 1e-5},
		{name: "gemm_big", op: "Gemm", inputs: [][]int64{{37, 70}}, consts: []*ir.Tensor{w(70, 100), w(1, 100)}, attrs: []*ir.Attribute{ir.AttrF("alpha", 0.5), ir.AttrF("beta", 2)}, tol: 1e-5},
		{name: "gemm_act", op: "Gemm", inputs: [][]int64{{5, 8}, {8, 9}}},
		{name: "gemm_transA", op: "Gemm", inputs: [][]int64{{8, 5}}, consts: []*ir.Tensor{w(8, 17), w(5, 1)}, attrs: []*ir.Attribute{ir.AttrI("transA", 1)}},
		{name: "matmul", op: "MatMul", inputs: [][]int64{{1, 130, 64}}, consts: []*ir.Tensor{w(64, 70)}, tol: 1e-5},
		{name: "matmul_batched", op: "MatMul", inputs: [][]int64{{2, 3, 9, 16}, {2, 3, 16, 20}}, tol: 1e-5},
		{name: "matmul_bcast", op: "MatMul", inputs: [][]int64{{2, 1, 5, 16}, {3, 16, 7}}, tol: 1e-5},
		{name: "matmul_vec", op: "MatMul", inputs: [][]int64{{16}, {4, 16, 7}}, tol: 1e-5},
		// A's batch dims fold into M when B is a shared 2-D matrix.
		{name: "matmul_fold_m1", op: "MatMul", inputs: [][]int64{{37, 1, 24}}, consts: []*ir.Tensor{w(24, 70)}, tol: 1e-5},
		{name: "matmul_fold", op: "MatMul", inputs: [][]int64{{3, 4, 7, 16}}, consts: []*ir.Tensor{w(16, 20)}, tol: 1e-5},
		{name: "matmul_fold_var", op: "MatMul", inputs: [][]int64{{2, 3, 5, 16}, {16, 9}}, tol: 1e-5},
		{name: "matmul_fold_bcast", op: "MatMul", inputs: [][]int64{{2, 3, 5, 16}, {1, 16, 9}}, tol: 1e-5},
		{name: "matmul_fold_vec", op: "MatMul", inputs: [][]int64{{3, 5, 16}, {16}}, tol: 1e-5},
		{name: "conv3x3", op: "Conv", inputs: [][]int64{{1, 3, 12, 12}}, consts: []*ir.Tensor{w(8, 3, 3, 3), w(8)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1)}, tol: 1e-5},
		{name: "conv7x7s2", op: "Conv", inputs: [][]int64{{1, 3, 23, 23}}, consts: []*ir.Tensor{w(10, 3, 7, 7), w(10)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 3, 3, 3, 3), ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		{name: "conv1x1", op: "Conv", inputs: [][]int64{{2, 16, 7, 7}}, consts: []*ir.Tensor{w(20, 16, 1, 1)}, tol: 1e-5},
		{name: "conv1x1s2", op: "Conv", inputs: [][]int64{{1, 16, 9, 9}}, consts: []*ir.Tensor{w(20, 16, 1, 1), w(20)}, attrs: []*ir.Attribute{ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		{name: "conv_dilated", op: "Conv", inputs: [][]int64{{1, 4, 10, 10}}, consts: []*ir.Tensor{w(6, 4, 3, 3)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 2, 2, 2, 2), ir.AttrIs("dilations", 2, 2)}, tol: 1e-5},
		{name: "conv_dw", op: "Conv", inputs: [][]int64{{1, 8, 9, 9}}, consts: []*ir.Tensor{w(8, 1, 3, 3), w(8)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 8)}, tol: 1e-5},
		{name: "conv_dw_s2", op: "Conv", inputs: [][]int64{{1, 8, 10, 10}}, consts: []*ir.Tensor{w(8, 1, 3, 3)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 8), ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		// Windows through rowTaps (rows wider than a vector): tails, 5×5,
		// dilation, a last full vector whose right tap reads the next
		// stretch of the row; stride 1 and 2.
		{name: "conv_dw_wide", op: "Conv", inputs: [][]int64{{1, 4, 6, 37}}, consts: []*ir.Tensor{w(4, 1, 3, 3), w(4)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 4)}, tol: 1e-5},
		{name: "conv_dw5_dilated", op: "Conv", inputs: [][]int64{{1, 3, 11, 35}}, consts: []*ir.Tensor{w(3, 1, 5, 5)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 4, 4, 4, 4), ir.AttrIs("dilations", 2, 2), ir.AttrI("group", 3)}, tol: 1e-5},
		{name: "maxpool_s1_wide", op: "MaxPool", inputs: [][]int64{{1, 3, 7, 40}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{name: "conv_dw_s2_wide", op: "Conv", inputs: [][]int64{{1, 6, 13, 37}}, consts: []*ir.Tensor{w(6, 1, 3, 3), w(6)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 6), ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		{name: "conv_dw5_s2", op: "Conv", inputs: [][]int64{{1, 4, 15, 70}}, consts: []*ir.Tensor{w(4, 1, 5, 5)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 2, 2, 2, 2), ir.AttrI("group", 4), ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		{name: "conv_dw_s2_dilated", op: "Conv", inputs: [][]int64{{1, 3, 12, 40}}, consts: []*ir.Tensor{w(3, 1, 3, 3)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 2, 2, 2, 2), ir.AttrIs("dilations", 2, 2), ir.AttrI("group", 3), ir.AttrIs("strides", 2, 2)}, tol: 1e-5},
		{name: "maxpool_s2_wide", op: "MaxPool", inputs: [][]int64{{1, 3, 9, 111}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2)}},
		{name: "maxpool_s2_full", op: "MaxPool", inputs: [][]int64{{1, 2, 5, 33}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2)}},
		{name: "avgpool_s2_wide", op: "AveragePool", inputs: [][]int64{{1, 2, 9, 69}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 1, 1)}},
		{name: "conv_grouped", op: "Conv", inputs: [][]int64{{1, 8, 6, 6}}, consts: []*ir.Tensor{w(4, 4, 3, 3), w(4)}, attrs: []*ir.Attribute{ir.AttrI("group", 2)}, tol: 1e-5},
	}
	checkCases(t, r, cases)
}

// checkCases compiles and checks each case against the reference, at its
// tolerance (1e-5 when it names none).
func checkCases(t *testing.T, r *rand.Rand, cases []opCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, feeds := c.model(r)
			tol := c.tol
			if tol == 0 {
				tol = 1e-5
			}
			check(t, m, feeds, tol)
		})
	}
}

// TestFusedChain exercises epilogue fusion, aliasing and arena reuse.
func TestFusedChain(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	g := ir.NewGraph("chain")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 4, 10, 10)))
	w1 := g.AddInitializer("w1", randTensor(r, 8, 4, 3, 3))
	b1 := g.AddInitializer("b1", randTensor(r, 8))
	h := g.Apply("Conv", []*ir.Value{x, w1, b1}, ir.AttrIs("pads", 1, 1, 1, 1))
	h = g.Apply("Relu", []*ir.Value{h})
	w2 := g.AddInitializer("w2", randTensor(r, 8, 1, 3, 3))
	h2 := g.Apply("Conv", []*ir.Value{h, w2}, ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", 8))
	lo := g.AddInitializer("lo", ir.Scalar(ir.Float32, float32(0)))
	hi := g.AddInitializer("hi", ir.Scalar(ir.Float32, float32(6)))
	h2 = g.Apply("Clip", []*ir.Value{h2, lo, hi})
	s := g.Apply("Add", []*ir.Value{h, h2})
	p := g.Apply("MaxPool", []*ir.Value{s}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
	gp := g.Apply("GlobalAveragePool", []*ir.Value{p})
	f := g.Apply("Flatten", []*ir.Value{gp})
	w3 := g.AddInitializer("w3", randTensor(r, 5, 8))
	y := g.Apply("Gemm", []*ir.Value{f, w3}, ir.AttrI("transB", 1))
	y.Name = "y"
	g.SetOutputs(y)
	m := ir.NewModel(g, 13)
	res := checkO2(t, m, map[string]*ir.Tensor{"x": randTensor(r, 1, 4, 10, 10)}, 1e-5)
	if res.ArenaBytes >= res.TensorBytes {
		t.Errorf("arena %d bytes, no reuse over %d bytes of tensors", res.ArenaBytes, res.TensorBytes)
	}
	t.Logf("arena %d bytes for %d bytes of tensors; kernels %v", res.ArenaBytes, res.TensorBytes, res.Kernels)
}

func TestUnsupportedListsAll(t *testing.T) {
	needLLC(t)
	g := ir.NewGraph("bad")
	// A decoded image has a shape only the data gives: the Cast reading
	// it and the ReduceSum over the Cast are both refused, in one error.
	img := g.Apply("ImageDecoder", []*ir.Value{g.AddInput("x", ir.TensorType(ir.Uint8, ir.S(64)))})
	a := g.Apply("Cast", []*ir.Value{img}, ir.AttrI("to", int64(ir.Float32)))
	g.SetOutputs(g.Apply("ReduceSum", []*ir.Value{a}, ir.AttrI("keepdims", 0)))
	_, err := Compile(ir.NewModel(g, 20), Options{})
	if err == nil || !strings.Contains(err.Error(), "Cast") || !strings.Contains(err.Error(), "ReduceSum") {
		t.Fatalf("want an error naming Cast and ReduceSum, got %v", err)
	}
}

func TestDynamicShapeRejected(t *testing.T) {
	needLLC(t)
	g := ir.NewGraph("dyn")
	// A dim with neither a size nor a name cannot be planned for.
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.UnknownDim(), ir.D(3))))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	_, err := Compile(ir.NewModel(g, 13), Options{})
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("want an error naming x, got %v", err)
	}
}

func TestMissingLLC(t *testing.T) {
	g := ir.NewGraph("m")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	_, err := Compile(ir.NewModel(g, 13), Options{LLC: "/nonexistent/llc"})
	if !errors.Is(err, ErrNoLLC) {
		t.Fatalf("got %v", err)
	}
}

// fusionOnly is this backend's judgement of what fuses, with every
// quantized group formed and no convolution algorithm chosen: the passes
// as the lowering tests want them, without measuring.
type fusionOnly struct{ passes.Reference }

func (fusionOnly) Fusible(n *ir.Node, _ ops.Opsets) bool { return kernel.Fusible(n) }

// chooseWith is the reference's judgements with convolution algorithms
// chosen by choose.
type chooseWith struct {
	passes.Reference
	choose func(m *ir.Model, fg *ir.Node) (string, error)
}

func (c chooseWith) ConvAlgorithm(m *ir.Model, fg *ir.Node) (string, error) { return c.choose(m, fg) }
