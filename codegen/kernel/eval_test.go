package kernel

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// evalOne runs a map kernel of value over a space of n points into a new
// buffer of type d, on the tensors bound, and returns the output.
func evalOne(t *testing.T, d ir.DType, n int64, value *Expr, bound map[*Buffer]*ir.Tensor) *ir.Tensor {
	t.Helper()
	out := NewBuffer("out", d, n)
	res := ir.NewTensor(d, n)
	bufs := map[*Buffer]*ir.Tensor{out: res}
	for b, v := range bound {
		bufs[b] = v
	}
	if err := RunKernel(&Kernel{Name: "k", Out: out, Space: out.Dims, Value: value}, bufs, nil, Schedule{Axis: -1}); err != nil {
		t.Fatalf("%s: %v", value, err)
	}
	return res
}

// ints is a buffer of int64 values with its tensor.
func ints(vals ...int64) (*Buffer, map[*Buffer]*ir.Tensor) {
	b := NewBuffer("x", ir.Int64, int64(len(vals)))
	return b, map[*Buffer]*ir.Tensor{b: ir.FromSlice(ir.Int64, []int64{int64(len(vals))}, vals)}
}

// TestEvalIntegerNumerics holds the evaluator to doc.go's integer rules:
// wrapping at each type's width, division and remainder by zero giving 0,
// MinInt / -1 wrapping, shifts of the width or more giving 0 (a negative
// amount is a huge one), unsigned comparisons, exact wrapping powers.
func TestEvalIntegerNumerics(t *testing.T) {
	pow3to64 := int64(1)
	for range 64 {
		pow3to64 *= 3
	}
	for _, c := range []struct {
		d    ir.DType
		op   func(x, y *Expr) *Expr
		name string
		a, b int64
		want int64
	}{
		{ir.Int8, Add, "add", 100, 100, -56},
		{ir.Uint8, Sub, "sub", 3, 5, 254},
		{ir.Int8, Div, "div", -128, -1, -128},
		{ir.Int8, Rem, "rem", -128, -1, 0},
		{ir.Int64, Div, "div", math.MinInt64, -1, math.MinInt64},
		{ir.Int64, Rem, "rem", math.MinInt64, -1, 0},
		{ir.Int32, Div, "div", 7, 0, 0},
		{ir.Int32, Rem, "rem", 7, 0, 0},
		{ir.Uint32, Div, "div", 7, 0, 0},
		{ir.Int32, Div, "div", -7, 2, -3},
		{ir.Int32, Rem, "rem", -7, 2, -1},
		{ir.Uint8, Div, "div", 200, 3, 66},
		{ir.Uint64, Div, "div", -2, 2, math.MaxInt64}, // (2^64-2)/2
		{ir.Int8, Shl, "shl", 1, 7, -128},
		{ir.Int8, Shl, "shl", 1, 8, 0},
		{ir.Int8, Shr, "shr", -128, 7, -1},
		{ir.Int8, Shr, "shr", -128, 8, 0},
		{ir.Uint8, Shr, "shr", 128, 7, 1},
		{ir.Uint32, Shl, "shl", 1, 32, 0},
		{ir.Int64, Shl, "shl", 1, 64, 0},
		{ir.Int32, Shl, "shl", 1, -1, 0},
		{ir.Int64, Shr, "shr", -8, 1, -4},
		{ir.Uint8, Max, "max", 200, 100, 200},
		{ir.Int8, Max, "max", -56, 100, 100},
		{ir.Uint64, Min, "min", -1, 5, 5},
		{ir.Int32, Pow, "pow", 3, 4, 81},
		{ir.Int32, Pow, "pow", 2, 31, math.MinInt32},
		{ir.Int64, Pow, "pow", 3, 64, pow3to64},
		{ir.Int64, Pow, "pow", -1, -3, -1},
		{ir.Int64, Pow, "pow", 2, -1, 0},
	} {
		x, bound := ints(c.a, c.b)
		v := c.op(CastTo(Load(x, C(0)), c.d), CastTo(Load(x, C(1)), c.d))
		got := evalOne(t, c.d, 1, v, bound).Int64At(0)
		if c.d == ir.Uint64 {
			got = int64(uint64(got))
		}
		if got != c.want {
			t.Errorf("%s %s(%d, %d) = %d, want %d", c.d, c.name, c.a, c.b, got, c.want)
		}
	}
}

