package dataset

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// npyFile writes a .npy file as numpy.save does: the header dict padded
// with spaces and a newline to a multiple of 64 bytes.
func npyFile(version byte, header string, body []byte) []byte {
	pre := 10
	if version > 1 {
		pre = 12
	}
	h := header + " "
	for (pre+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	out := append([]byte("\x93NUMPY"), version, 0)
	if version == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	}
	return append(append(out, h...), body...)
}

func TestParseNPY(t *testing.T) {
	f32 := []byte{}
	for _, v := range []float32{1.5, -2, 3.25, 0, 7, 8} {
		f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(v))
	}
	for _, version := range []byte{1, 2, 3} {
		tn, err := ParseNPY(npyFile(version, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32))
		require.NoError(t, err, "version %d", version)
		assert.Equal(t, ir.Float32, tn.DType)
		assert.Equal(t, []int64{2, 3}, tn.Dims)
		assert.Equal(t, []float32{1.5, -2, 3.25, 0, 7, 8}, tn.Float32s())
	}

	cases := []struct {
		descr string
		dtype ir.DType
		body  []byte
		want  []float64
	}{
		{"<f8", ir.Float64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(-0.5)), []float64{-0.5}},
		{"<i8", ir.Int64, binary.LittleEndian.AppendUint64(nil, uint64(1<<40)), []float64{1 << 40}},
		{"<i4", ir.Int32, binary.LittleEndian.AppendUint32(nil, uint32(0xfffffffe)), []float64{-2}},
		{"|u1", ir.Uint8, []byte{200}, []float64{200}},
		{"|b1", ir.Bool, []byte{1}, []float64{1}},
	}
	for _, c := range cases {
		tn, err := ParseNPY(npyFile(1, fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (1,), }", c.descr), c.body))
		require.NoError(t, err, c.descr)
		assert.Equal(t, c.dtype, tn.DType, c.descr)
		assert.Equal(t, c.want, []float64{tn.Float64At(0)}, c.descr)
	}

	// A scalar has shape ().
	tn, err := ParseNPY(npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32[:4]))
	require.NoError(t, err)
	assert.Empty(t, tn.Dims)

	for _, c := range []struct{ data []byte }{
		{[]byte("PK\x03\x04 a zip file")},
		{npyFile(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f32[:4])},
		{npyFile(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f32[:8])},
		{npyFile(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f32)},
		{npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", f32)},
		{npyFile(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f32)},
		{npyFile(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f32)[:20]},
	} {
		_, err := ParseNPY(c.data)
		assert.Error(t, err, "%q", c.data)
	}
}

func TestConvert(t *testing.T) {
	f64 := ir.FromSlice(ir.Float64, []int64{3}, []float64{0.1, -2, 1e10})
	f32, err := Convert(f64, ir.Float32)
	require.NoError(t, err)
	assert.Equal(t, []float32{0.1, -2, 1e10}, f32.Float32s())

	i32 := ir.FromSlice(ir.Int32, []int64{2}, []int32{-3, 4})
	i64, err := Convert(i32, ir.Int64)
	require.NoError(t, err)
	assert.Equal(t, []int64{-3, 4}, i64.Int64s())

	same, err := Convert(f64, ir.Float64)
	require.NoError(t, err)
	assert.Same(t, f64, same)

	_, err = Convert(f64, ir.Int64)
	require.Error(t, err)
	assert.Equal(t, "cannot convert double data to int64", err.Error())
}
