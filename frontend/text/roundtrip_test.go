package text

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

// expressible clears, in place, what the syntax cannot hold (the losses the
// package comment lists), so a model read from ONNX compares with its round
// trip through text.
func expressible(m *ir.Model) {
	if m.Graph != nil {
		expressibleGraph(m.Graph)
	}
}

func expressibleGraph(g *ir.Graph) {
	g.DocString, g.Metadata = "", nil
	values := append(append(append(append([]*ir.Value{}, g.Inputs...), g.Outputs...), g.Initializers...), g.ValueInfo...)
	for _, n := range g.Nodes {
		n.DocString, n.Metadata = "", nil
		values = append(values, n.Outputs...)
		for _, a := range n.Attrs {
			a.DocString = ""
			expressibleTensor(a.T)
			for _, t := range a.Tensors {
				expressibleTensor(t)
			}
			if a.TP != nil {
				expressibleType(a.TP)
			}
			for i := range a.TypeProtos {
				expressibleType(&a.TypeProtos[i])
			}
			for _, sg := range n.Subgraphs() {
				expressibleGraph(sg)
			}
		}
	}
	for _, v := range values {
		if v != nil {
			v.DocString = ""
			expressibleType(&v.Type)
			expressibleTensor(v.Const)
		}
	}
}

func expressibleTensor(t *ir.Tensor) {
	if t != nil {
		t.DocString = ""
	}
}

func expressibleType(t *ir.Type) {
	t.Denotation = ""
	for i := range t.Shape.Dims {
		d := &t.Shape.Dims[i]
		d.Denotation = ""
		if d.Param == "" && d.Value < 0 {
			d.Value = -1
		}
	}
	if t.Inner != nil {
		expressibleType(t.Inner)
	}
}

// checkRoundTrip prints m, parses it back and compares, then checks that
// printing is idempotent.
func checkRoundTrip(t *testing.T, name string, m *ir.Model) {
	t.Helper()
	expressible(m)
	s, err := Print(m)
	if err != nil {
		t.Errorf("%s: Print: %v", name, err)
		return
	}
	back, err := Parse(name, []byte(s))
	if err != nil {
		t.Errorf("%s: Parse(Print): %v", name, err)
		return
	}
	if d := ir.Diff(m, back); d != "" {
		t.Errorf("%s: print → parse differs: %s", name, d)
		return
	}
	s2, err := Print(back)
	if err != nil || s2 != s {
		t.Errorf("%s: printing is not idempotent (%v)", name, err)
	}
}

func TestONNXNodeModels(t *testing.T) {
	paths, _ := filepath.Glob("/work/shared/onnx-node/*/model.onnx")
	if len(paths) == 0 {
		t.Skip("no /work/shared/onnx-node")
	}
	for _, p := range paths {
		m, err := onnx.ReadFile(p)
		if err != nil {
			continue // frontend/onnx's own tests cover what it rejects
		}
		checkRoundTrip(t, p, m)
	}
}

func TestZooModels(t *testing.T) {
	paths, _ := filepath.Glob("/work/shared/zoo/*/model.onnx")
	if len(paths) == 0 {
		t.Skip("no /work/shared/zoo")
	}
	dir := t.TempDir()
	for _, p := range paths {
		m, err := onnx.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		expressible(m)
		name := filepath.Base(filepath.Dir(p))
		out := filepath.Join(dir, name+".onnxtxt")
		start := time.Now()
		if err := WriteFile(out, m); err != nil {
			t.Errorf("%s: WriteFile: %v", name, err)
			continue
		}
		back, err := ParseFile(out)
		if err != nil {
			t.Errorf("%s: ParseFile: %v", name, err)
			continue
		}
		elapsed := time.Since(start)
		if d := ir.Diff(m, back); d != "" {
			t.Errorf("%s: WriteFile → ParseFile differs: %s", name, d)
		}
		st, _ := os.Stat(out)
		t.Logf("%s: %d bytes of text, written and read in %v", name, st.Size(), elapsed)
	}
}
