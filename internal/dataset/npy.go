package dataset

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// ReadTensor reads a tensor from an ONNX TensorProto (.pb) or a NumPy
// array (.npy) file, by extension, within lim (the file's size is checked
// before it is read, the tensor's before it is allocated).
func ReadTensor(path string, lim ir.Limits) (*ir.Tensor, error) {
	if !strings.HasSuffix(strings.ToLower(path), ".npy") {
		return onnx.ReadTensorFileWithin(path, lim)
	}
	data, err := readfile.Within(path, lim, nil)
	if err != nil {
		return nil, err
	}
	t, err := ParseNPY(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// npyDTypes are the array types ParseNPY reads: little-endian (or
// single-byte) float32, float64, int64, int32, uint8 and bool.
var npyDTypes = map[string]ir.DType{
	"<f4": ir.Float32, "<f8": ir.Float64, "<i8": ir.Int64, "<i4": ir.Int32,
	"|u1": ir.Uint8, "<u1": ir.Uint8, "|b1": ir.Bool, "<b1": ir.Bool,
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// ParseNPY decodes a .npy file (format versions 1 to 3): a magic string, a
// header that is a Python dict literal ({'descr': '<f4', 'fortran_order':
// False, 'shape': (1, 64), }), then the array's bytes in C order.
func ParseNPY(data []byte) (*ir.Tensor, error) {
	const magic = "\x93NUMPY"
	if len(data) < 10 || string(data[:6]) != magic {
		return nil, fmt.Errorf("not a .npy file (no \\x93NUMPY magic)")
	}
	var hlen, start int
	switch major := data[6]; major {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(data[8:10])), 10
	case 2, 3:
		if len(data) < 12 {
			return nil, fmt.Errorf(".npy header truncated")
		}
		hlen, start = int(binary.LittleEndian.Uint32(data[8:12])), 12
	default:
		return nil, fmt.Errorf(".npy format version %d is not supported (1 to 3 are)", major)
	}
	if hlen > len(data)-start {
		return nil, fmt.Errorf(".npy header truncated")
	}
	header := string(bytes.TrimRight(data[start:start+hlen], " \n\x00"))
	body := data[start+hlen:]

	m := npyDescr.FindStringSubmatch(header)
	if m == nil {
		return nil, fmt.Errorf(".npy header has no descr: %s", header)
	}
	dtype, ok := npyDTypes[m[1]]
	if !ok {
		return nil, fmt.Errorf(".npy dtype %q is not supported (little-endian float32, float64, int64, int32, uint8 and bool are)", m[1])
	}
	if m := npyFortran.FindStringSubmatch(header); m == nil || m[1] != "False" {
		return nil, fmt.Errorf(".npy array is not in C order (save it with np.ascontiguousarray)")
	}
	m = npyShape.FindStringSubmatch(header)
	if m == nil {
		return nil, fmt.Errorf(".npy header has no shape: %s", header)
	}
	dims := []int64{}
	for _, f := range strings.Split(m[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil || d < 0 {
			return nil, fmt.Errorf(".npy shape (%s) is not a tuple of sizes", m[1])
		}
		dims = append(dims, d)
	}
	want, err := ir.ByteSize(dtype, dims) // a size that wraps must not match a short body
	if err != nil {
		return nil, fmt.Errorf(".npy shape %v of %s: %w", dims, dtype, err)
	}
	if int64(len(body)) != want {
		return nil, fmt.Errorf(".npy data is %d bytes, shape %v of %s needs %d", len(body), dims, dtype, want)
	}
	return ir.FromRaw(dtype, dims, bytes.Clone(body)), nil
}

// Convert returns t as dtype d, for input files whose element type
// differs from the engine's (NumPy's float64 default for a float32 input):
// floats to floats, integers and bools to integers or floats. It refuses
// floats to integers, which would silently truncate.
func Convert(t *ir.Tensor, d ir.DType) (*ir.Tensor, error) {
	if t.DType == d {
		return t, nil
	}
	isInt := func(d ir.DType) bool {
		return d == ir.Int64 || d == ir.Int32 || d == ir.Uint8 || d == ir.Bool
	}
	toFloat := d == ir.Float32 || d == ir.Float64
	if !(toFloat && (t.DType.IsFloat() || isInt(t.DType)) || isInt(d) && isInt(t.DType)) {
		return nil, fmt.Errorf("cannot convert %s data to %s", t.DType, d)
	}
	out := ir.NewTensor(d, t.Dims...)
	out.Name = t.Name
	for i := range int(t.Len()) {
		switch d {
		case ir.Float32:
			ir.Data[float32](out)[i] = float32(t.Float64At(i))
		case ir.Float64:
			ir.Data[float64](out)[i] = t.Float64At(i)
		case ir.Int64:
			ir.Data[int64](out)[i] = t.Int64At(i)
		case ir.Int32:
			ir.Data[int32](out)[i] = int32(t.Int64At(i))
		case ir.Uint8:
			ir.Data[uint8](out)[i] = uint8(t.Int64At(i))
		case ir.Bool:
			if t.Int64At(i) != 0 {
				out.Raw[i] = 1
			}
		}
	}
	return out, nil
}

// EncodeNPY writes t as a .npy file (format 1.0, C order), as numpy.save
// does: the header dict padded with spaces to a multiple of 64 bytes.
// It takes the element types ParseNPY reads.
func EncodeNPY(t *ir.Tensor) ([]byte, error) {
	descr, ok := map[ir.DType]string{ir.Float32: "<f4", ir.Float64: "<f8", ir.Int64: "<i8",
		ir.Int32: "<i4", ir.Uint8: "|u1", ir.Bool: "|b1"}[t.DType]
	if !ok {
		return nil, fmt.Errorf("cannot write %s data as .npy", t.DType)
	}
	dims := make([]string, len(t.Dims))
	for i, d := range t.Dims {
		dims[i] = strconv.FormatInt(d, 10)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(out, h...), t.Raw...), nil
}
