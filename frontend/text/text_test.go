package text

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/text/*.golden from the printer")

// goldenInputs are the hand-written models; each has a .golden file holding
// what the printer makes of it.
func goldenInputs(t testing.TB) []string {
	paths, err := filepath.Glob("../../testdata/text/*.onnxtxt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	return paths
}

func goldenPath(input string) string { return strings.TrimSuffix(input, ".onnxtxt") + ".golden" }

func mustParseFile(t *testing.T, path string) *ir.Model {
	t.Helper()
	m, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestGolden checks the printer's output for each input, that printing is
// idempotent (print ∘ parse is the identity on printer output), and that
// the printed text means the same ir as the input.
func TestGolden(t *testing.T) {
	for _, in := range goldenInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			m := mustParseFile(t, in)
			got, err := Print(m)
			if err != nil {
				t.Fatal(err)
			}
			golden := goldenPath(in)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Fatalf("Print differs from %s (run with -update and review the diff):\n%s", golden, got)
			}
			back, err := Parse(golden, want)
			if err != nil {
				t.Fatal(err)
			}
			if d := ir.Diff(m, back); d != "" {
				t.Fatalf("parse(print(m)) != m: %s", d)
			}
			again, err := Print(back)
			if err != nil || again != got {
				t.Fatalf("print is not idempotent (%v):\n%s", err, again)
			}
		})
	}
}

// TestThroughONNX checks text → ir → ONNX → ir → text is the identity.
func TestThroughONNX(t *testing.T) {
	for _, in := range goldenInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			m := mustParseFile(t, in)
			want, err := Print(m)
			if err != nil {
				t.Fatal(err)
			}
			data, err := onnx.Write(m)
			if err != nil {
				t.Skipf("onnx.Write: %v", err)
			}
			back, err := onnx.Read(data, "")
			if err != nil {
				t.Fatalf("onnx.Read: %v", err)
			}
			got, err := Print(back)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("text differs after ONNX: %s\n%s", ir.Diff(m, back), got)
			}
		})
	}
}

// TestWriteFile checks the external-data form round trips and stays out of
// the text.
func TestWriteFile(t *testing.T) {
	g := ir.NewGraph("big")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1000)))
	w := ir.NewTensor(ir.Float32, 1000)
	for i, f := range w.Float32s() {
		w.Float32s()[i] = float32(i) * 0.001
		_ = f
	}
	wv := g.AddInitializer("w", w)
	small := g.AddInitializer("b", ir.FromSlice(ir.Int64, []int64{2}, []int64{1, 2}))
	h := ir.NewTensor(ir.Float16, 3, 100)
	hv := g.AddInitializer("h", h)
	y := g.Apply("Add", []*ir.Value{x, wv})
	y.Name = "y"
	g.Apply("Concat", []*ir.Value{small, hv}, ir.AttrI("axis", 0))
	g.SetOutputs(y)
	m := ir.NewModel(g, 17)

	path := filepath.Join(t.TempDir(), "model.onnxtxt")
	if err := WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(path)
	for _, want := range []string{
		`float[1000] w = ["location": "model.onnxtxt.bin", "offset": "0", "length": "4000"]`,
		`float16[3,100] h = ["location": "model.onnxtxt.bin", "offset": "4032", "length": "600"]`,
		`int64[2] b = {1, 2}`,
	} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("text lacks %s:\n%s", want, text)
		}
	}
	back, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := ir.Diff(m, back); d != "" {
		t.Fatal(d)
	}
}