// TestEvalFloatToInt: float to integer conversions truncate toward zero
// and saturate into int64 (NaN gives 0; Uint64 keeps values up to 2^64)
// before wrapping to narrower types; to Bool is x != 0.
func TestEvalFloatToInt(t *testing.T) {
	big := uint64(1e19)
	in := []float64{300.7, -300.7, 1e30, -1e30, math.NaN(), -2.9, 1e19, math.Inf(1), -1, 0}
	x := NewBuffer("x", ir.Float64, int64(len(in)))
	bound := map[*Buffer]*ir.Tensor{x: ir.FromSlice(ir.Float64, []int64{int64(len(in))}, in)}
	n := int64(len(in))
	for _, c := range []struct {
		d    ir.DType
		want []int64
	}{
		{ir.Int8, []int64{44, -44, -1, 0, 0, -2, -1, -1, -1, 0}},
		{ir.Int32, []int64{300, -300, -1, 0, 0, -2, -1, -1, -1, 0}},
		{ir.Int64, []int64{300, -300, math.MaxInt64, math.MinInt64, 0, -2, math.MaxInt64, math.MaxInt64, -1, 0}},
		{ir.Uint8, []int64{44, 212, 255, 0, 0, 254, 255, 255, 255, 0}},
		{ir.Uint64, []int64{300, -300, -1, math.MinInt64, 0, -2, int64(big), -1, -1, 0}},
		{ir.Bool, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 0}},
	} {
		got := evalOne(t, c.d, n, CastTo(Load(x, Var(0)), c.d), bound)
		for i, w := range c.want {
			if g := got.Int64At(i); g != w {
				t.Errorf("cast %g to %s = %d, want %d", in[i], c.d, g, w)
			}
		}
	}
}

// TestEvalMaxMinPropagateNaN: Max and Min give NaN when either operand is.
func TestEvalMaxMinPropagateNaN(t *testing.T) {
	nan := math.NaN()
	a := []float64{nan, 1, nan, 1, -2}
	b := []float64{1, nan, nan, 2, -3}
	for _, d := range []ir.DType{ir.Float32, ir.Float64} {
		x, y := NewBuffer("x", ir.Float64, 5), NewBuffer("y", ir.Float64, 5)
		bound := map[*Buffer]*ir.Tensor{x: ir.FromSlice(ir.Float64, []int64{5}, a), y: ir.FromSlice(ir.Float64, []int64{5}, b)}
		xv, yv := CastTo(Load(x, Var(0)), d), CastTo(Load(y, Var(0)), d)
		hi, lo := evalOne(t, d, 5, Max(xv, yv), bound), evalOne(t, d, 5, Min(xv, yv), bound)
		for i := range a {
			wantHi, wantLo := math.Max(a[i], b[i]), math.Min(a[i], b[i])
			if g := hi.Float64At(i); g != wantHi && !(math.IsNaN(g) && math.IsNaN(wantHi)) {
				t.Errorf("%s max(%g, %g) = %g", d, a[i], b[i], g)
			}
			if g := lo.Float64At(i); g != wantLo && !(math.IsNaN(g) && math.IsNaN(wantLo)) {
				t.Errorf("%s min(%g, %g) = %g", d, a[i], b[i], g)
			}
		}
	}
}

