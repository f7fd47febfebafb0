package ops

import (
	"errors"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Math functions, arithmetic and the variadic folds. Rows start at the
// first version with today's signature; later versions that only added
// element types share the row (its Types lists them all).

var (
	signedFloatTypes = concatTypes(floatTypes, signedTypes)
	powBaseTypes     = concatTypes(floatTypes, []ir.DType{ir.Int32, ir.Int64})
)

var mathOps = concatRows(
	unaryRows(
		unaryOp{name: "Abs", since: 6, types: numericTypes, f: pure(math.Abs), i: absOf[int64], u: absOf[uint64]},
		unaryOp{name: "Neg", since: 6, types: signedFloatTypes, f: pure(negOf[float64]), i: negOf[int64]},
		unaryOp{name: "Sign", since: 9, types: numericTypes, f: pure(signOf[float64]), i: signOf[int64], u: signOf[uint64]},
		unaryOp{name: "Ceil", since: 6, types: floatTypes, f: pure(math.Ceil)},
		unaryOp{name: "Floor", since: 6, types: floatTypes, f: pure(math.Floor)},
		unaryOp{name: "Round", since: 11, types: floatTypes, f: pure(math.RoundToEven)},
		unaryOp{name: "Reciprocal", since: 6, types: floatTypes, f: pure(func(x float64) float64 { return 1 / x })},
		unaryOp{name: "Sqrt", since: 6, types: floatTypes, f: pure(math.Sqrt)},
		unaryOp{name: "Exp", since: 6, types: floatTypes, f: pure(math.Exp)},
		unaryOp{name: "Log", since: 6, types: floatTypes, f: pure(math.Log)},
		unaryOp{name: "Erf", since: 9, types: numericTypes, f: pure(math.Erf)},
		unaryOp{name: "Sin", since: 7, types: floatTypes, f: pure(math.Sin)},
		unaryOp{name: "Cos", since: 7, types: floatTypes, f: pure(math.Cos)},
		unaryOp{name: "Tan", since: 7, types: floatTypes, f: pure(math.Tan)},
		unaryOp{name: "Asin", since: 7, types: floatTypes, f: pure(math.Asin)},
		unaryOp{name: "Acos", since: 7, types: floatTypes, f: pure(math.Acos)},
		unaryOp{name: "Atan", since: 7, types: floatTypes, f: pure(math.Atan)},
		unaryOp{name: "Sinh", since: 9, types: floatTypes, f: pure(math.Sinh)},
		unaryOp{name: "Cosh", since: 9, types: floatTypes, f: pure(math.Cosh)},
		unaryOp{name: "Tanh", since: 6, types: floatTypes, f: pure(math.Tanh)},
		unaryOp{name: "Asinh", since: 9, types: floatTypes, f: pure(math.Asinh)},
		unaryOp{name: "Acosh", since: 9, types: floatTypes, f: pure(math.Acosh)},
		unaryOp{name: "Atanh", since: 9, types: floatTypes, f: pure(math.Atanh)},
		unaryOp{name: "IsNaN", since: 9, types: floatTypes, boolOut: true, f: pure(func(x float64) float64 { return b2f(math.IsNaN(x)) })},
		unaryOp{name: "IsInf", since: 10, types: floatTypes, boolOut: true, attrs: []AttrDef{defInt("detect_negative", 1), defInt("detect_positive", 1)}, f: isInf},
	),
	binaryRows(
		binaryOp{name: "Add", since: 7, types: numericTypes, arith: fixed(arith{f: addOf[float64], i: addOf[int64], u: addOf[uint64]})},
		binaryOp{name: "Sub", since: 7, types: numericTypes, arith: fixed(arith{f: subOf[float64], i: subOf[int64], u: subOf[uint64]})},
		binaryOp{name: "Mul", since: 7, types: numericTypes, arith: fixed(arith{f: mulOf[float64], i: mulOf[int64], u: mulOf[uint64]})},
		// Integer division truncates toward zero, as C (and Go) do.
		binaryOp{name: "Div", since: 7, types: numericTypes, arith: fixed(arith{f: divOf[float64], i: divOf[int64], u: divOf[uint64], check: nonZeroDivisor})},
		binaryOp{name: "Mod", since: 10, types: numericTypes, attrs: []AttrDef{defInt("fmod", 0)}, arith: modArith},
		// Pow-7 takes one float type; Pow-12 separates the exponent's type
		// and admits integer bases.
		binaryOp{name: "Pow", since: 7, types: floatTypes, arith: fixed(powArith)},
		binaryOp{name: "Pow", since: 12, types: powBaseTypes, mixed: true, arith: fixed(powArith)},
	),
	variadicRows(
		variadicOp{name: "Max", since: 6, types: numericTypes, arith: arith{f: maxOf[float64], i: maxOf[int64], u: maxOf[uint64]}},
		variadicOp{name: "Min", since: 6, types: numericTypes, arith: arith{f: minOf[float64], i: minOf[int64], u: minOf[uint64]}},
		variadicOp{name: "Sum", since: 6, types: floatTypes, arith: arith{f: addOf[float64]}},
		variadicOp{name: "Mean", since: 6, types: floatTypes, arith: arith{f: addOf[float64]}, mean: true},
	),
)

func init() { register(mathOps) }

func concatRows(sets ...[]*Schema) []*Schema {
	var out []*Schema
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func absOf[T kernelNum](x T) T {
	if x < 0 {
		return -x
	}
	return x
}

func negOf[T kernelNum](x T) T { return -x }

// signOf keeps NaN (NaN compares false both ways and is returned as is).
func signOf[T kernelNum](x T) T {
	var one T = 1
	switch {
	case x > 0:
		return one
	case x < 0:
		return -one
	}
	return x
}

func isInf(a attrs) func(float64) float64 {
	neg, pos := a.Int("detect_negative") != 0, a.Int("detect_positive") != 0
	return func(x float64) float64 { return b2f(neg && math.IsInf(x, -1) || pos && math.IsInf(x, 1)) }
}

func addOf[T kernelNum](a, b T) T { return a + b }
func subOf[T kernelNum](a, b T) T { return a - b }
func mulOf[T kernelNum](a, b T) T { return a * b }
func divOf[T kernelNum](a, b T) T { return a / b }

// maxOf and minOf propagate NaN, as numpy's maximum and minimum do.
func maxOf[T kernelNum](a, b T) T { return max(a, b) }
func minOf[T kernelNum](a, b T) T { return min(a, b) }

var errDivideByZero = errors.New("integer division by zero")

func nonZeroDivisor(_, b int64) error {
	if b == 0 {
		return errDivideByZero
	}
	return nil
}

// modArith is Mod's function: with fmod=0 the result takes the divisor's
// sign (Python's %, numpy.mod), with fmod=1 the dividend's (C's fmod).
func modArith(a attrs) (arith, error) {
	switch fm := a.Int("fmod"); fm {
	case 0:
		return arith{f: floorModFloat, i: floorMod[int64], u: floorMod[uint64], check: nonZeroDivisor}, nil
	case 1:
		return arith{f: math.Mod, i: truncMod[int64], u: truncMod[uint64], check: nonZeroDivisor}, nil
	default:
		return arith{}, errors.New("attribute fmod must be 0 or 1")
	}
}

func truncMod[T kernelInt](a, b T) T { return a % b }

func floorMod[T kernelInt](a, b T) T {
	r := a % b
	if r != 0 && (r < 0) != (b < 0) {
		r += b
	}
	return r
}

func floorModFloat(a, b float64) float64 {
	r := math.Mod(a, b)
	if r != 0 && (r < 0) != (b < 0) {
		r += b
	}
	return r
}

// powArith raises integers exactly (wrapping on overflow, as numpy does):
// IntPow.
var powArith = arith{f: math.Pow,
	i: func(a, b int64) int64 { return IntPow(a, b, true) },
	check: func(a, b int64) error {
		if a == 0 && b < 0 {
			return errors.New("integer 0 raised to a negative power")
		}
		return nil
	}}

// IntPow is a to the power b in 64-bit integers, wrapping on overflow (b
// the bits of an unsigned exponent when signed is false): a negative
// exponent leaves |a^b| < 1, truncated to 0, except for bases ±1. Every
// executor computes integer Pow with it.
func IntPow(a, b int64, signed bool) int64 {
	if signed && b < 0 {
		switch {
		case a == 1:
			return 1
		case a == -1 && b%2 == 0:
			return 1
		case a == -1:
			return -1
		}
		return 0
	}
	r := int64(1)
	for n := uint64(b); n > 0; n >>= 1 {
		if n&1 == 1 {
			r *= a
		}
		a *= a
	}
	return r
}
