package reference

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// A sequence input is bound by kind and element type, and a graph of
// sequence ops computes on it: y = SequenceAt(Insert(x, t), -1) is t, and
// n = SequenceLength(x) + 1.
func TestSequenceValues(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	vec := func(n int64) *ir.Tensor {
		v := ir.NewTensor(ir.Float32, n)
		for i := range v.Float32s() {
			v.Float32s()[i] = float32(rng.NormFloat64())
		}
		return v
	}
	g := ir.NewGraph("seq")
	elem := ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N")))
	x := g.AddInput("x", ir.Type{Kind: ir.SequenceKind, Inner: &elem})
	tv := g.AddInput("t", ir.TensorType(ir.Float32, ir.S(3)))
	grown := g.Apply("SequenceInsert", []*ir.Value{x, tv})
	last := g.AddInitializer("last", ir.Scalar(ir.Int64, int64(-1)))
	y := g.Apply("SequenceAt", []*ir.Value{grown, last})
	y.Name = "y"
	n := g.Apply("SequenceLength", []*ir.Value{grown})
	n.Name = "n"
	g.SetOutputs(y, n)
	e, err := New(ir.NewModel(g, 17))
	if err != nil {
		t.Fatal(err)
	}
	// The elements' N may differ from one to the next.
	seq := ir.NewSequence(ir.Float32, []*ir.Tensor{vec(2), vec(5)})
	in := vec(3)
	out, err := e.Run(map[string]*ir.Tensor{"x": seq, "t": in})
	if err != nil {
		t.Fatal(err)
	}
	if !out["y"].Equal(in) || out["n"].Int64s()[0] != 3 {
		t.Errorf("y = %v, n = %v; want %v and 3", out["y"].Float32s(), out["n"].Int64s(), in.Float32s())
	}
	for name, bad := range map[string]*ir.Tensor{
		"a tensor for a sequence": vec(2),
		"an element of rank 2":    ir.NewSequence(ir.Float32, []*ir.Tensor{ir.NewTensor(ir.Float32, 1, 2)}),
		"an empty int64 sequence": ir.NewSequence(ir.Int64, nil),
		"an optional":             ir.NewOptional(ir.Float32, vec(2)),
	} {
		_, err := e.Run(map[string]*ir.Tensor{"x": bad, "t": in})
		if err == nil || !strings.Contains(err.Error(), `input "x`) {
			t.Errorf("%s: got %v, want an error naming input x", name, err)
		}
	}
}
