package ir

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allDTypes is every element type with its ONNX text name and raw size,
// written out from onnx.proto rather than read from dtypeInfos.
var allDTypes = []struct {
	d    DType
	name string
	size int
}{
	{Float32, "float", 4},
	{Uint8, "uint8", 1},
	{Int8, "int8", 1},
	{Uint16, "uint16", 2},
	{Int16, "int16", 2},
	{Int32, "int32", 4},
	{Int64, "int64", 8},
	{String, "string", 0},
	{Bool, "bool", 1},
	{Float16, "float16", 2},
	{Float64, "double", 8},
	{Uint32, "uint32", 4},
	{Uint64, "uint64", 8},
	{Complex64, "complex64", 8},
	{Complex128, "complex128", 16},
	{BFloat16, "bfloat16", 2},
	{Float8E4M3FN, "float8e4m3fn", 1},
	{Float8E4M3FNUZ, "float8e4m3fnuz", 1},
	{Float8E5M2, "float8e5m2", 1},
	{Float8E5M2FNUZ, "float8e5m2fnuz", 1},
	{Uint4, "uint4", -1},
	{Int4, "int4", -1},
}

func TestDTypeTable(t *testing.T) {
	require.Len(t, allDTypes, 22)
	for i, c := range allDTypes {
		assert.Equal(t, DType(i+1), c.d, "ONNX numbering")
		assert.Equal(t, c.name, c.d.String())
		assert.Equal(t, c.size, c.d.Size(), c.name)
		assert.True(t, c.d.Valid(), c.name)
		got, err := ParseDType(c.name)
		require.NoError(t, err)
		assert.Equal(t, c.d, got, "ParseDType(%q)", c.name)
	}
}

func TestDTypeInvalid(t *testing.T) {
	for _, d := range []DType{Undefined, 23, -1} {
		assert.False(t, d.Valid(), d)
		assert.Equal(t, 0, d.Size())
		assert.False(t, d.IsFloat() || d.IsInt())
	}
	assert.Equal(t, "dtype(0)", Undefined.String())
	assert.Equal(t, "dtype(99)", DType(99).String())
}

func TestParseDType(t *testing.T) {
	for s, want := range map[string]DType{"float32": Float32, "float64": Float64, "float": Float32, "double": Float64} {
		got, err := ParseDType(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "float128", "int", "dtype(1)", "fp16"} {
		d, err := ParseDType(s)
		assert.Error(t, err, s)
		assert.Equal(t, Undefined, d, s)
		if err != nil {
			assert.Contains(t, err.Error(), "unknown element type")
		}
	}
}

func TestDTypeClasses(t *testing.T) {
	floats := map[DType]bool{Float32: true, Float64: true, Float16: true, BFloat16: true}
	signed := map[DType]bool{Int8: true, Int16: true, Int32: true, Int64: true}
	unsigned := map[DType]bool{Uint8: true, Uint16: true, Uint32: true, Uint64: true}
	for _, c := range allDTypes {
		d := c.d
		assert.Equal(t, floats[d], d.IsFloat(), "%s.IsFloat", d)
		assert.Equal(t, signed[d], d.IsSigned(), "%s.IsSigned", d)
		assert.Equal(t, unsigned[d], d.IsUnsigned(), "%s.IsUnsigned", d)
		assert.Equal(t, signed[d] || unsigned[d], d.IsInt(), "%s.IsInt", d)
	}
}

func TestAttrKindString(t *testing.T) {
	assert.Equal(t, "float", AttrFloat.String())
	assert.Equal(t, "tensor", AttrTensor.String())
	assert.Equal(t, "type_protos", AttrTypeProtos.String())
	assert.Equal(t, "attrkind(0)", AttrUndefined.String())
	assert.Equal(t, "attrkind(15)", AttrKind(15).String())
}
