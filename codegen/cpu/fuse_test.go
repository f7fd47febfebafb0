package cpu

import (
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
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, feeds := c.model(r)
			check(t, m, feeds, 1e-5)
		})
	}
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
// what the unfused graph does. A clamp folds into the store; the other
// activations run in place right after it: one kernel besides the base's
// own (Im2col, Conv, MatMul).
func TestEpilogueGroups(t *testing.T) {
	r := rand.New(rand.NewSource(10))
	for _, c := range []struct {
		name  string
		act   func(g *ir.Graph, v *ir.Value) *ir.Value
		steps int // kernels after the base's
	}{
		{"relu", func(g *ir.Graph, v *ir.Value) *ir.Value { return g.Apply("Relu", []*ir.Value{v}) }, 0},
		{"leaky_relu", func(g *ir.Graph, v *ir.Value) *ir.Value {
			return g.Apply("LeakyRelu", []*ir.Value{v}, ir.AttrF("alpha", 0.1))
		}, 1},
		{"sigmoid", func(g *ir.Graph, v *ir.Value) *ir.Value { return g.Apply("Sigmoid", []*ir.Value{v}) }, 1},
		{"hard_swish", func(g *ir.Graph, v *ir.Value) *ir.Value { return g.Apply("HardSwish", []*ir.Value{v}) }, 1},
		{"silu", func(g *ir.Graph, v *ir.Value) *ir.Value {
			return g.Apply("Mul", []*ir.Value{v, g.Apply("Sigmoid", []*ir.Value{v})})
		}, 1},
	} {
		for _, base := range []string{"conv", "matmul"} {
			t.Run(base+"_"+c.name, func(t *testing.T) {
				g := ir.NewGraph(c.name)
				var v *ir.Value
				var feeds map[string]*ir.Tensor
				if base == "conv" {
					x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 4, 6, 6)))
					feeds = map[string]*ir.Tensor{"x": randTensor(r, 1, 4, 6, 6)}
					v = g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 8, 4, 3, 3)), g.AddInitializer("b", randTensor(r, 8))},
						ir.AttrIs("pads", 1, 1, 1, 1))
				} else {
					// MatMul + bias + residual, all in the store.
					x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 5, 24)))
					res := g.AddInput("res", ir.TensorType(ir.Float32, ir.S(2, 5, 40)))
					feeds = map[string]*ir.Tensor{"x": randTensor(r, 2, 5, 24), "res": randTensor(r, 2, 5, 40)}
					v = g.Apply("MatMul", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 24, 40))})
					v = g.Apply("Add", []*ir.Value{v, g.AddInitializer("b", randTensor(r, 40))})
					v = g.Apply("Add", []*ir.Value{res, v})
				}
				y := c.act(g, v)
				y.Name = "y"
				g.SetOutputs(y)
				res := checkO2(t, ir.NewModel(g, 14), feeds, 1e-5)
				if n := len(res.Kernels) - kernelsWith(res, "Im2col") - kernelsWith(res, "Conv") - kernelsWith(res, "MatMul"); n != c.steps {
					t.Errorf("want %d kernels after the base's, got %v", c.steps, res.Kernels)
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
