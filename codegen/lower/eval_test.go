package lower_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// gemmTarget is a target like codegen/cuda's: it claims float32 MatMul,
// Gemm and Conv nodes for a micro-kernel (of any size) and keeps the slots
// in the caller's buffers.
type gemmTarget struct{}

func (gemmTarget) Name() string       { return "test" }
func (gemmTarget) Align() int64       { return 64 }
func (gemmTarget) SlotsInArena() bool { return false }
func (gemmTarget) Micro(n *ir.Node, c *kernel.Ctx, in []*kernel.Buffer, out *kernel.Buffer) any {
	switch n.OpType {
	case "MatMul", "Gemm", "Conv":
		if n.Domain == "" && out.DType == ir.Float32 {
			return n.OpType
		}
	}
	return nil
}

// builder makes a model's initializers and inputs from one random source.
type builder struct {
	g   *ir.Graph
	rng *rand.Rand
}

func newBuilder(seed int64) *builder {
	return &builder{g: ir.NewGraph("m"), rng: rand.New(rand.NewSource(seed))}
}

// weight is an initializer of N(0, 0.3²) values.
func (b *builder) weight(name string, dims ...int64) *ir.Value {
	return b.g.AddInitializer(name, b.random(0.3, dims...))
}

func (b *builder) random(scale float64, dims ...int64) *ir.Tensor {
	d := make([]float32, ir.Product(dims))
	for i := range d {
		d[i] = float32(b.rng.NormFloat64() * scale)
	}
	return ir.FromSlice(ir.Float32, dims, d)
}

func (b *builder) input(name string, dims ...int64) *ir.Value {
	return b.g.AddInput(name, ir.TensorType(ir.Float32, ir.S(dims...)))
}

func (b *builder) op(op string, in []*ir.Value, attrs ...*ir.Attribute) *ir.Value {
	return b.g.AddNode(op, in, 1, attrs...).Outputs[0]
}

func (b *builder) scalar(name string, v float32) *ir.Value {
	return b.g.AddInitializer(name, ir.Scalar(ir.Float32, v))
}

// lowered holds a model's program and what the reference computed on the
// same random N(0,1) inputs.
type lowered struct {
	prog  *lower.Program
	feeds map[string]*ir.Tensor
	want  map[string]*ir.Tensor
}

// lowerModel runs the reference on m, then the O2 passes for cuda-sim and
// the driver for gemmTarget.
func lowerModel(t *testing.T, b *builder, outs ...*ir.Value) *lowered {
	t.Helper()
	return lowerFor(t, gemmTarget{}, b, nil, outs...)
}

// lowerFor is lowerModel for target tg, with the random feeds of the
// float inputs and then set's.
func lowerFor(t *testing.T, tg lower.Target, b *builder, set map[string]*ir.Tensor, outs ...*ir.Value) *lowered {
	t.Helper()
	b.g.SetOutputs(outs...)
	m := ir.NewModel(b.g, 17)
	feeds := map[string]*ir.Tensor{}
	for _, in := range m.Graph.Inputs {
		dims, _ := in.Type.Shape.Ints()
		feeds[in.Name] = b.random(1, dims...)
		if set[in.Name] != nil {
			feeds[in.Name] = set[in.Name]
		}
	}
	ref, err := reference.New(m)
	require.NoError(t, err)
	want, err := ref.Run(feeds)
	require.NoError(t, err)
	opts := build.Options{Target: build.TargetCUDASim, OptLevel: 2, Verify: true}
	if _, ok := tg.(lower.ControlFlow); ok {
		opts.Disabled = []string{"unroll-scans"} // tg compiles the Scans cuda-sim would unroll
	}
	_, _, err = build.Optimize(m, opts)
	require.NoError(t, err)
	p, err := lower.Build(m, tg, lower.Options{})
	require.NoError(t, err)
	return &lowered{prog: p, feeds: feeds, want: want}
}

// check runs the program and compares every output with the reference's.
func (l *lowered) check(t *testing.T) {
	t.Helper()
	got, err := l.prog.Run(l.feeds)
	require.NoError(t, err, "%s", l.prog)
	require.Len(t, got, len(l.want))
	for name, w := range l.want {
		g := got[name]
		require.NotNil(t, g, "output %s", name)
		require.Equal(t, w.DType, g.DType, name)
		require.Equal(t, w.Dims, g.Dims, name)
		for i := 0; i < int(w.Len()); i++ {
			a, b := g.Float64At(i), w.Float64At(i)
			require.False(t, math.IsNaN(a), "%s[%d] was never written\n%s", name, i, l.prog)
			require.LessOrEqual(t, math.Abs(a-b), 1e-5+1e-4*math.Abs(b), "%s[%d]: got %g, want %g\n%s", name, i, a, b, l.prog)
		}
	}
}

