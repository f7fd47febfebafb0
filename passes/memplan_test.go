package passes

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
)

func f32(dims ...int64) ir.Type { return ir.TensorType(ir.Float32, ir.S(dims...)) }

// TestPlanMemoryHooks checks what a backend's hooks change: a fused node
// writes another value than its own output and reads a residual, and a
// node's scratch gets a buffer live while it runs.
func TestPlanMemoryHooks(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("X", f32(16))
	a := g.Apply("Relu", []*ir.Value{x})
	conv := g.AddNode("Conv", []*ir.Value{x}, 1)
	add := g.Apply("Add", []*ir.Value{conv.Outputs[0], a}) // fused into conv
	for _, v := range []*ir.Value{a, conv.Outputs[0], add} {
		v.Type = f32(16)
	}
	y := g.Apply("Relu", []*ir.Value{add})
	y.Type = f32(16)
	nodes := []*ir.Node{a.Producer, conv, y.Producer}
	p, err := PlanMemory(nodes, MemoryHooks{
		InArena: func(v *ir.Value) bool { return v != y },
		Reads: func(n *ir.Node) []*ir.Value {
			if n == conv {
				return []*ir.Value{x, a}
			}
			return n.Inputs
		},
		Writes: func(n *ir.Node) []*ir.Value {
			if n == conv {
				return []*ir.Value{add}
			}
			return n.Outputs
		},
		Scratch: func(n *ir.Node) int64 {
			if n == conv {
				return 100
			}
			return 0
		},
	})
	require.NoError(t, err)
	type row struct {
		v           *ir.Value
		n           *ir.Node
		size        int64
		first, last int
		off         int64
	}
	var got []row
	for _, b := range p.Buffers {
		got = append(got, row{b.Value, b.Node, b.Size, b.First, b.Last, b.Offset})
	}
	assert.Equal(t, []row{
		{a, nil, 64, 0, 1, 128},
		{add, nil, 64, 1, 2, 192},
		{nil, conv, 128, 1, 1, 0},
	}, got)
	assert.Equal(t, int64(256), p.ArenaBytes)
	assert.Equal(t, int64(256), p.TensorBytes)
}

// TestPlanMemoryNoOverlap plans random DAGs and checks that buffers live
// at the same time never share bytes, and that planning twice gives the
// same offsets.
func TestPlanMemoryNoOverlap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 50; trial++ {
		g := ir.NewGraph("g")
		vals := []*ir.Value{g.AddInput("X", f32(8))}
		for i := 0; i < 20; i++ {
			ins := []*ir.Value{vals[rng.Intn(len(vals))], vals[rng.Intn(len(vals))]}
			v := g.Apply("Add", ins)
			v.Type = f32(1 + rng.Int63n(200))
			vals = append(vals, v)
		}
		p, err := PlanMemory(g.Nodes, MemoryHooks{})
		require.NoError(t, err)
		for i, a := range p.Buffers {
			for _, b := range p.Buffers[i+1:] {
				live := a.First <= b.Last && b.First <= a.Last
				disjoint := a.Offset+a.Size <= b.Offset || b.Offset+b.Size <= a.Offset
				assert.True(t, !live || disjoint, "trial %d: %s and %s overlap", trial, a.Value.Name, b.Value.Name)
			}
		}
		assert.LessOrEqual(t, p.ArenaBytes, p.TensorBytes)
		again, err := PlanMemory(g.Nodes, MemoryHooks{})
		require.NoError(t, err)
		for i, b := range again.Buffers {
			assert.Equal(t, p.Buffers[i].Offset, b.Offset)
		}
	}
}

// TestMemplanDynamicShapes: a graph without static shapes gets no plan,
// and the pipeline goes on.
func TestMemplanDynamicShapes(t *testing.T) {
	m, err := text.Parse("dyn", []byte(`<ir_version: 8, opset_import: ["" : 13]>
g (float[N,4] X) => (float[N,4] Y) {
  A = Relu(X)
  Y = Neg(A)
}`))
	require.NoError(t, err)
	c := &Context{OptLevel: 2, Verify: true}
	require.NoError(t, Run(c, O2, m))
	assert.Nil(t, c.Memory)
}
