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
	bits int // of a packed element
}{
	{Float32, "float", 4, 0},
	{Uint8, "uint8", 1, 0},
	{Int8, "int8", 1, 0},
	{Uint16, "uint16", 2, 0},
	{Int16, "int16", 2, 0},
	{Int32, "int32", 4, 0},
	{Int64, "int64", 8, 0},
	{String, "string", 0, 0},
	{Bool, "bool", 1, 0},
	{Float16, "float16", 2, 0},
	{Float64, "double", 8, 0},
	{Uint32, "uint32", 4, 0},
	{Uint64, "uint64", 8, 0},
	{Complex64, "complex64", 8, 0},
	{Complex128, "complex128", 16, 0},
	{BFloat16, "bfloat16", 2, 0},
	{Float8E4M3FN, "float8e4m3fn", 1, 0},
	{Float8E4M3FNUZ, "float8e4m3fnuz", 1, 0},
	{Float8E5M2, "float8e5m2", 1, 0},
	{Float8E5M2FNUZ, "float8e5m2fnuz", 1, 0},
	{Uint4, "uint4", -1, 4},
	{Int4, "int4", -1, 4},
	{Float4E2M1, "float4e2m1", -1, 4},
	{Float8E8M0, "float8e8m0", 1, 0},
	{Uint2, "uint2", -1, 2},
	{Int2, "int2", -1, 2},
}

func TestDTypeTable(t *testing.T) {
	require.Len(t, allDTypes, 26)
	for i, c := range allDTypes {
		assert.Equal(t, DType(i+1), c.d, "ONNX numbering")
		assert.Equal(t, c.name, c.d.String())
		assert.Equal(t, c.size, c.d.Size(), c.name)
		assert.Equal(t, c.bits, c.d.PackedBits(), c.name)
		assert.True(t, c.d.Valid(), c.name)
		got, err := ParseDType(c.name)
		require.NoError(t, err)
		assert.Equal(t, c.d, got, "ParseDType(%q)", c.name)
	}
}

func TestDTypeInvalid(t *testing.T) {
	for _, d := range []DType{Undefined, 27, -1} {
		assert.False(t, d.Valid(), d)
		assert.Equal(t, 0, d.Size())
		assert.False(t, d.IsFloat() || d.IsInt())
	}
	assert.Equal(t, "dtype(0)", Undefined.String())
	assert.Equal(t, "dtype(99)", DType(99).String())
}

// Packed types fill each byte from its low bits and pad the last byte.
func TestPackedRawLen(t *testing.T) {
	for _, c := range []struct {
		d    DType
		n    int64
		want int
	}{
		{Int4, 0, 0}, {Int4, 1, 1}, {Int4, 2, 1}, {Int4, 3, 2}, {Float4E2M1, 5, 3},
		{Int2, 1, 1}, {Uint2, 4, 1}, {Uint2, 5, 2}, {Int2, 9, 3}, {Float8E8M0, 3, 3},
	} {
		assert.Equal(t, c.want, RawLen(c.d, c.n), "%s × %d", c.d, c.n)
		size, err := ByteSize(c.d, []int64{c.n})
		require.NoError(t, err)
		assert.Equal(t, int64(c.want), size, "%s × %d", c.d, c.n)
	}
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
