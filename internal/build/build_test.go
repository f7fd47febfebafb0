package build

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

func needLLC(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
}

// TestBuildRunDigits compiles the bundled digits models to engines, loads
// them with the runtime and checks the outputs against PyTorch's, at 1 and
// 2 threads; and checks that two builds give byte-identical engines.
func TestBuildRunDigits(t *testing.T) {
	needLLC(t)
	for _, name := range []string{"digits_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("../../testdata/models", name+".onnx")
			out, err := Build(path, Options{OptLevel: 2, Verify: true})
			require.NoError(t, err)
			again, err := Build(path, Options{OptLevel: 2, Verify: true})
			require.NoError(t, err)
			assert.Equal(t, out.Engine, again.Engine, "builds must be deterministic")

			eng, err := runtime.LoadBytes(out.Engine)
			require.NoError(t, err)
			dir := filepath.Join("../../testdata/models", name, "test_data_set_0")
			x, err := onnx.ReadTensorFile(filepath.Join(dir, "input_0.pb"))
			require.NoError(t, err)
			want, err := onnx.ReadTensorFile(filepath.Join(dir, "output_0.pb"))
			require.NoError(t, err)
			for _, threads := range []int{1, 2} {
				ctx, err := eng.NewContext(runtime.Options{Threads: threads})
				require.NoError(t, err)
				got, err := ctx.Run(map[string]*ir.Tensor{eng.Inputs()[0].Name: x})
				require.NoError(t, err)
				detail, ok := conformance.Compare(want, got[eng.Outputs()[0].Name], conformance.Tolerance{RelL2: 1e-4})
				assert.True(t, ok, "%d threads: %s", threads, detail)
			}
		})
	}
}
