package cpu

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
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

// TestTorchLoopShapes compiles a model PyTorch 1.13 exported from
// torch.jit.script (testdata/controlflow/torch_loop_shapes/gen.py): a for
// loop whose body takes x.view(x.size(0), -1) of the input and of a
// carried value (Shape→Gather→Unsqueeze→Concat→Reshape, the batch dim
// dynamic in the file and pinned here, as cc test does), against
// PyTorch's output, through the O2 pipeline as cc build compiles.
func TestTorchLoopShapes(t *testing.T) {
	needLLC(t)
	dir := "../../testdata/controlflow/torch_loop_shapes"
	m, err := onnx.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*ir.Tensor{}
	for i, in := range m.Graph.Inputs {
		tensor, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
		if err != nil {
			t.Fatal(err)
		}
		in.Type.Shape = ir.S(tensor.Dims...)
		feeds[in.Name] = tensor
	}
	want, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	res := compileAndCompare(t, optimize(t, m), feeds, map[string]*ir.Tensor{m.Graph.Outputs[0].Name: want}, 1e-5)
	if n := kernelsWith(res, "loop"); n != 1 {
		t.Errorf("%d loops ended, want 1 (kernels %v)", n, res.Kernels)
	}
}

// scanModel: a Scan of 5 iterations over x (axis 1, reverse) and y
// (axis 0, forward) whose body runs a MatMul on its state; two states
// (one swapped through a pass-through), scan outputs along axes 0, 1
// (reverse) and -1.
func scanModel(r *rand.Rand) *ir.Model {
	g := ir.NewGraph("scan")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 5, 8)))
	y := g.AddInput("y", ir.TensorType(ir.Float32, ir.S(5, 8)))
	wt := randTensor(r, 8, 8)
	for i, v := range wt.Float32s() {
		wt.Float32s()[i] = v * 0.2
	}
	w := g.AddInitializer("w", wt)
	f := func(dims ...int64) ir.Type { return ir.TensorType(ir.Float32, ir.S(dims...)) }
	body := ir.NewGraph("body")
	h := body.AddInput("h", f(4, 8))
	p := body.AddInput("p", f(8))
	xs := body.AddInput("xs", f(4, 8))
	ys := body.AddInput("ys", f(8))
	next := body.Apply("Tanh", []*ir.Value{body.Apply("Add", []*ir.Value{body.Apply("MatMul", []*ir.Value{h, w}), xs})})
	body.SetOutputs(next, body.Apply("Add", []*ir.Value{p, ys}),
		next, body.Apply("Mul", []*ir.Value{xs, ys}), body.Apply("Sub", []*ir.Value{p, ys}))
	n := g.AddNode("Scan", []*ir.Value{g.AddInitializer("h0", randTensor(r, 4, 8)), g.AddInitializer("p0", randTensor(r, 8)), x, y}, 5,
		ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 2), ir.AttrIs("scan_input_axes", 1, 0), ir.AttrIs("scan_input_directions", 1, 0),
		ir.AttrIs("scan_output_axes", 0, 1, -1), ir.AttrIs("scan_output_directions", 0, 1, 0))
	for i, name := range []string{"h", "p", "hs", "prods", "diffs"} {
		n.Outputs[i].Name = name
	}
	g.SetOutputs(n.Outputs...)
	return ir.NewModel(g, 16)
}

// TestScan compiles a Scan (as a loop of its inputs' length) and checks
// it against the reference at 1 and 2 threads.
func TestScan(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	m := scanModel(r)
	res := check(t, m, map[string]*ir.Tensor{"x": randTensor(r, 4, 5, 8), "y": randTensor(r, 5, 8)}, 1e-4)
	if n := kernelsWith(res, "loop"); n != 1 {
		t.Errorf("%d loops ended, want 1 (kernels %v)", n, res.Kernels)
	}
}
