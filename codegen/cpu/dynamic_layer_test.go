package cpu

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// dynamicLayerNet has a dynamic batch N through ops the kernel layer
// lowers (ConvTranspose, MaxPool with Indices, a 3-D Conv, GRU): their
// kernels read N at run time.
func dynamicLayerNet(r *rand.Rand) *ir.Model {
	g := ir.NewGraph("dynlayer")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(2), ir.D(5), ir.D(6))))
	up := g.Apply("ConvTranspose", []*ir.Value{x, g.AddInitializer("wt", randTensor(r, 2, 3, 3, 3)), g.AddInitializer("bt", randTensor(r, 3))},
		ir.AttrIs("strides", 2, 2), ir.AttrIs("pads", 1, 1, 0, 0))
	pool := &ir.Node{Name: "pool", OpType: "MaxPool", Inputs: []*ir.Value{up}, Attrs: []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3), ir.AttrIs("pads", 1, 1, 1, 1)}}
	y, idx := &ir.Value{Name: "y", Producer: pool}, &ir.Value{Name: "idx", Producer: pool}
	pool.Outputs = []*ir.Value{y, idx}
	g.Nodes = append(g.Nodes, pool)
	v := g.AddInput("v", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(2), ir.D(3), ir.D(4), ir.D(3))))
	c3 := g.Apply("Conv", []*ir.Value{v, g.AddInitializer("w3", randTensor(r, 3, 2, 2, 3, 2))}, ir.AttrIs("pads", 1, 1, 0, 0, 1, 1))
	s := g.AddInput("s", ir.TensorType(ir.Float32, ir.ShapeOf(ir.D(3), ir.Sym("N"), ir.D(4))))
	gru := &ir.Node{Name: "gru", OpType: "GRU", Inputs: []*ir.Value{s, g.AddInitializer("wg", randTensor(r, 1, 6, 4)), g.AddInitializer("rg", randTensor(r, 1, 6, 2))},
		Attrs: []*ir.Attribute{ir.AttrI("hidden_size", 2)}}
	gy, gh := &ir.Value{Name: "gy", Producer: gru}, &ir.Value{Name: "gh", Producer: gru}
	gru.Outputs = []*ir.Value{gy, gh}
	g.Nodes = append(g.Nodes, gru)
	g.SetOutputs(y, idx, c3, gy, gh)
	return ir.NewModel(g, 14)
}

func TestDynamicBatchLayerOps(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(3))
	m := optimize(t, dynamicLayerNet(rand.New(rand.NewSource(7))))
	e := compileLoad(t, m, Options{Winograd: WinogradOff, Profile: map[string]DimRange{"N": {Min: 1, Opt: 2, Max: 5}}})
	for _, batch := range []int64{1, 5, 3} {
		in := map[string]*ir.Tensor{"x": randTensor(r, batch, 2, 5, 6), "v": randTensor(r, batch, 2, 3, 4, 3), "s": randTensor(r, 3, batch, 4)}
		want := runRef(t, dynamicLayerNet(rand.New(rand.NewSource(7))), in)
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
}

// A kernel-layer step inside a per-sample run (a MatMul's GELU, run in
// place after it) over a leading dim that is an expression (2*N, from a
// Concat on the batch axis) would cover too much: the build refuses it,
// naming the dim, or the engine matches the reference at every size.
func TestPerSampleExpressionLead(t *testing.T) {
	needLLC(t)
	model := func() *ir.Model {
		r := rand.New(rand.NewSource(2))
		g := ir.NewGraph("lead")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(4), ir.D(16))))
		a := g.Apply("MatMul", []*ir.Value{g.Apply("Concat", []*ir.Value{x, x}, ir.AttrI("axis", 0)), g.AddInitializer("w", randTensor(r, 16, 32))})
		half := g.AddInitializer("half", ir.Scalar(ir.Float32, float32(0.5)))
		one := g.AddInitializer("one", ir.Scalar(ir.Float32, float32(1)))
		sq2 := g.AddInitializer("sq2", ir.Scalar(ir.Float32, float32(math.Sqrt2)))
		gelu := g.Apply("Mul", []*ir.Value{g.Apply("Mul", []*ir.Value{a, g.Apply("Add", []*ir.Value{g.Apply("Erf", []*ir.Value{g.Apply("Div", []*ir.Value{a, sq2})}), one})}), half})
		y := g.Apply("MatMul", []*ir.Value{gelu, g.AddInitializer("w2", randTensor(r, 32, 8))})
		y.Name = "y"
		g.SetOutputs(y)
		return ir.NewModel(g, 13)
	}
	opts := Options{Winograd: WinogradOff, Profile: map[string]DimRange{"N": {Min: 1, Opt: 1, Max: 3}}}
	if _, err := Compile(optimize(t, model()), opts); err != nil {
		if !strings.Contains(err.Error(), "not a plain symbol") {
			t.Fatalf("Compile: %v, want the refusal naming the dim", err)
		}
		return
	}
	e := compileLoad(t, optimize(t, model()), opts)
	r := rand.New(rand.NewSource(3))
	var feeds []map[string]*ir.Tensor
	for _, batch := range []int64{1, 3, 2} {
		feeds = append(feeds, map[string]*ir.Tensor{"x": randTensor(r, batch, 4, 16)})
	}
	checkAtSizes(t, e, model, feeds)
}
