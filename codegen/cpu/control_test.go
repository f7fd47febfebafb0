package cpu

import (
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// controlModel: a Loop of M iterations (an input) whose body runs a
// MatMul (a hand-written GEMM), an If nested in it on the data, and a
// condition that stops it once the state grows past a bound; then an If
// on the result feeding a graph output through each branch; then a Loop
// of a constant 3 iterations with a scan output.
func controlModel(r *rand.Rand) *ir.Model {
	g := ir.NewGraph("control")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 32)))
	m := g.AddInput("m", ir.TensorType(ir.Int64, ir.S()))
	// A contraction (|w| small), so that long runs do not amplify
	// rounding into a different branch.
	wt := randTensor(r, 32, 32)
	for i, v := range wt.Float32s() {
		wt.Float32s()[i] = v * 0.05
	}
	w := g.AddInitializer("w", wt)
	zero := g.AddInitializer("zero", ir.Scalar(ir.Float32, float32(0)))

	body := ir.NewGraph("body")
	body.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	body.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	h := body.AddInput("h", ir.TensorType(ir.Float32, ir.S(4, 32)))
	y := body.Apply("Tanh", []*ir.Value{body.Apply("MatMul", []*ir.Value{h, w})})
	pos := body.Apply("Greater", []*ir.Value{body.Apply("ReduceSum", []*ir.Value{y}, ir.AttrI("keepdims", 0)), zero})
	then := ir.NewGraph("then")
	then.SetOutputs(then.Apply("Add", []*ir.Value{y, x}))
	els := ir.NewGraph("else")
	els.SetOutputs(els.Apply("Mul", []*ir.Value{y, els.AddInitializer("half", ir.Scalar(ir.Float32, float32(0.5)))}))
	next := body.AddNode("If", []*ir.Value{pos}, 1, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els)).Outputs[0]
	goOn := body.Apply("Less", []*ir.Value{body.Apply("ReduceSum", []*ir.Value{body.Apply("Abs", []*ir.Value{next})}, ir.AttrI("keepdims", 0)),
		body.AddInitializer("bound", ir.Scalar(ir.Float32, float32(400)))})
	body.SetOutputs(goOn, next)
	loop := g.AddNode("Loop", []*ir.Value{m, nil, x}, 1, ir.AttrG("body", body)).Outputs[0]

	big := g.Apply("Greater", []*ir.Value{g.Apply("ReduceMean", []*ir.Value{loop}, ir.AttrI("keepdims", 0)), zero})
	t2 := ir.NewGraph("then2")
	t2.SetOutputs(t2.Apply("Relu", []*ir.Value{loop}))
	e2 := ir.NewGraph("else2")
	e2.SetOutputs(loop)
	out := g.AddNode("If", []*ir.Value{big}, 1, ir.AttrG("then_branch", t2), ir.AttrG("else_branch", e2)).Outputs[0]
	out.Name = "out"

	scan := ir.NewGraph("scan")
	it := scan.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	c := scan.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	s := scan.AddInput("s", ir.TensorType(ir.Float32, ir.S(4, 32)))
	s2 := scan.Apply("Add", []*ir.Value{s, x})
	row := scan.Apply("Mul", []*ir.Value{s2, scan.Apply("Cast", []*ir.Value{it}, ir.AttrI("to", int64(ir.Float32)))})
	scan.SetOutputs(c, s2, row)
	three := g.AddInitializer("three", ir.Scalar(ir.Int64, int64(3)))
	sl := g.AddNode("Loop", []*ir.Value{three, nil, x}, 2, ir.AttrG("body", scan))
	sl.Outputs[0].Name, sl.Outputs[1].Name = "state", "rows"
	g.SetOutputs(out, sl.Outputs[0], sl.Outputs[1])
	return ir.NewModel(g, 13)
}

// TestControlFlow compiles If and Loop nodes (nested, on values the
// engine computes, with a trip count fed at run time) and checks them
// against the reference at 1 and 2 threads, for loops that run no
// iteration, one, several, and until their condition stops them.
func TestControlFlow(t *testing.T) {
	for _, trips := range []int64{0, 1, 3, 1000} {
		r := rand.New(rand.NewSource(trips + 7))
		m := controlModel(r)
		feeds := map[string]*ir.Tensor{"x": randTensor(r, 4, 32), "m": ir.Scalar(ir.Int64, trips)}
		res := check(t, m, feeds, 1e-4)
		if n := kernelsWith(res, "loop"); n != 2 {
			t.Errorf("trips %d: %d loops ended, want 2 (kernels %v)", trips, n, res.Kernels)
		}
	}
}
