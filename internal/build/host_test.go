package build

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// hostMixModel is a text pipeline over a dynamic length N, its string
// nodes host steps between native ones: words are looked up (a string
// LabelEncoder, host) and scaled with x (Cast, Mul, Add: native); the
// signs of the result are named (an integer-to-string LabelEncoder, host,
// reading the arena), joined to the upper-cased words (StringNormalizer
// and StringConcat, host only) and matched (RegexFullMatch, host), and
// the matches counted (Cast, ReduceSum: native, reading what a host step
// wrote).
func hostMixModel() *ir.Model {
	g := ir.NewGraph("host_mix")
	n := ir.ShapeOf(ir.Sym("N"))
	words := g.AddInput("words", ir.TensorType(ir.String, n))
	x := g.AddInput("x", ir.TensorType(ir.Float32, n))
	ml := func(op string, in *ir.Value, attrs ...*ir.Attribute) *ir.Value {
		v := g.Apply(op, []*ir.Value{in}, attrs...)
		v.Producer.Domain = "ai.onnx.ml"
		return v
	}
	ids := ml("LabelEncoder", words, ir.AttrSs("keys_strings", "kiln", "onnx", "go", "llvm"),
		ir.AttrIs("values_int64s", 3, -2, 5, 1), ir.AttrI("default_int64", -1))
	f := g.Apply("Cast", []*ir.Value{ids}, ir.AttrI("to", int64(ir.Float32)))
	y := g.Apply("Add", []*ir.Value{g.Apply("Mul", []*ir.Value{f, x}), x})
	pos := g.Apply("Cast", []*ir.Value{g.Apply("Greater", []*ir.Value{y, g.AddInitializer("zero", ir.FromSlice(ir.Float32, []int64{}, []float32{0}))})}, ir.AttrI("to", int64(ir.Int64)))
	label := ml("LabelEncoder", pos, ir.AttrIs("keys_int64s", 0, 1), ir.AttrSs("values_strings", "neg", "pos"), ir.AttrS("default_string", "?"))
	upper := g.Apply("StringNormalizer", []*ir.Value{words}, ir.AttrS("case_change_action", "UPPER"))
	joined := g.Apply("StringConcat", []*ir.Value{upper, label})
	match := g.Apply("RegexFullMatch", []*ir.Value{joined}, ir.AttrS("pattern", "[A-Z]+pos"))
	count := g.Apply("ReduceSum", []*ir.Value{g.Apply("Cast", []*ir.Value{match}, ir.AttrI("to", int64(ir.Int64)))}, ir.AttrI("keepdims", 0))
	y.Name, label.Name, joined.Name, count.Name = "y", "label", "joined", "count"
	g.SetOutputs(y, label, joined, count)
	m := ir.NewModel(g, 20)
	m.IRVersion = 9
	m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: "ai.onnx.ml", Version: 4})
	return m
}

// An engine whose graph mixes string nodes (host steps) and native ones
// gives the reference executor's outputs at several lengths and thread
// counts, through Run and RunProfiled.
func TestHostStepsMatchReference(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	out, err := BuildModel(hostMixModel(), nil, Options{OptLevel: 2})
	require.NoError(t, err)
	eng, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	ref, err := reference.New(hostMixModel())
	require.NoError(t, err)
	vocab := []string{"kiln", "onnx", "go", "llvm", "tensor", "Kiln", ""}
	rng := rand.New(rand.NewSource(7))
	for _, n := range []int{1, 6, 19} {
		words := &ir.Tensor{DType: ir.String, Dims: []int64{int64(n)}}
		xs := make([]float32, n)
		for i := range xs {
			words.Strings = append(words.Strings, vocab[rng.Intn(len(vocab))])
			xs[i] = rng.Float32()*4 - 2
		}
		feeds := map[string]*ir.Tensor{"words": words, "x": ir.FromSlice(ir.Float32, []int64{int64(n)}, xs)}
		want, err := ref.Run(feeds)
		require.NoError(t, err)
		for _, threads := range []int{1, 2} {
			ctx, err := eng.NewContext(runtime.Options{Threads: threads})
			require.NoError(t, err)
			prof, err := eng.NewProfile()
			require.NoError(t, err)
			for _, profiled := range []bool{false, true} {
				var got map[string]*ir.Tensor
				if profiled {
					got, err = ctx.RunProfiled(feeds, prof)
				} else {
					got, err = ctx.Run(feeds)
				}
				require.NoError(t, err)
				for name, w := range want {
					detail, ok := conformance.Compare(w, got[name], conformance.DefaultTolerance)
					assert.True(t, ok, "N=%d, %d threads, profiled %v: %s: %s", n, threads, profiled, name, detail)
				}
			}
		}
	}
}

