package passes

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// chain is x → Relu → Relu → ... (n nodes) with every value float[dims].
func chain(n int, dims ...int64) (*ir.Graph, []*ir.Node) {
	g := ir.NewGraph("g")
	v := g.AddInput("x", f32(dims...))
	var nodes []*ir.Node
	for i := 0; i < n; i++ {
		v = g.Apply("Relu", []*ir.Value{v})
		v.Type = f32(dims...)
		nodes = append(nodes, v.Producer)
	}
	g.SetOutputs(v)
	return g, nodes
}

// PlanMemory computes sizes with overflow checks: a value whose size wraps
// once got a 0-byte buffer ("tensors total 0") and the engine then wrote
// past its arena.
func TestPlanMemoryRefusesOverflowingValues(t *testing.T) {
	_, nodes := chain(2, 2147483648, 2147483648)
	_, err := PlanMemory(nodes, MemoryHooks{})
	require.True(t, errors.Is(err, ir.ErrLimit), "got %v", err)
	assert.Contains(t, err.Error(), "float[2147483648,2147483648]): its size in bytes overflows int64")
}

func TestPlanMemoryArenaLimit(t *testing.T) {
	// Three live 1 MiB buffers at most (a node's output never shares its
	// input's bytes): 2 MiB of arena.
	_, nodes := chain(3, 1<<18)
	p, err := PlanMemory(nodes, MemoryHooks{Limits: ir.Limits{MaxArenaBytes: 2 << 20}})
	require.NoError(t, err)
	assert.Equal(t, int64(2<<20), p.ArenaBytes)

	_, err = PlanMemory(nodes, MemoryHooks{Limits: ir.Limits{MaxArenaBytes: 2<<20 - 1}})
	var le *ir.LimitError
	require.True(t, errors.As(err, &le), "got %v", err)
	assert.Contains(t, err.Error(), `the arena (its largest buffer: "Relu_out0", float[262144], 1048576 bytes (1 MiB)) is 2097152 bytes (2 MiB), over the arena limit of 2097151 bytes`)
	assert.Contains(t, err.Error(), ir.FlagMaxArenaBytes)

	_, err = PlanMemory(nodes, MemoryHooks{Limits: ir.Limits{MaxTensorBytes: 1<<20 - 1}})
	require.True(t, errors.As(err, &le), "got %v", err)
	assert.Contains(t, err.Error(), "over the tensor limit")

	_, err = PlanMemory(nodes, MemoryHooks{Scratch: func(*ir.Node) int64 { return 1 << 62 }})
	require.True(t, errors.As(err, &le), "got %v", err)
	assert.True(t, strings.Contains(err.Error(), "scratch is 4611686018427387904 bytes"), err.Error())
}

// The pipeline reads its limits from the Context: the infer pass names
// the value, and a raised limit admits it.
func TestPipelineLimits(t *testing.T) {
	g, _ := chain(1, 1<<33)
	for _, v := range g.Outputs {
		v.Type = ir.Type{}
	}
	m := ir.NewModel(g, 17)
	err := Run(&Context{}, O2, m)
	require.True(t, errors.Is(err, ir.ErrLimit), "got %v", err)
	assert.Contains(t, err.Error(), `input "x" (float[8589934592]) is 34359738368 bytes (32 GiB), over the tensor limit`)

	g, _ = chain(1, 1<<33)
	m = ir.NewModel(g, 17)
	require.NoError(t, Run(&Context{Limits: ir.Limits{MaxTensorBytes: 1 << 35}}, O2, m))

	m.OpsetImports[0].Version = 99
	err = Run(&Context{}, O2, m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `opset 99 for domain "": kiln supports up to 26`)
}
