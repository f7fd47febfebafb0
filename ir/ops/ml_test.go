package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// callML runs an ai.onnx.ml op's kernel as callKernel does the default
// domain's, checking its result against inference.
func callML(t *testing.T, op string, opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) (*ir.Tensor, error) {
	t.Helper()
	s, err := Lookup(MLDomain, op, opset)
	require.NoError(t, err)
	n := &ir.Node{Domain: MLDomain, OpType: op, Attrs: attrs, Outputs: []*ir.Value{{Name: "y"}}}
	types := make([]ir.Type, len(ins))
	for i, in := range ins {
		types[i] = in.Type()
		n.Inputs = append(n.Inputs, &ir.Value{Name: fmt.Sprint("in", i), Type: types[i]})
	}
	if err := s.CheckNode(n); err != nil {
		return nil, err
	}
	c := NewKernelContext(s, n, opset, ins)
	if err := s.Run(c); err != nil {
		return nil, err
	}
	ic := NewInferContext(s, n, opset, types, ins)
	if assert.NoError(t, s.Infer(ic)) {
		assert.Equal(t, ic.Outputs[0].String(), c.Outputs[0].Type().String(), "inferred type vs kernel result")
	}
	return c.Outputs[0], nil
}

func TestBinarizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 5))
	x := randTensor(rng, ir.Float64, 3, 4)
	out, err := callML(t, "Binarizer", 1, []*ir.Tensor{x}, ir.AttrF("threshold", 0.25))
	require.NoError(t, err)
	for i, v := range Float64s(x) {
		assert.Equal(t, b2f(v > 0.25), Float64s(out)[i])
	}
	out, err = callML(t, "Binarizer", 1, []*ir.Tensor{vec(ir.Float32, float32(math.NaN()), 1, 0)})
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 0}, out.Float32s(), "NaN is not above the threshold")
	out, err = callML(t, "Binarizer", 1, []*ir.Tensor{vec(ir.Int64, int64(-3), 5)}, ir.AttrF("threshold", 2))
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 1}, out.Int64s())
	_, err = callML(t, "Binarizer", 1, []*ir.Tensor{strs([]int64{1}, "a")})
	assert.ErrorAs(t, err, new(*UnsupportedError))
}

func TestArrayFeatureExtractor(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	x := randTensor(rng, ir.Float32, 2, 3, 4)
	out, err := callML(t, "ArrayFeatureExtractor", 1, []*ir.Tensor{x, i64s(3, 0, 3)})
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3, 3}, out.Dims)
	xv := Float64s(x)
	for r := range 6 {
		assert.Equal(t, []float64{xv[r*4+3], xv[r*4], xv[r*4+3]}, Float64s(out)[r*3:r*3+3], "row %d", r)
	}
	// A vector gives one row; indices of any shape are taken in order.
	out, err = callML(t, "ArrayFeatureExtractor", 1, []*ir.Tensor{strs([]int64{3}, "a", "b", "c"), ir.FromSlice(ir.Int64, []int64{2, 1}, []int64{2, 1})})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2}, out.Dims)
	assert.Equal(t, []string{"c", "b"}, out.Strings)

	_, err = callML(t, "ArrayFeatureExtractor", 1, []*ir.Tensor{x, i64s(4)})
	assert.ErrorContains(t, err, "index 4 is outside [0, 4)")
	_, err = callML(t, "ArrayFeatureExtractor", 1, []*ir.Tensor{x, i64s(-1)})
	assert.ErrorContains(t, err, "index -1 is outside")
	_, err = callML(t, "ArrayFeatureExtractor", 1, []*ir.Tensor{x, vec(ir.Int32, int32(0))})
	assert.ErrorContains(t, err, "indices are int32")
}

func TestLabelEncoder(t *testing.T) {
	words := strs([]int64{2, 2}, "b", "zz", "a", "b")
	// v1: strings to their class index, and back.
	classes := ir.AttrSs("classes_strings", "a", "b")
	out, err := callML(t, "LabelEncoder", 1, []*ir.Tensor{words}, classes, ir.AttrI("default_int64", 9))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 9, 0, 1}, out.Int64s())
	out, err = callML(t, "LabelEncoder", 1, []*ir.Tensor{i64s(1, 5, 0)}, classes)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "_Unused", "a"}, out.Strings)

	// v2: float keys (NaN and -0 match their own kind), default -0.
	fx := vec(ir.Float32, float32(math.NaN()), 0, 2.5, 7)
	out, err = callML(t, "LabelEncoder", 2, []*ir.Tensor{fx}, ir.AttrFs("keys_floats", float32(math.NaN()), float32(math.Copysign(0, -1)), 2.5),
		ir.AttrSs("values_strings", "nan", "zero", "two"))
	require.NoError(t, err)
	assert.Equal(t, []string{"nan", "zero", "two", "_Unused"}, out.Strings)
	out, err = callML(t, "LabelEncoder", 2, []*ir.Tensor{words}, ir.AttrSs("keys_strings", "b"), ir.AttrFs("values_floats", 0.5))
	require.NoError(t, err)
	assert.Equal(t, "[0.5 -0 -0 0.5]", elems(out))

	// v4: tensors of more types, and their default.
	keys := ir.FromSlice(ir.Int16, []int64{2}, []int16{-4, 7})
	vals := ir.FromSlice(ir.Float64, []int64{2}, []float64{1.5, 2.5})
	x16 := ir.FromSlice(ir.Int16, []int64{3}, []int16{7, 0, -4})
	out, err = callML(t, "LabelEncoder", 4, []*ir.Tensor{x16}, ir.AttrT("keys_tensor", keys), ir.AttrT("values_tensor", vals))
	require.NoError(t, err)
	assert.Equal(t, "[2.5 -0 1.5]", elems(out))
	out, err = callML(t, "LabelEncoder", 4, []*ir.Tensor{x16}, ir.AttrT("keys_tensor", keys), ir.AttrT("values_tensor", vals),
		ir.AttrT("default_tensor", ir.FromSlice(ir.Float64, []int64{1}, []float64{-8})))
	require.NoError(t, err)
	assert.Equal(t, "[2.5 -8 1.5]", elems(out))

	for _, c := range []struct {
		x     *ir.Tensor
		attrs []*ir.Attribute
		want  string
	}{
		{words, []*ir.Attribute{ir.AttrSs("keys_strings", "a"), ir.AttrIs("keys_int64s", 1), ir.AttrIs("values_int64s", 1)}, "exactly one of the keys_* attributes must be set, got [keys_strings keys_int64s]"},
		{words, []*ir.Attribute{ir.AttrSs("keys_strings", "a")}, "exactly one of the values_* attributes"},
		{words, []*ir.Attribute{ir.AttrSs("keys_strings", "a", "b"), ir.AttrIs("values_int64s", 1)}, "must be vectors of one length"},
		{i64s(1), []*ir.Attribute{ir.AttrSs("keys_strings", "a"), ir.AttrIs("values_int64s", 1)}, "input is int64, the keys string"},
		{x16, []*ir.Attribute{ir.AttrT("keys_tensor", keys), ir.AttrT("values_tensor", vals), ir.AttrT("default_tensor", ir.Scalar(ir.Int64, int64(1)))}, "default_tensor is int64[], want one double"},
	} {
		_, err := callML(t, "LabelEncoder", 4, []*ir.Tensor{c.x}, c.attrs...)
		assert.ErrorContains(t, err, c.want)
	}
}
