package autodiff

import "github.com/kiln-ml/kiln/ir/ops"

// The preprocessing ops of ai.onnx.ml (ir/ops ml_prep.go).

func init() {
	notDifferentiable(ops.MLDomain, "not implemented: the gradient of a row divided by its norm", "Normalizer")
	notDifferentiable(ops.MLDomain, "not implemented: dy times scale", "Scaler")
	notDifferentiable(ops.MLDomain, "piecewise constant: a category lookup", "OneHotEncoder")
	notDifferentiable(ops.MLDomain, "not implemented: dy where the element was kept, 0 where imputed", "Imputer")
	notDifferentiable(ops.MLDomain, "not implemented: dy's columns sliced back to each input", "FeatureVectorizer")
	notDifferentiable(ops.MLDomain, "refused: its output is a sequence of maps", "ZipMap")
}
