package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
)

// Fusion (the passes' FusionGroups, lowered by fuse.go) is tested end to
// end: each graph goes through the O2 pipeline, is compiled and run against
// the reference executor, and the kernel list shows what was fused.

func kernelsWith(res *Result, op string) int {
	n := 0
	for _, k := range res.Kernels {
		if strings.Contains(k, "_"+op) {
			n++
		}
	}
	return n
}

// layerNormGraph appends PyTorch's decomposed LayerNorm of x (last axis)
// with scale and bias; square picks Pow(d, 2) or Mul(d, d).
func layerNormGraph(g *ir.Graph, r *rand.Rand, x *ir.Value, L int64, square string) *ir.Value {
	mean := g.Apply("ReduceMean", []*ir.Value{x}, ir.AttrIs("axes", -1))
	d := g.Apply("Sub", []*ir.Value{x, mean})
	var p *ir.Value
	if square == "Pow" {
		p = g.Apply("Pow", []*ir.Value{d, g.AddInitializer(g.UniqueName("two"), ir.Scalar(ir.Float32, float32(2)))})
	} else {
		p = g.Apply("Mul", []*ir.Value{d, d})
	}
	v := g.Apply("ReduceMean", []*ir.Value{p}, ir.AttrIs("axes", -1))
	v = g.Apply("Add", []*ir.Value{v, g.AddInitializer(g.UniqueName("eps"), ir.Scalar(ir.Float32, float32(1e-5)))})
	y := g.Apply("Div", []*ir.Value{d, g.Apply("Sqrt", []*ir.Value{v})})
	y = g.Apply("Mul", []*ir.Value{y, g.AddInitializer(g.UniqueName("gamma"), randTensor(r, L))})
	return g.Apply("Add", []*ir.Value{y, g.AddInitializer(g.UniqueName("beta"), randTensor(r, L))})
}

func TestFuseLayerNorm(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, c := range []struct {
		name     string
		dims     []int64
		square   string
		residual bool
	}{
		{"bert", []int64{1, 128, 256}, "Pow", true},
		{"odd_row", []int64{3, 5, 37}, "Mul", true},
		{"short_row", []int64{7, 5}, "Pow", false},
		{"one_row", []int64{1, 300}, "Pow", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph(c.name)
			a := g.AddInput("a", ir.TensorType(ir.Float32, ir.S(c.dims...)))
			feeds := map[string]*ir.Tensor{"a": randTensor(r, c.dims...)}
			x := a
			if c.residual {
				b := g.AddInput("b", ir.TensorType(ir.Float32, ir.S(c.dims...)))
				feeds["b"] = randTensor(r, c.dims...)
				x = g.Apply("Add", []*ir.Value{a, b})
			}
			y := layerNormGraph(g, r, x, c.dims[len(c.dims)-1], c.square)
			y.Name = "y"
			g.SetOutputs(y)
			res := checkO2(t, ir.NewModel(g, 13), feeds, 1e-5)
			if len(res.Kernels) != 1 || kernelsWith(res, "LayerNorm") != 1 {
				t.Errorf("want one LayerNorm kernel, got %v", res.Kernels)
			}
		})
	}
}

// TestFuseLayerNormShared: the normalized value and the input are also
// read elsewhere, so they must be materialized; the pattern still fuses.
func TestFuseLayerNormShared(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	g := ir.NewGraph("shared")
	a := g.AddInput("a", ir.TensorType(ir.Float32, ir.S(4, 40)))
	b := g.AddInput("b", ir.TensorType(ir.Float32, ir.S(4, 40)))
	x := g.Apply("Add", []*ir.Value{a, b})
	y := layerNormGraph(g, r, x, 40, "Pow")
	z := g.Apply("Mul", []*ir.Value{y, x}) // reads x again
	z.Name = "z"
	g.SetOutputs(z, y)
	res := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"a": randTensor(r, 4, 40), "b": randTensor(r, 4, 40)}, 1e-5)
	if kernelsWith(res, "LayerNorm") != 1 {
		t.Errorf("want a LayerNorm kernel, got %v", res.Kernels)
	}
}

