package ops

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// The reproductions of issue 8: static shapes whose byte size overflows
// int64 or passes the tensor limit are inference errors naming the value,
// its type and the limit, before anything is allocated or evaluated.

func requireLimit(t *testing.T, err error, wants ...string) {
	t.Helper()
	require.Error(t, err)
	var le *ir.LimitError
	require.True(t, errors.As(err, &le), "want a *ir.LimitError, got %v", err)
	for _, w := range wants {
		assert.Contains(t, err.Error(), w)
	}
}

func TestInferRefusesHugeInput(t *testing.T) {
	for _, c := range []struct {
		dims []int64
		want string
	}{
		{[]int64{2147483648, 2147483648}, "overflows int64"},                    // 2^64 bytes: once "tensors total 0", then SIGSEGV
		{[]int64{1 << 33}, "34359738368 bytes (32 GiB), over the tensor limit"}, // once Go's fatal "out of memory"
		{[]int64{1 << 61}, "overflows int64"},                                   // once "makeslice: len out of range"
	} {
		g := ir.NewGraph("huge")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(c.dims...)))
		g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
		_, err := InferShapes(ir.NewModel(g, 17))
		requireLimit(t, err, `input "x"`, ir.TensorType(ir.Float32, ir.S(c.dims...)).String(), c.want, ir.FlagMaxTensorBytes)
	}
}

func TestInferRefusesHugeExpand(t *testing.T) {
	g := ir.NewGraph("expand")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	shape := g.AddInitializer("shape", ir.FromSlice(ir.Int64, []int64{2}, []int64{2147483648, 2147483648}))
	y := g.Apply("Expand", []*ir.Value{x, shape})
	y.Name = "y"
	g.SetOutputs(y)
	_, err := InferShapes(ir.NewModel(g, 17))
	requireLimit(t, err, `output "y"`, "float[2147483648,2147483648]", "overflows")
}

// A constant huge value was evaluated at compile time when its element
// count wrapped to a small number; now its size is checked first.
func TestInferRefusesHugeConstantOfShape(t *testing.T) {
	g := ir.NewGraph("cos")
	shape := g.AddInitializer("shape", ir.FromSlice(ir.Int64, []int64{2}, []int64{1 << 32, 1 << 32}))
	y := g.Apply("ConstantOfShape", []*ir.Value{shape})
	g.SetOutputs(y)
	_, err := InferShapes(ir.NewModel(g, 17))
	requireLimit(t, err, "float[4294967296,4294967296]", "overflows")
}

func TestInferWithinRaisedLimit(t *testing.T) {
	g := ir.NewGraph("big")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1<<33)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	m := ir.NewModel(g, 17)
	_, err := InferShapesWithin(m, ir.Limits{MaxTensorBytes: 1 << 35})
	require.NoError(t, err, "32 GiB fits a 32 GiB limit")
	_, err = InferShapesWithin(m, ir.Limits{MaxTensorBytes: 1<<35 - 1})
	requireLimit(t, err, "over the tensor limit of 34359738367 bytes")
	// A lower limit catches an output even when the input fits.
	g = ir.NewGraph("tile")
	x = g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1024)))
	reps := g.AddInitializer("reps", ir.FromSlice(ir.Int64, []int64{1}, []int64{1024}))
	y := g.Apply("Tile", []*ir.Value{x, reps})
	g.SetOutputs(y)
	_, err = InferShapesWithin(ir.NewModel(g, 17), ir.Limits{MaxTensorBytes: 1 << 20})
	requireLimit(t, err, "Tile", "float[1048576]", "4194304 bytes (4 MiB), over the tensor limit of 1048576 bytes (1 MiB)")
}

func TestRunTypesSeesRunTimeShapes(t *testing.T) {
	g := ir.NewGraph("dyn")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1)))
	shape := g.AddInput("shape", ir.TensorType(ir.Int64, ir.S(2)))
	n := g.AddNode("Expand", []*ir.Value{x, shape}, 1)
	s, err := Lookup("", "Expand", 17)
	require.NoError(t, err)
	types, err := RunTypes(s, n, 17, Opsets{"": 17}, []*ir.Tensor{
		ir.FromSlice(ir.Float32, []int64{1}, []float32{0.5}),
		ir.FromSlice(ir.Int64, []int64{2}, []int64{3, 1 << 40}),
	})
	require.NoError(t, err)
	assert.Equal(t, "float[3,1099511627776]", types[0].String())
	requireLimit(t, ir.Limits{}.CheckType("y", types[0]), "over the tensor limit")
}

func TestOpsetNewerThanRegistry(t *testing.T) {
	g := ir.NewGraph("op99")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g.SetOutputs(g.Apply("Relu", []*ir.Value{x}))
	m := ir.NewModel(g, 99)
	_, err := InferShapes(m)
	var oe *UnsupportedError
	require.True(t, errors.As(err, &oe), "got %v", err)
	assert.Equal(t, `unsupported: opset 99 for domain "": kiln supports up to 26`, err.Error())

	m.OpsetImports = []ir.OpsetImport{{Domain: "ai.onnx", Version: 26}, {Domain: ir.KilnDomain, Version: 2}}
	_, err = InferShapes(m)
	assert.EqualError(t, err, `unsupported: opset 2 for domain "kiln": kiln supports up to 1`)

	// A domain kiln does not implement may be imported at any version;
	// using one of its ops is unsupported, as before.
	m.OpsetImports = []ir.OpsetImport{{Domain: "", Version: 17}, {Domain: "com.example", Version: 1000}}
	_, err = InferShapes(m)
	require.NoError(t, err)
	g.AddNode("Custom", []*ir.Value{x}, 1).Domain = "com.example"
	_, err = InferShapes(m)
	var ue *UnsupportedError
	require.True(t, errors.As(err, &ue), "got %v", err)
	assert.True(t, strings.Contains(err.Error(), "com.example.Custom"), err.Error())
}

// Every row is within the newest opset its domain claims, and every
// implemented domain claims one.
func TestNewestOpsetCoversRows(t *testing.T) {
	for _, s := range All() {
		newest, ok := NewestOpset(s.Domain)
		require.True(t, ok, "domain %q of %s has no newest opset", s.Domain, s.Name)
		assert.LessOrEqual(t, s.Since, newest, "%s.%s", s.Domain, s.Name)
	}
}
