package ops

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// Tests of the elementwise family (elementwise*.go, activation.go). The
// helpers callInfer, callKernel, randTensor, assertClose, checkShapeGolden,
// tt and sym are shared with the other families (reduce_test.go).

func TestElementwiseShapes(t *testing.T) {
	f, b := ir.Float32, ir.Bool
	x := tt(f, 2, 3, 4)
	xs := sym(f, "N", 3, -1)
	unranked := ir.TensorType(f, ir.Shape{})
	one := func(op string, opset int64, attrs []*ir.Attribute, ins ...ir.Type) shapeCase {
		return shapeCase{op: op, opset: opset, ins: ins, nOut: 1, attrs: attrs}
	}
	cases := []shapeCase{
		one("Relu", 14, nil, xs),
		one("Abs", 13, nil, tt(ir.Int8, 5)),
		one("Sqrt", 13, nil, unranked),
		one("LeakyRelu", 16, []*ir.Attribute{ir.AttrF("alpha", 0.1)}, x),
		one("IsNaN", 13, nil, xs),
		one("IsInf", 10, []*ir.Attribute{ir.AttrI("detect_negative", 0)}, x),
		one("Add", 14, nil, x, tt(f, 4)),
		one("Mul", 14, nil, sym(f, "N", 1, 4), sym(f, 3, 1)),
		one("Sub", 14, nil, sym(f, "N", 4), sym(f, "M", 4)),
		one("Div", 14, nil, xs, unranked),
		one("Add", 14, nil, x, tt(f, 3)),
		one("Add", 14, nil, x, tt(ir.Float64, 4)),
		one("Mod", 13, []*ir.Attribute{ir.AttrI("fmod", 1)}, tt(ir.Int32, 2, 1), tt(ir.Int32, 3)),
		one("Pow", 15, nil, tt(ir.Int64, 3), tt(f, 2, 1)),
		one("Pow", 7, nil, tt(f, 3), tt(ir.Float64, 3)),
		one("PRelu", 16, nil, sym(f, "N", 3, 4, 4), tt(f, 3, 1, 1)),
		one("PRelu", 16, nil, x, tt(f, 5, 2, 3, 4)),
		one("PRelu", 16, nil, x, tt(f, 3, 1)),
		one("Equal", 19, nil, tt(ir.String, 2), tt(ir.String, 1)),
		one("Greater", 13, nil, xs, tt(f, 7)),
		one("LessOrEqual", 16, nil, tt(ir.Uint64, 2, 1), tt(ir.Uint64, 1, 2)),
		one("Less", 13, nil, x, tt(ir.Int32, 4)),
		one("And", 7, nil, tt(b, 3, 1), tt(b, 4)),
		one("Xor", 7, nil, tt(f, 3), tt(f, 3)),
		one("Not", 1, nil, sym(b, "N")),
		one("Max", 13, nil, tt(f, 3, 1), tt(f, 4), sym(f, "K", 1, 1)),
		one("Sum", 13, nil, x),
		one("Mean", 13, nil, x, tt(f, 2, 3, 5)),
		one("Where", 16, nil, tt(b, 3, 1), sym(ir.String, "N", 1, 4), tt(ir.String, 1)),
		one("Where", 16, nil, tt(f, 3), tt(f, 3), tt(f, 3)),
		one("Cast", 13, []*ir.Attribute{ir.AttrI("to", int64(ir.Float16))}, xs),
		one("Cast", 19, []*ir.Attribute{ir.AttrI("to", int64(ir.String)), ir.AttrI("saturate", 0)}, tt(ir.Int64, 2)),
		one("Cast", 13, []*ir.Attribute{ir.AttrI("to", 99)}, x),
		one("Cast", 13, nil, x),
		one("Clip", 6, []*ir.Attribute{ir.AttrF("min", -1)}, xs),
		one("Clip", 13, nil, tt(ir.Int8, 3), tt(ir.Int8), ir.Type{}),
		one("Clip", 13, nil, x, ir.Type{}, tt(f, 2)),
		one("Clip", 13, nil, x, tt(ir.Float64)),
		{op: "Dropout", opset: 7, ins: []ir.Type{xs}, nOut: 2},
		{op: "Dropout", opset: 10, ins: []ir.Type{xs}, nOut: 2},
		{op: "Dropout", opset: 13, ins: []ir.Type{xs, tt(f), tt(b)}, nOut: 2},
		{op: "Dropout", opset: 13, ins: []ir.Type{x, tt(f)}, consts: []*ir.Tensor{nil, ir.Scalar(ir.Float32, float32(1))}, nOut: 1},
		one("Identity", 16, nil, tt(ir.String, 2)),
		// Symbolic broadcasting.
		one("Add", 14, nil, sym(f, "B", "S", 6), sym(f, 1, "min(16, S)", 6)),
		one("Add", 14, nil, sym(f, "N", 1), sym(f, 1, "M")),
		one("Add", 14, nil, sym(f, "N"), sym(f, "M")),
		one("Add", 14, nil, sym(f, "S - 1"), sym(f, "S")),
		one("Mul", 14, nil, sym(f, "2*N", 4), sym(f, "N*2", 1)),
		one("Where", 16, nil, sym(b, 1, 1, "S", "S"), sym(f, "B", 4, "S", "S"), tt(f)),
	}
	checkShapeGolden(t, "elementwise", cases)
}

