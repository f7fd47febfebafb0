package opcase

import (
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Cases of the elementwise family (codegen/kernel/ops_elementwise.go).
var elementwiseCases = map[string][]string{
	// Elementwise, unary.
	"Abs":             {"Abs-13 T[3,17]"},
	"Neg":             {"Neg-13 T[2,33]"},
	"Sign":            {"Sign-13 T[40]"},
	"Relu":            {"Relu-14 T[7,17]", "Relu-14 float[20]~[NaN -1 1 0 Inf -Inf -0 NaN 2 3 4 5 6 7 8 9 10 11 12 NaN]"},
	"Sqrt":            {"Sqrt-13 T[5,19]~pos", "Sqrt-13 T[6]~[-1 0 4 1e30 2 9]"},
	"Exp":             {"Exp-13 T[2,41]", "Exp-13 T[6]~[-200 -80 0 80 100 0.5]"},
	"Log":             {"Log-13 T[3,23]~pos", "Log-13 T[5]~[0 -1 1 1e-30 1e30]"},
	"Sin":             {"Sin-7 T[4,17]", "Sin-7 T[4]~[100 -1000 3.14159 0]"},
	"Cos":             {"Cos-7 T[4,17]", "Cos-7 T[4]~[100 -1000 3.14159 0]"},
	"Tan":             {"Tan-7 T[2,17]~unit"},
	"Asin":            {"Asin-7 T[2,17]~unit", "Asin-7 T[4]~[1 -1 0 2]"},
	"Acos":            {"Acos-7 T[2,17]~unit", "Acos-7 T[4]~[1 -1 0 2]"},
	"Atan":            {"Atan-7 T[3,17]", "Atan-7 T[4]~[1e30 -1e30 0.5 -3]"},
	"Sinh":            {"Sinh-9 T[3,17]", "Sinh-9 T[4]~[0.001 -0.05 20 -3]"},
	"Asinh":           {"Asinh-9 T[3,17]", "Asinh-9 T[6]~[0.001 -0.05 0.2 -30 3e20 -3e20]"},
	"Acosh":           {"Acosh-9 T[5]~[1 1.001 2.5 40 3e20]", "Acosh-9 T[4]~[0.5 -2 1.5 7]"},
	"Atanh":           {"Atanh-9 T[3,17]~unit", "Atanh-9 T[6]~[0.001 -0.05 0.3 -0.99 1 -1]"},
	"Cosh":            {"Cosh-9 T[3,17]"},
	"Tanh":            {"Tanh-13 T[3,17]", "Tanh-13 T[4]~[0.0001 -20 20 0]"},
	"Erf":             {"Erf-13 T[3,17]", "Erf-13 T[4]~[6 -7 5 -5]"},
	"Floor":           {"Floor-13 T[3,17]"},
	"Ceil":            {"Ceil-13 T[3,17]"},
	"Round":           {"Round-11 T[8]~[0.5 1.5 2.5 -0.5 -1.5 0.4 0.6 -2.5]", "Round-11 T[3,7]"},
	"Reciprocal":      {"Reciprocal-13 T[3,17]~nz"},
	"Sigmoid":         {"Sigmoid-13 T[3,17]", "Sigmoid-13 T[3]~[-100 100 0]"},
	"Softplus":        {"Softplus-1 T[3,17]"},
	"Softsign":        {"Softsign-1 T[3,17]"},
	"Mish":            {"Mish-18 T[3,17]"},
	"HardSwish":       {"HardSwish-14 T[3,17]"},
	"HardSigmoid":     {"HardSigmoid-6(alpha=0.3, beta=0.4) T[3,17]"},
	"LeakyRelu":       {"LeakyRelu-6(alpha=0.2) T[3,17]"},
	"ThresholdedRelu": {"ThresholdedRelu-10(alpha=0.5) T[3,17]"},
	"Elu":             {"Elu-6(alpha=0.7) T[3,17]"},
	"Selu":            {"Selu-6 T[3,17]"},
	"Celu":            {"Celu-12(alpha=1.5) T[3,17]"},
	"Shrink":          {"Shrink-9(bias=1.5, lambd=1.0) T[3,17]"},
	"IsNaN":           {"IsNaN-13 T[4]~[0 1 -1 2]"},
	"IsInf":           {"IsInf-10(detect_negative=0) T[4]~[1e300 -1e300 0 1]", "IsInf-10 T[2,9]"},
	"Not":             {"Not-1 bool[3,17]"},
	"Gelu": {"Gelu-20 T[3,17]", `Gelu-20(approximate="tanh") T[3,17]`,
		"Gelu-20 float[7]~[NaN Inf -Inf 0 10 -10 -3]", `Gelu-20(approximate="tanh") float[7]~[NaN Inf -Inf 0 10 -10 -3]`},
	"Swish":      {"Swish-24 T[3,17]", "Swish-24(alpha=0.5) T[3,17]", "Swish-24(alpha=-2.0) float[6]~[NaN Inf -Inf 0 100 -100]"},
	"BitwiseNot": {"BitwiseNot-18 T[3,17]"},
	"BitwiseAnd": {"BitwiseAnd-18 T[3,9], T[9]"},
	"BitwiseOr":  {"BitwiseOr-18 T[3,9], T[3,1]"},
	"BitwiseXor": {"BitwiseXor-18 T[3,9], T[9]", "BitwiseXor-18 int8[4]~[-1 -128 127 0], int8[4]~[127 -1 -128 5]"},
	"BitShift": {`BitShift-11(direction="LEFT") T[2,10], T[10]~[0 1 2 3 7 8 9 15 16 63]`,
		`BitShift-11(direction="RIGHT") T[2,10], T[10]~[0 1 2 3 7 8 9 15 16 63]`,
		`BitShift-11(direction="LEFT") uint64[4]~[1 3 255 7], uint64[4]~[63 64 65 200]`,
		`BitShift-11(direction="RIGHT") uint8[3,4], uint8[4]~[4 8 9 255]`},
	// At opset 25, which takes every type T runs over (the 8-, 4- and
	// 2-bit ones: cases_smalltypes.go).
	"Cast": {
		"Cast-25(to=1) T[3,17]", "Cast-25(to=7) T[2,9]", "Cast-25(to=6) T[2,9]", "Cast-25(to=2) T[2,9]",
		"Cast-25(to=9) T[2,9]", "Cast-25(to=10) T[2,9]", "Cast-25(to=11) T[2,9]", "Cast-25(to=16) T[2,9]",
		"Cast-25(to=12) T[2,9]", "Cast-25(to=3) T[2,9]", "Cast-25(to=13) T[2,9]", "Cast-13(to=1) float[2,9]",
	},
	"BitCast": bitCastCases(),
	"CastLike": {"CastLike-25 T[3,17], int64[1]=[0]", "CastLike-25 T[2,9], float16[2]=[1 2]", "CastLike-25 T[2,9], uint8[1]=[0]",
		"CastLike-15 int32[2,9], double[1]=[0]"},
	// Elementwise, binary and variadic, with broadcasting.
	"Add":            {"Add-14 T[2,3,17], T[3,17]", "Add-14 T[1,7], T[17,1]", "Add-14 T[33], T"},
	"Sub":            {"Sub-14 T[2,3,17], T[2,1,17]", "Sub-14 T, T[9]"},
	"Mul":            {"Mul-14 T[4,17], T[4,1]"},
	"Div":            {"Div-14 T[4,17], T[17]~nz", "Div-14 T[4]~[7 -7 7 -7], T[4]~[2 2 -2 5]"},
	"Mod":            {"Mod-13(fmod=1) T[4,9], T[9]~nz", "Mod-13 T[6]~[7 -7 7 -7 5 -5], T[6]~[3 3 -3 -3 2 5]"},
	"Pow":            {"Pow-15 T[3,9]~pos, T[9]~[0 1 2 3 0 1 2 3 2]", "Pow-15 T[2,3], int64[3]~[2 0 3]", powWraps, powWraps32},
	"PRelu":          {"PRelu-16 T[2,3,9], T[3,1]"},
	"Equal":          {"Equal-13 T[3,9], T[9]"},
	"Less":           {"Less-13 T[3,9], T[9]"},
	"LessOrEqual":    {"LessOrEqual-16 T[3,9], T[9]"},
	"Greater":        {"Greater-13 T[3,9], T[9]"},
	"GreaterOrEqual": {"GreaterOrEqual-16 T[3,9], T[9]"},
	"And":            {"And-7 bool[3,9], bool[9]"},
	"Or":             {"Or-7 bool[3,9], bool[9]"},
	"Xor":            {"Xor-7 bool[3,9], bool[9]"},
	"Max": {"Max-13 T[3,9], T[9], T[3,1]", "Max-13 float[4]~[1 0 -1 2], float[4]~[0 1 -1 3]",
		"Max-13 float[17]~[NaN 1 NaN 0 1 2 3 4 5 6 7 8 9 10 11 12 13], float[17]~[1 NaN NaN 0 1 2 3 4 5 6 7 8 9 10 11 12 NaN]"},
	"Min": {"Min-13 T[3,9], T[9]", "Min-13 T[5]",
		"Min-13 float[17]~[NaN 1 NaN 0 1 2 3 4 5 6 7 8 9 10 11 12 13], float[17]~[1 NaN NaN 0 1 2 3 4 5 6 7 8 9 10 11 12 NaN]"},
	"Sum":   {"Sum-13 T[3,9], T[9], T[3,1]"},
	"Mean":  {"Mean-13 T[3,9], T[9]"},
	"Where": {"Where-16 bool[3,9], float[9], float[3,1]", "Where-16 bool[9], int64[2,9], int64"},
	"Clip": {"Clip-13 T[3,9], T=[-1], T=[2]", "Clip-13 T[3,9], _, T~[1]", "Clip-13 T[5]",
		"Clip-6(min=-0.5, max=0.5) float[3,9]", "Clip-13 float[18]~[NaN -3 3 0 Inf -Inf NaN 1 2 3 4 5 6 7 8 9 10 NaN], float=[-1], float=[2]"},
}

// Integer powers wrap to the type at every exponent (3^64 is 3^64 mod
// 2^64, not 0; an int32's past 2^32).
const (
	powWraps   = "Pow-15 int64[8]~[3 -3 2 5 -1 7 0 1], int64[8]~[64 65 64 100 65 127 70 99]"
	powWraps32 = "Pow-15 int32[6]~[3 -3 5 7 2 -1], int64[6]~[64 33 1000 32 40 1001]"
)

// bitCastCases reinterprets each width's bit patterns (signaling and
// quiet NaNs with payloads, -0, the smallest and largest denormals, Inf,
// all ones) from every type of that width to every other, and random
// values of every type as themselves and as float32 as int32.
func bitCastCases() []string {
	widths := []struct {
		types []string
		bits  string
	}{
		{[]string{"int8", "uint8", "bool"}, "0x00 0x01 0x7f 0x80 0xff 0x2a"},
		{[]string{"int16", "uint16", "float16", "bfloat16"},
			"0x7c01 0xfe55 0x7f81 0xffc5 0x8000 0x0001 0x03ff 0x807f 0x7c00 0x3c00 0xffff 0x1234"},
		{[]string{"int32", "uint32", "float32"},
			"0x7f800001 0xffc12345 0x7fbfffff 0x80000000 0x00000001 0x807fffff 0x7f800000 0x3f800000 0xffffffff 0x12345678"},
		{[]string{"int64", "uint64", "float64"},
			"0x7ff0000000000001 0xfff8000000012345 0x7ff7ffffffffffff 0x8000000000000000 0x0000000000000001 " +
				"0x800fffffffffffff 0x7ff0000000000000 0x3ff0000000000000 0xffffffffffffffff 0x123456789abcdef0"},
	}
	lines := []string{"BitCast-26(to=T) T[3,17]", "BitCast-26(to=6) float32[3,17]"}
	for _, w := range widths {
		n := len(strings.Fields(w.bits))
		for _, from := range w.types {
			for _, to := range w.types {
				if from == to {
					continue
				}
				d, _ := ir.ParseDType(to)
				lines = append(lines, fmt.Sprintf("BitCast-26(to=%d) %s[%d]~[%s]", int(d), from, n, w.bits))
			}
		}
	}
	return lines
}
