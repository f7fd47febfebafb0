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
)

func concatTypes(sets ...[]ir.DType) []ir.DType {
	var out []ir.DType
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}
