package lower_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// flowTarget is gemmTarget compiling control flow.
type flowTarget struct{ gemmTarget }

func (flowTarget) ControlFlow() {}

// ifModel: y = If(sum(x) > 0) then Relu(x)·w else x - 1, then y + x; the
// branches read x and w from the graph around them.
func ifModel(seed int64) (*builder, *ir.Value) {
	b := newBuilder(seed)
	x := b.input("x", 3, 4)
	w := b.weight("w", 3, 4)
	cond := b.op("Greater", []*ir.Value{b.op("ReduceSum", []*ir.Value{x}, ir.AttrI("keepdims", 0)), b.scalar("zero", 0)})
	then := ir.NewGraph("then")
	then.SetOutputs(then.Apply("Mul", []*ir.Value{then.Apply("Relu", []*ir.Value{x}), w}))
	els := ir.NewGraph("else")
	els.SetOutputs(els.Apply("Sub", []*ir.Value{x, els.AddInitializer("one", ir.Scalar(ir.Float32, float32(1)))}))
	y := b.g.AddNode("If", []*ir.Value{cond}, 1, ir.AttrG("then_branch", then), ir.AttrG("else_branch", els)).Outputs[0]
	return b, b.op("Add", []*ir.Value{y, x})
}

// TestIfRunsItsBranch lowers an If whose condition depends on the input
// and checks both branches against the reference, a branch output going
// straight to a graph output too.
func TestIfRunsItsBranch(t *testing.T) {
	taken := map[bool]int{}
	for seed := int64(1); seed <= 8; seed++ {
		b, out := ifModel(seed)
		l := lowerFor(t, flowTarget{}, b, nil, out)
		requireControl(t, l.prog, lower.ControlIf, 1)
		l.check(t)
		x := l.feeds["x"]
		var s float64
		for i := 0; i < int(x.Len()); i++ {
			s += x.Float64At(i)
		}
		taken[s > 0]++
	}
	require.Len(t, taken, 2, "the seeds take one branch only: %v", taken)
	b, _ := ifModel(3)
	y := b.g.Nodes[len(b.g.Nodes)-2].Outputs[0] // the If's output
	lowerFor(t, flowTarget{}, b, nil, y).check(t)
}

// loopModel: a Loop of M iterations (an input) whose body adds x to a
// carried sum, swaps two carried values and stops once the sum passes a
// bound; and a Loop of a constant 3 iterations with a scan output.
func loopModel(seed int64) (*builder, []*ir.Value) {
	b := newBuilder(seed)
	x := b.input("x", 4)
	m := b.g.AddInput("m", ir.TensorType(ir.Int64, ir.S()))
	body := ir.NewGraph("body")
	body.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	body.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	acc := body.AddInput("acc", ir.TensorType(ir.Float32, ir.S(4)))
	p := body.AddInput("p", ir.TensorType(ir.Float32, ir.S(4)))
	q := body.AddInput("q", ir.TensorType(ir.Float32, ir.S(4)))
	next := body.Apply("Add", []*ir.Value{acc, body.Apply("Abs", []*ir.Value{x})})
	goOn := body.Apply("Less", []*ir.Value{body.Apply("ReduceSum", []*ir.Value{next}, ir.AttrI("keepdims", 0)), body.AddInitializer("bound", ir.Scalar(ir.Float32, float32(6)))})
	body.SetOutputs(goOn, next, q, p)
	loop := b.g.AddNode("Loop", []*ir.Value{m, nil, b.weight("a0", 4), b.weight("p0", 4), b.weight("q0", 4)}, 3, ir.AttrG("body", body))

	scan := ir.NewGraph("scan")
	it := scan.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	c := scan.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	h := scan.AddInput("h", ir.TensorType(ir.Float32, ir.S(4)))
	h2 := scan.Apply("Tanh", []*ir.Value{scan.Apply("Add", []*ir.Value{h, x})})
	row := scan.Apply("Mul", []*ir.Value{h2, scan.Apply("Cast", []*ir.Value{it}, ir.AttrI("to", int64(ir.Float32)))})
	scan.SetOutputs(c, h2, row)
	three := b.g.AddInitializer("three", ir.Scalar(ir.Int64, int64(3)))
	l2 := b.g.AddNode("Loop", []*ir.Value{three, nil, b.weight("h0", 4)}, 2, ir.AttrG("body", scan))
	return b, append(loop.Outputs, l2.Outputs...)
}

