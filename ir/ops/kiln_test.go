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

// TestFusionGroupKindsAndRoles: inference, the reference kernel and the
// pipeline's verification (CheckGroups) refuse a group of an unknown
// kind, a role its kind does not have, roles that are not one per body
// node, and roles on a kind that has none, naming the node.
func TestFusionGroupKindsAndRoles(t *testing.T) {
	withAttrs := func(kind string, roles ...string) *ir.Model {
		m, _ := fusionGroupModel(func(x, b *ir.Value) []*ir.Value { return []*ir.Value{x, b} })
		n := m.Graph.Nodes[0]
		n.Name = "grouped"
		n.SetAttr(ir.AttrS("kind", kind))
		if roles != nil {
			n.SetAttr(ir.AttrSs("roles", roles...))
		}
		return m
	}
	for _, c := range []struct {
		name  string
		m     *ir.Model
		wants []string // "" for a well-formed group
	}{
		{"elementwise", withAttrs("elementwise"), nil},
		{"matmul epilogue", withAttrs("matmul", "bias", "activation"), nil},
		{"unknown kind", withAttrs("fancy"), []string{`node "grouped"`, `unknown fusion-group kind "fancy"`}},
		{"role of another kind", withAttrs("conv", "base", "q-output"), []string{`node "grouped"`, `role "q-output"`, "conv group"}},
		{"bias on a conv", withAttrs("conv", "base", "bias"), []string{`role "bias"`}},
		{"too few roles", withAttrs("qadd", "base"), []string{`node "grouped"`, "1 roles for its 2 body nodes"}},
		{"no roles", withAttrs("layernorm"), []string{"0 roles for its 2 body nodes"}},
		{"roles on elementwise", withAttrs("elementwise", "base", "activation"), []string{"has no roles", "holds 2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, inferErr := InferShapes(c.m)
			checkErr := CheckGroups(c.m.Graph)
			n := c.m.Graph.Nodes[0]
			s, err := OpsetsOf(c.m).Schema(n)
			require.NoError(t, err)
			kc := NewKernelContext(s, n, 1, []*ir.Tensor{ir.NewTensor(ir.Float32, 2, 3), c.m.Graph.Initializers[0].Const})
			kc.Opsets = OpsetsOf(c.m)
			runErr := s.Run(kc)
			if c.wants == nil {
				assert.NoError(t, inferErr)
				assert.NoError(t, checkErr)
				assert.NoError(t, runErr)
				return
			}
			for _, err := range []error{inferErr, checkErr, runErr} {
				for _, want := range c.wants {
					assert.ErrorContains(t, err, want)
				}
			}
		})
	}
}

// TestGroupKindsTable: every kind has its roles (all but elementwise's
// non-empty, no role twice), the quantized kinds are the ones Int8Of
// names, and each quantized kind but none other is formed by some op.
func TestGroupKindsTable(t *testing.T) {
	formed := map[GroupKind]bool{}
	for _, k := range int8Kernels {
		formed[k] = true
	}
	for _, k := range GroupKinds() {
		roles := k.Roles()
		assert.Equal(t, k != GroupElementwise, len(roles) > 0, "%s's roles", k)
		seen := map[Role]bool{}
		for _, r := range roles {
			assert.False(t, seen[r], "%s lists %s twice", k, r)
			seen[r] = true
		}
		assert.Equal(t, k.Quantized(), formed[k], "%s: quantized kinds are the ones an op's integer kernel forms", k)
		if k.Quantized() {
			assert.True(t, seen[RoleDQInput] && seen[RoleBase] && seen[RoleQOutput], "%s: a quantized group reads a dq-input and ends in its q-output", k)
		}
	}
	assert.False(t, GroupKind("fancy").Known())
	assert.True(t, GroupQLut.Known())
}
