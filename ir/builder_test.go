package ir

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nodeNames(ns []*Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

func valueNames(vs []*Value) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

func TestBuilder(t *testing.T) {
	g := NewGraph("g")
	assert.Equal(t, "g", g.Name)
	assert.Empty(t, g.Nodes)

	x := g.AddInput("x", TensorType(Float32, S(2, 3)))
	require.Equal(t, []*Value{x}, g.Inputs)
	assert.Equal(t, "float[2,3]", x.Type.String())
	assert.Nil(t, x.Producer)
	assert.False(t, x.IsConst())

	wt := NewTensor(Float32, 3, 4)
	w := g.AddInitializer("w", wt)
	require.Equal(t, []*Value{w}, g.Initializers)
	assert.Equal(t, "w", wt.Name, "the tensor takes the value's name")
	assert.Same(t, wt, w.Const)
	assert.True(t, w.IsConst())
	assert.Equal(t, "float[3,4]", w.Type.String())

	mm := g.AddNode("MatMul", []*Value{x, w}, 1, AttrI("k", 1))
	assert.Equal(t, "MatMul", mm.Name)
	assert.Equal(t, []*Value{x, w}, mm.Inputs)
	require.Len(t, mm.Outputs, 1)
	assert.Equal(t, "MatMul_out0", mm.Outputs[0].Name)
	assert.Same(t, mm, mm.Outputs[0].Producer)
	assert.Equal(t, UnknownKind, mm.Outputs[0].Type.Kind)
	assert.Equal(t, int64(1), mm.Attr("k").I)

	split := g.AddNode("Split", []*Value{mm.Outputs[0]}, 3)
	assert.Equal(t, []string{"Split_out0", "Split_out1", "Split_out2"}, valueNames(split.Outputs))
	for _, o := range split.Outputs {
		assert.Same(t, split, o.Producer)
	}

	r1 := g.Apply("Relu", []*Value{split.Outputs[0]})
	r2 := g.Apply("Relu", []*Value{split.Outputs[1]})
	r3 := g.Apply("Relu", []*Value{split.Outputs[2]})
	assert.Equal(t, []string{"MatMul", "Split", "Relu", "Relu_1", "Relu_2"}, nodeNames(g.Nodes))
	assert.Equal(t, []string{"Relu_out0", "Relu_1_out0", "Relu_2_out0"}, valueNames([]*Value{r1, r2, r3}))
	assert.Same(t, g.Nodes[3], r2.Producer)

	g.SetOutputs(r3, r1)
	assert.Equal(t, []*Value{r3, r1}, g.Outputs)
	require.NoError(t, g.Verify())

	m := NewModel(g, 17)
	assert.Equal(t, int64(8), m.IRVersion)
	assert.Equal(t, int64(17), m.Opset(""))
	assert.Equal(t, int64(17), m.Opset("ai.onnx"))
	assert.Equal(t, int64(0), m.Opset(KilnDomain))
	m.OpsetImports = append(m.OpsetImports, OpsetImport{Domain: KilnDomain, Version: 1})
	assert.Equal(t, int64(1), m.Opset(KilnDomain))
	require.NoError(t, m.Verify())
}

func TestUniqueName(t *testing.T) {
	g := NewGraph("g")
	assert.Equal(t, "a", g.UniqueName("a"))
	assert.Equal(t, "a", g.UniqueName("a"), "UniqueName reserves nothing")

	x := g.AddInput("Add", TensorType(Float32, S(1)))
	g.AddInitializer("Add_1", Scalar(Float32, float32(1)))
	n := g.AddNode("Add", []*Value{x, x}, 1)
	assert.Equal(t, "Add_2", n.Name, "inputs and initializers take names")
	assert.Equal(t, "Add_2_out0", n.Outputs[0].Name)
	assert.Equal(t, "Add_2_out0_1", g.UniqueName("Add_2_out0"), "node outputs take names")

	// Names inside subgraphs are taken too: ONNX scopes nest.
	body := NewGraph("body")
	body.AddInput("inner", TensorType(Float32, S(1)))
	body.Apply("Neg", []*Value{x})
	g.AddNode("If", []*Value{x}, 1, AttrG("then_branch", body))
	assert.Equal(t, "inner_1", g.UniqueName("inner"))
	assert.Equal(t, "Neg_1", g.UniqueName("Neg"))
	assert.Equal(t, "Neg_out0_1", g.UniqueName("Neg_out0"))
	g2 := NewGraph("g2")
	g2.AddNode("Loop", nil, 0, &Attribute{Name: "bodies", Kind: AttrGraphs, Graphs: []*Graph{body}})
	assert.Equal(t, "inner_1", g2.UniqueName("inner"), "graphs attributes count")
}

func TestNodeHelpers(t *testing.T) {
	g := NewGraph("g")
	x := g.AddInput("x", TensorType(Float32, S(1)))
	n := g.AddNode("Clip", []*Value{x, nil}, 2, AttrF("a", 1))
	assert.Same(t, x, n.Input(0))
	assert.Nil(t, n.Input(1), "omitted")
	assert.Nil(t, n.Input(5), "out of range")
	assert.Same(t, n.Outputs[1], n.Output(1))
	assert.Nil(t, n.Output(2))

	n.SetAttr(AttrF("a", 2))
	n.SetAttr(AttrS("mode", "x"))
	require.Len(t, n.Attrs, 2)
	assert.Equal(t, float32(2), n.Attr("a").F)
	assert.Equal(t, "x", n.Attr("mode").S)
	assert.Nil(t, n.Attr("b"))

	assert.Equal(t, `node "Clip" (Clip)`, n.String())
	n.Domain = KilnDomain
	assert.Equal(t, `node "Clip" (kiln.Clip)`, n.String())
	assert.Equal(t, `node (Relu)`, (&Node{OpType: "Relu"}).String())
}

// ifGraph builds
//
//	x, y inputs; a = Add(x, y); c = If(x) { then: n = Neg(a); out n } ; out c
//
// whose then-branch reads the outer value a.
func ifGraph() (g *Graph, a, c *Value, body *Graph) {
	g = NewGraph("main")
	x := g.AddInput("x", TensorType(Float32, S(2)))
	y := g.AddInput("y", TensorType(Float32, S(2)))
	a = g.Apply("Add", []*Value{x, y})
	body = NewGraph("then")
	neg := body.Apply("Neg", []*Value{a})
	body.SetOutputs(neg)
	c = g.Apply("If", []*Value{x}, AttrG("then_branch", body))
	g.SetOutputs(c)
	return g, a, c, body
}

func TestUsesAndFreeValues(t *testing.T) {
	g, a, c, body := ifGraph()
	x, y := g.Inputs[0], g.Inputs[1]
	add, iff := g.Nodes[0], g.Nodes[1]
	dbl := g.Apply("Mul", []*Value{a, a})

	uses := g.Uses()
	assert.Equal(t, []*Node{add, iff}, uses[x])
	assert.Equal(t, []*Node{add}, uses[y])
	assert.Equal(t, []*Node{iff, dbl.Producer}, uses[a], "the If reads a through its body; Mul reads it once")
	assert.NotContains(t, uses, c, "graph outputs are not node uses")
	assert.NotContains(t, uses, dbl)

	assert.Empty(t, g.FreeValues())
	assert.Equal(t, []*Value{a}, body.FreeValues())

	// A body nested one level deeper reads x (two levels up) and a value of
	// the middle graph; the middle graph's free values include x but not its
	// own value.
	inner := NewGraph("inner")
	mid := NewGraph("mid")
	mv := mid.AddInput("m", TensorType(Float32, S(2)))
	inner.SetOutputs(inner.Apply("Sub", []*Value{x, mv}))
	mid.SetOutputs(mid.Apply("Loop", nil, AttrG("body", inner)))
	loop := g.Apply("Scan", nil, AttrG("body", mid))
	assert.Equal(t, []*Value{x, mv}, inner.FreeValues())
	assert.Equal(t, []*Value{x}, mid.FreeValues())
	assert.Equal(t, []*Node{add, iff, loop.Producer}, g.Uses()[x])

	// A subgraph output that is an outer value is a free value too.
	pass := NewGraph("pass")
	pass.SetOutputs(y)
	assert.Equal(t, []*Value{y}, pass.FreeValues())

	// Values are free in order of first use, once each; initializers are
	// not free.
	h := NewGraph("h")
	k := h.AddInitializer("k", Scalar(Float32, float32(1)))
	h.Apply("Add", []*Value{y, k})
	h.Apply("Add", []*Value{x, y, nil})
	assert.Equal(t, []*Value{y, x}, h.FreeValues())
}

func TestReplaceUses(t *testing.T) {
	g, a, c, body := ifGraph()
	x := g.Inputs[0]
	sum := g.Apply("Add", []*Value{a, c})
	inner := NewGraph("inner")
	inner.SetOutputs(a) // a nested body that returns the outer value
	body.Apply("Loop", []*Value{a}, AttrG("body", inner))
	g.SetOutputs(c, a, sum)

	repl := g.Apply("Identity", []*Value{x})
	g.ReplaceUses(a, repl)

	assert.Same(t, repl, sum.Producer.Inputs[0])
	assert.Same(t, c, sum.Producer.Inputs[1], "other inputs stay")
	assert.Same(t, repl, body.Nodes[0].Inputs[0], "in the subgraph")
	assert.Same(t, repl, body.Nodes[1].Inputs[0], "in the subgraph")
	assert.Equal(t, []*Value{repl}, inner.Outputs, "nested subgraph outputs")
	assert.Equal(t, []*Value{c, repl, sum}, g.Outputs, "graph outputs")
	assert.NotContains(t, g.Uses(), a)
	assert.Same(t, x, g.Nodes[0].Inputs[0], "a's producer still reads x")
}

// chain builds n nodes where each reads the previous one's output.
func chain(n int) *Graph {
	g := NewGraph("chain")
	v := g.AddInput("x", TensorType(Float32, S(1)))
	for i := 0; i < n; i++ {
		v = g.Apply(fmt.Sprintf("Op%d", i), []*Value{v})
	}
	g.SetOutputs(v)
	return g
}

func TestTopoSortRestoresChain(t *testing.T) {
	g := chain(40)
	want := nodeNames(g.Nodes)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		rng.Shuffle(len(g.Nodes), func(i, j int) { g.Nodes[i], g.Nodes[j] = g.Nodes[j], g.Nodes[i] })
		require.NoError(t, g.TopoSort())
		require.Equal(t, want, nodeNames(g.Nodes))
		require.NoError(t, g.Verify())
	}
}

