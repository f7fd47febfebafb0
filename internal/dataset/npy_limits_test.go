package dataset

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A .npy header whose shape's byte size wraps around to the body's length
// (2^62 float32 elements are 2^64 bytes, 0 once wrapped) once read as a
// tensor with a huge shape and no data, which converting then allocated.
func TestParseNPYRefusesWrappingShapes(t *testing.T) {
	_, err := ParseNPY(npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648), }", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overflows int64")
	_, err = ParseNPY(npyFile(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overflows int64")
}
