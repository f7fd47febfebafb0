package cpu

import (
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestConcatInPlace checks that the convolutions feeding a channel Concat
// (a SqueezeNet fire module) write straight into its output, so no Concat
// kernel runs, and that a Concat with a graph-input operand, or one whose
// slices are not contiguous (batch 2), still copies and stays correct.
func TestConcatInPlace(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, c := range []struct {
		name        string
		batch       int64
		withInput   bool
		copies      bool
		graphOutput bool
	}{
		{"fire", 1, false, false, false},
		{"fire-as-output", 1, false, false, true},
		{"graph-input-operand", 1, true, true, false},
		{"batch-2", 2, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := ir.NewGraph("fire")
			x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(c.batch, 8, 7, 7)))
			sq := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{x, g.AddInitializer("ws", randTensor(r, 4, 8, 1, 1))})})
			e1 := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{sq, g.AddInitializer("w1", randTensor(r, 6, 4, 1, 1)),
				g.AddInitializer("b1", randTensor(r, 6))})})
			e3 := g.Apply("Conv", []*ir.Value{sq, g.AddInitializer("w3", randTensor(r, 5, 4, 3, 3))}, ir.AttrIs("pads", 1, 1, 1, 1))
			parts, channels := []*ir.Value{e1, e3}, int64(6+5)
			if c.withInput {
				parts, channels = append(parts, x), channels+8
			}
			cat := g.Apply("Concat", parts, ir.AttrI("axis", 1))
			y := cat
			if !c.graphOutput {
				y = g.Apply("Conv", []*ir.Value{cat, g.AddInitializer("wy", randTensor(r, 3, channels, 1, 1))})
			}
			y.Name = "y"
			g.SetOutputs(y)
			res := check(t, ir.NewModel(g, 13), map[string]*ir.Tensor{"x": randTensor(r, c.batch, 8, 7, 7)}, 1e-5)
			if n := kernelsWith(res, "Concat"); (n > 0) != c.copies {
				t.Errorf("%d Concat kernels, want copies %v (kernels %v)", n, c.copies, res.Kernels)
			}
		})
	}
}
