package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
)

// namedRelus is one Relu per input name: input NAME, output NAME_out.
func namedRelus(names ...string) *ir.Model {
	g := ir.NewGraph("names")
	var outs []*ir.Value
	for _, name := range names {
		x := g.AddInput(name, ir.TensorType(ir.Float32, ir.S(4)))
		y := g.Apply("Relu", []*ir.Value{x})
		y.Name = name + "_out"
		outs = append(outs, y)
	}
	g.SetOutputs(outs...)
	return ir.NewModel(g, 17)
}

// TestBuildRefusesNamesInferRefuses: a name the engine loader refuses is
// refused by cc build before it compiles, naming the value (quoted, so
// the terminal shows the escape) and the rule; no engine is written.
func TestBuildRefusesNamesInferRefuses(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("n", 4097)
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"newline", []string{"a\nb"}, `input "a\nb": the name holds the control character U+000A`},
		{"ansi", []string{"\x1b[31mred"}, `input "\x1b[31mred": the name holds the control character U+001B`},
		{"long", []string{long}, `input "` + strings.Repeat("n", 64) + `"… (4097 bytes): the name is 4097 bytes long`},
		{"two_non_utf8", []string{"x\xff", "x\xfe"}, `input "x\xff": the name is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".onnx")
			require.NoError(t, onnx.WriteFile(path, namedRelus(tc.names...)))
			out := filepath.Join(dir, tc.name+".kiln")
			r := cc(t, "build", path, "-o", out)
			requireOneErrorLine(t, r, path)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "names are 1 to 4096 bytes of UTF-8 without control characters")
			assert.NotContains(t, r.stderr, "\x1b")
			assert.Less(t, len(r.stderr), 1024)
			assert.NoFileExists(t, out)
		})
	}
	// At the limit, and with a character outside ASCII, a name builds.
	path := filepath.Join(dir, "ok.onnx")
	require.NoError(t, onnx.WriteFile(path, namedRelus("é"+strings.Repeat("n", 4096-len("é_out")))))
	r := cc(t, "build", path, "-o", filepath.Join(dir, "ok.kiln"))
	require.Equal(t, 0, r.code, r.stderr)
}

// TestInspectEscapesNames: cc inspect shows a name holding a newline or an
// ANSI escape sequence escaped, never raw to the terminal.
func TestInspectEscapesNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "names.onnx")
	m := namedRelus("a\nb", "\x1b[2Jclear", "x\xff")
	m.Graph.Name = "graph\x1b]0;title\x07"
	require.NoError(t, onnx.WriteFile(path, m))
	r := cc(t, "inspect", path)
	require.Equal(t, 0, r.code, r.stderr)
	for _, raw := range []string{"\x1b", "\x07", "a\nb", "\xff"} {
		assert.NotContains(t, r.stdout, raw)
	}
	for _, escaped := range []string{`a\nb`, `\x1b[2Jclear`, `x\xff`, `graph\x1b]0;title\a`} {
		assert.Contains(t, r.stdout, escaped)
	}
}

// TestLongListErrorIsShort: a Transpose whose perm has 10^6 entries is
// refused in one short line, not one echoing every entry.
func TestLongListErrorIsShort(t *testing.T) {
	dir := t.TempDir()
	g := ir.NewGraph("perm")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 3)))
	perm := make([]int64, 1_000_000)
	for i := range perm {
		perm[i] = int64(i)
	}
	y := g.Apply("Transpose", []*ir.Value{x}, ir.AttrIs("perm", perm...))
	y.Name = "y"
	g.SetOutputs(y)
	path := filepath.Join(dir, "perm.onnx")
	require.NoError(t, onnx.WriteFile(path, ir.NewModel(g, 17)))
	for _, args := range [][]string{{"build", path, "-o", filepath.Join(dir, "perm.kiln")}, {"inspect", path}} {
		r := cc(t, args...)
		assert.Less(t, len(r.stderr)+len(r.stdout), 4096, "%s: %.300s", args[0], r.stderr+r.stdout)
		if args[0] == "build" {
			requireOneErrorLine(t, r, path)
			assert.Less(t, len(r.stderr), 1024)
			assert.Contains(t, r.stderr, "(1000000 entries)")
		}
	}
	_ = os.Remove(path)
}
