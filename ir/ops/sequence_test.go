package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// The sequence and optional families' tests: kernels against Go slice
// operations and naive index loops, inference of sequence types, and the
// errors the node tests never reach.

// runSeqKernel runs op's kernel on values that may be sequences, without
// comparing with inference (whose element dims are unknown where a
// kernel's are static).
func runSeqKernel(op string, opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) (*ir.Tensor, error) {
	s, err := Lookup("", op, opset)
	if err != nil {
		return nil, err
	}
	n := &ir.Node{OpType: op, Attrs: attrs}
	for i, in := range ins {
		var v *ir.Value
		if in != nil {
			v = &ir.Value{Name: fmt.Sprint("in", i), Type: in.Type()}
		}
		n.Inputs = append(n.Inputs, v)
	}
	n.Outputs = []*ir.Value{{Name: "out"}}
	if err := s.CheckNode(n); err != nil {
		return nil, err
	}
	c := NewKernelContext(s, n, opset, ins)
	if err := s.Run(c); err != nil {
		return nil, err
	}
	return c.Outputs[0], nil
}

func randSeq(rng *rand.Rand, n int, dims ...int64) *ir.Tensor {
	elems := make([]*ir.Tensor, n)
	for i := range elems {
		elems[i] = randTensor(rng, ir.Float32, dims...)
	}
	return ir.NewSequence(ir.Float32, elems)
}

func TestSequenceInsertEraseAtMatchSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := randSeq(rng, 4, 2, 3)
	x := randTensor(rng, ir.Float32, 5)
	for pos := int64(-4); pos <= 4; pos++ {
		got, err := runSeqKernel("SequenceInsert", 11, []*ir.Tensor{s, x, ir.Scalar(ir.Int64, pos)})
		require.NoError(t, err)
		at := int(pos)
		if at < 0 {
			at += 4
		}
		want := append(append(append([]*ir.Tensor{}, s.Elems[:at]...), x), s.Elems[at:]...)
		assert.Equal(t, want, got.Elems, "insert at %d", pos)
	}
	for pos := int64(-4); pos < 4; pos++ {
		got, err := runSeqKernel("SequenceErase", 11, []*ir.Tensor{s, ir.Scalar(ir.Int32, int32(pos))})
		require.NoError(t, err)
		at := int(pos)
		if at < 0 {
			at += 4
		}
		want := append(append([]*ir.Tensor{}, s.Elems[:at]...), s.Elems[at+1:]...)
		assert.Equal(t, want, got.Elems, "erase at %d", pos)
		e, err := runSeqKernel("SequenceAt", 11, []*ir.Tensor{s, ir.Scalar(ir.Int64, pos)})
		require.NoError(t, err)
		assert.Same(t, s.Elems[at], e)
	}
	// The defaults: insert at the back, erase the last.
	got, err := runSeqKernel("SequenceInsert", 11, []*ir.Tensor{s, x})
	require.NoError(t, err)
	assert.Same(t, x, got.Elems[4])
	got, err = runSeqKernel("SequenceErase", 11, []*ir.Tensor{s})
	require.NoError(t, err)
	assert.Equal(t, s.Elems[:3], got.Elems)
	assert.Len(t, s.Elems, 4, "the input sequence is unchanged")
	n, err := runSeqKernel("SequenceLength", 11, []*ir.Tensor{s})
	require.NoError(t, err)
	assert.Equal(t, []int64{4}, n.Int64s())
}

