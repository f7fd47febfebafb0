package cpu

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// denseBlock is a DenseNet-style block: a BatchNormalization after a
// Concat (which cannot fold into a Conv), then the reductions and
// normalizations a classifier head uses, over a batch of n (a symbolic
// dim N when n is 0).
func denseBlock(r *rand.Rand, n int64) *ir.Model {
	g := ir.NewGraph("dense")
	batch := ir.D(n)
	if n == 0 {
		batch = ir.Sym("N")
	}
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(batch, ir.D(4), ir.D(6), ir.D(6))))
	c := g.Apply("Relu", []*ir.Value{g.Apply("Conv", []*ir.Value{x, g.AddInitializer("w", randTensor(r, 4, 4, 3, 3))},
		ir.AttrIs("pads", 1, 1, 1, 1))})
	cat := g.Apply("Concat", []*ir.Value{x, c}, ir.AttrI("axis", 1))
	scale, bias, mean := randTensor(r, 8), randTensor(r, 8), randTensor(r, 8)
	variance := randTensor(r, 8)
	for i, v := range ir.Data[float32](variance) {
		ir.Data[float32](variance)[i] = v*v + 0.1
	}
	bn := g.Apply("BatchNormalization", []*ir.Value{cat, g.AddInitializer("scale", scale), g.AddInitializer("bias", bias),
		g.AddInitializer("mean", mean), g.AddInitializer("var", variance)})
	act := g.Apply("Relu", []*ir.Value{bn})
	pooled := g.Apply("ReduceMean", []*ir.Value{act, g.AddInitializer("axes", i64s(2, 3))}, ir.AttrI("keepdims", 0))
	ln := g.Apply("LayerNormalization", []*ir.Value{pooled, g.AddInitializer("ln_scale", randTensor(r, 8))})
	y := g.Apply("Softmax", []*ir.Value{ln})
	y.Name = "y"
	g.SetOutputs(y)
	return ir.NewModel(g, 18)
}

// TestStandaloneBatchNorm compiles a BatchNormalization that follows a
// Concat, through the O2 pipeline, with a static and a dynamic batch.
func TestStandaloneBatchNorm(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	res := checkO2(t, denseBlock(rand.New(rand.NewSource(3)), 2), map[string]*ir.Tensor{"x": randTensor(r, 2, 4, 6, 6)}, 1e-5)
	if !slices.ContainsFunc(res.Kernels, func(k string) bool { return strings.HasSuffix(k, "BatchNormalization") }) {
		t.Fatalf("no BatchNormalization step in %v: the test no longer compiles one", res.Kernels)
	}

	m := optimize(t, denseBlock(rand.New(rand.NewSource(3)), 0))
	e := compileLoad(t, m, Options{Profile: map[string]DimRange{"N": {Min: 1, Opt: 1, Max: 4}}})
	for _, batch := range []int64{1, 3} {
		in := map[string]*ir.Tensor{"x": randTensor(r, batch, 4, 6, 6)}
		want := runRef(t, denseBlock(rand.New(rand.NewSource(3)), 0), in)
		got, err := e.Run(in, 2, nil)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if err := compareOut(got["y"], want["y"]); err != nil {
			t.Errorf("batch %d: %v", batch, err)
		}
	}
}