// micros counts a program's micro-kernel parts, and those with an
// epilogue.
func micros(p *lower.Program) (all, fused int) {
	for _, st := range p.Steps {
		for _, pt := range st.Parts {
			if pt.Micro != nil {
				all++
				if pt.Micro.Epilogue != nil {
					fused++
				}
			}
		}
	}
	return all, fused
}

// TestRunBasicBlock: a ResNet basic block is two steps, each a Conv
// micro-kernel storing its epilogue (Relu; the residual Add and Relu),
// and computes what the reference does.
func TestRunBasicBlock(t *testing.T) {
	b := newBuilder(1)
	x := b.input("x", 1, 8, 10, 10)
	conv := func(in *ir.Value, name string) *ir.Value {
		return b.op("Conv", []*ir.Value{in, b.weight(name+".w", 8, 8, 3, 3), b.weight(name+".b", 8)}, ir.AttrIs("pads", 1, 1, 1, 1))
	}
	r1 := b.op("Relu", []*ir.Value{conv(x, "c1")})
	y := b.op("Relu", []*ir.Value{b.op("Add", []*ir.Value{conv(r1, "c2"), x})})
	y.Name = "y"
	l := lowerModel(t, b, y)
	assert.Len(t, l.prog.Steps, 2, "%s", l.prog)
	all, fused := micros(l.prog)
	assert.Equal(t, 2, all, "%s", l.prog)
	assert.Equal(t, 2, fused, "%s", l.prog)
	l.check(t)
}

// TestRunLayerNorm: layer normalization as exporters decompose it
// (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add).
func TestRunLayerNorm(t *testing.T) {
	l := layerNorm(t)
	// One step: the two reductions into scratch, the tail reading them.
	require.Len(t, l.prog.Steps, 1, "%s", l.prog)
	assert.Len(t, l.prog.Steps[0].Parts, 3, "%s", l.prog)
	assert.Len(t, l.prog.Steps[0].Temps, 2, "%s", l.prog)
	l.check(t)
}

func layerNorm(t *testing.T) *lowered {
	b := newBuilder(2)
	x := b.input("x", 6, 32)
	axes := ir.AttrIs("axes", -1)
	mean := b.op("ReduceMean", []*ir.Value{x}, axes)
	d := b.op("Sub", []*ir.Value{x, mean})
	v := b.op("ReduceMean", []*ir.Value{b.op("Pow", []*ir.Value{d, b.scalar("two", 2)})}, axes)
	s := b.op("Sqrt", []*ir.Value{b.op("Add", []*ir.Value{v, b.scalar("eps", 1e-5)})})
	n := b.op("Div", []*ir.Value{d, s})
	y := b.op("Add", []*ir.Value{b.op("Mul", []*ir.Value{n, b.weight("gamma", 32)}), b.weight("beta", 32)})
	y.Name = "y"
	return lowerModel(t, b, y)
}

// TestRunBroadcastDAG: an elementwise DAG with broadcasting, whose values
// are read twice, as one step.
func TestRunBroadcastDAG(t *testing.T) {
	b := newBuilder(3)
	a := b.input("a", 2, 3, 4)
	c := b.input("c", 3, 1)
	w := b.weight("w", 4)
	s := b.op("Add", []*ir.Value{a, c})
	u := b.op("Tanh", []*ir.Value{b.op("Mul", []*ir.Value{s, w})})
	y := b.op("Max", []*ir.Value{b.op("Sub", []*ir.Value{u, a}), b.op("Abs", []*ir.Value{s})})
	y.Name = "y"
	l := lowerModel(t, b, y)
	assert.Len(t, l.prog.Steps, 1, "%s", l.prog)
	l.check(t)
}

// TestRunMatMulGelu: MatMul, a bias Add and Gelu as exporters write it
// (x/√2, Erf, +1, ×x, ×0.5): the tail is the micro-kernel's epilogue.
func TestRunMatMulGelu(t *testing.T) {
	b := newBuilder(4)
	x := b.input("x", 8, 32)
	h := b.op("Add", []*ir.Value{b.op("MatMul", []*ir.Value{x, b.weight("w", 32, 16)}), b.weight("bias", 16)})
	e := b.op("Erf", []*ir.Value{b.op("Div", []*ir.Value{h, b.scalar("sqrt2", float32(math.Sqrt2))})})
	g := b.op("Mul", []*ir.Value{b.op("Mul", []*ir.Value{h, b.op("Add", []*ir.Value{e, b.scalar("one", 1)})}), b.scalar("half", 0.5)})
	g.Name = "y"
	l := lowerModel(t, b, g)
	all, fused := micros(l.prog)
	assert.Equal(t, 1, all, "%s", l.prog)
	assert.Equal(t, 1, fused, "%s", l.prog)
	l.check(t)
}

