package ops

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Activations: unary rows (and PRelu, a binary one) of the elementwise
// builders. Attribute defaults are ONNX's.

var preluTypes = concatTypes(floatTypes, []ir.DType{ir.Int32, ir.Int64, ir.Uint32, ir.Uint64})

var activationOps = concatRows(
	unaryRows(
		// Relu-14 added the signed integer types.
		unaryOp{name: "Relu", since: 6, types: signedFloatTypes, f: pure(reluOf[float64]), i: reluOf[int64]},
		unaryOp{name: "LeakyRelu", since: 6, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 0.01)}, f: leakyRelu},
		unaryOp{name: "ThresholdedRelu", since: 10, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 1)}, f: thresholdedRelu},
		unaryOp{name: "Elu", since: 6, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 1)}, f: elu},
		unaryOp{name: "Selu", since: 6, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 1.67326319217681884765625), defFloat("gamma", 1.05070102214813232421875)}, f: selu},
		unaryOp{name: "Celu", since: 12, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 1)}, f: celu},
		unaryOp{name: "Sigmoid", since: 6, types: floatTypes, f: pure(sigmoid)},
		unaryOp{name: "HardSigmoid", since: 6, types: floatTypes, attrs: []AttrDef{defFloat("alpha", 0.2), defFloat("beta", 0.5)}, f: hardSigmoid},
		unaryOp{name: "HardSwish", since: 14, types: floatTypes, f: pure(func(x float64) float64 { return x * clamp01(x/6+0.5) })},
		unaryOp{name: "Softplus", since: 1, types: floatTypes, f: pure(softplus)},
		unaryOp{name: "Softsign", since: 1, types: floatTypes, f: pure(func(x float64) float64 { return x / (1 + math.Abs(x)) })},
		unaryOp{name: "Mish", since: 18, types: floatTypes, f: pure(func(x float64) float64 { return x * math.Tanh(softplus(x)) })},
		unaryOp{name: "Shrink", since: 9, types: numericTypes, attrs: []AttrDef{defFloat("bias", 0), defFloat("lambd", 0.5)}, f: shrink},
	),
	// PRelu-7 made the slope broadcast (unidirectionally) to the input.
	binaryRows(binaryOp{name: "PRelu", since: 7, types: preluTypes, toA: true,
		arith: fixed(arith{f: preluOf[float64], i: preluOf[int64], u: preluOf[uint64]})}),
)

func init() { register(activationOps) }

func reluOf[T kernelNum](x T) T { return max(x, 0) }

func preluOf[T kernelNum](x, slope T) T {
	if x < 0 {
		return slope * x
	}
	return x
}

func leakyRelu(a attrs) func(float64) float64 {
	alpha := float64(a.Float("alpha"))
	return func(x float64) float64 { return preluOf(x, alpha) }
}

func thresholdedRelu(a attrs) func(float64) float64 {
	alpha := float64(a.Float("alpha"))
	return func(x float64) float64 {
		if x > alpha {
			return x
		}
		return 0
	}
}

func elu(a attrs) func(float64) float64 {
	alpha := float64(a.Float("alpha"))
	return func(x float64) float64 {
		if x < 0 {
			return alpha * math.Expm1(x)
		}
		return x
	}
}

func selu(a attrs) func(float64) float64 {
	alpha, gamma := float64(a.Float("alpha")), float64(a.Float("gamma"))
	return func(x float64) float64 {
		if x <= 0 {
			return gamma * alpha * math.Expm1(x)
		}
		return gamma * x
	}
}

func celu(a attrs) func(float64) float64 {
	alpha := float64(a.Float("alpha"))
	return func(x float64) float64 { return max(0, x) + min(0, alpha*math.Expm1(x/alpha)) }
}

// sigmoid never evaluates exp of a large positive number, which would
// overflow to Inf and give NaN for very negative x.
func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func hardSigmoid(a attrs) func(float64) float64 {
	alpha, beta := float64(a.Float("alpha")), float64(a.Float("beta"))
	return func(x float64) float64 { return clamp01(alpha*x + beta) }
}

func clamp01(x float64) float64 { return max(0, min(1, x)) }

// softplus is log(1+exp(x)) rearranged so exp never overflows.
func softplus(x float64) float64 { return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }

func shrink(a attrs) func(float64) float64 {
	bias, lambd := float64(a.Float("bias")), float64(a.Float("lambd"))
	return func(x float64) float64 {
		switch {
		case x < -lambd:
			return x + bias
		case x > lambd:
			return x - bias
		}
		return 0
	}
}
