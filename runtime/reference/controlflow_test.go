package reference

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

func f32(dims []int64, v ...float32) *ir.Tensor { return ir.FromSlice(ir.Float32, dims, v) }

func randFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*4 - 2
	}
	return v
}

// named renames a value and its producer, so errors name them.
func named(v *ir.Value, name string) *ir.Value {
	v.Name = name
	if v.Producer != nil {
		v.Producer.Name = name
	}
	return v
}

func run(t *testing.T, m *ir.Model, lim ir.Limits, in map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	t.Helper()
	e, err := NewWithin(m, lim)
	require.NoError(t, err)
	return e.Run(in)
}

// TestIf: y = cond ? x + w : x * x, with w read from the enclosing graph.
func TestIf(t *testing.T) {
	g := ir.NewGraph("if")
	cond := g.AddInput("cond", ir.TensorType(ir.Bool, ir.S()))
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	w := g.AddInput("w", ir.TensorType(ir.Float32, ir.S(3)))
	then, els := ir.NewGraph("then"), ir.NewGraph("else")
	then.SetOutputs(named(then.Apply("Add", []*ir.Value{x, w}), "sum"))
	els.SetOutputs(named(els.Apply("Mul", []*ir.Value{x, x}), "square"))
	y := named(g.Apply("If", []*ir.Value{cond}, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els)), "y")
	g.SetOutputs(y)
	m := ir.NewModel(g, 13)
	require.NoError(t, Unsupported(m))

	r := rand.New(rand.NewSource(7))
	xs, ws := randFloats(r, 6), randFloats(r, 3)
	for _, c := range []bool{true, false} {
		out, err := run(t, m, ir.Limits{}, map[string]*ir.Tensor{"cond": ir.Scalar(ir.Bool, c), "x": f32([]int64{2, 3}, xs...), "w": f32([]int64{3}, ws...)})
		require.NoError(t, err)
		got := out["y"].Float32s()
		for i, v := range xs {
			want := v * v
			if c {
				want = v + ws[i%3]
			}
			assert.InDelta(t, want, got[i], 1e-6, "cond %v element %d", c, i)
		}
	}
	assert.Equal(t, "float[2,3]", y.Type.String())
}

// nestedLoop is a Loop of M iterations carrying acc (float[3]) whose body
// holds an If reading w, k and neg_w (a top-level intermediate no
// top-level node reads after it) two levels up: acc += w while the
// iteration is below k, else acc += neg_w. Each iteration's acc is a scan
// output.
func nestedLoop() *ir.Model {
	g := ir.NewGraph("nested")
	m := g.AddInput("M", ir.TensorType(ir.Int64, ir.S()))
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(3)))
	w := g.AddInput("w", ir.TensorType(ir.Float32, ir.S(3)))
	k := g.AddInitializer("k", ir.Scalar(ir.Int64, int64(2)))
	negW := named(g.Apply("Neg", []*ir.Value{w}), "neg_w") // an intermediate only the inner If reads
	body := ir.NewGraph("body")
	iter := body.AddInput("iter", ir.TensorType(ir.Int64, ir.S()))
	condIn := body.AddInput("cond_in", ir.TensorType(ir.Bool, ir.S()))
	acc := body.AddInput("acc", ir.Type{})
	early := named(body.Apply("Less", []*ir.Value{iter, k}), "early")
	then, els := ir.NewGraph("then"), ir.NewGraph("else")
	then.SetOutputs(named(then.Apply("Add", []*ir.Value{acc, w}), "plus"))
	els.SetOutputs(named(els.Apply("Add", []*ir.Value{acc, negW}), "minus"))
	next := named(body.Apply("If", []*ir.Value{early}, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els)), "next")
	condOut := named(body.Apply("Identity", []*ir.Value{condIn}), "cond_out")
	scan := named(body.Apply("Identity", []*ir.Value{next}), "step")
	body.SetOutputs(condOut, next, scan)
	loop := g.AddNode("Loop", []*ir.Value{m, nil, x}, 2, ir.AttrG("body", body))
	loop.Name = "loop1"
	loop.Outputs[0].Name, loop.Outputs[1].Name = "final", "steps"
	g.SetOutputs(loop.Outputs...)
	return ir.NewModel(g, 13)
}