// TestLoopRunsItsBody checks compiled loops against the reference: a
// trip count fed at run time (0, 1, many: the bound stops it first),
// carried values swapped every iteration, a scan output.
func TestLoopRunsItsBody(t *testing.T) {
	for _, trips := range []int64{0, 1, 2, 50} {
		b, outs := loopModel(trips + 10)
		l := lowerFor(t, flowTarget{}, b, map[string]*ir.Tensor{"m": ir.Scalar(ir.Int64, trips)}, outs...)
		requireControl(t, l.prog, lower.ControlLoop, 2)
		l.check(t)
	}
}

// requireControl fails unless p has n control steps of kind.
func requireControl(t *testing.T, p *lower.Program, kind lower.ControlKind, n int) {
	t.Helper()
	got := 0
	p.Walk(func(st *lower.Step) {
		if st.Control != nil && st.Control.Kind == kind {
			got++
		}
	})
	require.Equal(t, n, got, "%s", p)
}

// TestLoopBodyFoldsKnownValues: a Loop body computing a Reshape's shape
// from a carried value's (x.view(x.size(0), -1), as PyTorch exports it)
// runs no step for it: inference knows it in every iteration and the
// body's fold drops the nodes, as the graph's does. The result holds
// against the reference.
func TestLoopBodyFoldsKnownValues(t *testing.T) {
	b := newBuilder(5)
	x := b.input("x", 2, 3, 4)
	body := ir.NewGraph("body")
	body.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
	c := body.AddInput("c", ir.TensorType(ir.Bool, ir.S()))
	h := body.AddInput("h", ir.TensorType(ir.Float32, ir.S(2, 3, 4)))
	i64 := func(name string, v ...int64) *ir.Value {
		return body.AddInitializer(name, ir.FromSlice(ir.Int64, []int64{int64(len(v))}, v))
	}
	first := body.Apply("Gather", []*ir.Value{body.Apply("Shape", []*ir.Value{h}), body.AddInitializer("zero", ir.Scalar(ir.Int64, int64(0)))})
	shape := body.Apply("Concat", []*ir.Value{body.Apply("Unsqueeze", []*ir.Value{first, i64("axes", 0)}), i64("rest", -1)}, ir.AttrI("axis", 0))
	flat := body.Apply("Tanh", []*ir.Value{body.Apply("Reshape", []*ir.Value{h, shape})})
	body.SetOutputs(c, body.Apply("Add", []*ir.Value{h, x}), flat)
	three := b.g.AddInitializer("three", ir.Scalar(ir.Int64, int64(3)))
	loop := b.g.AddNode("Loop", []*ir.Value{three, nil, x}, 2, ir.AttrG("body", body))
	l := lowerFor(t, flowTarget{}, b, nil, loop.Outputs...)
	requireControl(t, l.prog, lower.ControlLoop, 1)
	for _, n := range body.Nodes {
		folded := n.OpType != "Reshape" && n.OpType != "Tanh" && n.OpType != "Add"
		require.Equal(t, folded, l.prog.Folded(n), "%s", n)
	}
	require.Equal(t, "float[3,2,12]", loop.Outputs[1].Type.String())
	l.check(t)
}

