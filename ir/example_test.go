package ir_test

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// Example builds a one-layer perceptron, y = Relu(x·W + B), with the builder
// API and checks it with Verify.
func Example() {
	g := ir.NewGraph("mlp")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 4)))
	w := g.AddInitializer("W", ir.FromSlice(ir.Float32, []int64{4, 2}, []float32{
		0.1, -0.2,
		0.3, 0.4,
		-0.5, 0.6,
		0.7, -0.8,
	}))
	b := g.AddInitializer("B", ir.FromSlice(ir.Float32, []int64{2}, []float32{0.01, 0.02}))
	h := g.Apply("Gemm", []*ir.Value{x, w, b}, ir.AttrF("alpha", 1), ir.AttrF("beta", 1))
	y := g.Apply("Relu", []*ir.Value{h})
	g.SetOutputs(y)

	m := ir.NewModel(g, 17)
	if err := m.Verify(); err != nil {
		fmt.Println("invalid:", err)
		return
	}
	for _, n := range g.Nodes {
		var ins []string
		for _, v := range n.Inputs {
			ins = append(ins, v.Name)
		}
		fmt.Printf("%s %v -> %s\n", n.OpType, ins, n.Outputs[0].Name)
	}
	for _, v := range g.Initializers {
		fmt.Printf("initializer %s: %s\n", v.Name, v.Type)
	}
	for _, v := range g.Outputs {
		fmt.Println("output:", v.Name)
	}
	// Output:
	// Gemm [x W B] -> Gemm_out0
	// Relu [Gemm_out0] -> Relu_out0
	// initializer W: float[4,2]
	// initializer B: float[2]
	// output: Relu_out0
}
