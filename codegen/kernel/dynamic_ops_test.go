package kernel

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// runDynamic runs case c (T = float32) through its definition with the
// dims dynamic(input or output index (outputs after inputs), axis, size)
// names as symbols bound only at run time, against the reference. It
// reports a refusal as refused.
func runDynamic(t *testing.T, line string, dynamic func(value, axis int, size int64) string) (refused bool) {
	t.Helper()
	c, err := opcase.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	g := ir.NewGraph("case")
	outs, feeds, err := c.Add(g, "c", ir.Float32, rand.New(rand.NewSource(seedOf(line))))
	if err != nil {
		t.Fatal(err)
	}
	m := opcase.NewModel(g, c.Opset)
	if _, err := ops.InferShapes(m); err != nil {
		t.Fatal(err)
	}
	ref, err := reference.New(m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	n := g.Nodes[0]
	syms := map[string]int64{}
	symbolic := func(value int, dims []int64) []*Expr {
		e := Ints(dims...)
		for a, d := range dims {
			if name := dynamic(value, a, d); name != "" {
				e[a], syms[name] = Sym(name), d
			}
		}
		return e
	}
	inputs, consts := opcase.Inputs(n, feeds)
	in := make([]*Buffer, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		x := inputs[i]
		if x == nil {
			x = consts[i]
		}
		in[i] = &Buffer{Name: v.Name, DType: x.DType, Dims: symbolic(i, x.Dims), ID: i}
	}
	out := make([]*Buffer, len(n.Outputs))
	for i, v := range n.Outputs {
		dims, _ := v.Type.Shape.Ints()
		out[i] = &Buffer{Name: v.Name, DType: v.Type.Elem, Dims: symbolic(len(n.Inputs)+i, dims), ID: len(n.Inputs) + i}
	}
	ctx, err := NewCtx(n, ops.OpsetsOf(m), in, out, consts)
	if err != nil {
		t.Fatal(err)
	}
	if err := Build(ctx); err != nil {
		if _, ok := err.(*ops.UnsupportedError); ok {
			return true
		}
		t.Fatalf("%s: %v", line, err)
	}
	for i := range inputs {
		if inputs[i] == nil {
			inputs[i] = consts[i]
		}
	}
	got, err := Run(ctx, inputs, syms)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	for i, o := range outs {
		if err := opcase.Compare(got[i], want[o.Name]); err != nil {
			t.Errorf("%s: %s: %v", line, o.Name, err)
		}
	}
	return false
}

// TestDynamicSequence runs every recurrent case with its sequence length
// (X's and Y's time axis) known only at run time.
func TestDynamicSequence(t *testing.T) {
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		for _, line := range opcase.Cases()[op] {
			c, err := opcase.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			g := ir.NewGraph("probe")
			if _, _, err := c.Add(g, "c", ir.Float32, rand.New(rand.NewSource(1))); err != nil {
				t.Fatal(err)
			}
			timeAxis := 0
			if a := g.Nodes[0].Attr("layout"); a != nil && a.I == 1 {
				timeAxis = 1
			}
			outY := len(g.Nodes[0].Inputs)
			if runDynamic(t, line, func(value, axis int, _ int64) string {
				if (value == 0 || value == outY) && axis == timeAxis {
					return "T"
				}
				return ""
			}) {
				t.Errorf("%s: refused a dynamic sequence length", line)
			}
		}
	}
}

// TestDynamicEinsum runs every Einsum case with each dim above 1 known
// only at run time (one symbol per size, as equal labels have one size).
// An ellipsis axis that might broadcast is refused; the others must run.
func TestDynamicEinsum(t *testing.T) {
	ran := 0
	for _, line := range opcase.Cases()["Einsum"] {
		if !runDynamic(t, line, func(_, _ int, size int64) string {
			if size == 1 {
				return ""
			}
			return fmt.Sprint("d", size)
		}) {
			ran++
		}
	}
	if ran == 0 {
		t.Error("no Einsum case ran with dynamic dims")
	}
	t.Logf("%d of %d Einsum cases ran with dynamic dims", ran, len(opcase.Cases()["Einsum"]))
}
