package cpu

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/types"
)

// stagesModel is a residual 3×3 convolution block (a conv epilogue group;
// its output h is a graph output, so the group ends there) followed by an
// elementwise group, optimized as cc build does.
func stagesModel(t *testing.T) *ir.Model {
	r := rand.New(rand.NewSource(3))
	g := ir.NewGraph("block")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 12, 12)))
	c := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 16, 16, 3, 3)), g.AddInitializer("b", randTensor(r, 16))},
		ir.AttrIs("pads", 1, 1, 1, 1))
	h := g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{c, x})})
	y := g.Apply("Mul", []*ir.Value{g.Apply("Sigmoid", []*ir.Value{h}), x})
	h.Name, y.Name = "h", "y"
	g.SetOutputs(h, y)
	return optimize(t, ir.NewModel(g, 13))
}

// testGen starts m's compilation for AVX-512 with Winograd wherever it
// fits (nothing measured).
func testGen(t *testing.T, m *ir.Model, opts Options) *gen {
	t.Helper()
	opts.CPU, opts.Winograd = "x86-64-v4", WinogradOn
	opts, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	feats, err := featuresFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGen(m, feats, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// genAfter runs m's stages up to and including stage, each check passing.
func genAfter(t *testing.T, m *ir.Model, stage string) *gen {
	t.Helper()
	g := testGen(t, m, Options{})
	if !slices.Contains(StageNames(), stage) {
		t.Fatalf("no stage %q", stage)
	}
	if err := g.buildUntil(stage); err != nil {
		t.Fatal(err)
	}
	return g
}

// nodeOf returns the lowered node of op in g.nodes.
func nodeOf(t *testing.T, g *gen, op string) *ir.Node {
	t.Helper()
	i := slices.IndexFunc(g.nodes, func(n *ir.Node) bool { return n.OpType == op })
	if i < 0 {
		t.Fatalf("no %s among the lowered nodes %v", op, g.nodes)
	}
	return g.nodes[i]
}

// TestStageChecks breaks what each stage promises and expects its check
// to say so, naming the node.
func TestStageChecks(t *testing.T) {
	for _, c := range []struct {
		stage string
		// breakIt breaks g's state and returns the node (or function) the
		// error must name.
		breakIt func(t *testing.T, g *gen) string
		want    string
	}{
		{"groups", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "FusionGroup") // the elementwise group
			g.plan(n).lower = nil
			return n.String()
		}, "has no lowering"},
		{"groups", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "FusionGroup")
			g.plan(n).residualAdd = nodeOf(t, g, "Conv")
			return n.String()
		}, "only a Conv, Gemm or MatMul takes"},
		{"conv-algorithms", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "Conv")
			g.plan(n).algorithm = algoPointwise
			return n.String()
		}, `but its group asks for "pointwise"`},
		{"conv-algorithms", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "FusionGroup")
			g.plan(n).winograd = g.plan(nodeOf(t, g, "Conv")).winograd
			return n.String()
		}, "is not a convolution lowered by hand"},
		{"memory", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "Conv")
			delete(g.prog.Places, g.outValue(n))
			return n.String()
		}, "has no location"},
		{"memory", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "Conv")
			g.plan(n).step.Scratch = g.prog.ArenaBytes - 64
			return n.String()
		}, "outside the arena"},
		{"memory", func(t *testing.T, g *gen) string {
			n := nodeOf(t, g, "Conv")
			g.plan(n).step.ScratchBytes = 0
			return n.String()
		}, "bytes of scratch and has 0"},
		{"lower", func(t *testing.T, g *gen) string {
			st := g.steps[len(g.steps)-1]
			st.f.NewBlock("")
			return st.f.Name()
		}, "has no terminator"},
		{"entry", func(t *testing.T, g *gen) string {
			g.mod.NewFunc("kiln_broken", types.Void).NewBlock("")
			return "kiln_broken"
		}, "has no terminator"},
	} {
		t.Run(c.stage+"/"+c.want, func(t *testing.T) {
			g := genAfter(t, stagesModel(t), c.stage)
			if c.stage == "conv-algorithms" && g.plan(nodeOf(t, g, "Conv")).winograd == nil {
				t.Fatal("the 3×3 convolution runs without Winograd: the case breaks nothing")
			}
			name := c.breakIt(t, g)
			err := g.check(c.stage)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
				t.Fatalf("check(%s) = %v, want an error naming %s: %s", c.stage, err, name, c.want)
			}
		})
	}
}

// TestStageDump checks that Options.Dump receives every stage in order,
// and that the listings show the plan: the fused pieces, the Winograd
// variant, the scratch and the places of the values.
func TestStageDump(t *testing.T) {
	var stages []string
	texts := map[string]string{}
	g := testGen(t, stagesModel(t), Options{Dump: func(stage, text string) {
		stages = append(stages, stage)
		texts[stage] = text
	}})
	if err := g.build(); err != nil {
		t.Fatal(err)
	}
	want := StageNames()
	if testing.Verbose() {
		for _, s := range stages {
			t.Log(texts[s])
		}
	}
	if !slices.Equal(stages, want) {
		t.Fatalf("dumped stages %v, want %v", stages, want)
	}
	// Dumping changes nothing compiled.
	quiet := testGen(t, stagesModel(t), Options{})
	if err := quiet.build(); err != nil {
		t.Fatal(err)
	}
	if g.mod.String() != quiet.mod.String() {
		t.Error("the LLVM IR built with Dump differs from the IR built without")
	}
	conv := nodeOf(t, g, "Conv")
	p := g.plan(conv)
	for stage, parts := range map[string][]string{
		"slots":           {`input  0 "x"`, `output 1 "h"`, `output 2 "y"`},
		"groups":          {conv.String() + ": hand-written", "residual " + p.residualAdd.String(), "clamp " + p.clamp.String(), "group on the kernel layer"},
		"conv-algorithms": {"winograd " + p.winograd.name},
		"memory":          {"scratch ", `reads "x" io[0]`, `writes "y" io[2]`, "arena+"},
		"lower":           {"step 0: k001_"},
		"entry":           {"parts 1"},
	} {
		for _, s := range parts {
			if !strings.Contains(texts[stage], s) {
				t.Errorf("the dump after %s lacks %q:\n%s", stage, s, texts[stage])
			}
		}
	}
}
