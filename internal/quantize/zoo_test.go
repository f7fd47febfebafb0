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
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

const zoo = "../../../shared/zoo"

func needZoo(t *testing.T) {
	if _, err := os.Stat(zoo); err != nil {
		t.Skipf("%s is absent (the shared model zoo): %v", zoo, err)
	}
}

// top1 is the share of the data's samples the model classifies as the
// labels say, on the reference executor.
func top1(t *testing.T, m *ir.Model, data *dataset.Set, labels []int64) float64 {
	t.Helper()
	ex, err := reference.New(m)
	require.NoError(t, err)
	out := m.Graph.Outputs[0].Name
	right := 0
	for i := range data.Runs() {
		res, err := ex.Run(data.Run(i))
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

// The trained digits models, quantized on digits_calib (32 training
// images), keep their top-1 accuracy on the 360 held-out digits within
// half a point. Calibration runs on a native engine where LLVM is
// installed, else on the reference executor.
func TestDigitsTop1(t *testing.T) {
	needZoo(t)
	for _, c := range []struct{ model, file string }{{"digits_cnn", "x.pb"}, {"digits_mlp", "x_flat.pb"}} {
		t.Run(c.model, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(zoo, c.model, "model.onnx"))
			require.NoError(t, err)
			_, float := modelBytesOf(t, src)
			_, m := modelBytesOf(t, src)
			opts := Options{Data: []string{filepath.Join(zoo, "digits_calib", c.file)}, Method: Method{Name: "entropy"}}
			if err := cpu.Available(); err != nil {
				t.Logf("calibrating on the reference executor: %v", err)
				opts.reference = true
			}
			res, err := Quantize(m, src, opts)
			require.NoError(t, err)
			assert.Equal(t, 32, res.Samples)

			inputs, err := runInputs(float)
			require.NoError(t, err)
			data, err := dataset.Read([]string{filepath.Join(zoo, "digits_test", c.file)}, inputs, ir.Limits{})
			require.NoError(t, err)
			labels, err := dataset.ReadLabels(filepath.Join(zoo, "digits_test", "y.pb"), ir.Limits{})
			require.NoError(t, err)
			require.Len(t, labels, data.Runs())
			fp32, int8 := top1(t, float, data, labels), top1(t, res.Model, data, labels)
			t.Logf("%s top-1: fp32 %.4f, int8 %.4f", c.model, fp32, int8)
			assert.Greater(t, fp32, 0.97, "the float model as trained")
			assert.InDelta(t, fp32, int8, 0.005)
		})
	}
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
		if caches[i], err = readCache(path, sha(src)); err != nil {
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