func TestNestedLoopIf(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	xs, ws := randFloats(r, 3), randFloats(r, 3)
	for _, trips := range []int64{0, 1, 5} {
		out, err := run(t, nestedLoop(), ir.Limits{}, map[string]*ir.Tensor{
			"M": ir.Scalar(ir.Int64, trips), "x": f32([]int64{3}, xs...), "w": f32([]int64{3}, ws...)})
		require.NoError(t, err, "M=%d", trips)
		acc := append([]float32{}, xs...)
		var steps []float32
		for i := int64(0); i < trips; i++ {
			for j := range acc {
				if i < 2 {
					acc[j] += ws[j]
				} else {
					acc[j] -= ws[j]
				}
			}
			steps = append(steps, acc...)
		}
		assert.InDeltaSlice(t, acc, out["final"].Float32s(), 1e-5, "M=%d", trips)
		assert.Equal(t, []int64{trips, 3}, out["steps"].Dims, "M=%d", trips)
		if trips > 0 {
			assert.InDeltaSlice(t, steps, out["steps"].Float32s(), 1e-5, "M=%d", trips)
		}
	}
	m := nestedLoop()
	_, err := New(m)
	require.NoError(t, err)
	assert.Equal(t, "float[3]", m.Graph.Outputs[0].Type.String(), "acc keeps its shape")
	assert.Equal(t, "float[?,3]", m.Graph.Outputs[1].Type.String())
}

// whileLoop has no trip count: it runs while iter < n (n from the outer
// graph), carrying a float[k] that grows by one element per iteration.
func whileLoop(withCond bool) *ir.Model {
	g := ir.NewGraph("while")
	n := g.AddInput("n", ir.TensorType(ir.Int64, ir.S()))
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	body := ir.NewGraph("body")
	iter := body.AddInput("iter", ir.TensorType(ir.Int64, ir.S()))
	condIn := body.AddInput("cond_in", ir.TensorType(ir.Bool, ir.S()))
	acc := body.AddInput("acc", ir.Type{})
	grown := named(body.Apply("Concat", []*ir.Value{acc, x}, ir.AttrI("axis", 0)), "grown")
	var condOut *ir.Value
	if withCond {
		condOut = named(body.Apply("Less", []*ir.Value{iter, n}), "again")
	} else {
		condOut = named(body.Apply("Identity", []*ir.Value{condIn}), "again")
	}
	body.SetOutputs(condOut, grown)
	var cond *ir.Value
	if withCond {
		cond = g.AddInitializer("go", ir.Scalar(ir.Bool, true))
	}
	loop := g.AddNode("Loop", []*ir.Value{nil, cond, x}, 1, ir.AttrG("body", body))
	loop.Name = "while1"
	loop.Outputs[0].Name = "y"
	g.SetOutputs(loop.Outputs...)
	return ir.NewModel(g, 13)
}

func TestLoopGrowingState(t *testing.T) {
	m := whileLoop(true)
	out, err := run(t, m, ir.Limits{}, map[string]*ir.Tensor{"n": ir.Scalar(ir.Int64, int64(4)), "x": f32([]int64{1}, 1.5)})
	require.NoError(t, err)
	// Iterations 0..4 run (the body's cond is false after iteration 4).
	assert.Equal(t, []float32{1.5, 1.5, 1.5, 1.5, 1.5, 1.5}, out["y"].Float32s())
	assert.Equal(t, "float[?]", m.Graph.Outputs[0].Type.String(), "a carried value whose shape changes")
}

func TestLoopLimit(t *testing.T) {
	_, err := run(t, whileLoop(false), ir.Limits{MaxLoopIterations: 50}, map[string]*ir.Tensor{
		"n": ir.Scalar(ir.Int64, int64(0)), "x": f32([]int64{1}, 0.25)})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ir.ErrLimit), err.Error())
	assert.Contains(t, err.Error(), `node "while1" (Loop): still running after 50 iterations`)
	assert.Contains(t, err.Error(), ir.FlagMaxLoopIterations)
}

