package text

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// The reproductions of issue 8 for the text reader: deep nesting fails in
// the lexer, naming the line, before the parser recurses; files and
// tensors are checked before they are read or allocated.

// allocated returns how many bytes fn allocated on the Go heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A type a million sequences deep (about 5 MB of text) once overflowed
// the parser's stack; 200,000 levels took minutes.
func TestDeepTypeFailsAtTheLimit(t *testing.T) {
	const levels = 1_000_000
	src := "<ir_version: 8, opset_import: [\"\" : 17]>\ng (\n  " + strings.Repeat("seq(", levels) + "float" + strings.Repeat(")", levels) + " x) => () {}"
	_, err := Parse("deep.onnxtxt", []byte(src))
	var le *ir.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a *ir.LimitError", err)
	}
	// The 65th "seq(" starts at line 3, column 3 + 64*4; its '(' is 3 on.
	if want := "deep.onnxtxt:3:262: nested deeper than 64 levels (the nesting limit; --max-nesting raises it)"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
}

// ifChain is text of a graph holding an If whose then_branch holds an If
// ... levels graphs deep in all, one a line.
func ifChain(levels int) string {
	var b strings.Builder
	b.WriteString("<ir_version: 8, opset_import: [\"\" : 17]>\ng0 () => (float y0) {\n")
	for i := 1; i < levels; i++ {
		b.WriteString("  c = Constant <value = bool {1}> ()\n")
		b.WriteString("  y = If (c) <else_branch = e () => (float z) { z = Constant <value = float {0}> () }, then_branch = g () => (float y) {\n")
	}
	b.WriteString("  y = Constant <value = float {1}> ()\n")
	for i := 1; i < levels; i++ {
		b.WriteString("}>\n")
	}
	b.WriteString("  y0 = Identity (y)\n}\n")
	return b.String()
}

func TestNestedGraphsLimit(t *testing.T) {
	if _, err := Parse("m.onnxtxt", []byte(ifChain(64))); err != nil {
		t.Fatalf("64 levels of graphs: %v", err)
	}
	_, err := Parse("m.onnxtxt", []byte(ifChain(65)))
	if !errors.Is(err, ir.ErrLimit) || !strings.HasPrefix(err.Error(), "m.onnxtxt:130:") {
		t.Fatalf("65 levels of graphs: %v (want the error at line 130, where level 65 opens)", err)
	}
	if _, err := ParseWithin("m.onnxtxt", []byte(ifChain(65)), ir.Limits{MaxNesting: 65}); err != nil {
		t.Fatalf("65 levels under a raised limit: %v", err)
	}
	// Far deeper: fails where the limit is passed, not at the end.
	_, err = Parse("m.onnxtxt", []byte(ifChain(100_000)))
	if !errors.Is(err, ir.ErrLimit) || !strings.HasPrefix(err.Error(), "m.onnxtxt:130:") {
		t.Fatalf("100,000 levels of graphs: %v", err)
	}
	// The printer's nesting reads back: a model built with the ir builder,
	// printed, parsed at exactly the limit.
	inner := ir.NewGraph("leaf")
	inner.SetOutputs(inner.Apply("Constant", nil, ir.AttrT("value", ir.Scalar(ir.Float32, float32(1)))))
	for i := 1; i < 8; i++ {
		g := ir.NewGraph("g")
		cond := g.Apply("Constant", nil, ir.AttrT("value", ir.Scalar(ir.Bool, true)))
		g.SetOutputs(g.Apply("If", []*ir.Value{cond}, ir.AttrG("then_branch", inner), ir.AttrG("else_branch", inner)))
		inner = g
	}
	src, err := Print(ir.NewModel(inner, 17))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseWithin("m.onnxtxt", []byte(src), ir.Limits{MaxNesting: 8}); err != nil {
		t.Fatalf("8 levels under a limit of 8: %v", err)
	}
	if _, err := ParseWithin("m.onnxtxt", []byte(src), ir.Limits{MaxNesting: 7}); !errors.Is(err, ir.ErrLimit) {
		t.Fatalf("8 levels under a limit of 7: %v", err)
	}
}

func TestHugeTensorLiteral(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"g () => () <float[1099511627776,1099511627776] w = {1}> {}", "m.onnxtxt:1:13: tensor (float[1099511627776,1099511627776]): its size in bytes overflows int64"},
		{"g () => () <float[8589934592] w = {1}> {}", "m.onnxtxt:1:13: tensor (float[8589934592]) is 34359738368 bytes (32 GiB), over the tensor limit"},
		{`g () => () <float[8589934592] w = ["location": "w.bin"]> {}`, "over the tensor limit"},
		{"g () => () { y = Constant <value = float[4294967296,4294967296] {1}> () }", "overflows int64"},
	} {
		var err error
		bytes := allocated(func() { _, err = Parse("m.onnxtxt", []byte(tc.src)) })
		if !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\ngot  %v\nwant %q", tc.src, err, tc.want)
		}
		if bytes > 1<<20 {
			t.Errorf("%s: allocated %d bytes before failing", tc.src, bytes)
		}
	}
}

func TestExternalDataBoundedByFileSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	bytes := allocated(func() {
		_, err = Parse(filepath.Join(dir, "m.onnxtxt"), []byte(`g () => () <float[268435456] w = ["location": "w.bin", "offset": "8"]> {}`))
	})
	if err == nil || !strings.Contains(err.Error(), `external data "w.bin" has 16 bytes, need 1073741824 at offset 8`) {
		t.Fatalf("got %v", err)
	}
	if bytes > 1<<20 {
		t.Errorf("allocated %d bytes for data the file does not have", bytes)
	}
}

func TestParseFileChecksBeforeReading(t *testing.T) {
	dir := t.TempDir()
	zeros := filepath.Join(dir, "zeros.onnxtxt")
	f, err := os.Create(zeros)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk space
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	bytes := allocated(func() { _, err = ParseFile(zeros) })
	if err == nil || !strings.Contains(err.Error(), "not ONNX text syntax") || !strings.Contains(err.Error(), `zeros.onnxtxt:1:1: unexpected character '\x00'`) {
		t.Fatalf("got %v", err)
	}
	if bytes > 1<<20 {
		t.Errorf("allocated %d bytes for a 1 GB file of zeros", bytes)
	}

	model := filepath.Join(dir, "m.onnxtxt")
	src := "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2] x) => (float[2] y) {\n  y = Relu (x)\n}\n"
	if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ParseFileWithin(model, ir.Limits{MaxFileBytes: int64(len(src)) - 1}); !errors.Is(err, ir.ErrLimit) || !strings.Contains(err.Error(), "--max-file-bytes") {
		t.Errorf("a file one byte over the limit: %v", err)
	}
	if _, _, err := ParseFileWithin(model, ir.Limits{MaxFileBytes: int64(len(src))}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	// A text whose first 4 KiB end inside a string is not refused for it.
	long := "<ir_version: 8, opset_import: [\"\" : 17], doc_string: \"" + strings.Repeat("d", 5000) + "\">\ng (float[2] x) => (float[2] y) {\n  y = Relu (x)\n}\n"
	if err := os.WriteFile(model, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(model); err != nil {
		t.Errorf("a string across the prefix: %v", err)
	}
}
