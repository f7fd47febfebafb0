package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// AttributeProto field numbers.
const (
	attrName          = 1
	attrF             = 2
	attrI             = 3
	attrS             = 4
	attrT             = 5
	attrG             = 6
	attrFloats        = 7
	attrInts          = 8
	attrStrings       = 9
	attrTensors       = 10
	attrGraphs        = 11
	attrDocString     = 13
	attrTP            = 14
	attrTypeProtos    = 15
	attrType          = 20
	attrRefAttrName   = 21
	attrSparseTensor  = 22
	attrSparseTensors = 23
)

// attribute decodes an AttributeProto. Subgraphs resolve outer names in sc.
func (d *decoder) attribute(b []byte, sc *scope) (*ir.Attribute, error) {
	a := &ir.Attribute{}
	// IR version 1 attributes have no type field; the kind of the value
	// field that was present stands in for it.
	var seen ir.AttrKind
	err := eachField(b, func(f field) (err error) {
		var v []byte
		switch f.num {
		case attrName:
			a.Name, err = f.str()
		case attrRefAttrName:
			a.RefAttrName, err = f.str()
		case attrDocString:
			a.DocString, err = f.str()
		case attrType:
			var k int64
			k, err = f.int64()
			a.Kind = ir.AttrKind(k)
		case attrF:
			a.F, err = f.float32()
			seen = ir.AttrFloat
		case attrI:
			a.I, err = f.int64()
			seen = ir.AttrInt
		case attrS:
			a.S, err = f.str()
			seen = ir.AttrString
		case attrFloats:
			if v, err = f.fixed(4); err == nil {
				for i := 0; i < len(v); i += 4 {
					a.Floats = append(a.Floats, math.Float32frombits(binary.LittleEndian.Uint32(v[i:])))
				}
			}
			seen = ir.AttrFloats
		case attrInts:
			var us []uint64
			us, err = f.varints(nil)
			for _, u := range us {
				a.Ints = append(a.Ints, int64(u))
			}
			seen = ir.AttrInts
		case attrStrings:
			var s string
			s, err = f.str()
			a.Strings = append(a.Strings, s)
			seen = ir.AttrStrings
		case attrT, attrTensors:
			var t *ir.Tensor
			if v, err = f.bytes(); err == nil {
				t, err = d.tensor(v)
			}
			if f.num == attrT {
				a.T, seen = t, ir.AttrTensor
			} else {
				a.Tensors, seen = append(a.Tensors, t), ir.AttrTensors
			}
		case attrG, attrGraphs:
			var g *ir.Graph
			if v, err = f.bytes(); err == nil {
				g, err = d.graph(v, sc)
			}
			if f.num == attrG {
				a.G, seen = g, ir.AttrGraph
			} else {
				a.Graphs, seen = append(a.Graphs, g), ir.AttrGraphs
			}
		case attrSparseTensor, attrSparseTensors:
			var s *ir.SparseTensor
			if v, err = f.bytes(); err == nil {
				s, err = d.sparseTensor(v)
			}
			if f.num == attrSparseTensor {
				a.Sparse, seen = s, ir.AttrSparseTensor
			} else {
				a.SparseTensors, seen = append(a.SparseTensors, s), ir.AttrSparseTensors
			}
		case attrTP, attrTypeProtos:
			var t ir.Type
			if v, err = f.bytes(); err == nil {
				t, err = d.typeProto(v)
			}
			if f.num == attrTP {
				a.TP, seen = &t, ir.AttrTypeProto
			} else {
				a.TypeProtos, seen = append(a.TypeProtos, t), ir.AttrTypeProtos
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attribute %q: %w", a.Name, err)
	}
	if a.Name == "" {
		return nil, errors.New("attribute with no name")
	}
	if a.Kind == ir.AttrUndefined && a.RefAttrName == "" {
		a.Kind = seen
	}
	return onlyKind(a)
}

// onlyKind keeps just the value field that the attribute's kind names, as
// ir requires; stray fields a writer left set are dropped.
func onlyKind(a *ir.Attribute) (*ir.Attribute, error) {
	k := &ir.Attribute{Name: a.Name, Kind: a.Kind, RefAttrName: a.RefAttrName, DocString: a.DocString}
	missing := false
	switch a.Kind {
	case ir.AttrUndefined:
		if a.RefAttrName == "" {
			return nil, fmt.Errorf("attribute %q has no type and no value", a.Name)
		}
	case ir.AttrFloat:
		k.F = a.F
	case ir.AttrInt:
		k.I = a.I
	case ir.AttrString:
		k.S = a.S
	case ir.AttrTensor:
		k.T, missing = a.T, a.T == nil
	case ir.AttrGraph:
		k.G, missing = a.G, a.G == nil
	case ir.AttrSparseTensor:
		k.Sparse, missing = a.Sparse, a.Sparse == nil
	case ir.AttrTypeProto:
		k.TP, missing = a.TP, a.TP == nil
	case ir.AttrFloats:
		k.Floats = a.Floats
	case ir.AttrInts:
		k.Ints = a.Ints
	case ir.AttrStrings:
		k.Strings = a.Strings
	case ir.AttrTensors:
		k.Tensors = a.Tensors
	case ir.AttrGraphs:
		k.Graphs = a.Graphs
	case ir.AttrSparseTensors:
		k.SparseTensors = a.SparseTensors
	case ir.AttrTypeProtos:
		k.TypeProtos = a.TypeProtos
	default:
		return nil, fmt.Errorf("attribute %q has unknown type %d", a.Name, a.Kind)
	}
	if missing && a.RefAttrName == "" {
		return nil, fmt.Errorf("attribute %q of type %s has no value", a.Name, a.Kind)
	}
	return k, nil
}

func appendAttribute(b []byte, a *ir.Attribute) ([]byte, error) {
	b = appendStringAlways(b, attrName, a.Name)
	var err error
	// sub appends one nested message, remembering the first error.
	sub := func(num protowire.Number, enc func([]byte) ([]byte, error)) {
		b = appendMessage(b, num, func(b []byte) []byte {
			if err == nil {
				b, err = enc(b)
			}
			return b
		})
	}
	switch a.Kind {
	case ir.AttrFloat:
		b = protowire.AppendFixed32(protowire.AppendTag(b, attrF, protowire.Fixed32Type), math.Float32bits(a.F))
	case ir.AttrInt:
		b = appendIntAlways(b, attrI, a.I)
	case ir.AttrString:
		b = appendStringAlways(b, attrS, a.S)
	case ir.AttrTensor:
		sub(attrT, func(b []byte) ([]byte, error) { return appendTensor(b, a.T) })
	case ir.AttrGraph:
		sub(attrG, func(b []byte) ([]byte, error) { return appendGraph(b, a.G) })
	case ir.AttrSparseTensor:
		sub(attrSparseTensor, func(b []byte) ([]byte, error) { return appendSparseTensor(b, a.Sparse) })
	case ir.AttrTypeProto:
		if a.TP == nil {
			return nil, fmt.Errorf("attribute %q of type %s has no value", a.Name, a.Kind)
		}
		sub(attrTP, func(b []byte) ([]byte, error) { return appendType(b, *a.TP), nil })
	case ir.AttrFloats:
		if len(a.Floats) > 0 {
			b = appendMessage(b, attrFloats, func(b []byte) []byte {
				for _, f := range a.Floats {
					b = protowire.AppendFixed32(b, math.Float32bits(f))
				}
				return b
			})
		}
	case ir.AttrInts:
		b = appendPackedInts(b, attrInts, a.Ints)
	case ir.AttrStrings:
		for _, s := range a.Strings {
			b = appendStringAlways(b, attrStrings, s)
		}
	case ir.AttrTensors:
		for _, t := range a.Tensors {
			sub(attrTensors, func(b []byte) ([]byte, error) { return appendTensor(b, t) })
		}
	case ir.AttrGraphs:
		for _, g := range a.Graphs {
			sub(attrGraphs, func(b []byte) ([]byte, error) { return appendGraph(b, g) })
		}
	case ir.AttrSparseTensors:
		for _, s := range a.SparseTensors {
			sub(attrSparseTensors, func(b []byte) ([]byte, error) { return appendSparseTensor(b, s) })
		}
	case ir.AttrTypeProtos:
		for _, t := range a.TypeProtos {
			sub(attrTypeProtos, func(b []byte) ([]byte, error) { return appendType(b, t), nil })
		}
	}
	if err != nil {
		return nil, fmt.Errorf("attribute %q: %w", a.Name, err)
	}
	b = appendString(b, attrDocString, a.DocString)
	b = appendInt(b, attrType, int64(a.Kind))
	return appendString(b, attrRefAttrName, a.RefAttrName), nil
}