// TestLoopErrorNamesIteration: a body node failing in iteration 3 is
// reported with the loop, the iteration and the node.
func TestLoopErrorNamesIteration(t *testing.T) {
	g := ir.NewGraph("gather")
	data := g.AddInput("data", ir.TensorType(ir.Float32, ir.S(3)))
	m := g.AddInitializer("trips", ir.Scalar(ir.Int64, int64(5)))
	body := ir.NewGraph("body")
	iter := body.AddInput("iter", ir.TensorType(ir.Int64, ir.S()))
	condIn := body.AddInput("cond_in", ir.TensorType(ir.Bool, ir.S()))
	picked := named(body.Apply("Gather", []*ir.Value{data, iter}), "pick")
	body.SetOutputs(named(body.Apply("Identity", []*ir.Value{condIn}), "c"), picked)
	loop := g.AddNode("Loop", []*ir.Value{m, nil}, 1, ir.AttrG("body", body))
	loop.Name = "loop1"
	loop.Outputs[0].Name = "picked"
	g.SetOutputs(loop.Outputs...)
	model := ir.NewModel(g, 13)
	_, err := run(t, model, ir.Limits{}, map[string]*ir.Tensor{"data": f32([]int64{3}, 1, 2, 3)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `node "loop1" (Loop) iteration 3: node "pick" (Gather)`)
	assert.Equal(t, "float[5]", model.Graph.Outputs[0].Type.String(), "a constant trip count and a cond that stays true")
}

// TestScanReverse: a running sum over x's rows scanned backward, each
// step's sum accumulated along output axis 1, against a naive loop.
func TestScanReverse(t *testing.T) {
	g := ir.NewGraph("scan")
	init := g.AddInput("init", ir.TensorType(ir.Float32, ir.S(2)))
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(4, 2)))
	body := ir.NewGraph("body")
	sum := body.AddInput("sum", ir.TensorType(ir.Float32, ir.S(2)))
	row := body.AddInput("row", ir.TensorType(ir.Float32, ir.S(2)))
	next := named(body.Apply("Add", []*ir.Value{sum, row}), "next")
	body.SetOutputs(next, named(body.Apply("Identity", []*ir.Value{next}), "step"))
	scan := g.AddNode("Scan", []*ir.Value{init, x}, 2, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 1),
		ir.AttrIs("scan_input_directions", 1), ir.AttrIs("scan_output_axes", -1))
	scan.Outputs[0].Name, scan.Outputs[1].Name = "total", "steps"
	g.SetOutputs(scan.Outputs...)
	m := ir.NewModel(g, 11)
	r := rand.New(rand.NewSource(5))
	is, xs := randFloats(r, 2), randFloats(r, 8)
	out, err := run(t, m, ir.Limits{}, map[string]*ir.Tensor{"init": f32([]int64{2}, is...), "x": f32([]int64{4, 2}, xs...)})
	require.NoError(t, err)
	acc := append([]float32{}, is...)
	steps := make([]float32, 8) // [2, 4]: element j of step s at j*4+s
	for s := 0; s < 4; s++ {
		for j := range acc {
			acc[j] += xs[(3-s)*2+j]
			steps[j*4+s] = acc[j]
		}
	}
	assert.InDeltaSlice(t, acc, out["total"].Float32s(), 1e-5)
	assert.Equal(t, []int64{2, 4}, out["steps"].Dims)
	assert.InDeltaSlice(t, steps, out["steps"].Float32s(), 1e-5)
	assert.Equal(t, "float[2,4]", m.Graph.Outputs[1].Type.String())
}

// TestTorchControlFlow runs a model PyTorch 1.13 exported from
// torch.jit.script (testdata/controlflow/torch_control_flow/gen.py): an If on
// x.sum() > 0 and a for loop of n iterations over tanh, against PyTorch's
// outputs, once through each branch (the second with zero iterations).
func TestTorchControlFlow(t *testing.T) {
	dir := "../../testdata/controlflow/torch_control_flow"
	m, err := onnx.ReadFile(dir + "/model.onnx")
	require.NoError(t, err)
	e, err := New(m)
	require.NoError(t, err)
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		x, err := onnx.ReadTensorFile(dir + "/" + set + "/input_0.pb")
		require.NoError(t, err)
		n, err := onnx.ReadTensorFile(dir + "/" + set + "/input_1.pb")
		require.NoError(t, err)
		want, err := onnx.ReadTensorFile(dir + "/" + set + "/output_0.pb")
		require.NoError(t, err)
		out, err := e.Run(map[string]*ir.Tensor{"x": x, "n": n})
		require.NoError(t, err, set)
		assert.Equal(t, want.Dims, out["y"].Dims, set)
		assert.InDeltaSlice(t, want.Float32s(), out["y"].Float32s(), 1e-5, set)
	}
}

