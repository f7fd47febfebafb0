package build

import (
	"os"
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

func needLLC(t testing.TB) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
}

// TestBuildRunDigits compiles the bundled digits models to engines, loads
// them with the runtime and checks the outputs against PyTorch's, at 1 and
// 2 threads; and checks that two builds with the same timing cache give
// byte-identical engines.
func TestBuildRunDigits(t *testing.T) {
	needLLC(t)
	for _, name := range []string{"digits_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("../../testdata/models", name+".onnx")
			// Measured choices (Winograd) are reproducible through the
			// timing cache: same model, flags and cache, same bytes.
			opts := Options{OptLevel: 2, Verify: true, TimingCache: filepath.Join(t.TempDir(), "timing.json")}
			out, err := Build(path, opts)
			require.NoError(t, err)
			again, err := Build(path, opts)
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

// TestTimingCacheProblems: a timing cache that cannot be saved is a
// warning (the engine is still built), a corrupt one an error naming it.
func TestTimingCacheProblems(t *testing.T) {
	needLLC(t)
	model := func() *ir.Model {
		g := ir.NewGraph("wino")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 16, 16, 16)))
		w := ir.NewTensor(ir.Float32, 16, 16, 3, 3)
		for i, f := 0, w.Float32s(); i < len(f); i++ {
			f[i] = float32(i%7) - 3
		}
		y := g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", w)}, ir.AttrIs("pads", 1, 1, 1, 1))
		y.Name = "y"
		g.SetOutputs(y)
		return ir.NewModel(g, 13)
	}
	out, err := BuildModel(model(), nil, Options{OptLevel: 2, TimingCache: "/proc/no-such-dir/cache.json"})
	require.NoError(t, err)
	assert.NotEmpty(t, out.Engine)
	require.Len(t, out.Warnings, 1)
	assert.Contains(t, out.Warnings[0], "timing cache was not saved")

	bad := filepath.Join(t.TempDir(), "cache.json")
	require.NoError(t, os.WriteFile(bad, []byte("not json"), 0o644))
	_, err = BuildModel(model(), nil, Options{OptLevel: 2, TimingCache: bad})
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad)
}
