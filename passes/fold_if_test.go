package passes

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// TestFoldIfMatchesReference runs infer and fold-if on each fold-if golden
// (one model takes every then branch, one every else, on shape checks of
// Shape and Size): no If is left, and the rewritten graph, and the
// golden's expected one, compute what the original does on random inputs.
func TestFoldIfMatchesReference(t *testing.T) {
	files, _ := filepath.Glob("../testdata/passes/fold-if/*.txtar")
	require.GreaterOrEqual(t, len(files), 2)
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		require.NoError(t, err)
		orig, err := text.Parse(file, section(ar, "input.onnxtxt"))
		require.NoError(t, err)
		folded, err := text.Parse(file, section(ar, "input.onnxtxt"))
		require.NoError(t, err)
		infer, _ := Lookup(O2, "infer")
		foldIf, _ := Lookup(O2, "fold-if")
		require.NoError(t, Run(&Context{OptLevel: 2, Verify: true}, []Pass{infer, foldIf}, folded), file)
		for _, n := range folded.Graph.Nodes {
			assert.NotEqual(t, "If", n.OpType, "%s: %s is left", file, n)
		}
		expected, err := text.Parse(file, section(ar, "output.onnxtxt"))
		require.NoError(t, err, file)

		inputs := randomInputs(t, orig)
		want := runReference(t, orig, inputs)
		for _, got := range []map[string]*ir.Tensor{runReference(t, folded, inputs), runReference(t, expected, inputs)} {
			require.Len(t, got, len(want), file)
			for name, w := range want {
				g, ok := got[name]
				require.True(t, ok, "%s: output %q lost", file, name)
				assert.Equal(t, w.Dims, g.Dims, "%s: %s", file, name)
				assert.Equal(t, ops.Float64s(w), ops.Float64s(g), "%s: %s", file, name)
			}
		}
	}
}

// TestFoldIfKeepsDataDependentIf: an If on a value of the data stays, its
// branches untouched.
func TestFoldIfKeepsDataDependentIf(t *testing.T) {
	m, err := text.Parse("data_if", []byte(`<ir_version: 8, opset_import: ["" : 13]>
g (float[4] X) => (float[4] Y) <float zero = {0}> {
  s = ReduceSum<keepdims = 0>(X)
  pos = Greater(s, zero)
  Y = If(pos) <
    then_branch = g1 () => (a) { a = Relu(X) },
    else_branch = g2 () => (b) { b = Neg(X) }
  >
}`))
	require.NoError(t, err)
	infer, _ := Lookup(O2, "infer")
	foldIf, _ := Lookup(O2, "fold-if")
	require.NoError(t, Run(&Context{OptLevel: 2, Verify: true}, []Pass{infer, foldIf}, m))
	last := m.Graph.Nodes[len(m.Graph.Nodes)-1]
	require.Equal(t, "If", last.OpType)
	assert.Equal(t, "Relu", last.Attr("then_branch").G.Nodes[0].OpType)
	assert.Equal(t, "Neg", last.Attr("else_branch").G.Nodes[0].OpType)
}

// TestShapeTensorInputsReadThroughIf: an input a branch reads, whose value
// an If output carries to a shape, is one a compiler must know (AffineGrid's
// expansion splits its size input in an If; fold-if then needs it pinned).
func TestShapeTensorInputsReadThroughIf(t *testing.T) {
	m, err := text.Parse("size_if", []byte(`<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] X, int64[2] size) => (float[?,?] Y) <int64 two = {2}> {
  n = Size(size)
  is2 = Equal(n, two)
  shape = If(is2) <
    then_branch = g1 () => (a) { a = Identity(size) },
    else_branch = g2 () => (b) { b = Identity(size) }
  >
  Y = Reshape(X, shape)
}`))
	require.NoError(t, err)
	found := ops.ShapeTensorInputs(m.Graph)
	require.Len(t, found, 1)
	for v := range found {
		assert.Equal(t, "size", v.Name)
	}
}
