package passes

import (
	"fmt"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// reluChain is x → Relu → … (n nodes) → y.
func reluChain(n int) *ir.Model { return chainOf(n, func(int) string { return "Relu" }) }

// groupChain is a chain of n nodes, Relu, Relu, Softmax repeated: n/3
// fusion groups of two.
func groupChain(n int) *ir.Model {
	return chainOf(n, func(i int) string { return [...]string{"Relu", "Relu", "Softmax"}[i%3] })
}

// chainOf is x → op(0) → op(1) → … (n nodes) → y, its names given here
// (Graph.Apply lists the graph's names for each new one).
func chainOf(n int, op func(i int) string) *ir.Model {
	g := ir.NewGraph("chain")
	v := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(64)))
	for i := range n {
		out := &ir.Value{Name: fmt.Sprintf("v%d", i)}
		node := &ir.Node{Name: fmt.Sprintf("n%d", i), OpType: op(i), Inputs: []*ir.Value{v}, Outputs: []*ir.Value{out}}
		out.Producer = node
		g.Nodes = append(g.Nodes, node)
		v = out
	}
	v.Name = "y"
	g.SetOutputs(v)
	return ir.NewModel(g, 13)
}

// TestLongChainFuses: the O2 pipeline on a 100,000-node elementwise chain
// finishes (fuse-elementwise was quadratic in it) with the chain one group.
func TestLongChainFuses(t *testing.T) {
	m := reluChain(100_000)
	if err := Run(&Context{OptLevel: 2}, O2, m); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Graph.Nodes); n != 1 {
		t.Fatalf("%d nodes after O2, want the chain fused into 1", n)
	}
	if n := len(m.Graph.Nodes[0].Attr("body").G.Nodes); n != 100_000 {
		t.Fatalf("the group holds %d nodes, want 100000", n)
	}
}

// BenchmarkO2Chain runs the O2 pipeline on chains of 10^3 to 10^5 nodes,
// one group or a group per three nodes: time per node stays flat when
// every pass is linear.
func BenchmarkO2Chain(b *testing.B) {
	for _, chain := range []struct {
		name  string
		model func(int) *ir.Model
	}{{"relu", reluChain}, {"groups", groupChain}} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", chain.name, n), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					m := chain.model(n)
					b.StartTimer()
					if err := Run(&Context{OptLevel: 2}, O2, m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