// TestEvalHalfPrecision: Float16 and BFloat16 loads widen exactly, stores
// round to nearest even (ties to the even neighbour, overflow to Inf), and
// a cast to either type rounds a float32 value to its precision.
func TestEvalHalfPrecision(t *testing.T) {
	in := []float32{1 + 0x1p-11, 1 + 3*0x1p-11, 65520, 1 + 0x1p-8, 1 + 3*0x1p-8, 0x1p-24}
	n := int64(len(in))
	x := NewBuffer("x", ir.Float32, n)
	bound := map[*Buffer]*ir.Tensor{x: ir.FromSlice(ir.Float32, []int64{n}, in)}
	half := ir.Data[uint16](evalOne(t, ir.Float16, n, Load(x, Var(0)), bound))
	wantHalf := []uint16{0x3c00, 0x3c02, 0x7c00, 0x3c04, 0x3c0c, 0x0001}
	brain := ir.Data[uint16](evalOne(t, ir.BFloat16, n, Load(x, Var(0)), bound))
	wantBrain := []uint16{0x3f80, 0x3f80, 0x4780, 0x3f80, 0x3f82, 0x3380}
	for i := range in {
		if half[i] != wantHalf[i] {
			t.Errorf("%g stored as float16 %#04x, want %#04x", in[i], half[i], wantHalf[i])
		}
		if brain[i] != wantBrain[i] {
			t.Errorf("%g stored as bfloat16 %#04x, want %#04x", in[i], brain[i], wantBrain[i])
		}
	}
	// Loads widen: the halves read back exactly, as float32.
	h := NewBuffer("h", ir.Float16, n)
	back := evalOne(t, ir.Float32, n, Load(h, Var(0)), map[*Buffer]*ir.Tensor{h: ir.FromSlice(ir.Float16, []int64{n}, half)})
	for i := range half {
		if got, want := back.Float64At(i), float64(ir.HalfToFloat32(half[i])); got != want {
			t.Errorf("float16 %#04x loads as %g, want %g", half[i], got, want)
		}
	}
	// A cast to Float16 computes in float32, rounded.
	rounded := evalOne(t, ir.Float32, n, CastTo(Load(x, Var(0)), ir.Float16), bound)
	if got := rounded.Float64At(1); got != 1+0x1p-9 {
		t.Errorf("cast of %g to float16 = %g, want %g", in[1], got, 1+0x1p-9)
	}
}

// TestEvalIndices: LoadOr reads nothing where its condition is false (an
// index outside the buffer there is fine), a Load outside is an error
// naming it, and Index counts negative indices from the end and clamps
// the rest into the buffer.
func TestEvalIndices(t *testing.T) {
	x, bound := ints(10, 20, 30)
	got := evalOne(t, ir.Int64, 5, LoadOr(Lt(Var(0), C(3)), x, C(-1), Var(0)), bound)
	if want := []int64{10, 20, 30, -1, -1}; !equalInts(got, want) {
		t.Errorf("loador gave %v, want %v", got.Int64s(), want)
	}
	got = evalOne(t, ir.Int64, 5, Load(x, Index(Sub(Mul(Var(0), C(2)), C(4)), C(3))), bound)
	if want := []int64{10, 20, 10, 30, 30}; !equalInts(got, want) { // indices -4 -2 0 2 4
		t.Errorf("clamped gather gave %v, want %v", got.Int64s(), want)
	}
	out := NewBuffer("out", ir.Int64, 5)
	bound[out] = ir.NewTensor(ir.Int64, 5)
	err := RunKernel(&Kernel{Name: "k", Out: out, Space: out.Dims, Value: Load(x, Var(0))}, bound, nil, Schedule{Axis: -1})
	if err == nil || !strings.Contains(err.Error(), "reads x[3] at [3]") {
		t.Errorf("a load past the end gave %v", err)
	}
}

func equalInts(t *ir.Tensor, want []int64) bool {
	for i, w := range want {
		if t.Int64At(i) != w {
			return false
		}
	}
	return int(t.Len()) == len(want)
}

// TestEvalSymbols: runtime dimensions come from the symbols given, and a
// missing one is an error that names it.
func TestEvalSymbols(t *testing.T) {
	out := &Buffer{Name: "out", DType: ir.Int64, Dims: []*Expr{Sym("N")}}
	k := &Kernel{Name: "iota", Out: out, Space: out.Dims, Value: Add(Mul(Var(0), C(2)), Sym("N"))}
	res := ir.NewTensor(ir.Int64, 4)
	if err := RunKernel(k, map[*Buffer]*ir.Tensor{out: res}, map[string]int64{"N": 4}, Schedule{Axis: -1}); err != nil {
		t.Fatal(err)
	}
	if want := []int64{4, 6, 8, 10}; !equalInts(res, want) {
		t.Errorf("got %v, want %v", res.Int64s(), want)
	}
	err := RunKernel(k, map[*Buffer]*ir.Tensor{out: res}, nil, Schedule{Axis: -1})
	if err == nil || !strings.Contains(err.Error(), `runtime dimension "N"`) {
		t.Errorf("a missing symbol gave %v", err)
	}
}