// unaryOracles computes each unary op directly from its definition,
// without the kernels' rearrangements for stability. dom maps a normal
// random number into the op's domain.
var unaryOracles = []struct {
	op    string
	attrs []*ir.Attribute
	dom   func(float64) float64
	want  func(x float64) float64
}{
	{"Abs", nil, nil, math.Abs},
	{"Neg", nil, nil, func(x float64) float64 { return -x }},
	{"Sign", nil, nil, func(x float64) float64 { return float64(cmpFloat(x, 0)) }},
	{"Ceil", nil, nil, math.Ceil},
	{"Floor", nil, nil, math.Floor},
	{"Round", nil, func(x float64) float64 { return math.Round(x*4) / 2 }, math.RoundToEven},
	{"Reciprocal", nil, nil, func(x float64) float64 { return 1 / x }},
	{"Sqrt", nil, math.Abs, math.Sqrt},
	{"Exp", nil, nil, math.Exp},
	{"Log", nil, math.Abs, math.Log},
	{"Erf", nil, nil, math.Erf},
	{"Sin", nil, nil, math.Sin},
	{"Cos", nil, nil, math.Cos},
	{"Tan", nil, nil, math.Tan},
	{"Asin", nil, math.Tanh, math.Asin},
	{"Acos", nil, math.Tanh, math.Acos},
	{"Atan", nil, nil, math.Atan},
	{"Sinh", nil, nil, func(x float64) float64 { return (math.Exp(x) - math.Exp(-x)) / 2 }},
	{"Cosh", nil, nil, func(x float64) float64 { return (math.Exp(x) + math.Exp(-x)) / 2 }},
	{"Tanh", nil, nil, func(x float64) float64 { return (math.Exp(2*x) - 1) / (math.Exp(2*x) + 1) }},
	{"Sigmoid", nil, nil, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
	{"Relu", nil, nil, func(x float64) float64 { return math.Max(x, 0) }},
	{"LeakyRelu", nil, nil, func(x float64) float64 { return pick(x >= 0, x, f32c(0.01)*x) }},
	{"LeakyRelu", []*ir.Attribute{ir.AttrF("alpha", 0.5)}, nil, func(x float64) float64 { return pick(x >= 0, x, 0.5*x) }},
	{"ThresholdedRelu", []*ir.Attribute{ir.AttrF("alpha", 0.5)}, nil, func(x float64) float64 { return pick(x > 0.5, x, 0) }},
	{"Elu", []*ir.Attribute{ir.AttrF("alpha", 2)}, nil, func(x float64) float64 { return pick(x >= 0, x, 2*(math.Exp(x)-1)) }},
	{"Selu", nil, nil, func(x float64) float64 {
		// The defaults are float32 attributes, as in ONNX.
		alpha, gamma := f32c(1.6732632423543772), f32c(1.0507009873554805)
		return gamma * pick(x > 0, x, alpha*math.Exp(x)-alpha)
	}},
	{"Celu", []*ir.Attribute{ir.AttrF("alpha", 2)}, nil, func(x float64) float64 {
		return math.Max(0, x) + math.Min(0, 2*(math.Exp(x/2)-1))
	}},
	{"HardSigmoid", []*ir.Attribute{ir.AttrF("alpha", 0.5), ir.AttrF("beta", 0.25)}, nil, func(x float64) float64 {
		return math.Max(0, math.Min(1, 0.5*x+0.25))
	}},
	{"HardSwish", nil, func(x float64) float64 { return 4 * x }, func(x float64) float64 {
		return x * math.Max(0, math.Min(1, x/6+0.5))
	}},
	{"Softplus", nil, nil, func(x float64) float64 { return math.Log(1 + math.Exp(x)) }},
	{"Softsign", nil, nil, func(x float64) float64 { return x / (1 + math.Abs(x)) }},
	{"Mish", nil, nil, func(x float64) float64 { return x * math.Tanh(math.Log(1+math.Exp(x))) }},
	{"Shrink", []*ir.Attribute{ir.AttrF("lambd", 0.7), ir.AttrF("bias", 0.2)}, nil, func(x float64) float64 {
		l, b := f32c(0.7), f32c(0.2)
		return pick(x < -l, x+b, pick(x > l, x-b, 0))
	}},
}

// f32c is an attribute's value: attributes hold float32.
func f32c(v float64) float64 { return float64(float32(v)) }

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

func cmpFloat(a, b float64) int {
	switch {
	case a > b:
		return 1
	case a < b:
		return -1
	}
	return 0
}

// TestUnaryAgainstOracles runs every unary op on random data of each
// float type at the newest opset, comparing with the oracle evaluated on
// the input's own (already rounded) values.
func TestUnaryAgainstOracles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tols := map[ir.DType]float64{ir.Float32: 1e-6, ir.Float64: 1e-12, ir.Float16: 1e-3, ir.BFloat16: 8e-3}
	for _, o := range unaryOracles {
		for _, dt := range floatTypes {
			x := randTensor(rng, dt, 3, 4, 5)
			if o.dom != nil {
				v := Float64s(x)
				for i := range v {
					v[i] = o.dom(v[i])
				}
				x = FromFloat64s(dt, x.Dims, v)
			}
			name := fmt.Sprintf("%s %v %s", o.op, o.attrs, dt)
			out, err := callKernel(t, o.op, 22, []*ir.Tensor{x}, 1, o.attrs...)
			require.NoError(t, err, name)
			want := Float64s(x)
			for i := range want {
				want[i] = o.want(want[i])
			}
			assertClose(t, want, Float64s(out[0]), tols[dt], tols[dt], name)
		}
	}
}

