package passes

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var update = flag.Bool("update", false, "rewrite the expected outputs of the golden pass tests")

// TestGolden runs each pass on the text-IR inputs in
// testdata/passes/<pass>/*.txtar (after shape inference) and compares the
// printed result with the archive's output.onnxtxt (plan.txt for memplan).
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("../testdata/passes/*/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		passName := filepath.Base(filepath.Dir(file))
		t.Run(passName+"/"+strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			p, ok := Lookup(O2, passName)
			require.True(t, ok, "no pass %q in O2", passName)
			ar, err := txtar.ParseFile(file)
			require.NoError(t, err)
			input := section(ar, "input.onnxtxt")
			require.NotNil(t, input, "%s has no input.onnxtxt section", file)
			m, err := text.Parse(file, input)
			require.NoError(t, err)
			c := &Context{OptLevel: 2, Verify: true, Target: kernelSizeTarget{}}
			infer, _ := Lookup(O2, "infer")
			require.NoError(t, Run(c, []Pass{infer, p}, m))
			name, got, err := goldenOutput(passName, c, m)
			require.NoError(t, err)
			if *update {
				setSection(ar, name, []byte(got))
				require.NoError(t, os.WriteFile(file, txtar.Format(ar), 0o644))
				return
			}
			want := section(ar, name)
			require.NotNil(t, want, "%s has no %s section (run with -update)", file, name)
			assert.Equal(t, string(want), got)
		})
	}
}

// kernelSizeTarget stands in for a backend in the conv-layout goldens: it
// names a group's algorithm after its first convolution's kernel.
type kernelSizeTarget struct{ Reference }

func (kernelSizeTarget) ConvAlgorithm(_ *ir.Model, fg *ir.Node) (string, error) {
	w, ok := staticDims(fg.Attr("body").G.Nodes[0].Inputs[1])
	if !ok || len(w) != 4 {
		return "", errors.New("no static 2-D kernel")
	}
	return fmt.Sprintf("%s-%dx%d", fg.Attr("kind").S, w[2], w[3]), nil
}

// goldenOutput is what a golden test compares after the pass, and the
// archive section holding it: the printed graph; for memplan, which leaves
// the graph alone, the printed plan; for infer, every node output's type
// (the text syntax prints only the graph's inputs' and outputs').
func goldenOutput(pass string, c *Context, m *ir.Model) (name, got string, err error) {
	if pass == "infer" {
		var b strings.Builder
		for _, n := range m.Graph.Nodes {
			for _, v := range n.Outputs {
				fmt.Fprintf(&b, "%s: %s\n", v.Name, v.Type)
			}
		}
		return "types.txt", b.String(), nil
	}
	if pass == "memplan" {
		if c.Memory == nil {
			return "", "", errors.New("memplan recorded no plan")
		}
		var b strings.Builder
		err := c.Memory.Print(&b)
		return "plan.txt", b.String(), err
	}
	got, err = text.Print(m)
	return "output.onnxtxt", got, err
}

func section(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setSection(ar *txtar.Archive, name string, data []byte) {
	for i, f := range ar.Files {
		if f.Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

// TestPassOrder checks the declared "a before b" constraints against O2.
func TestPassOrder(t *testing.T) {
	index := map[string]int{}
	for i, p := range O2 {
		if _, dup := index[p.Name]; dup {
			t.Errorf("pass %q appears twice", p.Name)
		}
		index[p.Name] = i
	}
	for _, c := range passOrder {
		a, okA := index[c[0]]
		b, okB := index[c[1]]
		if okA && okB && a >= b {
			t.Errorf("pass %q must run before %q", c[0], c[1])
		}
	}
}

// TestPipelinePreservesResults runs the whole O2 pipeline on every golden
// input, verifying after each pass, and checks with the reference executor
// that the optimized model computes what the original does on random inputs.
func TestPipelinePreservesResults(t *testing.T) {
	files, _ := filepath.Glob("../testdata/passes/*/*.txtar")
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		require.NoError(t, err)
		orig, err := text.Parse(file, section(ar, "input.onnxtxt"))
		require.NoError(t, err)
		opt, err := text.Parse(file, section(ar, "input.onnxtxt"))
		require.NoError(t, err)
		require.NoError(t, Run(&Context{OptLevel: 2, Verify: true}, O2, opt), file)

		inputs := randomInputs(t, orig)
		want := runReference(t, orig, inputs)
		got := runReference(t, opt, inputs)
		for name, w := range want {
			g, ok := got[name]
			require.True(t, ok, "%s: output %q lost", file, name)
			assert.Equal(t, w.Dims, g.Dims, "%s: %s", file, name)
			assert.InDeltaSlice(t, ops.Float64s(w), ops.Float64s(g), 1e-6, "%s: %s", file, name)
		}
	}
}

func randomInputs(t *testing.T, m *ir.Model) map[string]*ir.Tensor {
	rng := rand.New(rand.NewSource(7))
	inputs := map[string]*ir.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.Const != nil {
			continue
		}
		require.True(t, v.Type.Shape.Ranked, "golden inputs have a rank: %s", v.Name)
		dims := make([]int64, len(v.Type.Shape.Dims))
		for i, d := range v.Type.Shape.Dims {
			dims[i] = d.Value
			if d.Value < 0 {
				dims[i] = 3 // a symbolic or unknown dim
			}
		}
		data := make([]float64, ir.Product(dims))
		for i := range data {
			data[i] = rng.NormFloat64()
		}
		inputs[v.Name] = ops.FromFloat64s(v.Type.Elem, dims, data)
	}
	return inputs
}

func runReference(t *testing.T, m *ir.Model, inputs map[string]*ir.Tensor) map[string]*ir.Tensor {
	e, err := reference.New(m)
	require.NoError(t, err)
	out, err := e.Run(inputs)
	require.NoError(t, err)
	return out
}