// A node that cannot run where its value lives is refused by name: a
// native node reading what ImageDecoder decodes (a shape only the data
// gives), and a string op inside a Loop body (host steps run between
// runs of the code).
func TestHostStepsRefused(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	g := ir.NewGraph("decode")
	img := g.Apply("ImageDecoder", []*ir.Value{g.AddInput("bytes", ir.TensorType(ir.Uint8, ir.S(64)))})
	g.SetOutputs(g.Apply("ReduceSum", []*ir.Value{g.Apply("Cast", []*ir.Value{img}, ir.AttrI("to", int64(ir.Float32)))}, ir.AttrI("keepdims", 0)))
	_, err := BuildModel(ir.NewModel(g, 20), nil, Options{OptLevel: 2})
	var ue ops.UnsupportedErrors
	require.True(t, errors.As(err, &ue), "%v", err)
	assert.ErrorContains(t, err, "Cast")
	assert.ErrorContains(t, err, "which ImageDecoder computes on the host at a shape only the data gives")

	// A Loop carrying strings, and one whose body computes on the
	// graph's strings.
	for _, carried := range []bool{true, false} {
		body := ir.NewGraph("body")
		body.AddInput("i", ir.TensorType(ir.Int64, ir.S()))
		cond := body.AddInput("cond", ir.TensorType(ir.Bool, ir.S()))
		g = ir.NewGraph("loop")
		trip := g.AddInitializer("trip", ir.FromSlice(ir.Int64, []int64{}, []int64{2}))
		words := g.AddInput("words", ir.TensorType(ir.String, ir.S(2)))
		var loop *ir.Value
		if carried {
			s := body.AddInput("s", ir.TensorType(ir.String, ir.S(2)))
			body.SetOutputs(body.Apply("Identity", []*ir.Value{cond}), body.Apply("StringConcat", []*ir.Value{s, s}))
			loop = g.Apply("Loop", []*ir.Value{trip, nil, words}, ir.AttrG("body", body))
		} else {
			same := body.Apply("Equal", []*ir.Value{body.Apply("StringConcat", []*ir.Value{words, words}), words})
			body.SetOutputs(body.Apply("Identity", []*ir.Value{cond}), body.Apply("Cast", []*ir.Value{same}, ir.AttrI("to", int64(ir.Int64))))
			loop = g.Apply("Loop", []*ir.Value{trip, nil}, ir.AttrG("body", body))
		}
		g.SetOutputs(loop)
		_, err = BuildModel(ir.NewModel(g, 20), nil, Options{OptLevel: 2})
		require.Error(t, err)
		if carried {
			assert.ErrorContains(t, err, "Loop (opset 20): it reads \"words\", a string[2], which engines keep on the host")
		} else {
			assert.ErrorContains(t, err, "StringConcat (opset 20)")
			assert.ErrorContains(t, err, "inside an If, Loop or Scan")
		}
	}
}

// hostSeqModel moves sequences between host steps and native code:
// x's rows split into a sequence (SplitToSequence, reading the io slot),
// a native Relu of a row appended (SequenceInsert), its length scaled
// natively (SequenceLength into the arena, then Mul); an element of the
// sequence input s picked by the index input (SequenceAt, whose static
// shape lets native code read it) and added to b; the grown sequence
// and its concatenation (a shape only the data gives) are outputs.
func hostSeqModel() *ir.Model {
	g := ir.NewGraph("host_seq")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(3))))
	elem := ir.TensorType(ir.Float32, ir.S(3))
	s := g.AddInput("s", ir.Type{Kind: ir.SequenceKind, Inner: &elem})
	idx := g.AddInput("idx", ir.TensorType(ir.Int64, ir.S()))
	b := g.AddInput("b", ir.TensorType(ir.Float32, ir.S(3)))
	rows := g.Apply("SplitToSequence", []*ir.Value{x}, ir.AttrI("axis", 0), ir.AttrI("keepdims", 0))
	picked := g.Apply("SequenceAt", []*ir.Value{s, idx})
	sum := g.Apply("Add", []*ir.Value{picked, b})
	grown := g.Apply("SequenceInsert", []*ir.Value{rows, g.Apply("Relu", []*ir.Value{sum})})
	count := g.Apply("Mul", []*ir.Value{g.Apply("SequenceLength", []*ir.Value{grown}), g.AddInitializer("ten", ir.FromSlice(ir.Int64, []int64{}, []int64{10}))})
	flat := g.Apply("ConcatFromSequence", []*ir.Value{grown}, ir.AttrI("axis", 0))
	sum.Name, grown.Name, count.Name, flat.Name = "sum", "grown", "count", "flat"
	g.SetOutputs(sum, grown, count, flat)
	m := ir.NewModel(g, 18)
	m.IRVersion = 8
	return m
}

// Sequences as engine inputs and outputs, through host steps and native
// code, give the reference executor's outputs.
func TestHostSequencesMatchReference(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	out, err := BuildModel(hostSeqModel(), nil, Options{OptLevel: 2})
	require.NoError(t, err)
	eng, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	ref, err := reference.New(hostSeqModel())
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(11))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = rng.Float32()*4 - 2
		}
		return v
	}
	for _, n := range []int{1, 4} {
		var elems []*ir.Tensor
		for range 3 {
			elems = append(elems, ir.FromSlice(ir.Float32, []int64{3}, vec(3)))
		}
		feeds := map[string]*ir.Tensor{
			"x": ir.FromSlice(ir.Float32, []int64{int64(n), 3}, vec(3*n)), "s": ir.NewSequence(ir.Float32, elems),
			"idx": ir.FromSlice(ir.Int64, []int64{}, []int64{int64(n % 3)}), "b": ir.FromSlice(ir.Float32, []int64{3}, vec(3)),
		}
		want, err := ref.Run(feeds)
		require.NoError(t, err)
		ctx, err := eng.NewContext(runtime.Options{Threads: 2})
		require.NoError(t, err)
		got, err := ctx.Run(feeds)
		require.NoError(t, err)
		for name, w := range want {
			detail, ok := conformance.Compare(w, got[name], conformance.DefaultTolerance)
			assert.True(t, ok, "N=%d: %s: %s", n, name, detail)
		}
		// A tensor where the engine takes a sequence is refused by name.
		feeds["s"] = elems[0]
		_, err = ctx.Run(feeds)
		assert.ErrorContains(t, err, `input "s": got`)
		assert.ErrorContains(t, err, `the engine takes seq(float[])`)
	}
}
