package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mlp builds x:float[1,4] → Gemm(x, W, B) → Relu → y.
func mlp() *Graph {
	g := NewGraph("mlp")
	x := g.AddInput("x", TensorType(Float32, S(1, 4)))
	w := g.AddInitializer("W", FromSlice(Float32, []int64{4, 3}, make([]float32, 12)))
	b := g.AddInitializer("B", NewTensor(Float32, 3))
	h := g.Apply("Gemm", []*Value{x, w, b}, AttrF("alpha", 1), AttrI("transB", 0))
	g.SetOutputs(g.Apply("Relu", []*Value{h}))
	return g
}

func TestVerifyValid(t *testing.T) {
	require.NoError(t, mlp().Verify())

	g, _, _, _ := ifGraph()
	require.NoError(t, g.Verify(), "a subgraph may read an outer value")

	// An initializer that is also an input is an overridable default.
	g = mlp()
	g.Inputs = append(g.Inputs, g.Initializers[1])
	require.NoError(t, g.Verify())

	// Symbolic and unknown dims stand for the data's sizes.
	g = mlp()
	g.Initializers[0].Type = TensorType(Float32, ShapeOf(Sym("K"), UnknownDim()))
	require.NoError(t, g.Verify())
	g.Initializers[0].Type = TensorType(Float32, Shape{})
	require.NoError(t, g.Verify(), "unknown rank")

	// Omitted optional inputs and outputs.
	g = mlp()
	g.Nodes[0].Inputs[2] = nil
	g.Nodes[1].Outputs = append(g.Nodes[1].Outputs, nil)
	require.NoError(t, g.Verify())

	// Every attribute kind with its value set, and a graph attribute.
	g = mlp()
	body := NewGraph("b")
	body.SetOutputs(g.Inputs[0])
	g.Nodes[1].Attrs = []*Attribute{
		AttrT("t", NewTensor(Int8, 1)), AttrG("g", body), AttrS("s", ""), AttrFs("fs"), AttrIs("is"), AttrSs("ss"),
		{Name: "sp", Kind: AttrSparseTensor, Sparse: &SparseTensor{}},
		{Name: "tp", Kind: AttrTypeProto, TP: &Type{}},
		{Name: "ref", Kind: AttrUndefined, RefAttrName: "outer"},
	}
	require.NoError(t, g.Verify())

	assert.EqualError(t, (&Model{}).Verify(), "model has no graph")
	require.NoError(t, NewModel(mlp(), 13).Verify())
}

func TestVerifyFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(g *Graph)
		want   string
	}{
		{"value defined twice", func(g *Graph) {
			g.Nodes[1].Outputs[0].Name = "Gemm_out0"
		}, `graph "mlp": value "Gemm_out0" is defined twice (node "Relu" (Relu) output)`},
		{"output named like an input", func(g *Graph) {
			g.Nodes[0].Outputs[0].Name = "x"
		}, `graph "mlp": value "x" is defined twice (node "Gemm" (Gemm) output)`},
		{"two inputs with one name", func(g *Graph) {
			g.AddInput("x", TensorType(Float32, S(1)))
		}, `graph "mlp": value "x" is defined twice (graph input)`},
		{"initializer named like an input", func(g *Graph) {
			g.AddInitializer("x", NewTensor(Float32, 1))
		}, `graph "mlp": value "x" is defined twice (initializer)`},
		{"read before definition", func(g *Graph) {
			g.Nodes[0], g.Nodes[1] = g.Nodes[1], g.Nodes[0]
		}, `graph "mlp": node "Relu" (Relu) reads "Gemm_out0" (input 0), which is not defined before it`},
		{"read of a detached value", func(g *Graph) {
			g.Nodes[0].Inputs[1] = &Value{Name: "W"} // same name, different value
		}, `graph "mlp": node "Gemm" (Gemm) reads "W" (input 1), which is not defined before it`},
		{"undefined graph output", func(g *Graph) {
			g.Outputs = append(g.Outputs, &Value{Name: "ghost"})
		}, `graph "mlp": output "ghost" is not defined by any node, input or initializer`},
		{"nil graph output", func(g *Graph) {
			g.Outputs = append(g.Outputs, nil)
		}, `graph "mlp": output 1 is missing`},
		{"producer mismatch", func(g *Graph) {
			g.Nodes[1].Outputs[0].Producer = g.Nodes[0]
		}, `graph "mlp": node "Relu" (Relu) output 0 "Relu_out0" does not name the node as its producer`},
		{"one value output by two nodes", func(g *Graph) {
			g.Nodes[1].Outputs[0] = g.Nodes[0].Outputs[0]
		}, `graph "mlp": node "Relu" (Relu) output 0 "Gemm_out0" does not name the node as its producer`},
		{"node output with data", func(g *Graph) {
			g.Nodes[1].Outputs[0].Const = NewTensor(Float32, 1)
		}, `graph "mlp": node "Relu" (Relu) output "Relu_out0" also holds constant data`},
		{"unnamed output", func(g *Graph) {
			g.Nodes[0].Outputs[0].Name = ""
		}, `graph "mlp": node "Gemm" (Gemm) output has no name`},
		{"no op type", func(g *Graph) {
			g.Nodes[1].OpType = ""
		}, `graph "mlp": node "Relu" () has no op type`},
		{"input with a producer", func(g *Graph) {
			g.Inputs[0].Producer = g.Nodes[0]
		}, `graph "mlp": input "x" has a producer`},
		{"initializer without data", func(g *Graph) {
			g.Initializers[1].Const = nil
		}, `graph "mlp": initializer "B" has no data`},
		{"initializer dtype", func(g *Graph) {
			g.Initializers[0].Type.Elem = Float64
		}, `graph "mlp": initializer "W" holds float data but is declared double[4,3]`},
		{"initializer non-tensor type", func(g *Graph) {
			g.Initializers[0].Type = Type{Kind: SequenceKind}
		}, `graph "mlp": initializer "W" has non-tensor type seq(?)`},
		{"initializer shape", func(g *Graph) {
			g.Initializers[0].Type.Shape = S(3, 4)
		}, `graph "mlp": initializer "W" has shape [4 3] but is declared float[3,4]`},
		{"initializer rank", func(g *Graph) {
			g.Initializers[0].Type.Shape = ShapeOf(Sym("N"))
		}, `graph "mlp": initializer "W" has shape [4 3] but is declared float[N]`},
		{"initializer bytes", func(g *Graph) {
			w := g.Initializers[0].Const
			w.Raw = w.Raw[:44]
		}, `graph "mlp": initializer "W" has 44 bytes of data for float[4 3] (want 48)`},
		{"string initializer count", func(g *Graph) {
			s := NewTensor(String, 2)
			s.Strings = s.Strings[:1]
			g.AddInitializer("s", s)
		}, `graph "mlp": initializer "s" has 1 strings for shape [2]`},
		{"tensor attribute without a tensor", func(g *Graph) {
			g.Nodes[1].Attrs = append(g.Nodes[1].Attrs, &Attribute{Name: "value", Kind: AttrTensor})
		}, `graph "mlp": node "Relu" (Relu): attribute "value" of kind tensor has no value`},
		{"graph attribute without a graph", func(g *Graph) {
			g.Nodes[0].Attrs = append(g.Nodes[0].Attrs, &Attribute{Name: "body", Kind: AttrGraph})
		}, `graph "mlp": node "Gemm" (Gemm): attribute "body" of kind graph has no value`},
		{"sparse attribute without a value", func(g *Graph) {
			g.Nodes[0].Attrs = append(g.Nodes[0].Attrs, &Attribute{Name: "sp", Kind: AttrSparseTensor})
		}, `graph "mlp": node "Gemm" (Gemm): attribute "sp" of kind sparse_tensor has no value`},
		{"type attribute without a value", func(g *Graph) {
			g.Nodes[0].Attrs = append(g.Nodes[0].Attrs, &Attribute{Name: "tp", Kind: AttrTypeProto})
		}, `graph "mlp": node "Gemm" (Gemm): attribute "tp" of kind type_proto has no value`},
		{"attribute of unknown kind", func(g *Graph) {
			g.Nodes[0].Attrs = append(g.Nodes[0].Attrs, &Attribute{Name: "k", Kind: 99})
		}, `graph "mlp": node "Gemm" (Gemm): attribute "k" has unknown kind 99`},
		{"unnamed attribute", func(g *Graph) {
			g.Nodes[0].Attrs[0].Name = ""
		}, `graph "mlp": node "Gemm" (Gemm): attribute with no name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := mlp()
			require.NoError(t, g.Verify())
			c.mutate(g)
			assert.EqualError(t, g.Verify(), c.want)
		})
	}
}

func TestVerifySubgraphs(t *testing.T) {
	t.Run("undefined value", func(t *testing.T) {
		g, _, _, body := ifGraph()
		body.Nodes[0].Inputs[0] = &Value{Name: "ghost"}
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "If" (If): graph "then": `+
			`node "Neg" (Neg) reads "ghost" (input 0), which is not defined before it`)
	})
	t.Run("outer value defined after the node", func(t *testing.T) {
		g, a, _, body := ifGraph()
		late := g.Apply("Sub", []*Value{a, a})
		body.Nodes[0].Inputs[0] = late
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "If" (If): graph "then": `+
			`node "Neg" (Neg) reads "Sub_out0" (input 0), which is not defined before it`)
	})
	t.Run("the owning node's own output", func(t *testing.T) {
		g, _, c, body := ifGraph()
		body.Nodes[0].Inputs[0] = c
		assert.ErrorContains(t, g.Verify(), `node "Neg" (Neg) reads "If_out0" (input 0), which is not defined before it`)
	})
	t.Run("undefined subgraph output", func(t *testing.T) {
		g, _, _, body := ifGraph()
		body.Outputs[0] = &Value{Name: "ghost"}
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "If" (If): graph "then": `+
			`output "ghost" is not defined by any node, input or initializer`)
	})
	t.Run("subgraph value shadows an outer name", func(t *testing.T) {
		g, _, _, body := ifGraph()
		body.AddInput("y", TensorType(Float32, S(2)))
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "If" (If): graph "then": `+
			`value "y" is defined twice (graph input)`)
	})
	t.Run("nested two levels reading the outermost graph", func(t *testing.T) {
		g, a, _, body := ifGraph()
		inner := NewGraph("inner")
		inner.SetOutputs(inner.Apply("Abs", []*Value{a}))
		body.Apply("Loop", nil, AttrG("body", inner))
		require.NoError(t, g.Verify())
		inner.Nodes[0].Inputs[0] = &Value{Name: "a2"}
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "If" (If): graph "then": `+
			`in a subgraph of node "Loop" (Loop): graph "inner": node "Abs" (Abs) reads "a2" (input 0), which is not defined before it`)
	})
	t.Run("sibling graphs attribute", func(t *testing.T) {
		g, a, _, _ := ifGraph()
		ok := NewGraph("ok")
		ok.SetOutputs(a)
		bad := NewGraph("bad")
		bad.SetOutputs(&Value{Name: "nope"})
		g.Apply("Switch", nil, &Attribute{Name: "branches", Kind: AttrGraphs, Graphs: []*Graph{ok, bad}})
		assert.EqualError(t, g.Verify(), `graph "main": in a subgraph of node "Switch" (Switch): graph "bad": `+
			`output "nope" is not defined by any node, input or initializer`)
	})
}
