package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The remaining families: quantization (ir/ops quant.go), recurrent
// networks (rnn.go), text (text.go), classical ML (ml.go) and kiln's own
// ops (kiln.go).

func init() {
	notDifferentiable("", "quantized inference: integer data or rounding to it (train in float, then quantize)",
		"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul")
	notDifferentiable("", "not implemented: backpropagation through time over the gates of each step", "RNN", "GRU", "LSTM")
	notDifferentiable("", "it computes on strings, or counts them", "StringConcat", "StringSplit", "StringNormalizer", "RegexFullMatch", "TfIdfVectorizer")
	notDifferentiable(ops.MLDomain, "piecewise constant: a 0/1 threshold", "Binarizer")
	notDifferentiable(ops.MLDomain, "a lookup of discrete keys", "LabelEncoder")
	notDifferentiable(ops.MLDomain, "not implemented: its gradient scatters dy back to the extracted columns", "ArrayFeatureExtractor")
	notDifferentiable(ir.KilnDomain, "formed by the fusion passes after autodiff runs: differentiate the model before it is compiled", "FusionGroup")
}
