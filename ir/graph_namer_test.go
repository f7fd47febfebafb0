package ir

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// namerTestGraph is a graph whose names collide in the ways Unique must
// step around: an input, an initializer, node and output names with _N
// suffixes already taken, and a subgraph's names.
func namerTestGraph() *Graph {
	g := NewGraph("g")
	x := g.AddInput("Add", TensorType(Float32, S(1)))
	g.AddInitializer("Add_1", Scalar(Float32, float32(1)))
	g.AddInitializer("w_3", Scalar(Float32, float32(1)))
	g.Apply("Add", []*Value{x, x})
	body := NewGraph("body")
	body.AddInput("inner", TensorType(Float32, S(1)))
	body.Apply("Neg", []*Value{x})
	g.AddNode("If", []*Value{x}, 1, AttrG("then_branch", body))
	return g
}

// TestNamerMatchesUniqueName holds Unique to UniqueName's answer for the
// same names (the oracle): after each name the namer hands out joins the
// graph, as it does in a pass, UniqueName sees it too.
func TestNamerMatchesUniqueName(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 26))
	bases := []string{"Add", "Add_1", "Add_2", "Add_2_out0", "w", "w_1", "w_3", "inner", "Neg", "Neg_out0", "If", "fresh", "x_1_1"}
	g := namerTestGraph()
	namer := g.Namer()
	for i := range 400 {
		base := bases[rng.IntN(len(bases))]
		want := g.UniqueName(base)
		got := namer.Unique(base)
		require.Equal(t, want, got, "call %d, base %q", i, base)
		// Alternate how the name joins the graph: as a node or a value.
		if i%2 == 0 {
			g.Nodes = append(g.Nodes, &Node{Name: got, OpType: "Identity"})
		} else {
			g.AddInitializer(got, Scalar(Float32, float32(i)))
		}
	}
}

func TestNamerReserve(t *testing.T) {
	g := namerTestGraph()
	namer := g.Namer()
	assert.Equal(t, "inner_1", namer.Unique("inner"), "a subgraph's names are taken")
	assert.Equal(t, "w", namer.Unique("w"))
	assert.Equal(t, "w_1", namer.Unique("w"), "a name handed out stays taken")
	namer.Reserve("w_2")
	assert.Equal(t, "w_4", namer.Unique("w"), "reserved and graph names are skipped")
	n := g.AddNode("Sub", nil, 1) // named by UniqueName, behind the namer's back
	namer.Reserve(n.Outputs[0].Name)
	assert.Equal(t, "Sub_out0_1", namer.Unique("Sub_out0"))
}

// TestNamerLinear counts the names Unique looks up to hand out n names,
// half from one base and half from bases whose _1 ... _9 the graph already
// holds: at most a few per name and per graph name (UniqueName's repeated
// scan of one base would look up k names for the k-th). The benchmark
// below times it.
func TestNamerLinear(t *testing.T) {
	for _, n := range []int{1_000, 100_000} {
		g, bases := namingWork(n)
		for i := range n / 10 {
			for k := 1; k <= 9; k++ {
				g.Nodes = append(g.Nodes, &Node{Name: fmt.Sprintf("n%d_%d", i, k), OpType: "Identity"})
			}
		}
		namer := g.Namer()
		for _, b := range bases {
			namer.Unique(b)
		}
		assert.LessOrEqual(t, namer.probes, 2*n+len(g.Nodes), "%d names over a graph of %d", n, len(g.Nodes))
	}
}

// namingWork is a graph of n nodes and n bases to name after: half one
// shared base, half the nodes' own names.
func namingWork(n int) (*Graph, []string) {
	g := NewGraph("g")
	bases := make([]string, n)
	for i := range n {
		g.Nodes = append(g.Nodes, &Node{Name: fmt.Sprint("n", i), OpType: "Identity"})
		bases[i] = "Add"
		if i%2 == 1 {
			bases[i] = g.Nodes[i].Name
		}
	}
	return g, bases
}

// handOutNames names one new value per base with one namer over g.
func handOutNames(g *Graph, bases []string) {
	namer := g.Namer()
	for _, b := range bases {
		namer.Unique(b)
	}
}

// BenchmarkUniqueNames: the namer's ns/name stays flat from 10^4 to 10^5
// names (go test -run X -bench UniqueNames ./ir); UniqueName's grows
// tenfold with a tenfold graph.
func BenchmarkUniqueNames(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint("namer/", n), func(b *testing.B) {
			g, bases := namingWork(n)
			b.ResetTimer()
			for range b.N {
				handOutNames(g, bases)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/name")
		})
	}
	for _, n := range []int{500, 5_000} { // quadratic: 10^5 would take hours
		b.Run(fmt.Sprint("UniqueName/", n), func(b *testing.B) {
			for range b.N {
				g := NewGraph("g")
				for range n {
					g.Nodes = append(g.Nodes, &Node{Name: g.UniqueName("Add"), OpType: "Identity"})
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/name")
		})
	}
}
