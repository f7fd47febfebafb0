package cpu

import (
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
)

// TestSharedWeightsStoredOnce: a weight used by several layers (as
// PyTorch exports repeated layers with equal weights: one initializer,
// Identity nodes) is packed once, and the layers still compute their own
// products.
func TestSharedWeightsStoredOnce(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	g := ir.NewGraph("shared")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 64)))
	w := g.AddInitializer("w", randTensor(r, 64, 64))
	y := x
	for range 4 {
		alias := g.Apply("Identity", []*ir.Value{w})
		y = g.Apply("Tanh", []*ir.Value{g.Apply("MatMul", []*ir.Value{y, alias})})
	}
	y.Name = "y"
	g.SetOutputs(y)
	res := checkO2(t, ir.NewModel(g, 17), map[string]*ir.Tensor{"x": randTensor(r, 4, 64)}, 1e-5)
	if plain := int64(64 * 64 * 4); int64(len(res.Weights)) >= 2*plain {
		t.Errorf("the engine stores %d bytes of weights for one shared %d-byte weight", len(res.Weights), plain)
	}
}

// TestWinogradWeightsDerived: an engine with Winograd layers stores their
// plain 3×3 weights, and the loader's derived kernels compute as the
// reference (check runs the engine through Load, which derives them).
func TestWinogradWeightsDerived(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	g := ir.NewGraph("wino")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 12, 12)))
	w := g.AddInitializer("w", randTensor(r, 24, 16, 3, 3))
	y := g.Apply("Conv", []*ir.Value{x, w}, ir.AttrIs("pads", 1, 1, 1, 1))
	y.Name = "y"
	g.SetOutputs(y)
	res := check(t, ir.NewModel(g, 17), map[string]*ir.Tensor{"x": randTensor(r, 1, 16, 12, 12)}, 1e-5)
	var derived int64
	for _, d := range res.Derived {
		if d.Kind == cpuabi.DerivedWinograd {
			derived += d.Bytes
		}
	}
	if derived == 0 {
		t.Fatalf("no Winograd kernels derived at load (kernels %v)", res.Kernels)
	}
	if plain := int64(24 * 16 * 9 * 4); int64(len(res.Weights)) > plain+4096 {
		t.Errorf("the engine stores %d bytes of weights for %d of plain 3×3 weights", len(res.Weights), plain)
	}
}
