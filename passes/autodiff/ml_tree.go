package autodiff

import "github.com/kiln-ml/kiln/ir/ops"

// The tree ensembles of ai.onnx.ml (ir/ops ml_tree.go).

func init() {
	notDifferentiable(ops.MLDomain, "piecewise constant in the input: a walk of threshold comparisons to a leaf",
		"TreeEnsembleRegressor", "TreeEnsembleClassifier", "TreeEnsemble")
}
