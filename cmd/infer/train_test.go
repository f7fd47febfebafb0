package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/training"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// infer train on a training engine of the bundled digits MLP: the JSON
// report's keys and numbers, the loss falling, --export's model (run on
// the reference executor) classifying as the last epoch's evaluation
// said, and usage errors.
func TestTrainCLI(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skipf("%v: no engines to train", err)
	}
	bin := buildInfer(t)
	run := func(args ...string) (int, string, string) {
		r := runInfer(t, bin, args...)
		return r.code, r.stdout, r.stderr
	}
	m, err := onnx.ReadFile("../../testdata/models/digits_mlp.onnx")
	require.NoError(t, err)
	require.NoError(t, training.Reinit(m, 2))
	step, tr, err := training.Step(m, training.StepOptions{
		GradOptions: training.GradOptions{Loss: training.SoftmaxCrossEntropy, Label: "label", Batch: 8},
		Optimizer:   training.Adam, LR: 3e-3})
	require.NoError(t, err)
	inf, err := training.Inference(tr)
	require.NoError(t, err)
	res, err := build.BuildModel(inf, tr.Model, build.Options{OptLevel: 2})
	require.NoError(t, err)
	tr.Inference = res.Engine
	out, err := build.BuildModel(step, tr.Model, build.Options{OptLevel: 2, Training: tr})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "step.kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))
	data := "../../testdata/data/digits_test/"
	export := filepath.Join(dir, "trained.onnx")

	code, stdout, stderr := run("train", path, "--data", data+"x_flat.pb", "--labels", data+"y.pb", "--epochs", "4",
		"--eval-data", data+"x_flat.pb", "--eval-labels", data+"y.pb", "--json", "--export", export)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Epochs []struct {
			Epoch        int
			Loss         float64
			Accuracy     float64
			EvalAccuracy *float64 `json:"eval_accuracy"`
			Seconds      float64
		}
		Final struct {
			Loss         float64
			EvalAccuracy *float64 `json:"eval_accuracy"`
			Seconds      float64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Len(t, rep.Epochs, 4)
	for i, e := range rep.Epochs {
		assert.Equal(t, i+1, e.Epoch)
		require.NotNil(t, e.EvalAccuracy)
		assert.Greater(t, e.Seconds, 0.0)
	}
	assert.Less(t, rep.Epochs[3].Loss, rep.Epochs[0].Loss/2, "the loss falls")
	assert.Greater(t, *rep.Final.EvalAccuracy, 0.8)
	assert.GreaterOrEqual(t, rep.Final.Seconds, rep.Epochs[3].Seconds)

	// The exported model (batch 1, as the model was) classifies the
	// samples as the last evaluation did.
	trained, err := onnx.ReadFile(export)
	require.NoError(t, err)
	e, err := reference.New(trained)
	require.NoError(t, err)
	x, err := onnx.ReadTensorFile(data + "x_flat.pb")
	require.NoError(t, err)
	y, err := onnx.ReadTensorFile(data + "y.pb")
	require.NoError(t, err)
	right := 0
	for i := 0; i < int(x.Dims[0]); i++ {
		in := ir.FromRaw(ir.Float32, []int64{1, 64}, x.Raw[i*256:(i+1)*256])
		o, err := e.Run(map[string]*ir.Tensor{"input": in})
		require.NoError(t, err)
		best := 0
		for k := 1; k < 10; k++ {
			if o["output"].Float64At(k) > o["output"].Float64At(best) {
				best = k
			}
		}
		if int64(best) == y.Int64At(i) {
			right++
		}
	}
	assert.InDelta(t, *rep.Final.EvalAccuracy, float64(right)/float64(x.Dims[0]), 1e-9)

	code, stdout, _ = run("train", path, "--data", data+"x_flat.pb", "--labels", data+"y.pb", "--epochs", "1", "--publish-every", "5")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "epoch 1/1")

	code, _, stderr = run("train", path, "--data", data+"x_flat.pb")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--labels")
	code, _, stderr = run("train", path, "--data", data+"x_flat.pb", "--labels", data+"y.pb", "--eval-data", data+"x_flat.pb")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--eval-labels")
	code, _, stderr = run("train", path, "--data", data+"x.pb", "--labels", data+"y.pb")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "x.pb")
}