// TestFuseElementwise: GELU after a bias Add is one kernel; a Transpose
// read only by the group is read through; broadcasts of every kind.
func TestFuseElementwise(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	g := ir.NewGraph("gelu")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 13, 70)))
	sc := func(v float32) *ir.Value { return g.AddInitializer(g.UniqueName("c"), ir.Scalar(ir.Float32, v)) }
	h := g.Apply("Add", []*ir.Value{g.AddInitializer("bias", randTensor(r, 70)), x})
	e := g.Apply("Erf", []*ir.Value{g.Apply("Div", []*ir.Value{h, sc(1.4142135)})})
	y := g.Apply("Mul", []*ir.Value{g.Apply("Mul", []*ir.Value{h, g.Apply("Add", []*ir.Value{e, sc(1)})}), sc(0.5)})
	y.Name = "y"
	// A transposed operand (inner dim kept) and a column broadcast.
	q := g.AddInput("q", ir.TensorType(ir.Float32, ir.S(13, 4, 16)))
	qt := g.Apply("Transpose", []*ir.Value{q}, ir.AttrIs("perm", 1, 0, 2))
	col := g.AddInput("col", ir.TensorType(ir.Float32, ir.S(4, 13, 1)))
	z := g.Apply("Sub", []*ir.Value{g.Apply("Div", []*ir.Value{qt, sc(8)}), col})
	z.Name = "z"
	g.SetOutputs(y, z)
	feeds := map[string]*ir.Tensor{"x": randTensor(r, 1, 13, 70), "q": randTensor(r, 13, 4, 16), "col": randTensor(r, 4, 13, 1)}
	res := checkO2(t, ir.NewModel(g, 13), feeds, 1e-5)
	if len(res.Kernels) != 2 || kernelsWith(res, "Transpose") != 0 {
		t.Errorf("want two fused kernels, got %v", res.Kernels)
	}
}

// TestFuseSharedValues: an elementwise chain whose every value two nodes
// read (t' = tanh(t) + 0.25·t) is one kernel computing each value once per
// point, not a tree doubling at each step; over shapes with too few rows
// for the threads, which then split the rows into pieces (a vector tail
// in the last piece).
func TestFuseSharedValues(t *testing.T) {
	const depth = 12
	r := rand.New(rand.NewSource(9))
	for _, dims := range [][]int64{{100003}, {3, 50000}, {2, 40000}, {7, 33}} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			g := ir.NewGraph("shared")
			v := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(dims...)))
			quarter := g.AddInitializer("quarter", ir.Scalar(ir.Float32, float32(0.25)))
			for range depth {
				v = g.Apply("Add", []*ir.Value{g.Apply("Tanh", []*ir.Value{v}), g.Apply("Mul", []*ir.Value{v, quarter})})
			}
			v.Name = "y"
			g.SetOutputs(v)
			res := checkO2(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, dims...)}, 1e-5)
			if len(res.Kernels) != 1 {
				t.Errorf("want one fused kernel, got %v", res.Kernels)
			}
			// Each step's multiplies (tanh's among them) appear once per
			// loop body (full vectors, the masked rest): linear in the
			// depth, where a tree would hold 2^depth.
			if n := strings.Count(res.LLVMIR, " fmul "); n > 16*depth {
				t.Errorf("%d multiplies in the IR for %d steps: values are recomputed per use", n, depth)
			}
		})
	}
}

// TestUnitTransposeIsView: a Transpose that only moves unit dims costs no
// kernel.
func TestUnitTransposeIsView(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	g := ir.NewGraph("view")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 9, 20)))
	tr := g.Apply("Transpose", []*ir.Value{x}, ir.AttrIs("perm", 1, 0, 2))
	y := g.Apply("Softmax", []*ir.Value{tr}, ir.AttrI("axis", -1))
	y.Name = "y"
	g.SetOutputs(y)
	res := check(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, 1, 9, 20)}, 1e-5)
	if kernelsWith(res, "Transpose") != 0 {
		t.Errorf("Transpose was copied: %v", res.Kernels)
	}
}