// TestActivationIdentities checks relations between ops, each computed by
// the kernels.
func TestActivationIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := randTensor(rng, ir.Float64, 4, 25)
	for i, v := range Float64s(x) {
		ir.Data[float64](x)[i] = 6 * v // reach the saturated regions
	}
	run := func(op string, in *ir.Tensor, attrs ...*ir.Attribute) []float64 {
		out, err := callKernel(t, op, 18, []*ir.Tensor{in}, 1, attrs...)
		require.NoError(t, err, op)
		return Float64s(out[0])
	}
	neg := FromFloat64s(ir.Float64, x.Dims, run("Neg", x))
	sig, sigNeg := run("Sigmoid", x), run("Sigmoid", neg)
	sum := make([]float64, len(sig))
	for i := range sig {
		sum[i] = sig[i] + sigNeg[i]
	}
	assertClose(t, filled(len(sum), 1), sum, 1e-12, 1e-12, "sigmoid(x)+sigmoid(-x)")

	hsig := run("HardSigmoid", x, ir.AttrF("alpha", float32(1.0/6)), ir.AttrF("beta", 0.5))
	hswish := run("HardSwish", x)
	sp := run("Softplus", x)
	mish := run("Mish", x)
	for i, v := range Float64s(x) {
		hsig[i] *= v
		sp[i] = v * math.Tanh(sp[i])
	}
	assertClose(t, hsig, hswish, 1e-7, 1e-7, "HardSwish = x*HardSigmoid(1/6, 1/2)")
	assertClose(t, sp, mish, 1e-12, 1e-12, "Mish = x*tanh(Softplus)")
	assertClose(t, run("Elu", x), run("Celu", x), 1e-12, 1e-12, "Celu(alpha=1) = Elu(alpha=1)")
	assertClose(t, Float64s(x), run("Reciprocal", FromFloat64s(ir.Float64, x.Dims, run("Reciprocal", x))), 1e-12, 0, "1/(1/x)")
	assertClose(t, run("Relu", x), run("ThresholdedRelu", x, ir.AttrF("alpha", 0)), 0, 0, "Relu = ThresholdedRelu(0)")
}

