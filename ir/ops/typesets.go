package ops

import "github.com/kiln-ml/kiln/ir"

// Element-type sets for Schema.Types, named after ONNX's type constraints,
// shared by every family.
var (
	floatTypes    = []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	signedTypes   = []ir.DType{ir.Int8, ir.Int16, ir.Int32, ir.Int64}
	unsignedTypes = []ir.DType{ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
	intTypes      = concatTypes(signedTypes, unsignedTypes)
	// numericTypes is ONNX's "all numeric tensors".
	numericTypes = concatTypes(floatTypes, intTypes)
	// allTypes adds bool and string: ops that only move or select data.
	allTypes = concatTypes(numericTypes, []ir.DType{ir.Bool, ir.String})
	// The 8- and 4-bit float types and the packed integers (ir's
	// smallfloat.go), which only Cast, CastLike and the quantizers compute
	// with.
	float8Types = []ir.DType{ir.Float8E4M3FN, ir.Float8E4M3FNUZ, ir.Float8E5M2, ir.Float8E5M2FNUZ}
	smallTypes  = concatTypes(float8Types, []ir.DType{ir.Float8E8M0, ir.Float4E2M1, ir.Int4, ir.Uint4, ir.Int2, ir.Uint2})
)

func concatTypes(sets ...[]ir.DType) []ir.DType {
	var out []ir.DType
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}
