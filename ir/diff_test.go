package ir

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diffModel builds a model exercising every part Diff compares: header,
// opsets, inputs, initializers, attributes of several kinds and an If with a
// body. Each call builds fresh, equal objects.
func diffModel() *Model {
	g := NewGraph("main")
	x := g.AddInput("x", TensorType(Float32, S(1, 4)))
	w := g.AddInitializer("W", FromSlice(Float32, []int64{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8}))
	h := g.Apply("Gemm", []*Value{x, w, nil},
		AttrF("alpha", 0.5), AttrF("beta", float32(math.NaN())), AttrI("transB", 0),
		AttrIs("perm", 1, 0), AttrFs("scales", 1, 2), AttrSs("names", "a"))
	k := g.Apply("Constant", nil, AttrT("value", FromSlice(Int64, []int64{2}, []int64{3, 4})))
	r := g.Apply("Relu", []*Value{h})
	body := NewGraph("then")
	body.SetOutputs(body.Apply("Neg", []*Value{r}), body.Apply("Abs", []*Value{k}))
	out := g.AddNode("If", []*Value{x}, 2, AttrG("then_branch", body))
	out.Outputs[0].Type = TensorType(Float32, S(1, 2))
	g.SetOutputs(out.Outputs...)
	m := NewModel(g, 17)
	m.OpsetImports = append(m.OpsetImports, OpsetImport{Domain: KilnDomain, Version: 1})
	m.Metadata = []StringPair{{"k", "v"}}
	return m
}

func TestDiffEqual(t *testing.T) {
	a, b := diffModel(), diffModel()
	require.NoError(t, a.Verify())
	assert.Equal(t, "", Diff(a, b))
	assert.Equal(t, "", Diff(a, a))
	assert.Equal(t, "", Diff(&Model{}, &Model{}))

	// NaN attributes compare by bits, not by ==.
	nan := float32(math.NaN())
	b.Graph.Nodes[0].Attr("beta").F = nan
	assert.Equal(t, "", Diff(a, b))
	b.Graph.Nodes[0].Attr("scales").Floats[1] = nan
	a.Graph.Nodes[0].Attr("scales").Floats[1] = nan
	assert.Equal(t, "", Diff(a, b))

	// Distinct but equal tensors and types.
	b.Graph.Initializers[0].Const = a.Graph.Initializers[0].Const.Clone()
	b.Graph.Inputs[0].Type = a.Graph.Inputs[0].Type.Clone()
	assert.Equal(t, "", Diff(a, b))
}

