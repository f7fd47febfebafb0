package cpu

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// A seeded random draw compiles to the reference's bits: RandomUniformLike
// (float32 and float16), RandomNormal (float32 and float64, Box–Muller's
// ln, √ and cos included), Bernoulli (double and bool) and Multinomial
// (37 classes, e^x built from basic operations too), at 1 and 2 threads,
// unfused and after the O2 passes (whose folding must leave RandomNormal,
// which has no inputs, to run time).
func TestRandomDrawsMatchTheReference(t *testing.T) {
	needLLC(t)
	build := func() (*ir.Model, map[string]*ir.Tensor) {
		g := ir.NewGraph("random")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(3, 37)))
		p := g.AddInput("p", ir.TensorType(ir.Float64, ir.S(5, 40)))
		outs := []*ir.Value{
			g.Apply("RandomUniformLike", []*ir.Value{x}, ir.AttrF("low", -2), ir.AttrF("high", 5), ir.AttrF("seed", 1)),
			g.Apply("RandomUniformLike", []*ir.Value{x}, ir.AttrI("dtype", int64(ir.Float16)), ir.AttrF("seed", 2)),
			g.Apply("RandomNormal", nil, ir.AttrIs("shape", 4, 65), ir.AttrF("mean", 0.5), ir.AttrF("scale", 3), ir.AttrF("seed", 3)),
			g.Apply("RandomNormal", nil, ir.AttrIs("shape", 4, 65), ir.AttrF("mean", 0.5), ir.AttrF("scale", 3), ir.AttrF("seed", 3)),
			g.Apply("RandomNormal", nil, ir.AttrIs("shape", 301), ir.AttrI("dtype", int64(ir.Float64)), ir.AttrF("seed", -7.25)),
			g.Apply("Bernoulli", []*ir.Value{p}, ir.AttrF("seed", 4)),
			g.Apply("Bernoulli", []*ir.Value{p}, ir.AttrI("dtype", int64(ir.Bool)), ir.AttrF("seed", 5)),
			g.Apply("Multinomial", []*ir.Value{x}, ir.AttrI("sample_size", 100), ir.AttrF("seed", 6)),
		}
		for i, o := range outs {
			o.Name = string(rune('a' + i))
		}
		g.SetOutputs(outs...)
		r := rand.New(rand.NewSource(1))
		probs := make([]float64, 200)
		for i := range probs {
			probs[i] = r.Float64()
		}
		return ir.NewModel(g, 22), map[string]*ir.Tensor{"x": randTensor(r, 3, 37), "p": ir.FromSlice(ir.Float64, []int64{5, 40}, probs)}
	}
	for _, o2 := range []bool{false, true} {
		m, feeds := build()
		want := runRef(t, m, feeds)
		if o2 {
			m = optimize(t, m)
		}
		e := compileLoad(t, m, Options{})
		for _, threads := range []int{1, 2} {
			got, err := e.Run(feeds, threads, nil)
			require.NoError(t, err)
			for name, w := range want {
				g := got[name]
				require.NotNil(t, g, name)
				require.Equal(t, w.DType, g.DType, name)
				require.Equal(t, w.Dims, g.Dims, name)
				if !bytes.Equal(w.Raw, g.Raw) {
					t.Errorf("O2 %v, %d threads: output %s is not the reference's draw", o2, threads, name)
				}
			}
		}
	}
}
