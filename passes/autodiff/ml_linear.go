package autodiff

import "github.com/kiln-ml/kiln/ir/ops"

// The linear models of ai.onnx.ml (ir/ops ml_linear.go).

func init() {
	notDifferentiable(ops.MLDomain, "not implemented: its labels are discrete and its scores' gradient goes through the post_transform",
		"LinearClassifier")
	notDifferentiable(ops.MLDomain, "not implemented: coefficientsᵀ·dy through the post_transform", "LinearRegressor")
}
