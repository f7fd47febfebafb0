package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// fusionGroupModel is y = Relu(x + b) with the two nodes in a FusionGroup
// whose inputs are in (the body's free values, in order, for a well-formed
// group).
func fusionGroupModel(in func(x, b *ir.Value) []*ir.Value) (*ir.Model, *ir.Value) {
	g := ir.NewGraph("fg")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	b := g.AddInitializer("b", ir.FromSlice(ir.Float32, []int64{3}, []float32{1, -2, 0.5}))
	body := ir.NewGraph("elementwise")
	s := body.Apply("Add", []*ir.Value{x, b})
	r := body.Apply("Relu", []*ir.Value{s})
	body.SetOutputs(r)
	y := &ir.Value{Name: "y"}
	n := &ir.Node{OpType: FusionGroup, Domain: ir.KilnDomain, Inputs: in(x, b), Outputs: []*ir.Value{y},
		Attrs: []*ir.Attribute{ir.AttrS("kind", "elementwise"), ir.AttrG("body", body)}}
	y.Producer = n
	g.Nodes = append(g.Nodes, n)
	g.SetOutputs(y)
	return ir.NewModel(g, 13), y
}

func TestFusionGroup(t *testing.T) {
	m, y := fusionGroupModel(func(x, b *ir.Value) []*ir.Value { return []*ir.Value{x, b} })
	_, err := InferShapes(m)
	require.NoError(t, err)
	assert.Equal(t, "float[2,3]", y.Type.String())

	opsets := OpsetsOf(m)
	n := m.Graph.Nodes[0]
	s, err := opsets.Schema(n)
	require.NoError(t, err)
	x := ir.FromSlice(ir.Float32, []int64{2, 3}, []float32{0, 1, 2, -3, 4, -5})
	c := NewKernelContext(s, n, 1, []*ir.Tensor{x, m.Graph.Initializers[0].Const})
	c.Opsets = opsets
	require.NoError(t, s.Run(c))
	assert.Equal(t, []float64{1, 0, 2.5, 0, 2, 0}, Float64s(c.Outputs[0]))

	c.Opsets = nil
	assert.ErrorContains(t, s.Run(c), "no opsets")
}

// TestFusionGroupInputs: the kernel binds inputs to the body's free values
// by position, so a node whose inputs are not those values is an error.
func TestFusionGroupInputs(t *testing.T) {
	m, _ := fusionGroupModel(func(x, b *ir.Value) []*ir.Value { return []*ir.Value{b, x} })
	_, err := InferShapes(m)
	assert.ErrorContains(t, err, "free value")
	m, _ = fusionGroupModel(func(x, _ *ir.Value) []*ir.Value { return []*ir.Value{x} })
	_, err = InferShapes(m)
	assert.ErrorContains(t, err, "outer values")
}
