package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

func TestBackends(t *testing.T) {
	assert.Equal(t, []string{"reference"}, BackendNames())
	b, err := LookupBackend("reference")
	require.NoError(t, err)
	assert.Equal(t, Reference{}, b)
	_, err = LookupBackend("tpu")
	assert.EqualError(t, err, `unknown backend "tpu" (backends: reference)`)
}

func TestReferenceRunsBundledModels(t *testing.T) {
	dirs, err := Discover([]string{"../../testdata/models"})
	require.NoError(t, err)
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(d))
	}
	require.Equal(t, []string{"digits_cnn", "digits_cnn_dynamic", "digits_mlp"}, names)
	for _, dir := range dirs {
		r := RunTest(dir, Reference{}, Tolerance{RelL2: 1e-5})
		assert.Equal(t, Pass, r.Status, "%s: %s", r.Name, r.Detail)
	}
}

// TestSequenceDataUnsupported: a test whose inputs are sequences holds
// SequenceProto data files, which are not read: UNSUPPORTED with the
// reason, never FAIL.
func TestMapDataUnsupported(t *testing.T) {
	g := ir.NewGraph("g")
	f := ir.TensorType(ir.Float32, ir.Shape{})
	x := g.AddInput("x", ir.Type{Kind: ir.MapKind, Elem: ir.Int64, Inner: &f})
	g.SetOutputs(g.Apply("Identity", []*ir.Value{x}))
	dir := t.TempDir()
	require.NoError(t, onnx.WriteFile(filepath.Join(dir, "model.onnx"), ir.NewModel(g, 17)))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "test_data_set_0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"), []byte{0x0a, 0x01, 'x'}, 0o644))
	r := RunTest(dir, acceptAll{}, DefaultTolerance)
	assert.Equal(t, Unsupported, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "MapProto")
}

// sequenceFile encodes a SequenceProto of tensors (onnx-data.proto:
// elem_type 2, tensor_values 3).
func sequenceFile(t *testing.T, elems ...*ir.Tensor) []byte {
	b := protowire.AppendTag(nil, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	for _, e := range elems {
		data, err := onnx.WriteTensor(e)
		require.NoError(t, err)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, data)
	}
	return b
}

// A sequence input and output are read from SequenceProto files and
// compared element by element.
func TestSequenceData(t *testing.T) {
	g := ir.NewGraph("g")
	f := ir.TensorType(ir.Float32, ir.Shape{})
	x := g.AddInput("x", ir.Type{Kind: ir.SequenceKind, Inner: &f})
	y := g.Apply("Identity", []*ir.Value{x})
	y.Type = x.Type.Clone()
	g.SetOutputs(y)
	a := ir.FromSlice(ir.Float32, []int64{2}, []float32{1, -2.5})
	b := ir.FromSlice(ir.Float32, []int64{1, 1}, []float32{4})
	write := func(out ...*ir.Tensor) string {
		dir := t.TempDir()
		require.NoError(t, onnx.WriteFile(filepath.Join(dir, "model.onnx"), ir.NewModel(g, 17)))
		set := filepath.Join(dir, "test_data_set_0")
		require.NoError(t, os.MkdirAll(set, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(set, "input_0.pb"), sequenceFile(t, a, b), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(set, "output_0.pb"), sequenceFile(t, out...), 0o644))
		return dir
	}
	r := RunTest(write(a, b), Reference{}, DefaultTolerance)
	assert.Equal(t, Pass, r.Status, r.Detail)
	r = RunTest(write(a), Reference{}, DefaultTolerance)
	assert.Equal(t, Fail, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "2 elements, want 1")
	r = RunTest(write(a, ir.FromSlice(ir.Float32, []int64{1, 1}, []float32{5})), Reference{}, DefaultTolerance)
	assert.Equal(t, Fail, r.Status, r.Detail)
	assert.Contains(t, r.Detail, "element 1")
}

// acceptAll is a backend that takes any model, so that a test reaches its
// data files.
type acceptAll struct{}

func (acceptAll) Prepare(*ir.Model) (Runner, error) { return acceptAll{}, nil }

func (acceptAll) Run(in map[string]*ir.Tensor) (map[string]*ir.Tensor, error) { return in, nil }

func TestReferenceUnsupported(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g.SetOutputs(g.Apply("NoSuchOp", []*ir.Value{x}))
	runner, err := Reference{}.Prepare(ir.NewModel(g, 17))
	assert.Nil(t, runner, "no non-nil interface around a nil executor")
	var ue *ops.UnsupportedError
	require.True(t, errors.As(err, &ue), "%v", err)
	assert.Equal(t, "NoSuchOp", ue.Op)
}