// scanModel: a Scan of 3 iterations over x (axis 1, forward) and y (its
// last axis, reverse) with three states (an accumulator reading a weight
// of the graph around it, and two swapped through each other) and scan
// outputs along axes 0, 2 (reverse) and -1 (reverse, a slice passed
// through).
func scanModel(seed int64) (*builder, []*ir.Value) {
	b := newBuilder(seed)
	x := b.input("x", 4, 3, 2)
	y := b.input("y", 2, 3)
	w := b.weight("w", 4, 2)
	f := func(dims ...int64) ir.Type { return ir.TensorType(ir.Float32, ir.S(dims...)) }
	body := ir.NewGraph("body")
	acc := body.AddInput("acc", f(4, 2))
	p := body.AddInput("p", f(2))
	q := body.AddInput("q", f(2))
	xs := body.AddInput("xs", f(4, 2))
	ys := body.AddInput("ys", f(2))
	next := body.Apply("Add", []*ir.Value{acc, body.Apply("Mul", []*ir.Value{xs, w})})
	body.SetOutputs(next, body.Apply("Add", []*ir.Value{body.Apply("Tanh", []*ir.Value{q}), ys}), p,
		body.Apply("Neg", []*ir.Value{next}), body.Apply("Sub", []*ir.Value{xs, acc}), ys)
	scan := b.g.AddNode("Scan", []*ir.Value{b.weight("acc0", 4, 2), b.weight("p0", 2), b.weight("q0", 2), x, y}, 6,
		ir.AttrG("body", body), ir.AttrI("num_scan_inputs", 2), ir.AttrIs("scan_input_axes", 1, -1), ir.AttrIs("scan_input_directions", 0, 1),
		ir.AttrIs("scan_output_axes", 0, 2, -1), ir.AttrIs("scan_output_directions", 0, 1, 1))
	return b, scan.Outputs
}

// TestScanRunsItsBody checks a compiled Scan against the reference: its
// slices read along each input's axis and direction, its states carried
// (swapped too), its scan outputs written along their axes and
// directions.
func TestScanRunsItsBody(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		b, outs := scanModel(seed)
		l := lowerFor(t, flowTarget{}, b, nil, outs...)
		requireControl(t, l.prog, lower.ControlLoop, 1)
		require.Equal(t, "float[4,2,3]", outs[4].Type.String())
		l.check(t)
	}
}

// TestScan8 compiles a Scan 8 of a batch of one without sequence_lens
// (backward), and refuses one with them, saying why.
func TestScan8(t *testing.T) {
	scan8 := func(lens bool) *ir.Model {
		b := newBuilder(4)
		body := ir.NewGraph("body")
		s := body.AddInput("s", ir.TensorType(ir.Float32, ir.S(2)))
		r := body.AddInput("r", ir.TensorType(ir.Float32, ir.S(2)))
		next := body.Apply("Add", []*ir.Value{s, r})
		body.SetOutputs(next, body.Apply("Mul", []*ir.Value{next, r}))
		var seq *ir.Value
		if lens {
			seq = b.g.AddInput("lens", ir.TensorType(ir.Int64, ir.S(1)))
		}
		n := b.g.AddNode("Scan", []*ir.Value{seq, b.weight("s0", 1, 2), b.input("x", 1, 3, 2)}, 2, ir.AttrG("body", body),
			ir.AttrI("num_scan_inputs", 1), ir.AttrIs("directions", 1))
		b.g.SetOutputs(n.Outputs...)
		return ir.NewModel(b.g, 8)
	}
	m := scan8(false)
	x := newBuilder(9).random(1, 1, 3, 2)
	ref, err := reference.New(m)
	require.NoError(t, err)
	want, err := ref.Run(map[string]*ir.Tensor{"x": x})
	require.NoError(t, err)
	p, err := lower.Build(m, flowTarget{}, lower.Options{})
	require.NoError(t, err)
	(&lowered{prog: p, feeds: map[string]*ir.Tensor{"x": x}, want: want}).check(t)

	_, err = lower.Build(scan8(true), flowTarget{}, lower.Options{})
	require.ErrorContains(t, err, "Scan 8 with sequence_lens \"lens\" is not compiled")
}
