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
	// The 8- and 4-bit float and int types (IR v9+) are kept so models that
	// declare them read and write faithfully; kiln does not compute with them.
	Float8E4M3FN   DType = 17
	Float8E4M3FNUZ DType = 18
	Float8E5M2     DType = 19
	Float8E5M2FNUZ DType = 20
	Uint4          DType = 21
	Int4           DType = 22
)

type dtypeInfo struct {
	name string // ONNX text-syntax spelling
	size int    // bytes per element in raw_data; 0 for string, -1 for packed 4-bit
}

var dtypeInfos = map[DType]dtypeInfo{
	Float32:        {"float", 4},
	Uint8:          {"uint8", 1},
	Int8:           {"int8", 1},
	Uint16:         {"uint16", 2},
	Int16:          {"int16", 2},
	Int32:          {"int32", 4},
	Int64:          {"int64", 8},
	String:         {"string", 0},
	Bool:           {"bool", 1},
	Float16:        {"float16", 2},
	Float64:        {"double", 8},
	Uint32:         {"uint32", 4},
	Uint64:         {"uint64", 8},
	Complex64:      {"complex64", 8},
	Complex128:     {"complex128", 16},
	BFloat16:       {"bfloat16", 2},
	Float8E4M3FN:   {"float8e4m3fn", 1},
	Float8E4M3FNUZ: {"float8e4m3fnuz", 1},
	Float8E5M2:     {"float8e5m2", 1},
	Float8E5M2FNUZ: {"float8e5m2fnuz", 1},
	Uint4:          {"uint4", -1},
	Int4:           {"int4", -1},
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
// It is 0 for strings and -1 for the packed 4-bit types.
func (d DType) Size() int { return dtypeInfos[d].size }

// IsFloat reports whether d is a floating-point type kiln computes with.
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