// TestScan8SequenceLengths: Scan 8 scans each batch entry over its own
// sequence length, backward here, and zero-pads its scan outputs.
func TestScan8SequenceLengths(t *testing.T) {
	g := ir.NewGraph("scan8")
	lens := g.AddInput("lens", ir.TensorType(ir.Int64, ir.S(2)))
	init := g.AddInput("init", ir.TensorType(ir.Float32, ir.S(2, 2)))
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3, 2)))
	body := ir.NewGraph("body")
	sum := body.AddInput("sum", ir.TensorType(ir.Float32, ir.S(2)))
	row := body.AddInput("row", ir.TensorType(ir.Float32, ir.S(2)))
	next := named(body.Apply("Add", []*ir.Value{sum, row}), "next")
	body.SetOutputs(next, named(body.Apply("Identity", []*ir.Value{next}), "step"))
	scan := g.AddNode("Scan", []*ir.Value{lens, init, x}, 2, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 1), ir.AttrIs("directions", 1))
	scan.Outputs[0].Name, scan.Outputs[1].Name = "total", "steps"
	g.SetOutputs(scan.Outputs...)
	m := ir.NewModel(g, 8)
	r := rand.New(rand.NewSource(11))
	is, xs := randFloats(r, 4), randFloats(r, 12)
	seq := []int64{3, 1}
	out, err := run(t, m, ir.Limits{}, map[string]*ir.Tensor{"lens": ir.FromSlice(ir.Int64, []int64{2}, seq),
		"init": f32([]int64{2, 2}, is...), "x": f32([]int64{2, 3, 2}, xs...)})
	require.NoError(t, err)
	total := make([]float32, 4)
	steps := make([]float32, 12)
	for b := 0; b < 2; b++ {
		acc := []float32{is[2*b], is[2*b+1]}
		for s := 0; s < int(seq[b]); s++ {
			at := int(seq[b]) - 1 - s
			for j := range acc {
				acc[j] += xs[b*6+at*2+j]
				steps[b*6+s*2+j] = acc[j]
			}
		}
		copy(total[2*b:], acc)
	}
	assert.InDeltaSlice(t, total, out["total"].Float32s(), 1e-5)
	assert.InDeltaSlice(t, steps, out["steps"].Float32s(), 1e-5)
	assert.Equal(t, "float[2,3,2]", m.Graph.Outputs[1].Type.String())
	assert.Equal(t, "float[2,2]", m.Graph.Outputs[0].Type.String())
}

// TestScanOutputDirection: scan_output_directions 1 prepends each step, so
// the output is the forward steps reversed.
func TestScanOutputDirection(t *testing.T) {
	g := ir.NewGraph("scan")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(3, 2)))
	body := ir.NewGraph("body")
	row := body.AddInput("row", ir.TensorType(ir.Float32, ir.S(2)))
	body.SetOutputs(named(body.Apply("Neg", []*ir.Value{row}), "neg"))
	scan := g.AddNode("Scan", []*ir.Value{x}, 1, ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 1), ir.AttrIs("scan_output_directions", 1))
	scan.Outputs[0].Name = "y"
	g.SetOutputs(scan.Outputs...)
	xs := randFloats(rand.New(rand.NewSource(13)), 6)
	out, err := run(t, ir.NewModel(g, 9), ir.Limits{}, map[string]*ir.Tensor{"x": f32([]int64{3, 2}, xs...)})
	require.NoError(t, err)
	want := []float32{-xs[4], -xs[5], -xs[2], -xs[3], -xs[0], -xs[1]}
	assert.Equal(t, want, out["y"].Float32s())
}
