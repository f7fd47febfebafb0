package cpu

import (
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestExpandDepthwise checks MobileNet's expansion (1×1 Conv + Relu6 into
// a depthwise 3×3 Conv + Relu6, stride 1 and 2, a residual after the
// depthwise one) run as one conv-dw kernel; and EfficientNet's (SiLU
// written as x·Sigmoid(x)), and one without an activation.
func TestExpandDepthwise(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, c := range []struct {
		name                   string
		batch, stride, m, k, h int64
		residual               bool
		projResidual           bool   // the projection adds a residual (split-K)
		act                    string // the expansion's: "" Relu6, "silu", "none"
		se                     bool   // a squeeze-excitation gate before the projection
	}{
		{"s1", 1, 1, 20, 8, 15, false, false, "", false},
		{"s2-batch2", 2, 2, 13, 8, 15, false, false, "", false},
		{"s1-residual", 1, 1, 12, 8, 15, true, false, "", false},
		{"wide", 1, 1, 96, 32, 7, false, false, "", false},
		{"wide-tail-s2", 1, 2, 100, 32, 9, false, false, "", false},
		{"wide-proj-residual", 1, 1, 100, 32, 9, false, true, "", false},
		{"silu", 1, 1, 20, 8, 15, false, false, "silu", false},
		{"silu-wide-s2-batch2", 2, 2, 100, 32, 9, false, false, "silu", false},
		{"no-activation", 1, 1, 96, 32, 7, false, true, "none", false},
		{"silu-se", 1, 1, 100, 32, 9, false, true, "silu", true},
		{"large-block-by-block", 1, 1, 96, 8, 200, false, true, "silu", false},
		{"silu-se-s2-batch2", 2, 2, 100, 32, 9, false, false, "silu", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph("expand")
			x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(c.batch, c.k, c.h, 19)))
			six := []*ir.Value{g.AddInitializer("lo", ir.Scalar(ir.Float32, float32(0))), g.AddInitializer("hi", ir.Scalar(ir.Float32, float32(6)))}
			e := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("we", randTensor(r, c.m, c.k, 1, 1)), g.AddInitializer("be", randTensor(r, c.m))})
			switch c.act {
			case "":
				e = g.Apply("Clip", append([]*ir.Value{e}, six...))
			case "silu":
				e = g.Apply("Mul", []*ir.Value{e, g.Apply("Sigmoid", []*ir.Value{e})})
			}
			d := g.Apply("Conv", []*ir.Value{e, g.AddInitializer("wd", randTensor(r, c.m, 1, 3, 3)), g.AddInitializer("bd", randTensor(r, c.m))},
				ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrI("group", c.m), ir.AttrIs("strides", c.stride, c.stride))
			feeds := map[string]*ir.Tensor{"x": randTensor(r, c.batch, c.k, c.h, 19)}
			if c.residual {
				res := g.AddInput("res", ir.TensorType(ir.Float32, ir.S(c.batch, c.m, c.h, 19)))
				d = g.Apply("Add", []*ir.Value{d, res})
				feeds["res"] = randTensor(r, c.batch, c.m, c.h, 19)
			} else {
				d = g.Apply("Clip", append([]*ir.Value{d}, six...))
			}
			if c.se {
				// The gate moves into the projection's weights (passes'
				// conv-scale): weights computed at run time.
				s := g.Apply("GlobalAveragePool", []*ir.Value{d})
				s = g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{s, g.AddInitializer("ws", randTensor(r, 8, c.m, 1, 1))})})
				s = g.Apply("Sigmoid", []*ir.Value{g.Apply("Conv", []*ir.Value{s, g.AddInitializer("wx", randTensor(r, c.m, 8, 1, 1)), g.AddInitializer("bx", randTensor(r, c.m))})})
				d = g.Apply("Mul", []*ir.Value{d, s})
			}
			p := g.Apply("Conv", []*ir.Value{d, g.AddInitializer("wp", randTensor(r, 4, c.m, 1, 1)), g.AddInitializer("bp", randTensor(r, 4))})
			oh := (c.h-1)/c.stride + 1
			ow := (19-1)/c.stride + 1
			if c.projResidual {
				pr := g.AddInput("pr", ir.TensorType(ir.Float32, ir.S(c.batch, 4, oh, ow)))
				p = g.Apply("Add", []*ir.Value{p, pr})
				feeds["pr"] = randTensor(r, c.batch, 4, oh, ow)
			}
			y := g.Apply("Relu", []*ir.Value{p})
			y.Name = "y"
			g.SetOutputs(y)
			res := checkO2(t, ir.NewModel(g, 13), feeds, 1e-5)
			if kernelsWith(res, "ConvExpandDW") != 1 {
				t.Errorf("kernels %v: want one ConvExpandDW", res.Kernels)
			}
			// An expanded tensor that stays in the L2 is expanded whole
			// first (a ConvExpand step besides ConvExpandDW), a larger one
			// block by block.
			l2 := hostL2()
			if l2 == 0 {
				l2 = defaultL2
			}
			if separate := 4*c.m*c.h*19 <= l2/3; (kernelsWith(res, "ConvExpand") == 2) != separate {
				t.Errorf("kernels %v: expanded in a step of its own %v, want %v", res.Kernels, !separate, separate)
			}
			// A parallel conv-dw kernel's projection sums per-thread
			// partials (ops_conv_splitk.go).
			if wantSplit := c.batch == 1 && c.m*c.k*c.h*19 >= 1<<16; (kernelsWith(res, "Conv1x1SplitK") == 1) != wantSplit {
				t.Errorf("kernels %v: split-K projection %v, want %v", res.Kernels, !wantSplit, wantSplit)
			}
		})
	}
}
