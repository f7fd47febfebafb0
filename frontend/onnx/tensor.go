package onnx

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
	"google.golang.org/protobuf/encoding/protowire"
)

// TensorProto field numbers.
const (
	tensorDims         = 1
	tensorDataType     = 2
	tensorSegment      = 3
	tensorFloatData    = 4
	tensorInt32Data    = 5
	tensorStringData   = 6
	tensorInt64Data    = 7
	tensorName         = 8
	tensorRawData      = 9
	tensorDoubleData   = 10
	tensorUint64Data   = 11
	tensorDocString    = 12
	tensorExternalData = 13
	tensorDataLocation = 14
)

var dataFieldNames = map[protowire.Number]string{
	tensorFloatData: "float_data", tensorInt32Data: "int32_data", tensorStringData: "string_data",
	tensorInt64Data: "int64_data", tensorRawData: "raw_data", tensorDoubleData: "double_data",
	tensorUint64Data: "uint64_data",
}

// ReadTensorFile reads a file holding one serialized TensorProto, as in the
// ONNX test data sets (input_0.pb). External data is resolved relative to
// the file's folder.
func ReadTensorFile(path string) (*ir.Tensor, error) {
	return ReadTensorFileWithin(path, ir.Limits{})
}

// ReadTensorFileWithin is ReadTensorFile under the given limits: the file's
// size is checked before it is read, the tensor's before it is allocated.
func ReadTensorFileWithin(path string, lim ir.Limits) (*ir.Tensor, error) {
	data, err := readfile.Within(path, lim, nil)
	if err != nil {
		return nil, err
	}
	t, err := readTensor(data, filepath.Dir(path), lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadTensor decodes a serialized TensorProto. It may not use external data.
func ReadTensor(data []byte) (*ir.Tensor, error) { return readTensor(data, "", ir.Limits{}) }

func readTensor(data []byte, dir string, lim ir.Limits) (*ir.Tensor, error) {
	d := newDecoder(dir, lim)
	defer d.close()
	return d.tensor(data)
}

// WriteTensor serializes a tensor as a TensorProto with its data in
// raw_data (string_data for strings).
func WriteTensor(t *ir.Tensor) ([]byte, error) { return appendTensor(nil, t) }

// rawTensor gathers a TensorProto's fields; the data is normalised into
// the tensor's Raw once all of them are known.
type rawTensor struct {
	t         *ir.Tensor
	dataField protowire.Number // which data field holds the data; 0 for none
	raw       []byte           // raw_data, a subslice of the input
	fixed     [][]byte         // float_data or double_data runs, already little-endian
	ints      []uint64         // int32_data, int64_data or uint64_data
	external  []ir.StringPair
	location  int64
}

// tensor decodes a TensorProto.
func (d *decoder) tensor(b []byte) (*ir.Tensor, error) {
	r := &rawTensor{t: &ir.Tensor{}}
	dtypeSet := false
	err := eachField(b, func(f field) (err error) {
		switch f.num {
		case tensorDims:
			var us []uint64
			if us, err = f.varints(nil); err == nil {
				for _, u := range us {
					r.t.Dims = append(r.t.Dims, int64(u))
				}
			}
		case tensorDataType:
			r.t.DType, err = readDType(f, false)
			dtypeSet = true
		case tensorSegment:
			err = errors.New("segmented tensors are not supported")
		case tensorName:
			r.t.Name, err = f.str()
		case tensorDocString:
			r.t.DocString, err = f.str()
		case tensorExternalData:
			err = collectPair(&r.external, f)
		case tensorDataLocation:
			r.location, err = f.int64()
		case tensorRawData, tensorStringData:
			var v []byte
			if v, err = f.bytes(); err == nil {
				if f.num == tensorRawData {
					r.raw = v
				} else {
					r.t.Strings = append(r.t.Strings, string(v))
				}
				err = r.use(f.num, f.num == tensorStringData || len(v) > 0)
			}
		case tensorFloatData, tensorDoubleData:
			size := 4
			if f.num == tensorDoubleData {
				size = 8
			}
			var v []byte
			if v, err = f.fixed(size); err == nil {
				r.fixed = append(r.fixed, v)
				err = r.use(f.num, len(v) > 0)
			}
		case tensorInt32Data, tensorInt64Data, tensorUint64Data:
			n := len(r.ints)
			if r.ints, err = f.varints(r.ints); err == nil {
				err = r.use(f.num, len(r.ints) > n)
			}
		}
		return err
	})
	if err == nil && !dtypeSet {
		err = errors.New("no data_type")
	}
	if err == nil {
		err = d.tensorData(r)
	}
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", r.t.Name, err)
	}
	return r.t, nil
}

// use records that data field num carries data, rejecting a second field.
func (r *rawTensor) use(num protowire.Number, nonEmpty bool) error {
	if !nonEmpty {
		return nil
	}
	if r.dataField != 0 && r.dataField != num {
		return fmt.Errorf("data in both %s and %s", dataFieldNames[r.dataField], dataFieldNames[num])
	}
	r.dataField = num
	return nil
}

// elementCount multiplies dims, rejecting negative dims and a count that
// overflows int64.
func elementCount(dims []int64) (int64, error) {
	n, err := ir.ElementCount(dims)
	if err != nil {
		return 0, fmt.Errorf("shape %v: %w", dims, err)
	}
	return n, nil
}

// tensorData normalises whichever data field was used into t.Raw (or checks
// t.Strings), verifying its length against the shape. The shape's size is
// checked against the limits before anything is allocated.
func (d *decoder) tensorData(r *rawTensor) error {
	t := r.t
	if _, err := d.lim.CheckTensor("data", t.DType, t.Dims); err != nil {
		return err
	}
	n, err := elementCount(t.Dims)
	if err != nil {
		return err
	}
	if t.DType == ir.String {
		if r.dataField != 0 && r.dataField != tensorStringData || r.location != 0 {
			return fmt.Errorf("string tensor with data outside string_data")
		}
		if int64(len(t.Strings)) != n {
			return fmt.Errorf("%d strings for shape %v", len(t.Strings), t.Dims)
		}
		return nil
	}
	want := ir.RawLen(t.DType, n)
	switch r.location {
	case 0:
	case 1:
		if r.dataField != 0 {
			return fmt.Errorf("external data and %s both set", dataFieldNames[r.dataField])
		}
		t.Raw, err = d.external(r.external, want)
		return err
	default:
		return fmt.Errorf("unknown data_location %d", r.location)
	}
	switch r.dataField {
	case 0:
		if n != 0 {
			return fmt.Errorf("no data for %s%v", t.DType, t.Dims)
		}
		t.Raw = []byte{}
	case tensorRawData:
		if len(r.raw) != want {
			return fmt.Errorf("raw_data has %d bytes, want %d for %s%v", len(r.raw), want, t.DType, t.Dims)
		}
		t.Raw = ir.FromRaw(t.DType, nil, r.raw).Raw
	case tensorStringData:
		return fmt.Errorf("string_data in a %s tensor", t.DType)
	case tensorFloatData, tensorDoubleData:
		return fixedData(r, want)
	default:
		return intData(r, n, want)
	}
	return nil
}

// fixedData concatenates float_data or double_data, whose little-endian
// encoding is the raw layout of float/complex64 and double/complex128.
func fixedData(r *rawTensor, want int) error {
	t := r.t
	ok := t.DType == ir.Float32 || t.DType == ir.Complex64
	if r.dataField == tensorDoubleData {
		ok = t.DType == ir.Float64 || t.DType == ir.Complex128
	}
	if !ok {
		return fmt.Errorf("%s cannot hold %s data", dataFieldNames[r.dataField], t.DType)
	}
	total := 0
	for _, c := range r.fixed {
		total += len(c)
	}
	if total != want {
		return fmt.Errorf("%s has %d bytes, want %d for %s%v", dataFieldNames[r.dataField], total, want, t.DType, t.Dims)
	}
	t.Raw = ir.AlignedBytes(want)
	off := 0
	for _, c := range r.fixed {
		off += copy(t.Raw[off:], c)
	}
	return nil
}

// intData narrows int32_data, int64_data or uint64_data entries to the
// element size. int32_data also carries the 8- and 16-bit types and bool,
// with float16/bfloat16/float8 as bit patterns, and the packed sub-byte types
// as one packed byte (two 4-bit or four 2-bit elements) per entry.
func intData(r *rawTensor, n int64, want int) error {
	t := r.t
	var ok bool
	switch r.dataField {
	case tensorInt32Data:
		ok = t.DType.Size() != 0 && t.DType.Size() <= 4 && t.DType != ir.Float32 && t.DType != ir.Uint32
	case tensorInt64Data:
		ok = t.DType == ir.Int64
	case tensorUint64Data:
		ok = t.DType == ir.Uint32 || t.DType == ir.Uint64
	}
	if !ok {
		return fmt.Errorf("%s cannot hold %s data", dataFieldNames[r.dataField], t.DType)
	}
	size := t.DType.Size()
	count := n
	if size < 0 {
		size, count = 1, int64(want)
	}
	if int64(len(r.ints)) != count {
		return fmt.Errorf("%s has %d entries, want %d for %s%v", dataFieldNames[r.dataField], len(r.ints), count, t.DType, t.Dims)
	}
	t.Raw = ir.AlignedBytes(want)
	for i, v := range r.ints {
		for k := 0; k < size; k++ {
			t.Raw[i*size+k] = byte(v >> (8 * k))
		}
	}
	return nil
}

func appendTensor(b []byte, t *ir.Tensor) ([]byte, error) {
	if t == nil {
		return nil, errors.New("nil tensor")
	}
	if !t.DType.Valid() {
		return nil, fmt.Errorf("tensor %q: unknown element type %d", t.Name, t.DType)
	}
	n, err := elementCount(t.Dims)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	switch {
	case t.DType == ir.String && int64(len(t.Strings)) != n:
		return nil, fmt.Errorf("tensor %q: %d strings for shape %v", t.Name, len(t.Strings), t.Dims)
	case t.DType != ir.String && len(t.Raw) != ir.RawLen(t.DType, n):
		return nil, fmt.Errorf("tensor %q: %d bytes of data for %s%v, want %d", t.Name, len(t.Raw), t.DType, t.Dims, ir.RawLen(t.DType, n))
	}
	b = appendPackedInts(b, tensorDims, t.Dims)
	b = appendIntAlways(b, tensorDataType, int64(t.DType))
	for _, s := range t.Strings {
		b = appendStringAlways(b, tensorStringData, s)
	}
	b = appendString(b, tensorName, t.Name)
	if len(t.Raw) > 0 {
		b = protowire.AppendBytes(protowire.AppendTag(b, tensorRawData, protowire.BytesType), t.Raw)
	}
	return appendString(b, tensorDocString, t.DocString), nil
}
