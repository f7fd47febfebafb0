package ops

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

type opsetChange struct {
	op       string
	version  int64
	ownRow   bool       // the version changed the signature: it has its own row
	newTypes []ir.DType // element types the version added
}

// What ONNX opsets 24 to 26 (ONNX 1.19 to 1.21) changed in the ops kiln
// implements, the record behind newestOpset's 26. Opset 24 added
// float8e8m0 to the ops that move data and to Cast (with round_mode) and
// the quantizers, and bfloat16 to TopK; 25 added int2 and uint2 to the same
// ops; 26 only added ops (BitCast, CumProd).
var opsets24To26 = []opsetChange{
	{"Cast", 24, true, []ir.DType{ir.Float8E8M0}},
	{"Cast", 25, false, []ir.DType{ir.Int2, ir.Uint2}},
	{"TopK", 24, false, []ir.DType{ir.BFloat16}},
}

// moveOps are the ops whose 24 and 25 only added float8e8m0, then int2
// and uint2.
var moveOps = []string{"Constant", "ConstantOfShape", "DequantizeLinear", "Flatten", "Identity", "Pad",
	"QuantizeLinear", "Reshape", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"}

// changedSignature are ops kiln does not implement whose 24 changed the
// signature: whoever adds one must give that version a row.
var changedSignature = map[string]int64{"Attention": 24, "CastLike": 24}

func TestOpsets24To26(t *testing.T) {
	versions := append([]opsetChange{}, opsets24To26...)
	for _, op := range moveOps {
		versions = append(versions,
			opsetChange{op, 24, false, []ir.DType{ir.Float8E8M0}},
			opsetChange{op, 25, false, []ir.DType{ir.Int2, ir.Uint2}})
	}
	for _, v := range versions {
		s, err := Lookup("", v.op, v.version)
		require.NoError(t, err, "%s-%d", v.op, v.version)
		if v.ownRow {
			assert.Equal(t, v.version, s.Since, "%s-%d has its own row", v.op, v.version)
		} else {
			assert.Less(t, s.Since, v.version, "%s-%d shares the older row", v.op, v.version)
		}
		for _, d := range v.newTypes {
			// A row's types are what its kernel computes: the new 8-, 4- and
			// 2-bit types only Cast, DequantizeLinear and the ops that move
			// data (movesCodes) take as their primary type
			// (QuantizeLinear's is its float input); bfloat16 (TopK) was
			// computed before.
			computed := d == ir.BFloat16 || v.op == "Cast" || v.op == "DequantizeLinear" ||
				MovementOf(&ir.Node{OpType: v.op}) != Computes
			assert.Equal(t, computed, s.SupportsType(d), "%s-%d for %s", v.op, v.version, d)
		}
		last, err := Lookup("", v.op, 26)
		require.NoError(t, err)
		assert.Same(t, s, last, "%s: no row after %d", v.op, v.version)
	}
	for op, v := range changedSignature {
		if s, err := Lookup("", op, v); err == nil {
			assert.GreaterOrEqual(t, s.Since, v, "%s-%d changed the signature: it needs its own row", op, v)
		}
	}
}

// requireUnsupportedType wants an *UnsupportedError naming element type d.
func requireUnsupportedType(t *testing.T, err error, d ir.DType) {
	t.Helper()
	var ue *UnsupportedError
	require.True(t, errors.As(err, &ue), "want an *UnsupportedError, got %v", err)
	assert.Equal(t, d, ue.DType, err.Error())
	assert.Contains(t, err.Error(), d.String())
}

func TestCast24RoundMode(t *testing.T) {
	x := vec(ir.Float32, float32(1.5), -2.25, 1e6)
	for _, mode := range []string{"up", "down", "nearest"} {
		out, err := callKernel(t, "Cast", 24, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.Int32)), ir.AttrS("round_mode", mode))
		require.NoError(t, err, mode)
		assert.Equal(t, []int32{1, -2, 1000000}, ir.Data[int32](out[0]), mode)
	}
	// round_mode rounds into float8e8m0: 1.5 lies between 2^0 and 2^1,
	// 2.25 between 2^1 and 2^2 (nearer the lower), 1e6 between 2^19 and
	// 2^20 (nearer the upper).
	for mode, want := range map[string][]byte{"up": {128, 129, 147}, "down": {127, 128, 146}, "nearest": {128, 128, 147}} {
		out, err := callKernel(t, "Cast", 24, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(ir.Float8E8M0)), ir.AttrS("round_mode", mode))
		require.NoError(t, err, mode)
		assert.Equal(t, want, out[0].Raw, mode)
	}
	// Cast-25's int2 and uint2 wrap as the wider integers do.
	for to, want := range map[ir.DType][]float64{ir.Int2: {1, -2, 0}, ir.Uint2: {1, 2, 0}} {
		out, err := callKernel(t, "Cast", 25, []*ir.Tensor{x}, 1, ir.AttrI("to", int64(to)))
		require.NoError(t, err, to.String())
		assert.Equal(t, want, Float64s(out[0]), to.String())
	}

	s, err := Lookup("", "Cast", 24)
	require.NoError(t, err)
	n := &ir.Node{Name: "c", OpType: "Cast", Inputs: []*ir.Value{{Name: "x"}}, Outputs: []*ir.Value{{Name: "y"}},
		Attrs: []*ir.Attribute{ir.AttrI("to", int64(ir.Int32)), ir.AttrS("round_mode", "stochastic")}}
	c := NewInferContext(s, n, 24, []ir.Type{x.Type()}, []*ir.Tensor{nil})
	assert.ErrorContains(t, s.Infer(c), `round_mode is "stochastic"`)

	// Before 24 the attribute does not exist.
	s, err = Lookup("", "Cast", 23)
	require.NoError(t, err)
	assert.ErrorContains(t, s.CheckNode(n), `unknown attribute "round_mode"`)
}

