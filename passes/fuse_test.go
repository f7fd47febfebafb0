package passes

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/txtar"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// TestFusionGroupSemantics checks kiln.FusionGroup's reference kernel
// against the unfused graph: each fusion golden's expected output, read
// back from text and after an ONNX write and read, computes what its input
// does on random inputs.
func TestFusionGroupSemantics(t *testing.T) {
	files, _ := filepath.Glob("../testdata/passes/fuse-*/*.txtar")
	require.NotEmpty(t, files)
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		require.NoError(t, err)
		orig, err := text.Parse(file, section(ar, "input.onnxtxt"))
		require.NoError(t, err)
		fused, err := text.Parse(file, section(ar, "output.onnxtxt"))
		require.NoError(t, err, file)
		data, err := onnx.Write(fused)
		require.NoError(t, err, file)
		back, err := onnx.Read(data, "")
		require.NoError(t, err, file)

		inputs := randomInputs(t, orig)
		want := runReference(t, orig, inputs)
		for _, got := range []map[string]*ir.Tensor{runReference(t, fused, inputs), runReference(t, back, inputs)} {
			for name, w := range want {
				g, ok := got[name]
				require.True(t, ok, "%s: output %q lost", file, name)
				assert.Equal(t, w.Dims, g.Dims, "%s: %s", file, name)
				assert.InDeltaSlice(t, ops.Float64s(w), ops.Float64s(g), 1e-6, "%s: %s", file, name)
			}
		}
	}
}
