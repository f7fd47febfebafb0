package autodiff

import "github.com/kiln-ml/kiln/ir/ops"

// The classical ML ops of domain ai.onnx.ml (ir/ops ml.go).

func init() {
	notDifferentiable(ops.MLDomain, "piecewise constant: a 0/1 threshold", "Binarizer")
	notDifferentiable(ops.MLDomain, "a lookup of discrete keys", "LabelEncoder")
	notDifferentiable(ops.MLDomain, "not implemented: its gradient scatters dy back to the extracted columns", "ArrayFeatureExtractor")
}
