package onnx

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// modelWireTypes are the wire types of ModelProto's fields.
var modelWireTypes = map[protowire.Number]protowire.Type{
	modelIRVersion: protowire.VarintType, modelProducerName: protowire.BytesType,
	modelProducerVersion: protowire.BytesType, modelDomain: protowire.BytesType,
	modelModelVersion: protowire.VarintType, modelDocString: protowire.BytesType,
	modelGraph: protowire.BytesType, modelOpsetImport: protowire.BytesType,
	modelMetadataProps: protowire.BytesType, modelTrainingInfo: protowire.BytesType,
	modelFunctions: protowire.BytesType,
}

// errNotModel prefixes what checkModelPrefix finds.
var errNotModel = errors.New("not an ONNX model")

// checkModelPrefix walks the top-level fields that start in prefix, the
// first bytes of a size-byte file: each must have a valid field number and
// wire type (ModelProto's own for the fields it defines), and a length
// that fits the file. It stops at the end of the prefix; the full decode
// checks the rest.
func checkModelPrefix(prefix []byte, size int64) error {
	off := 0
	for off < len(prefix) {
		tag, n := protowire.ConsumeVarint(prefix[off:])
		if n < 0 {
			if int64(len(prefix)) < size {
				return nil // the tag runs past the prefix
			}
			return fmt.Errorf("%w: byte %d: truncated field tag", errNotModel, off)
		}
		num, typ := protowire.DecodeTag(tag)
		if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: byte %d: field number %d", errNotModel, off, num)
		}
		if want, ok := modelWireTypes[num]; ok && typ != want {
			return fmt.Errorf("%w: byte %d: field %d has wire type %d, ModelProto's has %d", errNotModel, off, num, typ, want)
		}
		start := off
		off += n
		switch typ {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(prefix[off:])
		case protowire.Fixed32Type:
			n = 4
		case protowire.Fixed64Type:
			n = 8
		case protowire.BytesType:
			var length uint64
			length, n = protowire.ConsumeVarint(prefix[off:])
			if n >= 0 {
				if left := size - int64(off+n); length > uint64(left) {
					return fmt.Errorf("%w: byte %d: field %d claims %d bytes, the file has %d after it", errNotModel, start, num, length, left)
				}
				n += int(min(length, uint64(size)))
			}
		default:
			return fmt.Errorf("%w: byte %d: field %d has wire type %d, which onnx.proto never uses", errNotModel, start, num, typ)
		}
		if n < 0 {
			if int64(len(prefix)) < size {
				return nil
			}
			return fmt.Errorf("%w: byte %d: field %d is truncated", errNotModel, start, num)
		}
		off += n
	}
	return nil
}
