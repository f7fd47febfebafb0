package ir

import (
	"fmt"
	"strings"
)

// DType is a tensor element type. The values are ONNX's TensorProto.DataType
// numbers, so frontends convert without a table.
type DType int32

// Element types, numbered as in onnx.proto.
const (
	Undefined  DType = 0
	Float32    DType = 1
	Uint8      DType = 2
	Int8       DType = 3
	Uint16     DType = 4
	Int16      DType = 5
	Int32      DType = 6
	Int64      DType = 7
	String     DType = 8
	Bool       DType = 9
	Float16    DType = 10
	Float64    DType = 11
	Uint32     DType = 12
	Uint64     DType = 13
	Complex64  DType = 14
	Complex128 DType = 15
	BFloat16   DType = 16
	// The 8-, 4- and 2-bit float and int types (IR v9+): models that
	// declare them read and write faithfully, and the reference computes
	// with them through float64 (smallfloat.go) in Cast, CastLike,
	// QuantizeLinear and DequantizeLinear.
	Float8E4M3FN   DType = 17
	Float8E4M3FNUZ DType = 18
	Float8E5M2     DType = 19
	Float8E5M2FNUZ DType = 20
	Uint4          DType = 21
	Int4           DType = 22
	Float4E2M1     DType = 23
	Float8E8M0     DType = 24
	Uint2          DType = 25
	Int2           DType = 26
)

type dtypeInfo struct {
	name string // ONNX text-syntax spelling
	size int    // bytes per element in raw_data; 0 for string, -1 for packed sub-byte types
	bits int    // bits per element of a packed type (4 or 2), low bits first in each byte
}

var dtypeInfos = map[DType]dtypeInfo{
	Float32:        {name: "float", size: 4},
	Uint8:          {name: "uint8", size: 1},
	Int8:           {name: "int8", size: 1},
	Uint16:         {name: "uint16", size: 2},
	Int16:          {name: "int16", size: 2},
	Int32:          {name: "int32", size: 4},
	Int64:          {name: "int64", size: 8},
	String:         {name: "string", size: 0},
	Bool:           {name: "bool", size: 1},
	Float16:        {name: "float16", size: 2},
	Float64:        {name: "double", size: 8},
	Uint32:         {name: "uint32", size: 4},
	Uint64:         {name: "uint64", size: 8},
	Complex64:      {name: "complex64", size: 8},
	Complex128:     {name: "complex128", size: 16},
	BFloat16:       {name: "bfloat16", size: 2},
	Float8E4M3FN:   {name: "float8e4m3fn", size: 1},
	Float8E4M3FNUZ: {name: "float8e4m3fnuz", size: 1},
	Float8E5M2:     {name: "float8e5m2", size: 1},
	Float8E5M2FNUZ: {name: "float8e5m2fnuz", size: 1},
	Uint4:          {name: "uint4", size: -1, bits: 4},
	Int4:           {name: "int4", size: -1, bits: 4},
	Float4E2M1:     {name: "float4e2m1", size: -1, bits: 4},
	Float8E8M0:     {name: "float8e8m0", size: 1},
	Uint2:          {name: "uint2", size: -1, bits: 2},
	Int2:           {name: "int2", size: -1, bits: 2},
}

// String returns the ONNX text-syntax name ("float", "int64", "double", ...).
func (d DType) String() string {
	if info, ok := dtypeInfos[d]; ok {
		return info.name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Valid reports whether d is a known ONNX element type.
func (d DType) Valid() bool {
	_, ok := dtypeInfos[d]
	return ok
}

// Size is the number of bytes one element takes in raw little-endian form.
// It is 0 for strings and -1 for the packed sub-byte types (PackedBits).
func (d DType) Size() int { return dtypeInfos[d].size }

// PackedBits is the width of one element of a packed sub-byte type (4 for
// int4, uint4 and float4e2m1; 2 for int2 and uint2), elements filling each
// byte from its low bits; 0 for every other type.
func (d DType) PackedBits() int { return dtypeInfos[d].bits }

// PerByte is how many elements of a packed type share one byte (8 /
// PackedBits); 0 for other types.
func (d DType) PerByte() int64 {
	if b := d.PackedBits(); b > 0 {
		return int64(8 / b)
	}
	return 0
}

// IsFloat reports whether d is a floating-point type kiln computes with
// natively (not the 8- and 4-bit ones: IsSmallFloat).
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// IsInt reports whether d is a signed or unsigned integer type.
func (d DType) IsInt() bool { return d.IsSigned() || d.IsUnsigned() }

// IsSigned reports whether d is a signed integer type.
func (d DType) IsSigned() bool {
	return d == Int8 || d == Int16 || d == Int32 || d == Int64
}

// IsUnsigned reports whether d is an unsigned integer type.
func (d DType) IsUnsigned() bool {
	return d == Uint8 || d == Uint16 || d == Uint32 || d == Uint64
}

// ParseDType maps an ONNX text-syntax name to a DType. It accepts the
// aliases "float32" and "float64" too.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "float32":
		return Float32, nil
	case "float64":
		return Float64, nil
	}
	for d, info := range dtypeInfos {
		if info.name == s {
			return d, nil
		}
	}
	return Undefined, fmt.Errorf("unknown element type %q", s)
}
