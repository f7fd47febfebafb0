package onnx

import (
	"os"
	"path/filepath"
	"testing"

	onnxgo "github.com/owulveryck/onnx-go"
	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gorgonia.org/tensor"

	"github.com/kiln-ml/kiln/ir"
)

// goGraph is an onnx-go backend that only records what onnx-go decoded:
// node names, tensors, the op producing each value, and input edges
// (weighted by input position).
type goGraph struct {
	*simple.WeightedDirectedGraph
	ops map[int64]string
}

type goNode struct {
	id   int64
	name string
	t    tensor.Tensor
}

func (n *goNode) ID() int64                       { return n.id }
func (n *goNode) SetName(s string)                { n.name = s }
func (n *goNode) GetName() string                 { return n.name }
func (n *goNode) SetTensor(t tensor.Tensor) error { n.t = t; return nil }
func (n *goNode) GetTensor() tensor.Tensor        { return n.t }

func (g *goGraph) NewNode() graph.Node {
	return &goNode{id: g.WeightedDirectedGraph.NewNode().ID()}
}

func (g *goGraph) ApplyOperation(op onnxgo.Operation, outputs ...graph.Node) error {
	for _, n := range outputs {
		g.ops[n.ID()] = op.Name
	}
	return nil
}

// TestDifferentialOnnxGo reads the zoo's float32 models with onnx-go too and
// checks both readers agree on each node's op type, its input edges, and
// every initializer's values.
func TestDifferentialOnnxGo(t *testing.T) {
	dir := sharedDir(t, "zoo")
	for _, name := range []string{"digits_mlp", "digits_cnn", "resnet18", "mobilenet_v2", "squeezenet1_1", "tiny_bert", "lstm_small"} {
		t.Run(name, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join(dir, name, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Read(orig, "")
			if err != nil {
				t.Fatal(err)
			}
			written, err := Write(m)
			if err != nil {
				t.Fatal(err)
			}
			// onnx-go must agree with kiln on the original and on what kiln
			// wrote, which checks the writer against an independent reader.
			for src, raw := range map[string][]byte{"original": orig, "kiln-written": written} {
				g := &goGraph{WeightedDirectedGraph: simple.NewWeightedDirectedGraph(0, -1), ops: map[int64]string{}}
				gm := onnxgo.NewModel(g)
				if err := gm.UnmarshalBinary(raw); err != nil {
					t.Fatalf("onnx-go, %s: %v", src, err)
				}
				compareWithOnnxGo(t, m.Graph, g, gm)
			}
		})
	}
}

func compareWithOnnxGo(t *testing.T, kg *ir.Graph, g *goGraph, gm *onnxgo.Model) {
	t.Helper()
	byName := func(name string) *goNode {
		n, ok := gm.GetNodeByName(name)
		if !ok {
			t.Fatalf("onnx-go has no value %q", name)
		}
		return n.(*goNode)
	}
	for _, n := range kg.Nodes {
		for _, o := range n.Outputs {
			gn := byName(o.Name)
			if op := g.ops[gn.ID()]; op != n.OpType {
				t.Fatalf("%q: onnx-go says op %q, kiln %s", o.Name, op, n)
			}
			edges := g.From(gn.ID())
			count := 0
			for edges.Next() {
				in := edges.Node().(*goNode)
				if len(n.Inputs) == 0 && in.name == n.Name+"/input" {
					continue // onnx-go invents an input for input-less nodes
				}
				w, _ := g.Weight(gn.ID(), in.ID())
				if i := int(w); i >= len(n.Inputs) || valueName(n.Inputs[i]) != in.name {
					t.Fatalf("%q: onnx-go has input %d = %q, kiln %s has %v", o.Name, i, in.name, n, names(n.Inputs))
				}
				count++
			}
			if want := distinct(n.Inputs); count != want {
				t.Fatalf("%q: onnx-go has %d inputs, kiln %s has %d", o.Name, count, n, want)
			}
		}
	}
	compared := 0
	for _, v := range kg.Initializers {
		gt := byName(v.Name).t
		if gt == nil {
			t.Fatalf("onnx-go has no data for initializer %q", v.Name)
		}
		var equal bool
		switch got := gt.Data().(type) {
		case []float32:
			equal = sameFloats(got, v.Const.Float32s())
		case []int64:
			equal = sameInts(got, v.Const.Int64s())
		default:
			continue // a dtype onnx-go does not decode
		}
		if !equal {
			t.Fatalf("initializer %q: onnx-go and kiln read different values", v.Name)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no initializer was compared")
	}
}

func names(vs []*ir.Value) []string {
	var s []string
	for _, v := range vs {
		s = append(s, valueName(v))
	}
	return s
}

// distinct counts distinct input names (an omitted input is the name ""):
// onnx-go's graph keeps one edge per pair of nodes.
func distinct(vs []*ir.Value) int {
	seen := map[string]bool{}
	for _, v := range vs {
		seen[valueName(v)] = true
	}
	return len(seen)
}

func sameFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

func sameInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