func TestDiffReportsEachChange(t *testing.T) {
	node := func(m *Model, op string) *Node {
		for _, n := range m.Graph.Nodes {
			if n.OpType == op {
				return n
			}
		}
		panic(op)
	}
	for _, c := range []struct {
		name   string
		mutate func(m *Model)
		want   string // a substring of the report
	}{
		{"ir version", func(m *Model) { m.IRVersion = 9 }, "ir_version 8 != 9"},
		{"opset version", func(m *Model) { m.OpsetImports[0].Version = 18 },
			"opset_import [{ 17} {kiln 1}] != [{ 18} {kiln 1}]"},
		{"opset domain", func(m *Model) { m.OpsetImports[1].Domain = "com.microsoft" }, "opset_import"},
		{"opset count", func(m *Model) { m.OpsetImports = m.OpsetImports[:1] }, "opset_import"},
		{"producer", func(m *Model) { m.ProducerVersion = "2" }, `producer "kiln" "" != "kiln" "2"`},
		{"model metadata", func(m *Model) { m.Metadata[0].Value = "w" }, "model metadata: {k v} != {k w}"},
		{"model doc", func(m *Model) { m.DocString = "d" }, "model doc_string differs"},
		{"no graph", func(m *Model) { m.Graph = nil }, "one model has no graph"},
		{"graph name", func(m *Model) { m.Graph.Name = "g" }, `graph name "main" != "g"`},
		{"int attribute", func(m *Model) { node(m, "Gemm").Attr("transB").I = 1 },
			`graph "main": node 0: node "Gemm" (Gemm): attribute "transB": 0 != 1`},
		{"float attribute", func(m *Model) { node(m, "Gemm").Attr("alpha").F = 0.25 },
			`node "Gemm" (Gemm): attribute "alpha": 0.5 != 0.25`},
		{"float attribute NaN vs number", func(m *Model) { node(m, "Gemm").Attr("beta").F = 1 },
			`attribute "beta": NaN != 1`},
		{"float attribute signed zero", func(m *Model) {
			node(m, "Gemm").Attr("alpha").F = float32(math.Copysign(0, -1))
		}, `attribute "alpha": 0.5 != -0`},
		{"floats attribute", func(m *Model) { node(m, "Gemm").Attr("scales").Floats[1] = 3 },
			`attribute "scales": floats[1] 2 != 3`},
		{"ints attribute", func(m *Model) { node(m, "Gemm").Attr("perm").Ints[0] = 0 },
			`attribute "perm": ints [1 0] != [0 0]`},
		{"strings attribute", func(m *Model) { node(m, "Gemm").Attr("names").Strings = []string{"b"} },
			`attribute "names": strings ["a"] != ["b"]`},
		{"attribute kind", func(m *Model) { node(m, "Gemm").Attr("transB").Kind = AttrFloat },
			`attribute "transB": "transB" int != "transB" float`},
		{"attribute count", func(m *Model) { n := node(m, "Gemm"); n.Attrs = n.Attrs[:2] },
			`node "Gemm" (Gemm): 6 attributes != 2`},
		{"tensor attribute data", func(m *Model) { Data[int64](node(m, "Constant").Attr("value").T)[1] = 5 },
			`graph "main": node 1: node "Constant" (Constant): attribute "value": tensor differs`},
		{"tensor attribute dims", func(m *Model) {
			node(m, "Constant").Attr("value").T.Dims = []int64{1, 2}
		}, `attribute "value": tensor differs`},
		{"input type", func(m *Model) { m.Graph.Inputs[0].Type = TensorType(Float32, S(2, 4)) },
			`graph "main" inputs: "x" type float[1,4] != float[2,4]`},
		{"input symbolic dim", func(m *Model) { m.Graph.Inputs[0].Type.Shape.Dims[0] = Sym("N") },
			`graph "main" inputs: "x" type float[1,4] != float[N,4]`},
		{"input name", func(m *Model) { m.Graph.Inputs[0].Name = "y" }, `graph "main" inputs[0]: "x" != "y"`},
		{"initializer data", func(m *Model) { Data[float32](m.Graph.Initializers[0].Const)[7] = 9 },
			`graph "main" initializers: "W" data differs`},
		{"initializer count", func(m *Model) {
			m.Graph.Initializers = append(m.Graph.Initializers, m.Graph.Initializers[0])
		}, `graph "main" initializers: 1 != 2`},
		{"output type", func(m *Model) { m.Graph.Outputs[0].Type = TensorType(Float32, S(1, 3)) },
			`graph "main" outputs: "If_out0" type float[1,2] != float[1,3]`},
		{"node order", func(m *Model) {
			ns := m.Graph.Nodes
			ns[0], ns[1] = ns[1], ns[0]
		}, `graph "main": node 0: node "Gemm" (Gemm) != node "Constant" (Constant)`},
		{"node count", func(m *Model) { m.Graph.Apply("Relu", nil) }, `graph "main": 4 nodes != 5`},
		{"node input", func(m *Model) { node(m, "Gemm").Inputs[2] = m.Graph.Inputs[0] },
			`node "Gemm" (Gemm) inputs[2]: "" != "x"`},
		{"node domain", func(m *Model) { node(m, "Relu").Domain = KilnDomain },
			`node "Relu" (Relu) != node "Relu" (kiln.Relu)`},
		{"subgraph op", func(m *Model) { node(m, "If").Attr("then_branch").G.Nodes[0].OpType = "Abs" },
			`graph "main": node 3: node "If" (If): attribute "then_branch": graph "then": node 0: node "Neg" (Neg) != node "Neg" (Abs)`},
		{"subgraph reads another value", func(m *Model) {
			body := node(m, "If").Attr("then_branch").G
			body.Nodes[0].Inputs[0] = m.Graph.Inputs[0]
		}, `graph "then": node 0: node "Neg" (Neg) inputs[0]: "Relu_out0" != "x"`},
		{"subgraph output", func(m *Model) {
			body := node(m, "If").Attr("then_branch").G
			body.Outputs = body.Outputs[:1]
		}, `graph "then" outputs: 2 != 1`},
		{"subgraph missing", func(m *Model) { node(m, "If").Attr("then_branch").G = nil },
			`attribute "then_branch": graph missing`},
		{"graph metadata", func(m *Model) { m.Graph.Metadata = []StringPair{{"a", "b"}} },
			`graph "main" metadata: 0 entries != 1`},
		{"value_info", func(m *Model) { m.Graph.ValueInfo = []*Value{{Name: "Relu_out0"}} },
			`graph "main" value_info: 0 != 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := diffModel(), diffModel()
			c.mutate(b)
			d := Diff(a, b)
			assert.Contains(t, d, c.want)
			assert.NotEmpty(t, Diff(b, a), "the other way round")
		})
	}
}

// Initializer data compares bit for bit: equal NaNs are equal, NaNs with
// other payloads are not.
func TestDiffInitializerNaNs(t *testing.T) {
	a, b := diffModel(), diffModel()
	Data[uint32](a.Graph.Initializers[0].Const)[3] = 0x7fc00000
	Data[uint32](b.Graph.Initializers[0].Const)[3] = 0x7fc00000
	assert.Equal(t, "", Diff(a, b))
	Data[uint32](b.Graph.Initializers[0].Const)[3] = 0x7fc00001
	assert.Equal(t, `graph "main" initializers: "W" data differs`, Diff(a, b))
}
