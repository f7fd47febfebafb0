package autodiff

// The quantization ops (ir/ops quant.go): integer data, or rounding to it.

func init() {
	notDifferentiable("", "quantized inference: integer data or rounding to it (train in float, then quantize)",
		"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul")
	notDifferentiable("", "integer arithmetic (quantized inference)", "ConvInteger", "MatMulInteger")
}
