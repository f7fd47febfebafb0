package lower_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
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
