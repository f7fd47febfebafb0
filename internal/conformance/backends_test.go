package conformance

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.Equal(t, []string{"digits_cnn", "digits_mlp"}, []string{filepath.Base(dirs[0]), filepath.Base(dirs[1])})
	for _, dir := range dirs {
		r := RunTest(dir, Reference{}, Tolerance{RelL2: 1e-5})
		assert.Equal(t, Pass, r.Status, "%s: %s", r.Name, r.Detail)
	}
}

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