// diamondish builds a DAG with many valid orders: each node reads two
// earlier values chosen at random, and If nodes read through subgraphs.
func diamondish(rng *rand.Rand, n int) *Graph {
	g := NewGraph("dag")
	vals := []*Value{g.AddInput("x", TensorType(Float32, S(1))), g.AddInput("y", TensorType(Float32, S(1)))}
	for i := 0; i < n; i++ {
		a, b := vals[rng.IntN(len(vals))], vals[rng.IntN(len(vals))]
		var v *Value
		if i%5 == 4 {
			body := NewGraph(fmt.Sprintf("body%d", i))
			body.SetOutputs(body.Apply("Neg", []*Value{b}))
			v = g.Apply("If", []*Value{a}, AttrG("then_branch", body))
		} else {
			v = g.Apply("Add", []*Value{a, b})
		}
		vals = append(vals, v)
	}
	g.SetOutputs(vals[len(vals)-1])
	return g
}

func TestTopoSortShuffled(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 30 {
		g := diamondish(rng, 30)
		orig := nodeNames(g.Nodes)
		require.NoError(t, g.TopoSort())
		assert.Equal(t, orig, nodeNames(g.Nodes), "a valid order is kept")

		rng.Shuffle(len(g.Nodes), func(i, j int) { g.Nodes[i], g.Nodes[j] = g.Nodes[j], g.Nodes[i] })
		shuffled := append([]*Node(nil), g.Nodes...)
		require.NoError(t, g.TopoSort())
		require.NoError(t, g.Verify(), "trial %d", trial)
		first := nodeNames(g.Nodes)
		assert.ElementsMatch(t, orig, first)

		// The same shuffled order sorts the same way every time.
		for range 3 {
			g.Nodes = append([]*Node(nil), shuffled...)
			require.NoError(t, g.TopoSort())
			require.Equal(t, first, nodeNames(g.Nodes))
		}
	}
}

