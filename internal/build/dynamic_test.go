package build

import (
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/models/digits_cnn_dynamic")

// dynamicDir holds digits_cnn with its batch dim made symbolic, as
// PyTorch exports it with dynamic_axes: its PyTorch test set at batch 1
// and a batch-4 set whose outputs are the reference executor's.
const dynamicDir = "../../testdata/models/digits_cnn_dynamic"

// TestDynamicDigitsTestdata checks (or with -update writes) the dynamic
// model and its test sets.
func TestDynamicDigitsTestdata(t *testing.T) {
	m, err := onnx.ReadFile("../../testdata/models/digits_cnn.onnx")
	require.NoError(t, err)
	m.Graph.Inputs[0].Type.Shape.Dims[0] = ir.Sym("batch")
	m.Graph.Outputs[0].Type.Shape.Dims[0] = ir.Sym("batch")
	model, err := onnx.Write(m) // before the reference annotates types
	require.NoError(t, err)
	set0, err := onnx.ReadTensorFile("../../testdata/models/digits_cnn/test_data_set_0/input_0.pb")
	require.NoError(t, err)
	want0, err := onnx.ReadTensorFile("../../testdata/models/digits_cnn/test_data_set_0/output_0.pb")
	require.NoError(t, err)
	r := rand.New(rand.NewSource(4))
	x4 := ir.NewTensor(ir.Float32, 4, 1, 8, 8)
	for i := range x4.Float32s() {
		x4.Float32s()[i] = float32(r.Float64() * 16) // the UCI digits' pixel range
	}
	ref, err := reference.New(m)
	require.NoError(t, err)
	out, err := ref.Run(map[string]*ir.Tensor{"input": x4})
	require.NoError(t, err)
	want4 := out["output"]
	sets := map[string][2]*ir.Tensor{"test_data_set_0": {set0, want0}, "test_data_set_1": {x4, want4}}
	if *update {
		require.NoError(t, os.MkdirAll(dynamicDir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dynamicDir, "model.onnx"), model, 0o644))
		for name, s := range sets {
			dir := filepath.Join(dynamicDir, name)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for i, file := range []string{"input_0.pb", "output_0.pb"} {
				b, err := onnx.WriteTensor(s[i])
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, file), b, 0o644))
			}
		}
	}
	got, err := os.ReadFile(filepath.Join(dynamicDir, "model.onnx"))
	require.NoError(t, err, "run go test ./internal/build -run TestDynamicDigitsTestdata -update")
	require.Equal(t, model, got, "the model differs from digits_cnn with a dynamic batch")
	for name, s := range sets {
		for i, file := range []string{"input_0.pb", "output_0.pb"} {
			stored, err := onnx.ReadTensorFile(filepath.Join(dynamicDir, name, file))
			require.NoError(t, err)
			require.True(t, stored.Equal(s[i]), "%s/%s differs from what the reference gives", name, file)
		}
	}
}

// TestShapeTensorValue: an input whose value sets a shape (TopK's K) must
// be given with --value; the engine then takes that value only.
func TestShapeTensorValue(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	model := func() *ir.Model {
		g := ir.NewGraph("topk")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(3, 7)))
		k := g.AddInput("k", ir.TensorType(ir.Int64, ir.S(1)))
		n := g.AddNode("TopK", []*ir.Value{x, k}, 2)
		g.SetOutputs(n.Outputs...)
		return ir.NewModel(g, 13)
	}
	_, err := BuildModel(model(), nil, Options{OptLevel: 2})
	var ste *ops.ShapeTensorError
	require.ErrorAs(t, err, &ste)
	require.Contains(t, err.Error(), `input "k" sets shapes`)
	out, err := BuildModel(model(), nil, Options{OptLevel: 2, Shapes: Shapes{Values: map[string][]float64{"k": {4}}}})
	require.NoError(t, err)
	e, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	defer e.Close()
	ctx, err := e.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	x := ir.NewTensor(ir.Float32, 3, 7)
	r := rand.New(rand.NewSource(1))
	for i := range x.Float32s() {
		x.Float32s()[i] = float32(r.NormFloat64())
	}
	got, err := ctx.Run(map[string]*ir.Tensor{"x": x, "k": ir.FromSlice(ir.Int64, []int64{1}, []int64{4})})
	require.NoError(t, err)
	ref, err := reference.New(model())
	require.NoError(t, err)
	want, err := ref.Run(map[string]*ir.Tensor{"x": x, "k": ir.FromSlice(ir.Int64, []int64{1}, []int64{4})})
	require.NoError(t, err)
	m := model()
	for i, b := range e.Outputs() {
		name := m.Graph.Outputs[i].Name
		require.Equal(t, want[name].Dims, got[b.Name].Dims, name)
		require.Equal(t, want[name].Raw, got[b.Name].Raw, name)
	}
	_, err = ctx.Run(map[string]*ir.Tensor{"x": x, "k": ir.FromSlice(ir.Int64, []int64{1}, []int64{2})})
	require.ErrorContains(t, err, `input "k": the engine was compiled for one value of it`)
}

// TestArenaAtMaxima: the arena of an engine with a dynamic batch is
// planned at --max's, so it grows with it (the CPU options were once made
// before the inputs' ranges were declared, and the arena planned at 1).
func TestArenaAtMaxima(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	arena := func(maxBatch int64) int64 {
		out, err := Build(filepath.Join(dynamicDir, "model.onnx"), Options{OptLevel: 2,
			Shapes: Shapes{Max: map[string][]int64{"input": {maxBatch, 1, 8, 8}}}})
		require.NoError(t, err)
		return out.Code.ArenaBytes
	}
	small, big := arena(2), arena(512)
	require.GreaterOrEqual(t, big, 256*small/2, "arena %d at batch 512, %d at batch 2", big, small)
}
