package onnx

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kiln-ml/kiln/ir"
)

// seqProto encodes a SequenceProto (or, with the same numbers, an
// OptionalProto) of elem_type elemType holding the given messages in
// field num.
func seqProto(elemType int64, num protowire.Number, msgs ...[]byte) []byte {
	b := protowire.AppendTag(nil, seqElemType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(elemType))
	for _, m := range msgs {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b
}

func TestReadSequenceAndOptional(t *testing.T) {
	a := ir.FromSlice(ir.Float32, []int64{2}, []float32{1.5, -2})
	b := ir.FromSlice(ir.Float32, []int64{1, 3}, []float32{3, 4, 5})
	ea, err := WriteTensor(a)
	require.NoError(t, err)
	eb, err := WriteTensor(b)
	require.NoError(t, err)
	elem := ir.TensorType(ir.Float32, ir.Shape{})

	s, err := ReadSequence(seqProto(elemTensor, seqTensorValues, ea, eb), &elem)
	require.NoError(t, err)
	assert.Equal(t, ir.SequenceKind, s.Kind)
	require.Len(t, s.Elems, 2)
	assert.True(t, a.Equal(s.Elems[0]) && b.Equal(s.Elems[1]))

	// An empty sequence takes its element type from the declaration.
	i64 := ir.TensorType(ir.Int64, ir.Shape{})
	s, err = ReadSequence(seqProto(elemTensor, seqTensorValues), &i64)
	require.NoError(t, err)
	assert.Equal(t, ir.Int64, s.DType)
	assert.Empty(t, s.Elems)

	// A sequence of sequences, and an optional holding a sequence.
	inner := seqProto(elemTensor, seqTensorValues, ea)
	nested := ir.Type{Kind: ir.SequenceKind, Inner: &elem}
	s, err = ReadSequence(seqProto(elemSequence, seqSequenceValue, inner, inner), &nested)
	require.NoError(t, err)
	require.Len(t, s.Elems, 2)
	assert.Equal(t, ir.SequenceKind, s.Elems[1].Kind)
	o, err := ReadOptional(seqProto(elemSequence, seqSequenceValue, inner), &nested)
	require.NoError(t, err)
	assert.Equal(t, ir.OptionalKind, o.Kind)
	require.Len(t, o.Elems, 1)
	o, err = ReadOptional(seqProto(elemUndefined, seqTensorValues), &elem)
	require.NoError(t, err)
	assert.Empty(t, o.Elems)

	for name, data := range map[string][]byte{
		"elem_type disagrees":   seqProto(elemSequence, seqTensorValues, ea),
		"mixed element types":   seqProto(elemTensor, seqTensorValues, ea, mustTensor(t, ir.Scalar(ir.Int64, int64(1)))),
		"map values":            seqProto(4, seqMapValues, []byte{}),
		"truncated":             seqProto(elemTensor, seqTensorValues, ea)[:5],
		"two optional values":   nil,
		"declared type differs": seqProto(elemTensor, seqTensorValues, ea),
	} {
		var err error
		switch name {
		case "two optional values":
			_, err = ReadOptional(seqProto(elemTensor, seqTensorValues, ea, ea), nil)
		case "declared type differs":
			_, err = ReadSequence(data, &i64)
		default:
			_, err = ReadSequence(data, nil)
		}
		assert.Error(t, err, name)
	}
}

// A sequence nested past the limit is refused, not recursed into.
func TestReadSequenceNestingLimit(t *testing.T) {
	msg := seqProto(elemTensor, seqTensorValues)
	for range 100 {
		msg = seqProto(elemSequence, seqSequenceValue, msg)
	}
	_, err := ReadSequence(msg, nil)
	assert.ErrorContains(t, err, "nesting")
}

func mustTensor(t *testing.T, x *ir.Tensor) []byte {
	b, err := WriteTensor(x)
	require.NoError(t, err)
	return b
}

// No input may panic the SequenceProto and OptionalProto readers.
func FuzzReadSequence(f *testing.F) {
	a, _ := WriteTensor(ir.FromSlice(ir.Float32, []int64{2}, []float32{1, 2}))
	f.Add(seqProto(elemTensor, seqTensorValues, a, a))
	f.Add(seqProto(elemSequence, seqSequenceValue, seqProto(elemTensor, seqTensorValues, a)))
	f.Add(seqProto(elemOptional, seqOptionalValue, seqProto(elemTensor, seqTensorValues, a)))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ReadSequence(data, nil)
		_, _ = ReadOptional(data, nil)
	})
}

// WriteValue's sequences and optionals, nested, read back as they were.
func TestWriteValueRoundTrips(t *testing.T) {
	a := ir.FromSlice(ir.Float32, []int64{2}, []float32{1.5, -2})
	b := ir.FromSlice(ir.Float32, []int64{1, 3}, []float32{3, 4, 5})
	elem := ir.TensorType(ir.Float32, ir.Shape{})
	seqT := ir.Type{Kind: ir.SequenceKind, Inner: &elem}
	for _, v := range []*ir.Tensor{
		ir.NewSequence(ir.Float32, []*ir.Tensor{a, b}),
		ir.NewSequence(ir.Float32, nil),
		ir.NewOptional(ir.Float32, a),
		ir.NewOptional(ir.Float32, nil),
		ir.NewOptional(ir.Float32, ir.NewSequence(ir.Float32, []*ir.Tensor{b})),
	} {
		data, err := WriteValue(v)
		require.NoError(t, err)
		var got *ir.Tensor
		if v.Kind == ir.SequenceKind {
			got, err = ReadSequence(data, &seqT)
		} else {
			inner := &elem
			if len(v.Elems) == 1 && v.Elems[0].Kind == ir.SequenceKind {
				inner = &seqT
			}
			got, err = ReadOptional(data, &ir.Type{Kind: ir.OptionalKind, Inner: inner})
		}
		require.NoError(t, err)
		assert.Equal(t, v.Kind, got.Kind)
		require.Len(t, got.Elems, len(v.Elems))
		for i, e := range v.Elems {
			assert.Equal(t, e.Kind, got.Elems[i].Kind)
			if e.IsTensor() {
				assert.Equal(t, e.Dims, got.Elems[i].Dims)
				assert.Equal(t, e.Raw, got.Elems[i].Raw)
			} else {
				assert.Equal(t, e.Elems[0].Raw, got.Elems[i].Elems[0].Raw)
			}
		}
	}
}
