package opcase

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

func TestParseQuotedAttributesAndRandomConstants(t *testing.T) {
	c, err := Parse(`Einsum-12(equation="ij,jk->ik") T[3,4], T[4,5]=rand`)
	if err != nil {
		t.Fatal(err)
	}
	if c.NOut != 1 || len(c.Attrs) != 1 || c.Attrs[0].val != `"ij,jk->ik"` || len(c.Ins) != 2 {
		t.Fatalf("parsed %+v", c)
	}
	g := ir.NewGraph("g")
	_, feeds, err := c.Add(g, "c", ir.Float32, rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	w := g.Nodes[0].Inputs[1]
	if _, fed := feeds[w.Name]; fed || w.Const == nil || w.Const.Len() != 20 {
		t.Fatalf("=rand gave %v (fed %v), want a constant of 20 elements", w.Const, fed)
	}
	vals := map[float64]bool{}
	for i := range int(w.Const.Len()) {
		vals[w.Const.Float64At(i)] = true
	}
	if len(vals) < 10 {
		t.Errorf("=rand values are not random: %v", vals)
	}

	c, err = Parse(`GRU-14(activations=["Sigmoid" "Tanh"], hidden_size=2) T[1,1,2], T[1,6,2], T[1,6,2] -> 2`)
	if err != nil {
		t.Fatal(err)
	}
	if c.NOut != 2 {
		t.Errorf("NOut = %d, want 2", c.NOut)
	}
	at, err := parseAttr(c.Attrs[0], ir.Float32)
	if err != nil || at.Kind != ir.AttrStrings || !slices.Equal(at.Strings, []string{"Sigmoid", "Tanh"}) {
		t.Errorf("activations parsed as %+v (%v)", at, err)
	}
}

// TestCasesParse: every filed case line parses, is filed under its own op,
// and the tables are not empty (a family lost in a move would be).
func TestCasesParse(t *testing.T) {
	cases := Cases()
	if len(cases) < 100 {
		t.Errorf("%d ops have cases, want the whole table", len(cases))
	}
	for op, lines := range cases {
		for _, line := range lines {
			c, err := Parse(line)
			if err != nil {
				t.Error(err)
			} else if c.Op != op {
				t.Errorf("case %q is filed under %s", line, op)
			}
		}
	}
	if n := len(ScheduleCases()); n < 100 {
		t.Errorf("%d schedule cases", n)
	}
	for _, line := range ScheduleCases() {
		if _, err := Parse(line); err != nil {
			t.Error(err)
		}
	}
}

// TestParseDeclaredRefusal: !refused("WHY") is cut off the case, with the
// output count before it still read, and a malformed one is an error.
func TestParseDeclaredRefusal(t *testing.T) {
	c, err := Parse(`TopK-11(largest=0) T[3,5], int64[1]=[2] -> 2 !refused("sorted (a b)")`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Refusal != "sorted (a b)" || c.NOut != 2 || len(c.Ins) != 2 || len(c.Attrs) != 1 {
		t.Errorf("parsed %+v", c)
	}
	if c, err := Parse(`Relu-14 T[3]`); err != nil || c.Refusal != "" {
		t.Errorf("a plain case parsed as refusal %q (%v)", c.Refusal, err)
	}
	for _, bad := range []string{`Relu-14 T[3] !refused("x"`, `Relu-14 T[3] !refused(x)`, `Relu-14 T[3] !refused("")`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}