func TestQuantizers25TwoBitTypes(t *testing.T) {
	x := vec(ir.Float32, float32(0.5), -1.25, 3, -7)
	scale := ir.Scalar(ir.Float32, float32(0.5))
	// x / 0.5 = 1, -2.5, 6, -14: rounded half to even, then saturated.
	for d, want := range map[ir.DType][]float64{ir.Int2: {1, -2, 1, -2}, ir.Uint2: {1, 0, 3, 0}} {
		q, err := callKernel(t, "QuantizeLinear", 25, []*ir.Tensor{x, scale}, 1, ir.AttrI("output_dtype", int64(d)))
		require.NoError(t, err, d.String())
		assert.Equal(t, want, Float64s(q[0]), d.String())
		back, err := callKernel(t, "DequantizeLinear", 25, []*ir.Tensor{q[0], scale}, 1)
		require.NoError(t, err, d.String())
		for i, v := range want {
			assert.Equal(t, v*0.5, Float64s(back[0])[i], "%s element %d", d, i)
		}
	}
	s, err := Lookup("", "DequantizeLinear", 25)
	require.NoError(t, err)
	for _, d := range []ir.DType{ir.Int2, ir.Uint2, ir.Float8E8M0, ir.Float4E2M1} {
		assert.True(t, s.SupportsType(d), d.String())
	}
	s, err = Lookup("", "DequantizeLinear", 19)
	require.NoError(t, err)
	assert.False(t, s.SupportsType(ir.Int4), "int4 came with DequantizeLinear-21")
}

// ONNX's node tests of opset 25 pair a scalar scale with a [1] zero point
// (per tensor both): kiln quantizes with it as with a scalar one.
func TestQuantizeScalarScaleOneElementZeroPoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 25))
	x := randTensor(rng, ir.Float32, 3, 4)
	scale := ir.Scalar(ir.Float32, float32(0.25))
	zp := ir.FromSlice(ir.Int8, []int64{1}, []int8{-3})
	out, err := callKernel(t, "QuantizeLinear", 25, []*ir.Tensor{x, scale, zp}, 1)
	require.NoError(t, err)
	q := ir.Data[int8](out[0])
	for i, v := range x.Float32s() {
		want := math.Max(-128, math.Min(127, math.RoundToEven(float64(v/0.25))-3))
		assert.Equal(t, int8(want), q[i], "element %d (%g)", i, v)
	}
	back, err := callKernel(t, "DequantizeLinear", 25, []*ir.Tensor{out[0], scale, zp}, 1)
	require.NoError(t, err)
	for i, v := range back[0].Float32s() {
		assert.Equal(t, float32(q[i]+3)*0.25, v, "element %d", i)
	}

	_, err = callKernel(t, "QuantizeLinear", 25, []*ir.Tensor{x, scale, ir.FromSlice(ir.Int8, []int64{2}, []int8{1, 2})}, 1)
	assert.ErrorContains(t, err, "zero point")
}

// ConstantOfShape-24 and 25 take float8e8m0 and 2-bit values: the byte
// type is replicated, the 2-bit ones (as int4 before) are unsupported.
func TestConstantOfShape25Values(t *testing.T) {
	shape := vec(ir.Int64, int64(2), 3)
	out, err := callKernel(t, "ConstantOfShape", 24, []*ir.Tensor{shape}, 1, ir.AttrT("value", ir.FromRaw(ir.Float8E8M0, []int64{1}, []byte{0x7f})))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, out[0].Dims)
	assert.Equal(t, []byte{0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f}, out[0].Raw)
	for _, d := range []ir.DType{ir.Int2, ir.Uint2, ir.Int4} {
		_, err := callKernel(t, "ConstantOfShape", 25, []*ir.Tensor{shape}, 1, ir.AttrT("value", ir.FromRaw(d, []int64{1}, []byte{0x01})))
		requireUnsupportedType(t, err, d)
	}
}
