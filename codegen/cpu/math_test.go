package cpu

import (
	"math"
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestTranscendentalULPs measures the compiled Exp, Sigmoid, Tanh and SiLU
// (x·Sigmoid(x), one fused kernel) in units in the last place against
// float64, over a dense sweep of [-100, 100], random values near 0 and
// the edges (±0, ±Inf, NaN, past the overflow points). The op tables
// check them to 1e-4; this holds them to float32 precision, so a cheaper
// polynomial or reciprocal cannot trade accuracy unnoticed.
func TestTranscendentalULPs(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(7))
	var xs []float32
	for i := 0; i <= 40000; i++ {
		xs = append(xs, float32(-100+200*float64(i)/40000))
	}
	for range 4000 {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(10, -6*r.Float64())))
	}
	inf := float32(math.Inf(1))
	xs = append(xs, 0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()),
		88.7, 88.8, 89.5, -87.4, -103.9, -104.1, -150, 1e30, -1e30, 3e38, -3e38)

	tiny := func(float64) float64 { return 0x1p-126 }
	sigmoid := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	ops := []struct {
		name string
		ulps float64
		want func(float64) float64
		// flush is the absolute error allowed besides the ulps: results
		// below float32's normal range (2^-126) may flush to zero, and
		// SiLU inherits that times x.
		flush func(float64) float64
		node  func(g *ir.Graph, x *ir.Value) *ir.Value
	}{
		{"Exp", 2, math.Exp, tiny, func(g *ir.Graph, x *ir.Value) *ir.Value { return g.Apply("Exp", []*ir.Value{x}) }},
		{"Sigmoid", 3, sigmoid, tiny, func(g *ir.Graph, x *ir.Value) *ir.Value { return g.Apply("Sigmoid", []*ir.Value{x}) }},
		{"Tanh", 3, math.Tanh, tiny, func(g *ir.Graph, x *ir.Value) *ir.Value { return g.Apply("Tanh", []*ir.Value{x}) }},
		{"SiLU", 3, func(x float64) float64 { return x * sigmoid(x) }, func(x float64) float64 { return math.Abs(x) * 0x1p-126 }, func(g *ir.Graph, x *ir.Value) *ir.Value {
			return g.Apply("Mul", []*ir.Value{x, g.Apply("Sigmoid", []*ir.Value{x})})
		}},
	}
	g := ir.NewGraph("transcendental")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(int64(len(xs)))))
	var outs []*ir.Value
	for _, op := range ops {
		y := op.node(g, x)
		y.Name = op.name
		outs = append(outs, y)
	}
	g.SetOutputs(outs...)
	m := optimize(t, ir.NewModel(g, 13))
	e := compileLoad(t, m, Options{})
	in := ir.FromSlice(ir.Float32, []int64{int64(len(xs))}, xs)
	got, err := e.Run(map[string]*ir.Tensor{"x": in}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		worst, at := 0.0, float32(0)
		for i, v := range got[op.name].Float32s() {
			want := op.want(float64(xs[i]))
			if u := ulpDistance(v, want, op.flush(float64(xs[i]))); u > worst || math.IsNaN(u) {
				worst, at = u, xs[i]
			}
		}
		t.Logf("%s: worst %.2f ulp at x=%g", op.name, worst, at)
		if !(worst <= op.ulps) {
			t.Errorf("%s: %.2f ulp at x=%g, want ≤ %g", op.name, worst, at, op.ulps)
		}
	}
}

// ulpDistance is |got - want|, less flush, in float32 ulps at want
// (subnormal spacing below the normal range); NaN and infinities must match exactly (0 or
// +Inf ulps).
func ulpDistance(got float32, want, flush float64) float64 {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		if math.IsNaN(want) && math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(want, 0) || math.IsInf(g, 0) || math.Abs(want) > math.MaxFloat32:
		if float64(float32(want)) == g {
			return 0
		}
		return math.Inf(1)
	}
	a := math.Max(math.Abs(want), 0x1p-126)
	_, e := math.Frexp(a)
	return math.Max(0, math.Abs(g-want)-flush) / math.Ldexp(1, e-24)
}
