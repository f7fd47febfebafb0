package cpu

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// dynamicNet is a small conv net with a dynamic batch dim N: convolution,
// batch norm folded by the passes, pooling, a residual, a flatten and a
// classifier, as torchvision exports one with a dynamic batch axis.
func dynamicNet(r *rand.Rand) *ir.Model {
	g := ir.NewGraph("dyn")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(3), ir.D(12), ir.D(12))))
	w1 := g.AddInitializer("w1", randTensor(r, 8, 3, 3, 3))
	c1 := g.Apply("Conv", []*ir.Value{x, w1}, ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrIs("strides", 2, 2))
	r1 := g.Apply("Relu", []*ir.Value{c1})
	w2 := g.AddInitializer("w2", randTensor(r, 8, 8, 3, 3))
	c2 := g.Apply("Conv", []*ir.Value{r1, w2}, ir.AttrIs("pads", 1, 1, 1, 1))
	s := g.Apply("Add", []*ir.Value{c2, r1})
	r2 := g.Apply("Relu", []*ir.Value{s})
	mp := g.Apply("MaxPool", []*ir.Value{r2}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
	sm := g.Apply("Softmax", []*ir.Value{mp}, ir.AttrI("axis", 1))
	gp := g.Apply("GlobalAveragePool", []*ir.Value{sm})
	f := g.Apply("Flatten", []*ir.Value{gp})
	wf := g.AddInitializer("wf", randTensor(r, 5, 8))
	bf := g.AddInitializer("bf", randTensor(r, 5))
	y := g.Apply("Gemm", []*ir.Value{f, wf, bf}, ir.AttrI("transB", 1))
	g.SetOutputs(y)
	return ir.NewModel(g, 13)
}

// TestDynamicBatch compiles a dynamic-batch net once and runs it at
// several batches inside its range; a batch outside is refused.
func TestDynamicBatch(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(7))
	m := optimize(t, dynamicNet(r))
	res, err := Compile(m, Options{Winograd: WinogradOff, Profile: map[string]DimRange{"N": {Min: 1, Opt: 1, Max: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Symbols) != 1 || res.Symbols[0].Name != "N" || res.Symbols[0].Max != 6 {
		t.Fatalf("symbols %+v", res.Symbols)
	}
	e, err := Load(res)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref := dynamicNet(rand.New(rand.NewSource(7)))
	for _, batch := range []int64{1, 4, 6, 2} {
		in := map[string]*ir.Tensor{"x": randTensor(r, batch, 3, 12, 12)}
		refm := dynamicNet(rand.New(rand.NewSource(7)))
		_ = ref
		want := runRef(t, refm, in)
		for _, threads := range []int{1, 2} {
			got, err := e.Run(in, threads, nil)
			if err != nil {
				t.Fatalf("batch %d: %v", batch, err)
			}
			for name, w := range want {
				if err := compareOut(got[name], w); err != nil {
					t.Errorf("batch %d, %d threads, %s: %v", batch, threads, name, err)
				}
			}
		}
	}
	_, err = e.Run(map[string]*ir.Tensor{"x": randTensor(r, 7, 3, 12, 12)}, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "N is 7") || !strings.Contains(err.Error(), "1 to 6") {
		t.Fatalf("batch 7: want a refusal naming the dim and range, got %v", err)
	}
}

// TestDynamicSequence: batch and sequence both dynamic, as an attention
// block exports: projections, scores over the sequence, softmax, the
// weighted sum and a layer-norm-like reduction.
func TestDynamicSequence(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(3))
	w := randTensor(r, 16, 16)
	b := randTensor(r, 16)
	model := func() *ir.Model {
		g := ir.NewGraph("attn")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("B"), ir.Sym("S"), ir.D(16))))
		p := g.Apply("MatMul", []*ir.Value{x, g.AddInitializer("w", w.Clone())})
		p = g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{p, g.AddInitializer("b", b.Clone())})})
		kt := g.Apply("Transpose", []*ir.Value{x}, ir.AttrIs("perm", 0, 2, 1))
		sc := g.Apply("Softmax", []*ir.Value{g.Apply("MatMul", []*ir.Value{p, kt})}, ir.AttrI("axis", -1))
		o := g.Apply("MatMul", []*ir.Value{sc, x})
		mean := g.Apply("ReduceMean", []*ir.Value{o}, ir.AttrIs("axes", -1))
		g.SetOutputs(g.Apply("Sub", []*ir.Value{o, mean}))
		return ir.NewModel(g, 13)
	}
	e := compileLoad(t, optimize(t, model()), Options{Winograd: WinogradOff})
	for _, bs := range [][2]int64{{1, 1}, {1, 7}, {3, 5}, {2, 32}} {
		in := map[string]*ir.Tensor{"x": randTensor(r, bs[0], bs[1], 16)}
		want := runRef(t, model(), in)
		got, err := e.Run(in, 2, nil)
		if err != nil {
			t.Fatalf("%v: %v", bs, err)
		}
		for name, w := range want {
			if err := compareOut(got[name], w); err != nil {
				t.Errorf("B, S = %v: %s: %v", bs, name, err)
			}
		}
	}
}
