package onnx

import (
	"errors"
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// TypeProto field numbers, and those of the messages it holds.
const (
	typeTensor       = 1
	typeSequence     = 4
	typeMap          = 5
	typeDenotation   = 6
	typeOpaque       = 7
	typeSparseTensor = 8
	typeOptional     = 9

	// TypeProto.Tensor and TypeProto.SparseTensor
	tensorTypeElem  = 1
	tensorTypeShape = 2
	// TypeProto.Map
	mapKey   = 1
	mapValue = 2
	// TypeProto.Sequence and TypeProto.Optional
	innerElem = 1

	// TensorShapeProto.Dimension
	dimValue      = 1
	dimParam      = 2
	dimDenotation = 3
)

// valueInfo decodes a ValueInfoProto into a fresh value.
func (d *decoder) valueInfo(b []byte) (*ir.Value, error) {
	v := &ir.Value{}
	err := eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			v.Name, err = f.str()
		case 2:
			var t []byte
			if t, err = f.bytes(); err == nil {
				v.Type, err = d.typeProto(t)
			}
		case 3:
			v.DocString, err = f.str()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", v.Name, err)
	}
	if v.Name == "" {
		return nil, errors.New("value_info with no name")
	}
	return v, nil
}

func appendValueInfo(b []byte, v *ir.Value) []byte {
	b = appendStringAlways(b, 1, v.Name)
	if v.Type.Kind != ir.UnknownKind || v.Type.Denotation != "" {
		b = appendMessage(b, 2, func(b []byte) []byte { return appendType(b, v.Type) })
	}
	return appendString(b, 3, v.DocString)
}

// typeProto decodes a TypeProto. One with no value set has UnknownKind.
func (d *decoder) typeProto(b []byte) (ir.Type, error) {
	var t ir.Type
	if err := d.enter(); err != nil {
		return t, err
	}
	defer func() { d.depth-- }()
	err := eachField(b, func(f field) (err error) {
		var v []byte
		switch f.num {
		case typeTensor, typeSparseTensor:
			t.Kind = ir.TensorKind
			if f.num == typeSparseTensor {
				t.Kind = ir.SparseTensorKind
			}
			if v, err = f.bytes(); err == nil {
				t.Elem, t.Shape, err = tensorType(v)
			}
		case typeSequence, typeOptional:
			t.Kind = ir.SequenceKind
			if f.num == typeOptional {
				t.Kind = ir.OptionalKind
			}
			if v, err = f.bytes(); err == nil {
				t.Inner, err = d.innerType(v)
			}
		case typeMap:
			t.Kind = ir.MapKind
			if v, err = f.bytes(); err == nil {
				err = d.mapType(v, &t)
			}
		case typeOpaque:
			err = errors.New("opaque types are not supported")
		case typeDenotation:
			t.Denotation, err = f.str()
		}
		return err
	})
	return t, err
}

func tensorType(b []byte) (elem ir.DType, shape ir.Shape, err error) {
	err = eachField(b, func(f field) (err error) {
		switch f.num {
		case tensorTypeElem:
			elem, err = readDType(f, true)
		case tensorTypeShape:
			var v []byte
			if v, err = f.bytes(); err == nil {
				shape, err = readShape(v)
			}
		}
		return err
	})
	return elem, shape, err
}

// innerType decodes the elem_type of a Sequence or Optional type.
func (d *decoder) innerType(b []byte) (*ir.Type, error) {
	var inner *ir.Type
	err := eachField(b, func(f field) error {
		if f.num != innerElem {
			return nil
		}
		v, err := f.bytes()
		if err != nil {
			return err
		}
		t, err := d.typeProto(v)
		inner = &t
		return err
	})
	return inner, err
}

func (d *decoder) mapType(b []byte, t *ir.Type) error {
	return eachField(b, func(f field) (err error) {
		switch f.num {
		case mapKey:
			t.Elem, err = readDType(f, true)
		case mapValue:
			var v []byte
			if v, err = f.bytes(); err == nil {
				var inner ir.Type
				inner, err = d.typeProto(v)
				t.Inner = &inner
			}
		}
		return err
	})
}

// readDType decodes an element type number; types may leave it undefined,
// tensors may not.
func readDType(f field, undefinedOK bool) (ir.DType, error) {
	n, err := f.int64()
	if err != nil {
		return 0, err
	}
	dt := ir.DType(n)
	if !dt.Valid() && !(undefinedOK && dt == ir.Undefined) || int64(dt) != n {
		return 0, fmt.Errorf("unknown element type %d", n)
	}
	return dt, nil
}

// readShape decodes a TensorShapeProto. Its presence makes the shape ranked,
// even with no dims (a scalar).
func readShape(b []byte) (ir.Shape, error) {
	s := ir.Shape{Ranked: true, Dims: []ir.Dim{}}
	err := eachField(b, func(f field) error {
		if f.num != 1 {
			return nil
		}
		v, err := f.bytes()
		if err != nil {
			return err
		}
		dim := ir.UnknownDim()
		// dim_value and dim_param are a oneof: the last one present wins.
		err = eachField(v, func(f field) (err error) {
			switch f.num {
			case dimValue:
				dim.Param = ""
				if dim.Value, err = f.int64(); err == nil && dim.Value < 0 {
					dim.Value = -1 // some exporters write -1 for "unknown"
				}
			case dimParam:
				dim.Value = -1
				dim.Param, err = f.str()
			case dimDenotation:
				dim.Denotation, err = f.str()
			}
			return err
		})
		s.Dims = append(s.Dims, dim)
		return err
	})
	return s, err
}

func appendType(b []byte, t ir.Type) []byte {
	switch t.Kind {
	case ir.TensorKind, ir.SparseTensorKind:
		var num protowire.Number = typeTensor
		if t.Kind == ir.SparseTensorKind {
			num = typeSparseTensor
		}
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendInt(b, tensorTypeElem, int64(t.Elem))
			if t.Shape.Ranked {
				b = appendMessage(b, tensorTypeShape, func(b []byte) []byte { return appendShape(b, t.Shape) })
			}
			return b
		})
	case ir.SequenceKind, ir.OptionalKind:
		var num protowire.Number = typeSequence
		if t.Kind == ir.OptionalKind {
			num = typeOptional
		}
		b = appendMessage(b, num, func(b []byte) []byte {
			if t.Inner != nil {
				b = appendMessage(b, innerElem, func(b []byte) []byte { return appendType(b, *t.Inner) })
			}
			return b
		})
	case ir.MapKind:
		b = appendMessage(b, typeMap, func(b []byte) []byte {
			b = appendInt(b, mapKey, int64(t.Elem))
			if t.Inner != nil {
				b = appendMessage(b, mapValue, func(b []byte) []byte { return appendType(b, *t.Inner) })
			}
			return b
		})
	}
	return appendString(b, typeDenotation, t.Denotation)
}

func appendShape(b []byte, s ir.Shape) []byte {
	for _, d := range s.Dims {
		b = appendMessage(b, 1, func(b []byte) []byte {
			switch {
			case d.Param != "":
				b = appendStringAlways(b, dimParam, d.Param)
			case d.Value >= 0:
				b = appendIntAlways(b, dimValue, d.Value)
			}
			return appendString(b, dimDenotation, d.Denotation)
		})
	}
	return b
}
