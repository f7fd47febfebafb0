package ops_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/conformance"
)

// TestMLGolden runs the reference on testdata/ml: random tree ensembles,
// linear models and preprocessing ops whose outputs ONNX Runtime 1.30
// gave (testdata/ml/gen.py). The tolerance covers ORT's float32
// arithmetic against the reference's float64.
func TestMLGolden(t *testing.T) {
	dirs, err := conformance.Discover([]string{"../../testdata/ml"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 40)
	for _, dir := range dirs {
		r := conformance.RunTest(dir, conformance.Reference{}, conformance.Tolerance{Rtol: 1e-4, Atol: 1e-5})
		assert.Equal(t, conformance.Pass, r.Status, "%s: %s", r.Name, r.Detail)
	}
}