func TestSequenceRefusesBadPositions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := randSeq(rng, 3, 2)
	x := randTensor(rng, ir.Float32, 2)
	cases := []struct {
		op  string
		ins []*ir.Tensor
		msg string
	}{
		{"SequenceAt", []*ir.Tensor{s, ir.Scalar(ir.Int64, int64(3))}, "out of range"},
		{"SequenceAt", []*ir.Tensor{s, ir.Scalar(ir.Int64, int64(-4))}, "out of range"},
		{"SequenceAt", []*ir.Tensor{s, ir.Scalar(ir.Float32, float32(0))}, "int32 or int64"},
		{"SequenceAt", []*ir.Tensor{s, i64s(0, 1)}, "int32 or int64 scalar"},
		{"SequenceAt", []*ir.Tensor{x, ir.Scalar(ir.Int64, int64(0))}, "not a sequence"},
		{"SequenceInsert", []*ir.Tensor{s, x, ir.Scalar(ir.Int64, int64(4))}, "out of range"},
		{"SequenceInsert", []*ir.Tensor{s, i64s(1, 2)}, "inserts int64"},
		{"SequenceErase", []*ir.Tensor{s, ir.Scalar(ir.Int64, int64(3))}, "out of range"},
		{"SequenceErase", []*ir.Tensor{ir.NewSequence(ir.Float32, nil)}, "empty sequence"},
		{"ConcatFromSequence", []*ir.Tensor{ir.NewSequence(ir.Float32, nil)}, "empty sequence"},
	}
	for _, tc := range cases {
		attrs := []*ir.Attribute{}
		if tc.op == "ConcatFromSequence" {
			attrs = append(attrs, ir.AttrI("axis", 0))
		}
		_, err := runSeqKernel(tc.op, 11, tc.ins, attrs...)
		if assert.Error(t, err, tc.op) {
			assert.Contains(t, err.Error(), tc.msg, tc.op)
		}
	}
}

// sliceOracle copies x[..., start:start+n, ...] along axis with a naive
// coordinate loop.
func sliceOracle(x *ir.Tensor, axis int, start, n int64) []float32 {
	outer := ir.Product(x.Dims[:axis])
	inner := ir.Product(x.Dims[axis+1:])
	src := x.Float32s()
	out := []float32{}
	for o := int64(0); o < outer; o++ {
		for k := start; k < start+n; k++ {
			for i := int64(0); i < inner; i++ {
				out = append(out, src[(o*x.Dims[axis]+k)*inner+i])
			}
		}
	}
	return out
}

func TestSplitToSequenceAgainstSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randTensor(rng, ir.Float32, 3, 7, 2)
	cases := []struct {
		split *ir.Tensor
		sizes []int64
	}{
		{nil, []int64{1, 1, 1, 1, 1, 1, 1}},
		{ir.Scalar(ir.Int64, int64(3)), []int64{3, 3, 1}},
		{ir.Scalar(ir.Int32, int32(7)), []int64{7}},
		{i64s(2, 0, 5), []int64{2, 0, 5}},
	}
	for _, tc := range cases {
		for _, axis := range []int64{1, -2} {
			ins := []*ir.Tensor{x}
			if tc.split != nil {
				ins = append(ins, tc.split)
			}
			got, err := runSeqKernel("SplitToSequence", 11, ins, ir.AttrI("axis", axis))
			require.NoError(t, err)
			require.Len(t, got.Elems, len(tc.sizes))
			start := int64(0)
			for i, e := range got.Elems {
				assert.Equal(t, []int64{3, tc.sizes[i], 2}, e.Dims)
				assert.Equal(t, sliceOracle(x, 1, start, tc.sizes[i]), e.Float32s())
				start += tc.sizes[i]
			}
			// ConcatFromSequence undoes the split.
			back, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{got}, ir.AttrI("axis", axis))
			require.NoError(t, err)
			assert.True(t, x.Equal(back), "split %v then concat", tc.sizes)
		}
	}
	// keepdims=0 without split drops the axis.
	got, err := runSeqKernel("SplitToSequence", 11, []*ir.Tensor{x}, ir.AttrI("axis", 0), ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	require.Len(t, got.Elems, 3)
	assert.Equal(t, []int64{7, 2}, got.Elems[2].Dims)
	assert.Equal(t, sliceOracle(x, 0, 2, 1), got.Elems[2].Float32s())
	for _, bad := range []*ir.Tensor{ir.Scalar(ir.Int64, int64(0)), i64s(3, 3), i64s(8, -1), ir.FromSlice(ir.Int64, []int64{1, 1}, []int64{7})} {
		_, err := runSeqKernel("SplitToSequence", 11, []*ir.Tensor{x, bad}, ir.AttrI("axis", 1))
		assert.Error(t, err, "split %v", bad.Int64s())
	}
}

func TestConcatFromSequenceNewAxisStacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := randSeq(rng, 3, 2, 4)
	for _, axis := range []int64{0, 1, 2, -1, -3} {
		got, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{s}, ir.AttrI("axis", axis), ir.AttrI("new_axis", 1))
		require.NoError(t, err)
		a := int(axis)
		if a < 0 {
			a += 3
		}
		dims := []int64{2, 4}
		dims = append(dims[:a:a], append([]int64{3}, dims[a:]...)...)
		require.Equal(t, dims, got.Dims, "axis %d", axis)
		// Naive oracle: out[..., k, ...] at the new axis is element k.
		st := Strides(got.Dims)
		for k, e := range s.Elems {
			src := e.Float32s()
			for i := range src {
				r, c := int64(i)/4, int64(i)%4
				idx := []int64{r, c}
				idx = append(idx[:a:a], append([]int64{int64(k)}, idx[a:]...)...)
				off := idx[0]*st[0] + idx[1]*st[1] + idx[2]*st[2]
				assert.Equal(t, src[i], got.Float32s()[off])
			}
		}
	}
	_, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{s}, ir.AttrI("axis", 3), ir.AttrI("new_axis", 1))
	assert.Error(t, err)
	_, err = runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{s}, ir.AttrI("axis", 0), ir.AttrI("new_axis", 2))
	assert.Error(t, err)
}

func TestSequenceInference(t *testing.T) {
	f := func(dims ...int64) ir.Type { return ir.TensorType(ir.Float32, ir.S(dims...)) }
	out, err := callInfer("SequenceConstruct", 11, []ir.Type{f(2, 3), f(2, 4)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "seq(float[2,?])", out[0].String())
	_, err = callInfer("SequenceConstruct", 11, []ir.Type{f(2), ir.TensorType(ir.Int64, ir.S(2))}, nil, 1)
	assert.Error(t, err)
	seq := SequenceType(ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(3))))
	out, err = callInfer("SequenceAt", 11, []ir.Type{seq, ir.TensorType(ir.Int64, ir.S())}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[N,3]", out[0].String())
	_, err = callInfer("SequenceAt", 11, []ir.Type{f(2), ir.TensorType(ir.Int64, ir.S())}, nil, 1)
	assert.Error(t, err, "a tensor is not a sequence")
	_, err = callInfer("SequenceAt", 11, []ir.Type{seq, ir.TensorType(ir.Float32, ir.S())}, nil, 1)
	assert.Error(t, err, "a float position")
	out, err = callInfer("SequenceLength", 11, []ir.Type{seq}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "int64", out[0].String())
	out, err = callInfer("SequenceEmpty", 11, nil, nil, 1, ir.AttrI("dtype", int64(ir.Int32)))
	require.NoError(t, err)
	assert.Equal(t, "seq(int32[])", out[0].String())
	out, err = callInfer("SplitToSequence", 11, []ir.Type{f(4, 6)}, nil, 1, ir.AttrI("axis", 1), ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	assert.Equal(t, "seq(float[4])", out[0].String())
	out, err = callInfer("SplitToSequence", 11, []ir.Type{f(4, 6), ir.TensorType(ir.Int64, ir.S())}, []*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(2))}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.Equal(t, "seq(float[4,2])", out[0].String())
	out, err = callInfer("ConcatFromSequence", 11, []ir.Type{seq}, nil, 1, ir.AttrI("axis", -1), ir.AttrI("new_axis", 1))
	require.NoError(t, err)
	assert.Equal(t, "float[N,3,?]", out[0].String())
	_, err = callInfer("ConcatFromSequence", 11, []ir.Type{seq}, nil, 1, ir.AttrI("axis", 2))
	assert.Error(t, err, "axis out of range")
}

func TestOptionalKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := randTensor(rng, ir.Float32, 3)
	opt, err := runSeqKernel("Optional", 15, []*ir.Tensor{x})
	require.NoError(t, err)
	assert.Equal(t, ir.OptionalKind, opt.Kind)
	has, err := runSeqKernel("OptionalHasElement", 18, []*ir.Tensor{opt})
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, ir.Data[bool](has))
	got, err := runSeqKernel("OptionalGetElement", 18, []*ir.Tensor{opt})
	require.NoError(t, err)
	assert.Same(t, x, got)
	empty := ir.NewOptional(ir.Float32, nil)
	has, err = runSeqKernel("OptionalHasElement", 18, []*ir.Tensor{empty})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, ir.Data[bool](has))
	has, err = runSeqKernel("OptionalHasElement", 18, []*ir.Tensor{nil})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, ir.Data[bool](has), "an omitted input has no element")
	_, err = runSeqKernel("OptionalGetElement", 18, []*ir.Tensor{empty})
	assert.ErrorContains(t, err, "empty")
	_, err = runSeqKernel("Optional", 15, []*ir.Tensor{opt})
	assert.ErrorContains(t, err, "cannot hold an optional")
	_, err = callInfer("Optional", 15, []ir.Type{{}}, nil, 1)
	assert.ErrorContains(t, err, "type attribute")
	_, err = callInfer("OptionalGetElement", 15, []ir.Type{x.Type()}, nil, 1)
	assert.Error(t, err, "a tensor input before opset 18")
}

// An empty tensor with a huge axis would split into as many empty
// elements: the sequence's headers count against the tensor limit.
func TestSplitToSequenceBoundsItsLength(t *testing.T) {
	x := ir.NewTensor(ir.Float32, 1<<40, 0)
	for _, split := range []*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(2))} {
		ins := []*ir.Tensor{x}
		if split != nil {
			ins = append(ins, split)
		}
		_, err := runSeqKernel("SplitToSequence", 11, ins)
		var le *ir.LimitError
		assert.ErrorAs(t, err, &le)
	}
	got, err := runSeqKernel("SplitToSequence", 11, []*ir.Tensor{ir.NewTensor(ir.Float32, 4, 0)})
	require.NoError(t, err)
	assert.Len(t, got.Elems, 4)
}

// One tensor inserted many times costs a pointer each, but concatenating
// the sequence would allocate every copy: the output is checked first.
func TestConcatFromSequenceBoundsItsOutput(t *testing.T) {
	big := ir.NewTensor(ir.Float32, 1<<20)
	elems := make([]*ir.Tensor, 1<<13)
	for i := range elems {
		elems[i] = big
	}
	_, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{ir.NewSequence(ir.Float32, elems)}, ir.AttrI("axis", 0))
	var le *ir.LimitError
	assert.ErrorAs(t, err, &le)
}

func TestSequenceOfStrings(t *testing.T) {
	x := strs([]int64{2, 3}, "a", "bb", "", "c", "dd", "e")
	got, err := runSeqKernel("SplitToSequence", 11, []*ir.Tensor{x, i64s(1, 2)}, ir.AttrI("axis", 1))
	require.NoError(t, err)
	require.Len(t, got.Elems, 2)
	assert.Equal(t, []string{"a", "c"}, got.Elems[0].Strings)
	assert.Equal(t, []string{"bb", "", "dd", "e"}, got.Elems[1].Strings)
	back, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{got}, ir.AttrI("axis", 1))
	require.NoError(t, err)
	assert.True(t, x.Equal(back))
	rows, err := runSeqKernel("SplitToSequence", 11, []*ir.Tensor{x}, ir.AttrI("keepdims", 0))
	require.NoError(t, err)
	stacked, err := runSeqKernel("ConcatFromSequence", 11, []*ir.Tensor{rows}, ir.AttrI("axis", 0), ir.AttrI("new_axis", 1))
	require.NoError(t, err)
	assert.True(t, x.Equal(stacked), "unstack then stack")
}

// A sequence fed to an op that computes on tensors is refused by
// inference, naming the node and the value, instead of reaching a kernel
// that would read it as an empty tensor.
func TestSequenceIntoTensorOpRefused(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	s := g.Apply("SequenceConstruct", []*ir.Value{x})
	g.SetOutputs(g.Apply("Relu", []*ir.Value{s}))
	_, err := InferShapes(ir.NewModel(g, 17))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Relu takes tensors only")
	g2 := ir.NewGraph("g2")
	x2 := g2.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g2.SetOutputs(g2.Apply("Identity", []*ir.Value{g2.Apply("SequenceConstruct", []*ir.Value{x2})}))
	_, err = InferShapes(ir.NewModel(g2, 17))
	assert.NoError(t, err, "Identity passes a sequence through")
}
