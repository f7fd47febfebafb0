package reference

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// An input with an initializer default (IR version 4 on) computes with
// the default when a run does not give it and with the fed value when it
// does, as ONNX says: y = x + W.
func TestInputWithDefault(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	normal := func() *ir.Tensor {
		v := ir.NewTensor(ir.Float32, 2, 3)
		for i := range v.Float32s() {
			v.Float32s()[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, def, fed := normal(), normal(), normal()
	g := ir.NewGraph("default")
	xv := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	wv := g.AddInitializer("W", def)
	g.Inputs = append(g.Inputs, wv)
	y := g.Apply("Add", []*ir.Value{xv, wv})
	y.Name = "y"
	g.SetOutputs(y)
	e, err := New(ir.NewModel(g, 17))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*ir.Tensor{nil, fed} {
		feeds, want := map[string]*ir.Tensor{"x": x}, def
		if w != nil {
			feeds["W"], want = w, w
		}
		out, err := e.Run(feeds)
		if err != nil {
			t.Fatal(err)
		}
		sum := make([]float32, 6)
		for i := range sum {
			sum[i] = x.Float32s()[i] + want.Float32s()[i]
		}
		if got := out["y"].Float32s(); !slices.Equal(got, sum) {
			t.Fatalf("W fed %v: y = %v, want %v", w != nil, got, sum)
		}
	}
}
