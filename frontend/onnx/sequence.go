package onnx

import (
	"fmt"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// SequenceProto and OptionalProto field numbers (onnx-data.proto); both
// messages number the fields they share alike.
const (
	seqElemType      = 2
	seqTensorValues  = 3
	seqSparseValues  = 4
	seqSequenceValue = 5
	seqMapValues     = 6
	seqOptionalValue = 7
)

// The elem_type values of SequenceProto.DataType and OptionalProto.DataType.
const (
	elemUndefined = 0
	elemTensor    = 1
	elemSequence  = 3
	elemOptional  = 5
)

// ReadValueFileWithin reads a test data file holding the value of a graph
// input or output of type t: a TensorProto for a tensor (or an unknown
// type), a SequenceProto for a sequence, an OptionalProto for an optional.
// Sequences and optionals come back as ir.Tensors of that Kind. Maps and
// sparse tensors are refused.
func ReadValueFileWithin(path string, t ir.Type, lim ir.Limits) (*ir.Tensor, error) {
	if t.Kind != ir.SequenceKind && t.Kind != ir.OptionalKind {
		return ReadTensorFileWithin(path, lim)
	}
	data, err := readfile.Within(path, lim, nil)
	if err != nil {
		return nil, err
	}
	d := newDecoder(filepath.Dir(path), lim)
	defer d.close()
	var v *ir.Tensor
	if t.Kind == ir.SequenceKind {
		v, err = d.sequence(data, t.Inner)
	} else {
		v, err = d.optional(data, t.Inner)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ReadSequence decodes a serialized SequenceProto whose elements have type
// inner (nil when unknown). It may not use external data.
func ReadSequence(data []byte, inner *ir.Type) (*ir.Tensor, error) {
	d := newDecoder("", ir.Limits{})
	defer d.close()
	return d.sequence(data, inner)
}

// ReadOptional decodes a serialized OptionalProto, as ReadSequence.
func ReadOptional(data []byte, inner *ir.Type) (*ir.Tensor, error) {
	d := newDecoder("", ir.Limits{})
	defer d.close()
	return d.optional(data, inner)
}

// sequence decodes a SequenceProto. The element type of an empty sequence
// comes from its declared type; a sequence's tensors must share theirs.
func (d *decoder) sequence(b []byte, inner *ir.Type) (*ir.Tensor, error) {
	elems, err := d.compoundValues(b, inner, "SequenceProto")
	if err != nil {
		return nil, err
	}
	dtype := declaredElem(inner)
	for i, e := range elems {
		if i == 0 && dtype == ir.Undefined {
			dtype = e.DType
		}
		if e.DType != dtype {
			return nil, fmt.Errorf("SequenceProto: element %d is %s, the sequence holds %s", i, e.DType, dtype)
		}
	}
	return ir.NewSequence(dtype, elems), nil
}

// optional decodes an OptionalProto: no value, or one.
func (d *decoder) optional(b []byte, inner *ir.Type) (*ir.Tensor, error) {
	elems, err := d.compoundValues(b, inner, "OptionalProto")
	if err != nil {
		return nil, err
	}
	if len(elems) > 1 {
		return nil, fmt.Errorf("OptionalProto: %d values, at most one allowed", len(elems))
	}
	dtype := declaredElem(inner)
	if len(elems) == 1 {
		if dtype != ir.Undefined && elems[0].DType != dtype {
			return nil, fmt.Errorf("OptionalProto: holds %s, declared %s", elems[0].DType, dtype)
		}
		return ir.NewOptional(elems[0].DType, elems[0]), nil
	}
	return ir.NewOptional(dtype, nil), nil
}

// compoundValues decodes the values of a SequenceProto or OptionalProto
// (msg), checking them against elem_type.
func (d *decoder) compoundValues(b []byte, inner *ir.Type, msg string) ([]*ir.Tensor, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	var elems []*ir.Tensor
	elemType := int64(elemUndefined)
	var innerOf *ir.Type // the declared type of a nested value
	if inner != nil {
		innerOf = inner.Inner
	}
	err := eachField(b, func(f field) (err error) {
		var e *ir.Tensor
		switch f.num {
		case seqElemType:
			elemType, err = f.int64()
			return err
		case seqTensorValues:
			var v []byte
			if v, err = f.bytes(); err == nil {
				e, err = d.tensor(v)
			}
		case seqSequenceValue:
			var v []byte
			if v, err = f.bytes(); err == nil {
				e, err = d.sequence(v, innerOf)
			}
		case seqOptionalValue:
			var v []byte
			if v, err = f.bytes(); err == nil {
				e, err = d.optional(v, innerOf)
			}
		case seqSparseValues, seqMapValues:
			return fmt.Errorf("%s: sparse tensor and map values are not supported", msg)
		default:
			return nil
		}
		if err == nil {
			elems = append(elems, e)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, e := range elems {
		if want := elemTypeOf(e); elemType != want {
			return nil, fmt.Errorf("%s: elem_type is %d but value %d is a %s", msg, elemType, i, kindName(want))
		}
	}
	return elems, nil
}

func elemTypeOf(t *ir.Tensor) int64 {
	switch t.Kind {
	case ir.SequenceKind:
		return elemSequence
	case ir.OptionalKind:
		return elemOptional
	}
	return elemTensor
}

func kindName(elemType int64) string {
	return map[int64]string{elemTensor: "tensor", elemSequence: "sequence", elemOptional: "optional"}[elemType]
}

// declaredElem is the element type of the tensors a declared type holds
// (through nested sequences and optionals), or Undefined.
func declaredElem(t *ir.Type) ir.DType {
	for t != nil && t.Kind != ir.TensorKind {
		t = t.Inner
	}
	if t == nil {
		return ir.Undefined
	}
	return t.Elem
}

// WriteValue encodes a value as ONNX test data holds it: a TensorProto
// for a tensor, a SequenceProto for a sequence, an OptionalProto for an
// optional (ReadValueFileWithin reads each back).
func WriteValue(t *ir.Tensor) ([]byte, error) {
	if t.IsTensor() {
		return WriteTensor(t)
	}
	return appendCompound(nil, t)
}

// appendCompound appends sequence or optional t's fields: its name, the
// kind of its values and each value.
func appendCompound(b []byte, t *ir.Tensor) ([]byte, error) {
	b = appendString(b, 1, t.Name)
	elemType := int64(elemTensor)
	if len(t.Elems) > 0 {
		elemType = elemTypeOf(t.Elems[0])
	}
	b = appendIntAlways(b, seqElemType, elemType)
	var err error
	for _, e := range t.Elems {
		num := protowire.Number(seqTensorValues)
		switch e.Kind {
		case ir.SequenceKind:
			num = seqSequenceValue
		case ir.OptionalKind:
			num = seqOptionalValue
		}
		b = appendMessage(b, num, func(b []byte) []byte {
			var out []byte
			if e.IsTensor() {
				out, err = appendTensor(b, e)
			} else {
				out, err = appendCompound(b, e)
			}
			if err != nil {
				return b
			}
			return out
		})
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}