// TestEvalMalformed: a malformed kernel is an error that says what is
// wrong, never a panic.
func TestEvalMalformed(t *testing.T) {
	x := NewBuffer("x", ir.Float32, 4)
	out := NewBuffer("out", ir.Float32, 4)
	xs := Load(x, Var(0))
	bad := &Expr{Op: OpAdd, Type: ir.Float32, Args: []*Expr{xs, C(1)}}
	for _, c := range []struct {
		name  string
		k     *Kernel
		s     Schedule
		bound bool // x bound to a float32[4]
		want  string
	}{
		{"no value", &Kernel{Name: "k", Out: out, Space: out.Dims}, Schedule{}, true, "no output or value"},
		{"axis out of the space", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: Load(x, Var(1))}, Schedule{}, true, "axis 1 of a space of 1"},
		{"reduction axis in a map", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: Load(x, RVar(0))}, Schedule{}, true, "reduction axis 0 of 0"},
		{"acc outside post", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: Acc(ir.Float32)}, Schedule{}, true, "outside a reduction's Post"},
		{"hole", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: Hole("h", ir.Float32)}, Schedule{}, true, "host kernel"},
		{"mixed operands", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: bad}, Schedule{}, true, "operands of types"},
		{"stored type", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: Var(0)}, Schedule{}, true, "stores int64 values in float"},
		{"unbound buffer", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: xs}, Schedule{}, false, "buffer x has no tensor"},
		{"store outside", &Kernel{Name: "k", Out: out, Space: out.Dims, Value: xs, Store: []*Expr{Add(Var(0), C(1))}}, Schedule{}, true, "writes out[4] at [4]"},
		{"schedule axis", &Kernel{Name: "k", Out: NewBuffer("s", ir.Float32), Value: Load(x, RVar(0)),
			Reduce: &Reduce{Op: SumOp, Extents: Ints(4)}}, Schedule{VL: 4, Axis: 2, Reduction: true}, true, "reduction axis 2 of 1"},
	} {
		bufs := map[*Buffer]*ir.Tensor{c.k.Out: ir.NewTensor(c.k.Out.DType, 4)}
		if c.k.Out.Rank() == 0 {
			bufs[c.k.Out] = ir.NewTensor(c.k.Out.DType)
		}
		if c.bound {
			bufs[x] = ir.NewTensor(ir.Float32, 4)
		}
		err := RunKernel(c.k, bufs, nil, c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	// A tensor of the wrong shape for its buffer.
	err := RunKernel(&Kernel{Name: "k", Out: out, Space: out.Dims, Value: xs},
		map[*Buffer]*ir.Tensor{out: ir.NewTensor(ir.Float32, 4), x: ir.NewTensor(ir.Float32, 5)}, nil, Schedule{})
	if err == nil || !strings.Contains(err.Error(), "buffer x is float[4], its tensor float[5]") {
		t.Errorf("a misshapen tensor gave %v", err)
	}
}

// sumKernel sums each row of x (rows × n float32) into out.
func sumKernel(x, out *Buffer, n int64) *Kernel {
	return &Kernel{Name: "sum", Out: out, Space: out.Dims, Value: Load(x, Var(0), RVar(0)),
		Reduce: &Reduce{Op: SumOp, Extents: Ints(n)}}
}

// TestEvalReductionLanes: under a schedule with the reduction axis in
// lanes the evaluator sums as the emitted code does (codegen/llvm's
// emitReduce): element i into lane i mod VL, then the lanes as a tree
// while their number is even, the rest in order. The order shows in
// float32 sums that cancel.
func TestEvalReductionLanes(t *testing.T) {
	row := []float32{1e8, 1, -1e8, 1, 3}
	x := NewBuffer("x", ir.Float32, 1, 5)
	out := NewBuffer("out", ir.Float32, 1)
	f32 := func(v float32) float32 { return v }
	for _, c := range []struct {
		s    Schedule
		want float32
	}{
		{Schedule{Axis: -1}, f32(f32(f32(1e8+1)-1e8)+1) + 3},
		{Schedule{VL: 16, Axis: 0}, 4}, // lanes along the space: each point in order
		{Schedule{VL: 2, Axis: 0, Reduction: true}, f32(f32(1e8-1e8)+3) + f32(1+1)},
		{Schedule{VL: 3, Axis: 0, Reduction: true}, f32(f32(1e8+1)+f32(1+3)) + (-1e8)},
		{Schedule{VL: 4, Axis: 0, Reduction: true}, f32(f32(1e8+3)-1e8) + f32(1+1)},
	} {
		res := ir.NewTensor(ir.Float32, 1)
		bufs := map[*Buffer]*ir.Tensor{x: ir.FromSlice(ir.Float32, []int64{1, 5}, row), out: res}
		if err := RunKernel(sumKernel(x, out, 5), bufs, nil, c.s); err != nil {
			t.Fatal(err)
		}
		if got := res.Float32s()[0]; got != c.want {
			t.Errorf("%+v: sum %g, want %g", c.s, got, c.want)
		}
	}
}

// TestEvalScheduledSumsAgree: a scheduled reduction matches the in-order
// one within rounding, and differs from it in some row (the schedule is
// applied, not ignored); a NaN in one lane still gives NaN.
func TestEvalScheduledSumsAgree(t *testing.T) {
	const rows, n = 64, 1000
	r := rand.New(rand.NewSource(3))
	data := make([]float32, rows*n)
	for i := range data {
		data[i] = float32(r.NormFloat64() * 100)
	}
	data[5*n+17] = float32(math.NaN())
	x := NewBuffer("x", ir.Float32, rows, n)
	out := NewBuffer("out", ir.Float32, rows)
	run := func(s Schedule) []float32 {
		res := ir.NewTensor(ir.Float32, rows)
		bufs := map[*Buffer]*ir.Tensor{x: ir.FromSlice(ir.Float32, []int64{rows, n}, data), out: res}
		if err := RunKernel(sumKernel(x, out, n), bufs, nil, s); err != nil {
			t.Fatal(err)
		}
		return res.Float32s()
	}
	plain, lanes := run(Schedule{Axis: -1}), run(CPUSchedule(sumKernel(x, out, n), 16))
	if s := CPUSchedule(sumKernel(x, out, n), 16); !s.Reduction {
		t.Fatalf("CPUSchedule put no reduction in lanes: %+v", s)
	}
	differ := 0
	for i := range plain {
		a, b := float64(plain[i]), float64(lanes[i])
		if i == 5 {
			if !math.IsNaN(a) || !math.IsNaN(b) {
				t.Errorf("row 5 holds a NaN: sums %g and %g", a, b)
			}
			continue
		}
		if math.Abs(a-b) > 1e-5*math.Sqrt(n)*100 {
			t.Errorf("row %d: in order %g, in lanes %g", i, a, b)
		}
		if a != b {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("no row's sum changed under the schedule: the lanes were not applied")
	}
}

// EvalInt sizes buffers whose dims hold floor divisions of symbols
// (W//2 lowers to a select on the remainder's sign), as the evaluator
// computes them.
func TestEvalIntFloorDivisions(t *testing.T) {
	w := Sym("W")
	half := Select(And(Ne(Rem(w, C(2)), C(0)), Lt(w, C(0))), Sub(Div(w, C(2)), C(1)), Div(w, C(2)))
	for _, v := range []int64{1, 2, 7, 160} {
		got, ok := EvalInt(Mul(half, C(3)), map[string]int64{"W": v})
		if !ok || got != v/2*3 {
			t.Errorf("W=%d: got %d, %v; want %d", v, got, ok, v/2*3)
		}
	}
	got, ok := EvalInt(Select(Ge(w, C(5)), C(1), C(2)), map[string]int64{"W": 4})
	if !ok || got != 2 {
		t.Errorf("a select on W >= 5 at W=4: got %d, %v", got, ok)
	}
	if _, ok := EvalInt(half, nil); ok {
		t.Error("an unbound symbol evaluated")
	}
}
