package trainer

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/training"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var testdata = filepath.Join("..", "..", "testdata")

// stepEngine compiles the training step of a bundled model, returning the
// engine and the step model as built (for the reference executor).
func stepEngine(t *testing.T, model string, o training.StepOptions) (*runtime.Engine, *ir.Model) {
	if err := cpu.Available(); err != nil {
		t.Skipf("%v: no engines to test", err)
	}
	m, err := onnx.ReadFile(filepath.Join(testdata, "models", model))
	require.NoError(t, err)
	require.NoError(t, training.Reinit(m, 5))
	step, tr, err := training.Step(m, o)
	require.NoError(t, err)
	src, err := onnx.Write(step)
	require.NoError(t, err)
	ref, err := onnx.Read(src, "")
	require.NoError(t, err)
	inf, err := training.Inference(tr)
	require.NoError(t, err)
	res, err := build.BuildModel(inf, tr.Model, build.Options{OptLevel: 2})
	require.NoError(t, err)
	tr.Inference = res.Engine
	out, err := build.BuildModel(step, src, build.Options{OptLevel: 2, Training: tr})
	require.NoError(t, err)
	eng, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	return eng, ref
}

func digits(t *testing.T, tr *engine.Training, eng *runtime.Engine) *Samples {
	dir := filepath.Join(testdata, "data", "digits_calib")
	x := "x.pb"
	if eng.Inputs()[0].Shape[1] == 64 {
		x = "x_flat.pb"
	}
	s, err := Load(tr, eng.Inputs(), []string{filepath.Join(dir, x)}, filepath.Join(dir, "y.pb"), ir.Limits{})
	require.NoError(t, err)
	return s
}

// Steps of the compiled engine — its state read and written in turn from
// two buffer sets — give the parameters and optimizer state that the
// reference executor gives running the step model, for each optimizer.
func TestStepMatchesReference(t *testing.T) {
	for _, opt := range training.Optimizers {
		t.Run(opt, func(t *testing.T) {
			eng, ref := stepEngine(t, "digits_mlp.onnx", training.StepOptions{
				GradOptions: training.GradOptions{Loss: training.SoftmaxCrossEntropy, Label: "label", Batch: 8},
				Optimizer:   opt, LR: 0.05})
			tr, err := New(eng, 1, 0)
			require.NoError(t, err)
			rec := tr.Record()
			e, err := reference.New(ref)
			require.NoError(t, err)
			state := map[string]*ir.Tensor{}
			for k, v := range tr.cur {
				state[k] = v.Clone()
			}
			s := digits(t, rec, eng)
			loader := s.Shuffled(8, 1, 1, 3)
			defer loader.Close()
			for k := 1; k <= 3; k++ {
				b, ok := loader.Next()
				require.True(t, ok)
				feeds := map[string]*ir.Tensor{rec.Label: b.Labels, rec.LR: ops.FromFloat64s(ir.Float32, nil, []float64{0.05}),
					rec.Step: ir.Scalar(ir.Int64, int64(k))}
				for n, v := range b.Data {
					feeds[n] = v
				}
				for n, v := range state {
					feeds[n] = v
				}
				want, err := e.Run(feeds)
				require.NoError(t, err)
				got, err := tr.Step(b)
				require.NoError(t, err)
				loader.Done(b)
				assert.InEpsilon(t, want[rec.Loss].Float64At(0), got.Loss, 1e-4, "step %d loss", k)
				for _, st := range rec.State {
					state[st.Input] = want[st.Output]
				}
			}
			for _, st := range rec.State {
				assert.LessOrEqual(t, relL2(ops.Float64s(state[st.Input]), ops.Float64s(tr.cur[st.Input])), 1e-4, "%s after 3 steps", st.Input)
			}
		})
	}
}

func relL2(want, got []float64) float64 {
	var num, den float64
	for i := range want {
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}

// The loader's epochs each take distinct samples in a new order, in full
// batches; Sequential covers every sample once, padding the last batch.
func TestLoader(t *testing.T) {
	n := 10
	raw := make([]float32, n)
	ys := make([]int64, n)
	for i := range raw {
		raw[i], ys[i] = float32(i), int64(i%3)
	}
	s := &Samples{N: n,
		inputs: []field{{name: "x", dtype: ir.Float32, size: 4, data: ir.FromSlice(ir.Float32, []int64{int64(n)}, raw).Raw}},
		labels: field{name: "y", dtype: ir.Int64, size: 8, data: ir.FromSlice(ir.Int64, []int64{int64(n)}, ys).Raw}}
	l := s.Shuffled(3, 4, 2, 9)
	var epochs [][]int
	for {
		b, ok := l.Next()
		if !ok {
			break
		}
		for len(epochs) < b.Epoch {
			epochs = append(epochs, nil)
		}
		for r, x := range ir.Data[float32](b.Data["x"]) {
			i := int(x)
			assert.Equal(t, int64(i%3), b.Labels.Int64At(r), "label travels with its sample")
			epochs[b.Epoch-1] = append(epochs[b.Epoch-1], i)
		}
		l.Done(b)
	}
	l.Close()
	require.Len(t, epochs, 4)
	for _, e := range epochs {
		require.Len(t, e, 9) // 3 full batches of 3; one sample left over
		sorted := slices.Clone(e)
		slices.Sort(sorted)
		assert.Len(t, slices.Compact(sorted), 9, "an epoch repeats no sample")
	}
	assert.NotEqual(t, epochs[0], epochs[1], "each epoch has its own order")

	var seen []int
	require.NoError(t, s.Sequential(4, func(b *Batch) error {
		for _, x := range ir.Data[float32](b.Data["x"])[:b.Valid] {
			seen = append(seen, int(x))
		}
		return nil
	}))
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, seen)
}
