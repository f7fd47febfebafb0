package onnx

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// field is one decoded protobuf field. b subslices the input buffer, so
// large payloads (raw_data) are never copied while decoding.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint, fixed32 and fixed64 values
	b   []byte // length-delimited values
}

// eachField calls fn for every field of the message in b, in wire order.
// Unknown fields are passed to fn too; handlers ignore numbers they do not
// know, as protobuf requires for forward compatibility.
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			// Groups are obsolete and unused by onnx.proto; skip them whole.
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return wireError(n)
		}
		if err := fn(f); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func wireError(n int) error {
	return fmt.Errorf("malformed protobuf (truncated or not an ONNX file): %w", protowire.ParseError(n))
}

func (f field) want(t protowire.Type) error {
	if f.typ != t {
		return fmt.Errorf("field %d has wire type %d, want %d", f.num, f.typ, t)
	}
	return nil
}

func (f field) str() (string, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return "", err
	}
	return string(f.b), nil
}

func (f field) bytes() ([]byte, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return nil, err
	}
	return f.b, nil
}

func (f field) int64() (int64, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return 0, err
	}
	return int64(f.v), nil
}

func (f field) float32() (float32, error) {
	if err := f.want(protowire.Fixed32Type); err != nil {
		return 0, err
	}
	return math.Float32frombits(uint32(f.v)), nil
}

// varints decodes a repeated varint field, which a writer may send packed
// (one length-delimited run) or unpacked (one field per element); proto2
// readers must accept both.
func (f field) varints(dst []uint64) ([]uint64, error) {
	switch f.typ {
	case protowire.VarintType:
		return append(dst, f.v), nil
	case protowire.BytesType:
		for b := f.b; len(b) > 0; {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, wireError(n)
			}
			dst = append(dst, v)
			b = b[n:]
		}
		return dst, nil
	}
	return nil, fmt.Errorf("field %d has wire type %d, want a varint list", f.num, f.typ)
}

// fixed decodes a repeated fixed32 or fixed64 field (size 4 or 8) as
// little-endian bytes, which is already the raw_data layout of the matching
// element type. A packed run is returned as a subslice of the input.
func (f field) fixed(size int) ([]byte, error) {
	switch {
	case f.typ == protowire.BytesType:
		if len(f.b)%size != 0 {
			return nil, fmt.Errorf("field %d: packed length %d is not a multiple of %d", f.num, len(f.b), size)
		}
		return f.b, nil
	case size == 4 && f.typ == protowire.Fixed32Type:
		return protowire.AppendFixed32(nil, uint32(f.v)), nil
	case size == 8 && f.typ == protowire.Fixed64Type:
		return protowire.AppendFixed64(nil, f.v), nil
	}
	return nil, fmt.Errorf("field %d has wire type %d, want a fixed%d list", f.num, f.typ, size*8)
}

// Encoding helpers. Every writer appends to one growing buffer.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// appendStringAlways writes s even when empty: repeated strings and names
// whose position matters (node inputs) must keep their empty entries.
func appendStringAlways(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendIntAlways(b, num, v)
}

func appendIntAlways(b []byte, num protowire.Number, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(v))
}

func appendPackedInts(b []byte, num protowire.Number, vs []int64) []byte {
	if len(vs) == 0 {
		return b
	}
	return appendMessage(b, num, func(b []byte) []byte {
		for _, v := range vs {
			b = protowire.AppendVarint(b, uint64(v))
		}
		return b
	})
}

// appendMessage appends a length-delimited field whose body body appends.
// The body is written in place and then shifted right by the size of its
// length prefix, so no temporary buffer is allocated per message.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = body(b)
	n := len(b) - start
	var prefix [maxVarintLen]byte
	p := protowire.AppendVarint(prefix[:0], uint64(n))
	b = append(b, p...)
	copy(b[start+len(p):], b[start:start+n])
	copy(b[start:], p)
	return b
}

const maxVarintLen = 10

func appendPairs(b []byte, num protowire.Number, pairs []ir.StringPair) []byte {
	for _, p := range pairs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, 1, p.Key)
			return appendString(b, 2, p.Value)
		})
	}
	return b
}

// collectPair decodes a StringStringEntryProto field onto a list.
func collectPair(list *[]ir.StringPair, f field) error {
	b, err := f.bytes()
	if err != nil {
		return err
	}
	var p ir.StringPair
	err = eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			p.Key, err = f.str()
		case 2:
			p.Value, err = f.str()
		}
		return err
	})
	*list = append(*list, p)
	return err
}
