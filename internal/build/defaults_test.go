package build

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// defaultModel is y = Relu(x·W + b) where W is an input with an
// initializer default (IR version 4 on allows it) and b a plain weight.
func defaultModel(w, b *ir.Tensor) *ir.Model {
	g := ir.NewGraph("defaults")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 4)))
	wv := g.AddInitializer("W", w.Clone())
	g.Inputs = append(g.Inputs, wv)
	bv := g.AddInitializer("b", b.Clone())
	y := g.Apply("Relu", []*ir.Value{g.Apply("Add", []*ir.Value{g.Apply("MatMul", []*ir.Value{x, wv}), bv})})
	y.Name = "y"
	g.SetOutputs(y)
	m := ir.NewModel(g, 17)
	m.IRVersion = 8
	return m
}

// TestInitializerDefaults: an input with an initializer default means the
// default when a run does not give it and the fed value when it does. The
// reference does exactly that; an engine built by default compiles the
// input as a constant (agreeing unfed) and refuses a fed value, naming the
// flag; one built with OverridableInitializers agrees with the reference
// both ways.
func TestInitializerDefaults(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	w, b := normalTensor(rng, 4, 3), normalTensor(rng, 3)
	x, fedW := normalTensor(rng, 2, 4), normalTensor(rng, 4, 3)
	explicit, err := reference.New(defaultModel(fedW, b))
	require.NoError(t, err)
	want, err := explicit.Run(map[string]*ir.Tensor{"x": x})
	require.NoError(t, err)
	// The model as built and as read back from ONNX, where the input and
	// its initializer are two entries of one name.
	src, err := onnx.Write(defaultModel(w, b))
	require.NoError(t, err)
	read, err := onnx.Read(src, "")
	require.NoError(t, err)
	var unfed, fed map[string]*ir.Tensor
	for _, m := range []*ir.Model{defaultModel(w, b), read} {
		ref, err := reference.New(m)
		require.NoError(t, err)
		unfed, err = ref.Run(map[string]*ir.Tensor{"x": x})
		require.NoError(t, err)
		fed, err = ref.Run(map[string]*ir.Tensor{"x": x, "W": fedW})
		require.NoError(t, err)
		require.NotNil(t, unfed["y"])
		require.False(t, unfed["y"].Equal(fed["y"]), "the case must tell a fed W from the default")
		assertClose(t, want["y"], fed["y"], "the reference uses the fed W")
	}

	needLLC(t)
	run := func(opts Options, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, *runtime.Engine, error) {
		out, err := BuildModel(defaultModel(w, b), nil, opts)
		require.NoError(t, err)
		e, err := runtime.LoadBytes(out.Engine)
		require.NoError(t, err)
		t.Cleanup(func() { e.Close() })
		ctx, err := e.NewContext(runtime.Options{Threads: 1})
		require.NoError(t, err)
		got, err := ctx.Run(feeds)
		return got, e, err
	}

	got, e, err := run(Options{OptLevel: 2}, map[string]*ir.Tensor{"x": x})
	require.NoError(t, err)
	assertClose(t, unfed["y"], got[e.Outputs()[0].Name], "a folded default")
	require.Len(t, e.Inputs(), 1, "the default is compiled in")
	assert.Equal(t, []string{"W"}, e.Meta.Folded)
	_, _, err = run(Options{OptLevel: 2}, map[string]*ir.Tensor{"x": x, "W": fedW})
	require.ErrorContains(t, err, `input "W" is a constant in this engine`)
	require.ErrorContains(t, err, "--overridable-initializers")

	over := Options{OptLevel: 2, OverridableInitializers: true}
	got, e, err = run(over, map[string]*ir.Tensor{"x": x})
	require.NoError(t, err)
	assertClose(t, unfed["y"], got[e.Outputs()[0].Name], "an overridable input not given")
	require.Len(t, e.Inputs(), 2)
	got, e, err = run(over, map[string]*ir.Tensor{"x": x, "W": fedW})
	require.NoError(t, err)
	assertClose(t, fed["y"], got[e.Outputs()[0].Name], "an overridable input given")
	assert.Contains(t, e.Meta.BuildFlags, "--overridable-initializers")
}

func assertClose(t *testing.T, want, got *ir.Tensor, what string) {
	t.Helper()
	require.Equal(t, want.Dims, got.Dims, what)
	for i, v := range want.Float32s() {
		require.InDelta(t, v, got.Float32s()[i], 1e-5, "%s: element %d", what, i)
	}
}

// A dynamic dim's bound of 0 (--min x=0x64) is refused, naming the flag,
// the dim and the rule, not turned into 1; so is a --opt or --max of 0.
func TestZeroDynamicBoundRefused(t *testing.T) {
	for _, flag := range []string{"--min", "--opt", "--max"} {
		g := ir.NewGraph("relu")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(64))))
		g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
		zero := map[string][]int64{"x": {0, 64}}
		var s Shapes
		switch flag {
		case "--min":
			s.Min = zero
		case "--opt":
			s.Opt = zero
		case "--max":
			s.Max = zero
		}
		_, _, err := s.apply(ir.NewModel(g, 17))
		require.Error(t, err, flag)
		assert.Contains(t, err.Error(), flag+" x: dim 0 (N) is 0", flag)
		assert.Contains(t, err.Error(), "must be at least 1", flag)
	}
}
