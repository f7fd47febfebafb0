package cpu

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// zeroSizeCases are nodes over tensors with a zero dim, valid ONNX the
// reference runs: outputs of zero elements get no step at all; outputs
// read from an empty input are the op's value over nothing (a MatMul over
// K = 0 is zeros, a ReduceSum 0, a ReduceMax -Inf, as ONNX says since
// opset 18).
func zeroSizeCases(r *rand.Rand) []opCase {
	w := func(d ...int64) *ir.Tensor { return randTensor(r, d...) }
	return []opCase{
		{name: "matmul_m0", op: "MatMul", inputs: [][]int64{{0, 64}}, consts: []*ir.Tensor{w(64, 32)}},
		{name: "matmul_k0", op: "MatMul", inputs: [][]int64{{5, 0}}, consts: []*ir.Tensor{w(0, 32)}},
		{name: "matmul_batch0", op: "MatMul", inputs: [][]int64{{0, 3, 16}, {0, 16, 8}}},
		{name: "gemm_m0", op: "Gemm", inputs: [][]int64{{0, 64}}, consts: []*ir.Tensor{w(32, 64), w(32)}, attrs: []*ir.Attribute{ir.AttrI("transB", 1)}},
		{name: "gemm_k0_bias", op: "Gemm", inputs: [][]int64{{4, 0}}, consts: []*ir.Tensor{w(0, 6), w(6)}, attrs: []*ir.Attribute{ir.AttrF("beta", 0.5)}},
		{name: "conv_n0", op: "Conv", inputs: [][]int64{{0, 1, 8, 8}}, consts: []*ir.Tensor{w(2, 1, 3, 3), w(2)}},
		{name: "conv_n0_pad", op: "Conv", inputs: [][]int64{{0, 4, 8, 8}}, consts: []*ir.Tensor{w(8, 4, 3, 3)}, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1)}},
		{name: "relu", op: "Relu", inputs: [][]int64{{0, 7}}},
		{name: "add_bcast", op: "Add", inputs: [][]int64{{3, 0}, {0}}},
		{name: "concat_empty_part", op: "Concat", inputs: [][]int64{{2, 0, 4}, {2, 5, 4}}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{name: "concat_all_empty", op: "Concat", inputs: [][]int64{{0, 3}, {0, 3}}, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
		{name: "reducesum_empty_axis", op: "ReduceSum", inputs: [][]int64{{3, 0}}, consts: []*ir.Tensor{i64s(1)}},
		{name: "reducemax_empty_axis", op: "ReduceMax", inputs: [][]int64{{3, 0}}, consts: []*ir.Tensor{i64s(1)}, opset: 18},
		{name: "reducemin_empty_axis", op: "ReduceMin", inputs: [][]int64{{2, 0, 3}}, consts: []*ir.Tensor{i64s(1)}, opset: 18},
		{name: "reducesum_of_empty_rows", op: "ReduceSum", inputs: [][]int64{{0, 5}}, consts: []*ir.Tensor{i64s(1)}},
		{name: "softmax", op: "Softmax", inputs: [][]int64{{0, 7}}},
		{name: "transpose", op: "Transpose", inputs: [][]int64{{0, 3, 4}}, attrs: []*ir.Attribute{ir.AttrIs("perm", 2, 0, 1)}},
		{name: "maxpool", op: "MaxPool", inputs: [][]int64{{0, 3, 8, 8}}, attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3)}},
	}
}

// TestZeroSizeTensors compiles each zero-size case as given and after the
// O2 pipeline (fusion included) and compares with the reference.
func TestZeroSizeTensors(t *testing.T) {
	r := rand.New(rand.NewSource(32))
	for _, c := range zeroSizeCases(r) {
		t.Run(c.name, func(t *testing.T) {
			m, feeds := c.model(r)
			check(t, m, feeds, 1e-5)
		})
		t.Run(c.name+"/O2", func(t *testing.T) {
			m, feeds := c.model(r)
			checkO2(t, m, feeds, 1e-5)
		})
	}
}

// TestZeroSizeChain: an empty tensor through several nodes, fused at O2,
// and a non-empty output next to it.
func TestZeroSizeChain(t *testing.T) {
	r := rand.New(rand.NewSource(33))
	g := ir.NewGraph("zero_chain")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(0, 16)))
	z := g.AddInput("z", ir.TensorType(ir.Float32, ir.S(4, 16)))
	w := g.AddInitializer("w", randTensor(r, 16, 8))
	h := g.Apply("Relu", []*ir.Value{g.Apply("MatMul", []*ir.Value{x, w})})
	h = g.Apply("Sigmoid", []*ir.Value{g.Apply("Add", []*ir.Value{h, g.AddInitializer("b", randTensor(r, 8))})})
	h.Name = "empty"
	j := g.Apply("Concat", []*ir.Value{x, z}, ir.AttrI("axis", 0))
	j = g.Apply("ReduceMax", []*ir.Value{j, g.AddInitializer("axes", i64s(0))})
	j.Name = "rows"
	g.SetOutputs(h, j)
	feeds := map[string]*ir.Tensor{"x": randTensor(r, 0, 16), "z": randTensor(r, 4, 16)}
	checkO2(t, ir.NewModel(g, 18), feeds, 1e-5)
}

// TestEmptyGraphs: a graph whose only output is empty has no steps; one
// passing an input straight to an output, or with no outputs, is refused
// with what to change, never a crash.
func TestEmptyGraphs(t *testing.T) {
	needLLC(t)
	t.Run("only_empty_outputs", func(t *testing.T) {
		g := ir.NewGraph("nothing")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(0, 3)))
		y := g.Apply("Relu", []*ir.Value{x})
		y.Name = "y"
		g.SetOutputs(y)
		res := check(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": ir.NewTensor(ir.Float32, 0, 3)}, 0)
		if len(res.Kernels) != 0 {
			t.Errorf("kernels %v for an output of no elements, want none", res.Kernels)
		}
	})
	refused := []struct {
		name, want string
		graph      func(g *ir.Graph)
	}{
		{"no_outputs", "the graph has no outputs", func(g *ir.Graph) {
			g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4)))
		}},
		{"no_nodes_input_is_output", `output "x" is graph input "x"`, func(g *ir.Graph) {
			g.SetOutputs(g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4))))
		}},
		{"no_nodes_no_outputs", "the graph has no outputs", func(g *ir.Graph) {}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph(c.name)
			c.graph(g)
			_, err := Compile(ir.NewModel(g, 13), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "internal error") {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestRelL2Infinities: the comparison the zero-size tests rely on takes
// equal infinities (an empty ReduceMax) as equal and still sees a wrong
// sign.
func TestRelL2Infinities(t *testing.T) {
	inf := float32(math.Inf(-1))
	want := ir.FromSlice(ir.Float32, []int64{2}, []float32{inf, 1})
	if e := relL2(ir.FromSlice(ir.Float32, []int64{2}, []float32{inf, 1}), want); e != 0 {
		t.Errorf("equal -Inf: error %g, want 0", e)
	}
	if e := relL2(ir.FromSlice(ir.Float32, []int64{2}, []float32{-inf, 1}), want); e <= 1e-5 {
		t.Errorf("+Inf for -Inf: error %g, want a failing one (NaN or large)", e)
	}
}