// TestRunViews: a view inside the graph shares its input's bytes (an
// alias); a view that is a graph output is a step copying them.
func TestRunViews(t *testing.T) {
	b := newBuilder(5)
	x := b.input("x", 2, 6)
	shape := func(name string, d ...int64) *ir.Value {
		return b.g.AddInitializer(name, ir.FromSlice(ir.Int64, []int64{int64(len(d))}, d))
	}
	r := b.op("Relu", []*ir.Value{x})
	flat := b.op("Reshape", []*ir.Value{r, shape("s1", 3, 4)})
	flat.Name = "flat"
	z := b.op("Exp", []*ir.Value{b.op("Reshape", []*ir.Value{b.op("Neg", []*ir.Value{x}), shape("s2", 4, 3)})})
	z.Name = "z"
	l := lowerModel(t, b, flat, z)
	copies := 0
	for _, st := range l.prog.Steps {
		if st.Copy {
			copies++
		}
	}
	assert.Equal(t, 1, copies, "%s", l.prog)
	l.check(t)
}

// TestRunConstantOutput: an output the passes fold to a constant is
// copied from the weights by a step of its own.
func TestRunConstantOutput(t *testing.T) {
	b := newBuilder(6)
	x := b.input("x", 3, 5)
	k := b.op("Add", []*ir.Value{b.weight("k1", 2, 3), b.weight("k2", 3)})
	k.Name = "k"
	y := b.op("Sigmoid", []*ir.Value{x})
	y.Name = "y"
	l := lowerModel(t, b, y, k)
	assert.Contains(t, l.prog.String(), "kernel const_out", "%s", l.prog)
	l.check(t)
}

// TestRunRefusesBadInputs: inputs missing, unknown or of another shape
// are errors naming them.
func TestRunRefusesBadInputs(t *testing.T) {
	b := newBuilder(7)
	y := b.op("Relu", []*ir.Value{b.input("x", 2, 3)})
	y.Name = "y"
	l := lowerModel(t, b, y)
	_, err := l.prog.Run(map[string]*ir.Tensor{})
	assert.ErrorContains(t, err, `input "x" is not given`)
	_, err = l.prog.Run(map[string]*ir.Tensor{"x": b.random(1, 3, 2)})
	assert.ErrorContains(t, err, `input "x" is float[3 2]`)
	_, err = l.prog.Run(map[string]*ir.Tensor{"x": l.feeds["x"], "w": l.feeds["x"]})
	assert.ErrorContains(t, err, `"w" is not an input`)
}

// TestCheckRefusesMalformedPrograms: Program.Check (and Run) refuse a part
// that is neither a kernel nor a micro-kernel, and a step reading scratch
// that is not its own.
func TestCheckRefusesMalformedPrograms(t *testing.T) {
	lowerHead := func() *lowered {
		b := newBuilder(8)
		x := b.input("x", 4, 8)
		y := b.op("Sigmoid", []*ir.Value{b.op("Add", []*ir.Value{b.op("MatMul", []*ir.Value{x, b.weight("w", 8, 8)}), b.weight("bias", 8)})})
		y.Name = "y"
		return lowerModel(t, b, y)
	}
	l := lowerHead()
	require.NoError(t, l.prog.Check("memory"))

	st := l.prog.Steps[len(l.prog.Steps)-1]
	st.Parts = append(st.Parts, lower.Part{})
	assert.ErrorContains(t, l.prog.Check("support"), "a part is neither a kernel nor a micro-kernel")
	_, err := l.prog.Run(l.feeds)
	assert.ErrorContains(t, err, "neither a kernel nor a micro-kernel")

	l = lowerHead()
	st = l.prog.Steps[len(l.prog.Steps)-1]
	out := st.Parts[len(st.Parts)-1]
	var dst *kernel.Buffer
	if out.Micro != nil {
		dst = out.Micro.Out
	} else {
		dst = out.Kernel.Out
	}
	stray := &kernel.Buffer{Name: "stray", DType: dst.DType, Dims: dst.Dims, ID: -1}
	idx := kernel.Vars(len(dst.Dims))
	st.Parts = append(st.Parts,
		lower.Part{Kernel: &kernel.Kernel{Name: "fill", Out: stray, Space: dst.Dims, Value: kernel.Load(dst, idx...)}},
		lower.Part{Kernel: &kernel.Kernel{Name: "back", Out: dst, Space: dst.Dims, Value: kernel.Load(stray, idx...)}})
	err = l.prog.Check("memory")
	assert.ErrorContains(t, err, "scratch stray is not the step's")
	_, err = l.prog.Run(l.feeds)
	assert.ErrorContains(t, err, "stray")

	l = layerNorm(t)
	st = l.prog.Steps[0]
	st.Temps = st.Temps[1:]
	assert.ErrorContains(t, l.prog.Check("memory"), "scratch ReduceMean_out0 is not the step's")
	_, err = l.prog.Run(l.feeds)
	assert.ErrorContains(t, err, "ReduceMean_out0 is written but is neither a program value nor the step's scratch")
}
