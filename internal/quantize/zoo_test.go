package quantize

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// top1 is the share of the data's samples that run classifies as the
// labels say.
func top1(t *testing.T, run func(map[string]*ir.Tensor) (map[string]*ir.Tensor, error), out string, data *dataset.Set, labels []int64) float64 {
	t.Helper()
	right := 0
	for i := range data.Runs() {
		res, err := run(data.Run(i))
		require.NoError(t, err)
		scores := res[out].Float32s()
		best := 0
		for j, s := range scores {
			if s > scores[best] {
				best = j
			}
		}
		if int64(best) == labels[i] {
			right++
		}
	}
	return float64(right) / float64(data.Runs())
}

// The trained digits models (bundled in testdata), quantized on 32
// training images, keep their top-1 accuracy on the 360 held-out digits
// within half a point: the QDQ model on the reference executor, and its
// compiled engine (the integer kernels) where LLVM is installed.
// Calibration runs on a native engine where LLVM is, else on the
// reference executor.
func TestDigitsTop1(t *testing.T) {
	const data = "../../testdata/data"
	for _, c := range []struct{ model, file string }{{"digits_cnn", "x.pb"}, {"digits_mlp", "x_flat.pb"}} {
		t.Run(c.model, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("../../testdata/models", c.model+".onnx"))
			require.NoError(t, err)
			_, float := modelBytesOf(t, src)
			_, m := modelBytesOf(t, src)
			opts := Options{Data: []string{filepath.Join(data, "digits_calib", c.file)}, Method: Method{Name: "entropy"}}
			native := cpu.Available()
			if native != nil {
				t.Logf("calibrating on the reference executor: %v", native)
				opts.reference = true
			}
			res, err := Quantize(m, src, opts)
			require.NoError(t, err)
			assert.Equal(t, 32, res.Samples)
			assert.NotEmpty(t, res.Units, "the guard keeps these models in INT8")

			inputs, err := runInputs(float)
			require.NoError(t, err)
			test, err := dataset.Read([]string{filepath.Join(data, "digits_test", c.file)}, inputs, ir.Limits{})
			require.NoError(t, err)
			labels, err := dataset.ReadLabels(filepath.Join(data, "digits_test", "y.pb"), ir.Limits{})
			require.NoError(t, err)
			require.Len(t, labels, test.Runs())
			out := float.Graph.Outputs[0].Name
			fp32 := top1(t, referenceRun(t, float), out, test, labels)
			int8 := top1(t, referenceRun(t, res.Model), out, test, labels)
			t.Logf("%s top-1: fp32 %.4f, int8 %.4f (reference)", c.model, fp32, int8)
			assert.Greater(t, fp32, 0.97, "the float model as trained")
			assert.InDelta(t, fp32, int8, 0.005)
			if native != nil {
				return
			}
			qdq, err := onnx.Write(res.Model)
			require.NoError(t, err)
			built, err := build.Build(writeFile(t, "int8.onnx", qdq), build.Options{OptLevel: 2})
			require.NoError(t, err)
			eng, err := runtime.LoadBytes(built.Engine)
			require.NoError(t, err)
			defer eng.Close()
			assert.Equal(t, "int8", eng.Meta.Precision)
			ctx, err := eng.NewContext(runtime.Options{Threads: 1})
			require.NoError(t, err)
			engine := top1(t, ctx.Run, out, test, labels)
			t.Logf("%s top-1: int8 engine %.4f", c.model, engine)
			assert.InDelta(t, fp32, engine, 0.005)
		})
	}
}

func referenceRun(t *testing.T, m *ir.Model) func(map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	ex, err := reference.New(m)
	require.NoError(t, err)
	return ex.Run
}

func writeFile(t *testing.T, name string, b []byte) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// Calibrating on the native engine sees what the reference executor sees.
func TestEngineCalibrationMatchesReference(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	calib := writeTensor(t, dir, "x.pb", randn(rand.New(rand.NewPCG(12, 12)), 1, 5, 3, 8, 8))
	var caches [2]*Cache
	for i, ref := range []bool{false, true} {
		src, m := modelBytes(t, convNet(8))
		path := filepath.Join(dir, []string{"engine.json", "reference.json"}[i])
		_, err := Quantize(m, src, Options{Data: []string{calib}, CacheFile: path, Method: Method{Name: "entropy"}, reference: ref})
		require.NoError(t, err)
		if caches[i], err = readCache(path, sha(src), ir.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	require.Equal(t, len(caches[1].Tensors), len(caches[0].Tensors))
	for name, want := range caches[1].Tensors {
		got := caches[0].Tensors[name]
		require.NotNil(t, got, name)
		tol := 1e-4 * (want.Max - want.Min)
		assert.InDelta(t, want.Min, got.Min, tol, name)
		assert.InDelta(t, want.Max, got.Max, tol, name)
		assert.InDelta(t, want.Range[1], got.Range[1], 2*want.Hist.width()+tol, name)
	}
}

// modelBytesOf reads a model from its file's bytes.
func modelBytesOf(t *testing.T, src []byte) ([]byte, *ir.Model) {
	t.Helper()
	m, err := onnx.Read(src, "")
	require.NoError(t, err)
	return src, m
}
