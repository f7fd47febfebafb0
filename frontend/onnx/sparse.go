package onnx

import (
	"errors"
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// SparseTensorProto field numbers.
const (
	sparseValues  = 1
	sparseIndices = 2
	sparseDims    = 3
)

func (d *decoder) sparseTensor(b []byte) (*ir.SparseTensor, error) {
	s := &ir.SparseTensor{}
	err := eachField(b, func(f field) (err error) {
		var v []byte
		switch f.num {
		case sparseValues, sparseIndices:
			var t *ir.Tensor
			if v, err = f.bytes(); err == nil {
				t, err = d.tensor(v)
			}
			if f.num == sparseValues {
				s.Values = t
			} else {
				s.Indices = t
			}
		case sparseDims:
			var us []uint64
			us, err = f.varints(nil)
			for _, u := range us {
				s.Dims = append(s.Dims, int64(u))
			}
		}
		return err
	})
	if err == nil && (s.Values == nil || s.Indices == nil) {
		err = errors.New("values or indices missing")
	}
	if err == nil {
		_, err = elementCount(s.Dims)
	}
	if err != nil {
		return nil, fmt.Errorf("sparse tensor: %w", err)
	}
	return s, nil
}

func appendSparseTensor(b []byte, s *ir.SparseTensor) ([]byte, error) {
	if s == nil || s.Values == nil || s.Indices == nil {
		return nil, errors.New("sparse tensor without values or indices")
	}
	var err error
	for _, part := range []struct {
		num protowire.Number
		t   *ir.Tensor
	}{{sparseValues, s.Values}, {sparseIndices, s.Indices}} {
		b = appendMessage(b, part.num, func(b []byte) []byte {
			if err == nil {
				b, err = appendTensor(b, part.t)
			}
			return b
		})
	}
	if err != nil {
		return nil, fmt.Errorf("sparse tensor: %w", err)
	}
	return appendPackedInts(b, sparseDims, s.Dims), nil
}