func TestSoftmaxRows(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	cases := []opCase{
		{name: "softmax_128", op: "Softmax", inputs: [][]int64{{4, 128, 128}}, attrs: []*ir.Attribute{ir.AttrI("axis", -1)}},
		{name: "softmax_tail", op: "Softmax", inputs: [][]int64{{3, 37}}},
		{name: "softmax_short", op: "Softmax", inputs: [][]int64{{5, 3}}},
		{name: "softmax_opset11", op: "Softmax", inputs: [][]int64{{2, 3, 7}}, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}, opset: 11},
		{name: "logsoftmax", op: "LogSoftmax", inputs: [][]int64{{6, 45}}},
		{name: "logsoftmax_axis0", op: "LogSoftmax", inputs: [][]int64{{6, 5}}, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
	}
	checkCases(t, r, cases)
}

// TestPow covers the general x^y: negative bases with integer exponents,
// zero, fractional exponents of positive bases, a tensor of exponents.
func TestPow(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	g := ir.NewGraph("pow")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 24)))
	ye := g.AddInput("e", ir.TensorType(ir.Float32, ir.S(24)))
	y := g.Apply("Pow", []*ir.Value{x, ye})
	y.Name = "y"
	pos := g.AddInput("p", ir.TensorType(ir.Float32, ir.S(3, 17)))
	z := g.Apply("Pow", []*ir.Value{pos, g.AddInitializer("c", ir.Scalar(ir.Float32, float32(1.7)))})
	z.Name = "z"
	g.SetOutputs(y, z)
	xt := randTensor(r, 4, 24)
	xt.Float32s()[1], xt.Float32s()[3] = 0, 0 // 0^3 and 0^0
	et := ir.NewTensor(ir.Float32, 24)
	for i, v := range []float32{2, 3, -1, 0, 1, -2, 4, 5} { // integers for any base
		for j := i; j < 24; j += 8 {
			et.Float32s()[j] = v
		}
	}
	pt := randTensor(r, 3, 17)
	for i, v := range pt.Float32s() {
		pt.Float32s()[i] = float32(math.Abs(float64(v))) + 0.05
	}
	check(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": xt, "e": et, "p": pt}, 1e-5)
}

