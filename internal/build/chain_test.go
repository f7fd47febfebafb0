package build

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// reluChain is x → Relu → Relu → … (n nodes) → y. Its nodes are named
// here: Graph.Apply picks a unique name by listing the graph's, which
// costs a pass over the graph per node.
func reluChain(n int) *ir.Model {
	g := ir.NewGraph("chain")
	v := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(64)))
	for i := range n {
		out := &ir.Value{Name: fmt.Sprintf("r%d", i)}
		node := &ir.Node{Name: fmt.Sprintf("relu%d", i), OpType: "Relu", Inputs: []*ir.Value{v}, Outputs: []*ir.Value{out}}
		out.Producer = node
		g.Nodes = append(g.Nodes, node)
		v = out
	}
	v.Name = "y"
	g.SetOutputs(v)
	return ir.NewModel(g, 13)
}

// TestLongChainBuilds: a 100,000-node elementwise chain goes through the
// whole build (passes, codegen, llc). Every stage must be linear in the
// graph for it to finish; BenchmarkChainBuild shows the scaling.
func TestLongChainBuilds(t *testing.T) {
	needLLC(t)
	out, err := BuildModel(reluChain(100_000), nil, Options{OptLevel: 2, Verify: true})
	require.NoError(t, err)
	require.NotEmpty(t, out.Engine)
}

// BenchmarkChainBuild builds Relu chains of 10^3 to 10^5 nodes: the time
// per node stays flat when every stage is linear.
func BenchmarkChainBuild(b *testing.B) {
	needLLC(b)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				if _, err := BuildModel(reluChain(n), nil, Options{OptLevel: 2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
