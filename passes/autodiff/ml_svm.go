package autodiff

import "github.com/kiln-ml/kiln/ir/ops"

// The support vector machines of ai.onnx.ml (ir/ops ml_svm.go).

func init() {
	notDifferentiable(ops.MLDomain, "not implemented: its labels are votes, its scores' gradient goes through the kernels, the Platt coupling and the post_transform",
		"SVMClassifier")
	notDifferentiable(ops.MLDomain, "not implemented: Σ coefficients·∂K/∂x, a one-class SVM's sign piecewise constant", "SVMRegressor")
}