// TestEpilogueGroups: every epilogue the fuse-epilogue pass forms computes
// what the unfused graph does, on each store that applies one (GEMM,
// Winograd, 1×1, depthwise, Gemm and MatMul with bias and residual). An
// activation of the value alone is computed in the store: no kernel
// besides the base's; one that reads another tensor (PRelu's slope) runs
// in place right after.
func TestEpilogueGroups(t *testing.T) {
	r := rand.New(rand.NewSource(10))
	sc := func(g *ir.Graph, f float32) *ir.Value {
		return g.AddInitializer(fmt.Sprintf("c%d", len(g.Initializers)), ir.Scalar(ir.Float32, f))
	}
	for _, c := range []struct {
		name  string
		act   func(g *ir.Graph, v *ir.Value, ch []int64) *ir.Value // ch: a per-channel tensor's shape
		steps int                                                  // kernels after the base's
	}{
		{"relu", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value { return g.Apply("Relu", []*ir.Value{v}) }, 0},
		{"leaky_relu", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value {
			return g.Apply("LeakyRelu", []*ir.Value{v}, ir.AttrF("alpha", 0.1))
		}, 0},
		{"sigmoid", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value { return g.Apply("Sigmoid", []*ir.Value{v}) }, 0},
		{"hard_swish", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value { return g.Apply("HardSwish", []*ir.Value{v}) }, 0},
		{"silu", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value {
			return g.Apply("Mul", []*ir.Value{v, g.Apply("Sigmoid", []*ir.Value{v})})
		}, 0},
		{"gelu_erf", func(g *ir.Graph, v *ir.Value, _ []int64) *ir.Value {
			e := g.Apply("Erf", []*ir.Value{g.Apply("Div", []*ir.Value{v, sc(g, 1.4142135)})})
			return g.Apply("Mul", []*ir.Value{g.Apply("Mul", []*ir.Value{v, g.Apply("Add", []*ir.Value{e, sc(g, 1)})}), sc(g, 0.5)})
		}, 0},
		{"prelu_slope", func(g *ir.Graph, v *ir.Value, ch []int64) *ir.Value {
			return g.Apply("PRelu", []*ir.Value{v, g.AddInitializer("slope", randTensor(r, ch...))})
		}, 1},
	} {
		for _, base := range []string{"conv3x3", "conv1x1", "depthwise", "gemm", "matmul"} {
			t.Run(base+"_"+c.name, func(t *testing.T) {
				build := func(withAct bool) (*ir.Model, map[string]*ir.Tensor) {
					r := rand.New(rand.NewSource(11))
					g := ir.NewGraph(c.name)
					var v *ir.Value
					var feeds map[string]*ir.Tensor
					ch := []int64{40}
					switch base {
					case "conv3x3", "conv1x1", "depthwise":
						x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 8, 10, 10)))
						feeds = map[string]*ir.Tensor{"x": randTensor(r, 1, 8, 10, 10)}
						w, attrs := randTensor(r, 8, 8, 3, 3), []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1)}
						switch base {
						case "conv1x1":
							w, attrs = randTensor(r, 8, 8, 1, 1), nil
						case "depthwise":
							w, attrs = randTensor(r, 8, 1, 3, 3), append(attrs, ir.AttrI("group", 8))
						}
						v = g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", w), g.AddInitializer("b", randTensor(r, 8))}, attrs...)
						ch = []int64{8, 1, 1}
					case "gemm":
						x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(3, 24)))
						feeds = map[string]*ir.Tensor{"x": randTensor(r, 3, 24)}
						v = g.Apply("Gemm", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 40, 24)), g.AddInitializer("b", randTensor(r, 40))},
							ir.AttrI("transB", 1))
					default:
						// MatMul + bias + residual, all in the store.
						x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 5, 24)))
						res := g.AddInput("res", ir.TensorType(ir.Float32, ir.S(2, 5, 40)))
						feeds = map[string]*ir.Tensor{"x": randTensor(r, 2, 5, 24), "res": randTensor(r, 2, 5, 40)}
						v = g.Apply("MatMul", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 24, 40))})
						v = g.Apply("Add", []*ir.Value{v, g.AddInitializer("b", randTensor(r, 40))})
						v = g.Apply("Add", []*ir.Value{res, v})
					}
					if withAct {
						v = c.act(g, v, ch)
					}
					v.Name = "y"
					g.SetOutputs(v)
					return ir.NewModel(g, 14), feeds
				}
				m, feeds := build(true)
				res := checkO2(t, m, feeds, 1e-5)
				plain, _ := build(false)
				pres, err := Compile(optimize(t, plain), Options{Winograd: WinogradOn})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(res.Kernels) - len(pres.Kernels); n != c.steps {
					t.Errorf("want %d kernels after the base's, got %v (without the activation: %v)", c.steps, res.Kernels, pres.Kernels)
				}
			})
		}
	}
}

// TestFusionGroupUnlowerable: a group this backend cannot compute as one
// kernel is an error naming the group and the node, never a miscompile.
func TestFusionGroupUnlowerable(t *testing.T) {
	needLLC(t)
	m, err := text.Parse("bad.onnxtxt", []byte(`<ir_version: 8, opset_import: ["" : 13, "kiln" : 1]>
g (float[2,8] X) => (float[2,8] Y) {
  Y = kiln.FusionGroup (X) <
    kind = "elementwise",
    body = elementwise () => (float[2,8] Y_fused) {
      E = Exp (X)
      Y_fused = Softmax (E)
    }
  >
}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(m, Options{})
	if err == nil || !strings.Contains(err.Error(), "kiln.FusionGroup") || !strings.Contains(err.Error(), "Softmax") {
		t.Errorf("want an error naming the group and Softmax, got %v", err)
	}
}
