package autodiff

import "github.com/kiln-ml/kiln/ir"

// The remaining families: quantization (ir/ops quant.go), recurrent
// networks (rnn.go) and kiln's own ops (kiln.go).

func init() {
	notDifferentiable("", "quantized inference: integer data or rounding to it (train in float, then quantize)",
		"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul")
	notDifferentiable("", "not implemented: backpropagation through time over the gates of each step", "RNN", "GRU", "LSTM")
	notDifferentiable(ir.KilnDomain, "formed by the fusion passes after autodiff runs: differentiate the model before it is compiled", "FusionGroup")
}
