package opcase

// Cases of the ai.onnx.ml ops the kernel layer defines
// (codegen/kernel/ops_ml.go).
var mlCases = map[string][]string{
	"Binarizer": {"ai.onnx.ml.Binarizer-1(threshold=0.5) T[3,4,5]", "ai.onnx.ml.Binarizer-1 T[7]",
		"ai.onnx.ml.Binarizer-1(threshold=-1.0) float[8]~[NaN -1 -0 0 0.5 1 Inf -Inf]"},
	"ArrayFeatureExtractor": {"ai.onnx.ml.ArrayFeatureExtractor-1 T[3,5], int64[2]~[4 1]",
		"ai.onnx.ml.ArrayFeatureExtractor-1 T[6], int64[2,2]~[0 5 2 2]",
		"ai.onnx.ml.ArrayFeatureExtractor-1 T[2,3,4], int64[3]=[3 0 3]"},
	// Numeric keys: some elements match (the first of equal keys counts),
	// others take the default; NaN matches a NaN key, -0 the key 0.
	"LabelEncoder": {
		"ai.onnx.ml.LabelEncoder-2(keys_int64s=[1 2 3 -4], values_floats=[0.5 1.5 2.5 -3.5], default_float=9.0) int64[4,5]",
		"ai.onnx.ml.LabelEncoder-2(keys_int64s=[3 -2 3], values_int64s=[7 8 9]) int64[10]~[3 -2 0 1 3 5 -2 7 8 3]",
		"ai.onnx.ml.LabelEncoder-2(keys_floats=[0.5 -1.0 NaN 0.0], values_int64s=[1 2 3 4], default_int64=-7) float[8]~[0.5 -1 NaN 0 -0 2 0.5 3]",
		"ai.onnx.ml.LabelEncoder-4(keys_floats=[1.5 2.5], values_floats=[10.0 20.0]) float[6]~[1.5 0 2.5 -1 1.5 3]",
	},
}