func filled(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestUnaryIntegers(t *testing.T) {
	i64 := ir.FromSlice(ir.Int64, []int64{5}, []int64{math.MinInt64 + 1, -7, 0, 9, math.MaxInt64})
	u64 := ir.FromSlice(ir.Uint64, []int64{3}, []uint64{0, 5, math.MaxUint64})
	i8 := ir.FromSlice(ir.Int8, []int64{3}, []int8{-128, -3, 4})
	for _, c := range []struct {
		op   string
		in   *ir.Tensor
		want string
	}{
		{"Abs", i64, "[9223372036854775807 7 0 9 9223372036854775807]"},
		{"Abs", u64, "[0 5 18446744073709551615]"},
		{"Abs", i8, "[-128 3 4]"}, // wraps, as C's abs
		{"Neg", i64, "[9223372036854775807 7 0 -9 -9223372036854775807]"},
		{"Sign", i64, "[-1 -1 0 1 1]"},
		{"Sign", u64, "[0 1 1]"},
		{"Relu", i8, "[0 0 4]"},
		{"Erf", i8, "[-1 0 0]"}, // through float64, truncated: erf(-3) = -0.99998
	} {
		out, err := callKernel(t, c.op, 22, []*ir.Tensor{c.in}, 1)
		require.NoError(t, err, c.op)
		assert.Equal(t, c.in.DType, out[0].DType)
		assert.Equal(t, c.want, elems(out[0]), "%s %s", c.op, c.in.DType)
	}
}

// elems prints a tensor's values exactly in its own type.
func elems(t *ir.Tensor) string {
	switch {
	case t.DType == ir.String:
		return fmt.Sprint(t.Strings)
	case t.DType == ir.Bool:
		return fmt.Sprint(Bools(t))
	case t.DType == ir.Uint64:
		return fmt.Sprint(ir.Data[uint64](t))
	case t.DType.IsInt():
		return fmt.Sprint(Int64s(t))
	}
	return fmt.Sprint(Float64s(t))
}

// naiveBroadcast evaluates f over the broadcast of a and b by coordinate
// arithmetic: an oracle independent of BroadcastIndex.
func naiveBroadcast(a, b []float64, ad, bd, od []int64, f func(x, y float64) float64) []float64 {
	out := make([]float64, ir.Product(od))
	at := func(v []float64, dims []int64, coord []int64) float64 {
		flat, off := int64(0), len(coord)-len(dims)
		for i, d := range dims {
			c := coord[off+i]
			if d == 1 {
				c = 0
			}
			flat = flat*d + c
		}
		return v[flat]
	}
	coord := make([]int64, len(od))
	for k := range out {
		rem := int64(k)
		for i := len(od) - 1; i >= 0; i-- {
			coord[i] = rem % od[i]
			rem /= od[i]
		}
		out[k] = f(at(a, ad, coord), at(b, bd, coord))
	}
	return out
}

func TestBinaryBroadcastAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	shapes := [][3][]int64{
		{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
		{{2, 3, 4}, {3, 1}, {2, 3, 4}},
		{{1, 3, 1}, {2, 1, 4}, {2, 3, 4}},
		{{}, {2, 3}, {2, 3}},
		{{0, 3}, {1}, {0, 3}},
	}
	ops := map[string]func(x, y float64) float64{
		"Add": func(x, y float64) float64 { return x + y },
		"Sub": func(x, y float64) float64 { return x - y },
		"Mul": func(x, y float64) float64 { return x * y },
		"Div": func(x, y float64) float64 { return x / y },
		"Pow": math.Pow,
		"Mod": math.Mod,
	}
	for op, f := range ops {
		for _, s := range shapes {
			a := randTensor(rng, ir.Float32, s[0]...)
			b := randTensor(rng, ir.Float32, s[1]...)
			var attrs []*ir.Attribute
			if op == "Mod" {
				attrs = append(attrs, ir.AttrI("fmod", 1))
			}
			if op == "Pow" { // real results only
				a = mapFloat(a, math.Abs)
			}
			name := fmt.Sprintf("%s %v %v", op, s[0], s[1])
			out, err := callKernel(t, op, 22, []*ir.Tensor{a, b}, 1, attrs...)
			require.NoError(t, err, name)
			assert.Equal(t, s[2], out[0].Dims, name)
			want := naiveBroadcast(Float64s(a), Float64s(b), s[0], s[1], s[2], f)
			assertClose(t, want, Float64s(out[0]), 1e-6, 1e-6, name)
		}
	}
}

func mapFloat(t *ir.Tensor, f func(float64) float64) *ir.Tensor {
	v := Float64s(t)
	for i := range v {
		v[i] = f(v[i])
	}
	return FromFloat64s(t.DType, t.Dims, v)
}

func vec[T ir.Numeric](dtype ir.DType, v ...T) *ir.Tensor {
	return ir.FromSlice(dtype, []int64{int64(len(v))}, v)
}

func TestIntegerArithmetic(t *testing.T) {
	i32 := func(v ...int32) *ir.Tensor { return vec(ir.Int32, v...) }
	fmod1 := ir.AttrI("fmod", 1)
	big := uint64(1)<<63 + 5
	for _, c := range []struct {
		op    string
		a, b  *ir.Tensor
		attrs []*ir.Attribute
		want  string
	}{
		// Truncation toward zero, as C.
		{"Div", i32(7, -7, 7, -7, 6), i32(2, 2, -2, -2, 3), nil, "[3 -3 -3 3 2]"},
		{"Div", vec(ir.Int64, int64(math.MinInt64)), vec(ir.Int64, int64(-1)), nil, "[-9223372036854775808]"},
		{"Div", vec(ir.Uint64, big, 10), vec(ir.Uint64, uint64(2), 3), nil, "[4611686018427387906 3]"},
		// fmod=0 takes the divisor's sign, fmod=1 the dividend's.
		{"Mod", i32(7, -7, 7, -7), i32(3, 3, -3, -3), nil, "[1 2 -2 -1]"},
		{"Mod", i32(7, -7, 7, -7), i32(3, 3, -3, -3), []*ir.Attribute{fmod1}, "[1 -1 1 -1]"},
		{"Mod", vec(ir.Float64, 7.5, -7.5), vec(ir.Float64, 2.0, 2.0), []*ir.Attribute{fmod1}, "[1.5 -1.5]"},
		{"Mod", vec(ir.Float64, 7.5, -7.5), vec(ir.Float64, 2.0, 2.0), nil, "[1.5 0.5]"},
		{"Mod", vec(ir.Uint64, big), vec(ir.Uint64, uint64(10)), nil, "[3]"},
		{"Add", vec(ir.Int8, int8(127), -128), vec(ir.Int8, int8(1), -1), nil, "[-128 127]"},
		{"Mul", vec(ir.Uint8, uint8(16)), vec(ir.Uint8, uint8(17)), nil, "[16]"},
		{"Sub", vec(ir.Uint64, uint64(0)), vec(ir.Uint64, uint64(1)), nil, "[18446744073709551615]"},
		{"Pow", vec(ir.Int64, int64(3), -2, 2, -1, 1), vec(ir.Int64, int64(39), 3, -1, -3, -5), nil, "[4052555153018976267 -8 0 -1 1]"},
		{"Pow", vec(ir.Int32, int32(2), 9), vec(ir.Float32, float32(0.5), 0.5), nil, "[1 3]"},
		{"Pow", vec(ir.Float32, float32(2), 4), vec(ir.Uint32, uint32(3), 0), nil, "[8 1]"},
		{"PRelu", vec(ir.Int64, int64(-3), 4), vec(ir.Int64, int64(2)), nil, "[-6 4]"},
	} {
		name := fmt.Sprintf("%s(%s, %s)", c.op, elems(c.a), elems(c.b))
		out, err := callKernel(t, c.op, 15, []*ir.Tensor{c.a, c.b}, 1, c.attrs...)
		require.NoError(t, err, name)
		assert.Equal(t, c.a.DType, out[0].DType, name)
		assert.Equal(t, c.want, elems(out[0]), name)
	}
}

func TestIntegerErrors(t *testing.T) {
	for _, c := range []struct {
		op    string
		a, b  *ir.Tensor
		attrs []*ir.Attribute
		want  string
	}{
		{"Div", vec(ir.Int32, int32(1), 2), vec(ir.Int32, int32(1), 0), nil, "integer division by zero"},
		{"Div", vec(ir.Uint8, uint8(1)), vec(ir.Uint8, uint8(0)), nil, "integer division by zero"},
		{"Mod", vec(ir.Int64, int64(1)), vec(ir.Int64, int64(0)), []*ir.Attribute{ir.AttrI("fmod", 1)}, "integer division by zero"},
		{"Mod", vec(ir.Int64, int64(1)), vec(ir.Int64, int64(1)), []*ir.Attribute{ir.AttrI("fmod", 2)}, "fmod must be 0 or 1"},
		{"Pow", vec(ir.Int64, int64(0)), vec(ir.Int64, int64(-1)), nil, "0 raised to a negative power"},
		{"Add", vec(ir.Int64, int64(0)), vec(ir.Int32, int32(0)), nil, "want one type"},
		{"Add", vec(ir.Int64, int64(0), 1), vec(ir.Int64, int64(0), 1, 2), nil, "cannot broadcast"},
		{"PRelu", vec(ir.Float32, float32(0)), vec(ir.Float32, float32(0), 1), nil, "does not broadcast to input 0"},
	} {
		s, err := Lookup("", c.op, 15)
		require.NoError(t, err)
		n := &ir.Node{OpType: c.op, Inputs: make([]*ir.Value, 2), Outputs: []*ir.Value{{Name: "y"}}, Attrs: c.attrs}
		err = s.Run(NewKernelContext(s, n, 15, []*ir.Tensor{c.a, c.b}))
		assert.ErrorContains(t, err, c.want, c.op)
	}
}

func TestComparisonsAndLogic(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cmps := map[string]func(x, y float64) bool{
		"Equal":          func(x, y float64) bool { return x == y },
		"Less":           func(x, y float64) bool { return x < y },
		"LessOrEqual":    func(x, y float64) bool { return x <= y },
		"Greater":        func(x, y float64) bool { return x > y },
		"GreaterOrEqual": func(x, y float64) bool { return x >= y },
	}
	for op, f := range cmps {
		for _, dt := range []ir.DType{ir.Float32, ir.Int16, ir.Uint8, ir.Float16} {
			a := randTensor(rng, dt, 3, 4)
			b := randTensor(rng, dt, 4)
			if dt.IsFloat() { // a NaN, and a tie: b[1] meets a[1][1]
				av, bv := Float64s(a), Float64s(b)
				av[0], bv[1] = math.NaN(), av[5]
				a, b = FromFloat64s(dt, a.Dims, av), FromFloat64s(dt, b.Dims, bv)
			}
			out, err := callKernel(t, op, 16, []*ir.Tensor{a, b}, 1)
			require.NoError(t, err, op)
			want := naiveBroadcast(Float64s(a), Float64s(b), a.Dims, b.Dims, a.Dims, func(x, y float64) float64 { return b2f(f(x, y)) })
			assert.Equal(t, want, Float64s(out[0]), "%s %s", op, dt)
		}
	}
	big := vec(ir.Uint64, uint64(1)<<63, 3)
	small := vec(ir.Uint64, uint64(1))
	out, err := callKernel(t, "Greater", 13, []*ir.Tensor{big, small}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[true true]", elems(out[0]))
	strs := &ir.Tensor{DType: ir.String, Dims: []int64{3}, Strings: []string{"a", "b", ""}}
	out, err = callKernel(t, "Equal", 19, []*ir.Tensor{strs, {DType: ir.String, Dims: []int64{1}, Strings: []string{"b"}}}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[false true false]", elems(out[0]))

	tf := FromBools([]int64{2, 1}, []bool{true, false})
	tf2 := FromBools([]int64{2}, []bool{true, false})
	for op, want := range map[string]string{"And": "[true false false false]", "Or": "[true true true false]", "Xor": "[false true true false]"} {
		out, err := callKernel(t, op, 7, []*ir.Tensor{tf, tf2}, 1)
		require.NoError(t, err, op)
		assert.Equal(t, []int64{2, 2}, out[0].Dims)
		assert.Equal(t, want, elems(out[0]), op)
	}
	out, err = callKernel(t, "Not", 1, []*ir.Tensor{tf}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[false true]", elems(out[0]))
}

func TestVariadic(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	a, b, c := randTensor(rng, ir.Float64, 2, 1, 4), randTensor(rng, ir.Float64, 3, 1), randTensor(rng, ir.Float64, 4)
	od := []int64{2, 3, 4}
	ab := func(f func(x, y float64) float64) []float64 {
		return naiveBroadcast(naiveBroadcast(Float64s(a), Float64s(b), a.Dims, b.Dims, od, f), Float64s(c), od, c.Dims, od, f)
	}
	sum := ab(func(x, y float64) float64 { return x + y })
	mean := make([]float64, len(sum))
	for i, s := range sum {
		mean[i] = s / 3
	}
	for op, want := range map[string][]float64{"Max": ab(math.Max), "Min": ab(math.Min), "Sum": sum, "Mean": mean} {
		out, err := callKernel(t, op, 13, []*ir.Tensor{a, b, c}, 1)
		require.NoError(t, err, op)
		assert.Equal(t, od, out[0].Dims, op)
		assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12, op)
		one, err := callKernel(t, op, 13, []*ir.Tensor{a}, 1)
		require.NoError(t, err, op)
		assert.Equal(t, Float64s(a), Float64s(one[0]), "%s of one input", op)
	}
	nan := vec(ir.Float32, float32(math.NaN()), 1)
	out, err := callKernel(t, "Max", 13, []*ir.Tensor{nan, vec(ir.Float32, float32(2), 0)}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[NaN 1]", elems(out[0]), "NaN propagates")
	out, err = callKernel(t, "Min", 13, []*ir.Tensor{vec(ir.Uint64, uint64(1)<<63, 7), vec(ir.Uint64, uint64(9), 8)}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[9 7]", elems(out[0]))
	out, err = callKernel(t, "Max", 13, []*ir.Tensor{vec(ir.Int64, int64(math.MaxInt64-1), -5), vec(ir.Int64, int64(math.MaxInt64-2), -6)}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[9223372036854775806 -5]", elems(out[0]))
}

func TestWhere(t *testing.T) {
	cond := FromBools([]int64{2, 1}, []bool{true, false})
	x := &ir.Tensor{DType: ir.String, Dims: []int64{3}, Strings: []string{"a", "b", "c"}}
	y := &ir.Tensor{DType: ir.String, Dims: []int64{1}, Strings: []string{"-"}}
	out, err := callKernel(t, "Where", 16, []*ir.Tensor{cond, x, y}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, out[0].Dims)
	assert.Equal(t, "[a b c - - -]", elems(out[0]))
	h := FromFloat64s(ir.Float16, []int64{3}, []float64{1, 2, 3})
	out, err = callKernel(t, "Where", 16, []*ir.Tensor{cond, h, FromFloat64s(ir.Float16, nil, []float64{-1})}, 1)
	require.NoError(t, err)
	assert.Equal(t, "[1 2 3 -1 -1 -1]", elems(out[0]))
	_, err = callKernel(t, "Where", 16, []*ir.Tensor{h, h, h}, 1)
	assert.ErrorContains(t, err, "condition is float16")
}

func TestCastAllPairs(t *testing.T) {
	types := concatTypes(numericTypes, []ir.DType{ir.Bool})
	for _, from := range types {
		for _, to := range types {
			// Values every type holds exactly.
			vals := []float64{0, 1, 3, 100, 7, 0}
			if from == ir.Bool || to == ir.Bool {
				vals = []float64{0, 1, 1, 0}
			}
			x := FromFloat64s(from, []int64{2, int64(len(vals) / 2)}, vals)
			out, err := callKernel(t, "Cast", 13, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(to)))
			require.NoError(t, err, "%s to %s", from, to)
			assert.Equal(t, to, out[0].DType)
			assert.Equal(t, x.Dims, out[0].Dims)
			assert.Equal(t, vals, Float64s(out[0]), "%s to %s", from, to)
		}
	}
	for _, c := range []struct {
		x    *ir.Tensor
		to   ir.DType
		want string
	}{
		{vec(ir.Float32, float32(-2.7), 2.7, float32(math.NaN())), ir.Int32, "[-2 2 0]"},
		{vec(ir.Float32, float32(-0.5), 0, float32(math.NaN())), ir.Bool, "[true false true]"},
		{vec(ir.Int32, int32(300), -1), ir.Uint8, "[44 255]"},
		{vec(ir.Uint64, uint64(math.MaxUint64)), ir.Float64, "[1.8446744073709552e+19]"},
		{vec(ir.Float64, 1+1.0/2048), ir.Float16, "[1]"},           // halfway rounds to even
		{vec(ir.Float64, 1+3.0/2048), ir.Float16, "[1.001953125]"}, // and up
		{vec(ir.Float32, float32(1)+1.0/256), ir.BFloat16, "[1]"},
		{vec(ir.Float32, float32(0.1), 1e20, float32(math.Inf(-1))), ir.String, "[0.1 1e+20 -Inf]"},
		{vec(ir.Uint64, uint64(math.MaxUint64)), ir.String, "[18446744073709551615]"},
		{&ir.Tensor{DType: ir.String, Dims: []int64{3}, Strings: []string{"1.5", "-inf", "NaN"}}, ir.Float32, "[1.5 -Inf NaN]"},
		{&ir.Tensor{DType: ir.String, Dims: []int64{2}, Strings: []string{"-12", "7"}}, ir.Int8, "[-12 7]"},
	} {
		out, err := callKernel(t, "Cast", 13, []*ir.Tensor{c.x}, 1, ir.AttrI("to", int64(c.to)))
		require.NoError(t, err, "%s to %s", c.x.DType, c.to)
		assert.Equal(t, c.want, elems(out[0]), "%s %s to %s", elems(c.x), c.x.DType, c.to)
	}
	_, err := callKernel(t, "Cast", 13, []*ir.Tensor{{DType: ir.String, Dims: []int64{1}, Strings: []string{"x1"}}}, 1, ir.AttrI("to", int64(ir.Int32)))
	assert.ErrorContains(t, err, "invalid syntax")
	// The float8 types came with Cast-19.
	_, err = callKernel(t, "Cast", 13, []*ir.Tensor{vec(ir.Float32, float32(1))}, 1, ir.AttrI("to", int64(ir.Float8E4M3FN)))
	var ue *UnsupportedError
	assert.True(t, errors.As(err, &ue), "float8 is unsupported before Cast-19, got %v", err)
}

func TestClip(t *testing.T) {
	x := vec(ir.Float32, float32(-3), -0.5, 0.5, 3, float32(math.NaN()))
	out, err := callKernel(t, "Clip", 6, []*ir.Tensor{x}, 1, ir.AttrF("max", 1))
	require.NoError(t, err)
	assert.Equal(t, "[-3 -0.5 0.5 1 NaN]", elems(out[0]))
	for _, c := range []struct {
		ins  []*ir.Tensor
		want string
	}{
		{[]*ir.Tensor{x, ir.Scalar(ir.Float32, float32(-1)), ir.Scalar(ir.Float32, float32(1))}, "[-1 -0.5 0.5 1 NaN]"},
		{[]*ir.Tensor{x, nil, ir.Scalar(ir.Float32, float32(0))}, "[-3 -0.5 0 0 NaN]"},
		{[]*ir.Tensor{x, ir.Scalar(ir.Float32, float32(0))}, "[0 0 0.5 3 NaN]"},
		{[]*ir.Tensor{x, ir.Scalar(ir.Float32, float32(2)), ir.Scalar(ir.Float32, float32(1))}, "[1 1 1 1 NaN]"},
		{[]*ir.Tensor{x}, "[-3 -0.5 0.5 3 NaN]"},
		{[]*ir.Tensor{vec(ir.Int8, int8(-128), 5, 127), ir.Scalar(ir.Int8, int8(-3))}, "[-3 5 127]"},
		{[]*ir.Tensor{vec(ir.Int64, int64(math.MaxInt64), 0), nil, ir.Scalar(ir.Int64, int64(math.MaxInt64-1))}, "[9223372036854775806 0]"},
		{[]*ir.Tensor{vec(ir.Uint64, uint64(math.MaxUint64), 0), ir.Scalar(ir.Uint64, uint64(1)), ir.Scalar(ir.Uint64, uint64(1)<<63)}, "[9223372036854775808 1]"},
	} {
		out, err := callKernel(t, "Clip", 13, c.ins, 1)
		require.NoError(t, err, c.want)
		assert.Equal(t, c.want, elems(out[0]))
	}
	_, err = callKernel(t, "Clip", 13, []*ir.Tensor{x, vec(ir.Float32, float32(0), 1)}, 1)
	assert.ErrorContains(t, err, "want a scalar")
	_, err = callKernel(t, "Clip", 13, []*ir.Tensor{x, ir.Scalar(ir.Float64, 0.0)}, 1)
	assert.ErrorContains(t, err, "want float like the input")
}

func TestNumpyRand(t *testing.T) {
	// numpy.random.seed(0); numpy.random.random_sample(5)
	want := []float64{0.5488135039273248, 0.7151893663724195, 0.6027633760716439, 0.5448831829968969, 0.4236547993389047}
	r := newNumpyRand(0)
	for i, w := range want {
		assert.Equal(t, w, r.float64(), "draw %d", i)
	}
	// Past the first 624 words the state is regenerated.
	for range 1000 {
		v := r.float64()
		require.True(t, v >= 0 && v < 1)
	}
}

func TestDropout(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := randTensor(rng, ir.Float32, 3, 4, 5)
	for _, opset := range []int64{7, 10, 13} {
		out, err := callKernel(t, "Dropout", opset, []*ir.Tensor{x}, 2)
		require.NoError(t, err)
		assert.Equal(t, Float64s(x), Float64s(out[0]), "inference mode is the identity")
		assert.Equal(t, filled(60, 1), Float64s(out[1]), "nothing dropped")
		if opset < 10 {
			assert.Equal(t, ir.Float32, out[1].DType)
		} else {
			assert.Equal(t, ir.Bool, out[1].DType)
		}
	}
	ratio := ir.Scalar(ir.Float32, float32(0.75))
	train := FromBools(nil, []bool{true})
	out, err := callKernel(t, "Dropout", 13, []*ir.Tensor{x, ratio, train}, 2, ir.AttrI("seed", 3))
	require.NoError(t, err)
	r := newNumpyRand(3)
	for i, v := range Float64s(x) {
		keep := r.float64() >= 0.75
		assert.Equal(t, keep, Bools(out[1])[i])
		assert.InDelta(t, b2f(keep)*v*4, Float64s(out[0])[i], 1e-6)
	}
	out, err = callKernel(t, "Dropout", 13, []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(0)), train}, 1)
	require.NoError(t, err)
	assert.Equal(t, Float64s(x), Float64s(out[0]), "ratio 0 keeps everything")
	_, err = callKernel(t, "Dropout", 13, []*ir.Tensor{x, ir.Scalar(ir.Float32, float32(1)), train}, 1)
	assert.ErrorContains(t, err, "outside [0, 1)")
	_, err = callKernel(t, "Dropout", 13, []*ir.Tensor{x, ratio, ir.Scalar(ir.Float32, float32(1))}, 1)
	assert.ErrorContains(t, err, "training_mode must be a bool scalar")
}

func TestIsInfIsNaN(t *testing.T) {
	x := vec(ir.Float64, math.Inf(1), math.Inf(-1), math.NaN(), 0, 1e308)
	for _, c := range []struct {
		op    string
		attrs []*ir.Attribute
		want  string
	}{
		{"IsNaN", nil, "[false false true false false]"},
		{"IsInf", nil, "[true true false false false]"},
		{"IsInf", []*ir.Attribute{ir.AttrI("detect_positive", 0)}, "[false true false false false]"},
		{"IsInf", []*ir.Attribute{ir.AttrI("detect_negative", 0)}, "[true false false false false]"},
	} {
		out, err := callKernel(t, c.op, 20, []*ir.Tensor{x}, 1, c.attrs...)
		require.NoError(t, err)
		assert.Equal(t, c.want, elems(out[0]), "%s %v", c.op, c.attrs)
	}
}

// TestElementwiseRows checks each op's rows against the opset versions
// ONNX's node tests use and the newest ONNX opsets.
func TestElementwiseRows(t *testing.T) {
	for op, since := range map[string][]int64{
		"Add": {7}, "Pow": {7, 12}, "Clip": {6, 11}, "Cast": {6, 19, 24}, "Dropout": {7, 10, 12},
		"Softplus": {1}, "Not": {1}, "Max": {6}, "PRelu": {7}, "Equal": {7}, "Where": {9}, "Mish": {18},
	} {
		var got []int64
		for _, s := range All() {
			if s.Name == op && s.Domain == "" {
				got = append(got, s.Since)
			}
		}
		assert.Equal(t, since, got, op)
		_, err := Lookup("", op, 26)
		assert.NoError(t, err, op)
	}
}
