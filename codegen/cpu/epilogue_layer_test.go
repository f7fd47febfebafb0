package cpu

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// Epilogue groups (the passes' "conv", "gemm" and "matmul" FusionGroups)
// whose product the hand-written kernels do not take (handInfo) run the
// kernel layer's product into the group's output and the rest of the body
// over it in place; weights known only at run time take the hand
// kernels' algorithms that read them as laid out (and no conv-dw group).
// Each graph goes through the O2 pipeline and is compared with the
// reference, and the steps show which lowering ran.
func TestEpilogueOfLayerProduct(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, c := range []struct {
		name    string
		kernels string // the steps it compiles to
		build   func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value
	}{
		{"conv3d_bias_residual_relu", "Conv Relu", func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value {
			x := input(g, r, feeds, "x", 1, 3, 4, 5, 6)
			res := input(g, r, feeds, "res", 1, 4, 4, 5, 6)
			y := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 4, 3, 3, 3, 3)), g.AddInitializer("b", randTensor(r, 4))},
				ir.AttrIs("pads", 1, 1, 1, 1, 1, 1))
			return g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{y, res})})
		}},
		{"conv_runtime_weights_residual_sigmoid", "Im2col Conv", // the Sigmoid in the store
			func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value {
				x := input(g, r, feeds, "x", 2, 3, 9, 9)
				w := input(g, r, feeds, "w", 8, 3, 3, 3)
				b := input(g, r, feeds, "b", 8)
				res := input(g, r, feeds, "res", 2, 8, 9, 9)
				y := g.Apply("Conv", []*ir.Value{x, w, b}, ir.AttrIs("pads", 1, 1, 1, 1))
				return g.Apply("Sigmoid", []*ir.Value{g.Apply("Add", []*ir.Value{res, y})})
			}},
		{"pointwise_then_depthwise_runtime_weights", "Conv1x1 ConvGrouped", func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value {
			x := input(g, r, feeds, "x", 1, 4, 8, 8)
			w1 := input(g, r, feeds, "w1", 16, 4, 1, 1)
			w2 := input(g, r, feeds, "w2", 16, 1, 3, 3)
			y := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{x, w1})})
			return g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{y, w2}, ir.AttrI("group", 16), ir.AttrIs("pads", 1, 1, 1, 1))})
		}},
		{"conv1d_residual_clip", "Im2col Conv", func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value {
			x := input(g, r, feeds, "x", 2, 6, 40)
			res := input(g, r, feeds, "res", 2, 5, 40)
			y := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 5, 6, 5)), g.AddInitializer("b", randTensor(r, 5))},
				ir.AttrIs("pads", 2, 2))
			lo, hi := g.AddInitializer("lo", ir.Scalar(ir.Float32, float32(-1))), g.AddInitializer("hi", ir.Scalar(ir.Float32, float32(1)))
			return g.Apply("Clip", []*ir.Value{g.Apply("Add", []*ir.Value{y, res}), lo, hi})
		}},
		{"gemm_runtime_transposed_b_relu", "Gemm Relu", func(g *ir.Graph, feeds map[string]*ir.Tensor) *ir.Value {
			a := input(g, r, feeds, "a", 5, 7)
			b := input(g, r, feeds, "b", 6, 7)
			y := g.Apply("Gemm", []*ir.Value{a, b, g.AddInitializer("c", randTensor(r, 6))}, ir.AttrI("transB", 1), ir.AttrF("alpha", 0.5))
			return g.Apply("Relu", []*ir.Value{y})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph(c.name)
			feeds := map[string]*ir.Tensor{}
			y := c.build(g, feeds)
			y.Name = "y"
			g.SetOutputs(y)
			res := checkO2(t, ir.NewModel(g, 13), feeds, 1e-5)
			var got []string
			for _, k := range res.Kernels {
				got = append(got, k[strings.Index(k, "_")+1:])
			}
			if strings.Join(got, " ") != c.kernels {
				t.Errorf("compiled to %v, want %s", res.Kernels, c.kernels)
			}
		})
	}
}

func input(g *ir.Graph, r *rand.Rand, feeds map[string]*ir.Tensor, name string, dims ...int64) *ir.Value {
	feeds[name] = randTensor(r, dims...)
	return g.AddInput(name, ir.TensorType(ir.Float32, ir.S(dims...)))
}