func TestTopoSortSubgraphDependency(t *testing.T) {
	g, _, _, _ := ifGraph()
	g.Nodes[0], g.Nodes[1] = g.Nodes[1], g.Nodes[0] // If before the Add its body reads
	require.Error(t, g.Verify())
	require.NoError(t, g.TopoSort())
	assert.Equal(t, []string{"Add", "If"}, nodeNames(g.Nodes))
	require.NoError(t, g.Verify())
}

func TestTopoSortCycle(t *testing.T) {
	g := chain(4)
	// Op1 reads Op3's output: Op1 → Op2 → Op3 → Op1.
	g.Nodes[1].Inputs[0] = g.Nodes[3].Outputs[0]
	nodes := append([]*Node(nil), g.Nodes...)
	err := g.TopoSort()
	require.Error(t, err)
	assert.Regexp(t, `^graph "chain" has a cycle through node "Op[123]" \(Op[123]\)$`, err.Error())
	assert.Equal(t, nodes, g.Nodes, "nodes are left alone on failure")

	// A cycle through a subgraph read.
	g, _, c, body := ifGraph()
	body.Nodes[0].Inputs[0] = c // the If's body reads the If's own output
	require.ErrorContains(t, g.TopoSort(), `cycle through node "If" (If)`)

	// A node reading its own output.
	g = chain(3)
	g.Nodes[1].Inputs = append(g.Nodes[1].Inputs, g.Nodes[1].Outputs[0])
	require.ErrorContains(t, g.TopoSort(), `cycle through node "Op1" (Op1)`)
}
