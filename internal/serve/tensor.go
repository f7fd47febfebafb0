package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// The protocol's datatype names and kiln's element types. BYTES (strings)
// has no engine counterpart: no engine takes or gives strings.
var (
	datatypeOf = map[ir.DType]string{
		ir.Bool: "BOOL", ir.Uint8: "UINT8", ir.Uint16: "UINT16", ir.Uint32: "UINT32", ir.Uint64: "UINT64",
		ir.Int8: "INT8", ir.Int16: "INT16", ir.Int32: "INT32", ir.Int64: "INT64",
		ir.Float16: "FP16", ir.Float32: "FP32", ir.Float64: "FP64", ir.BFloat16: "BF16",
	}
	dtypeOf = func() map[string]ir.DType {
		m := map[string]ir.DType{}
		for d, s := range datatypeOf {
			m[s] = d
		}
		return m
	}()
)

// Datatype is the protocol's name for d ("FP32"), or d's own name when the
// protocol has none.
func Datatype(d ir.DType) string {
	if s, ok := datatypeOf[d]; ok {
		return s
	}
	return strings.ToUpper(d.String())
}

// parseDatatype maps a protocol datatype to kiln's element type.
func parseDatatype(s string) (ir.DType, error) {
	if d, ok := dtypeOf[s]; ok {
		return d, nil
	}
	if s == "BYTES" {
		return 0, fmt.Errorf("datatype BYTES is not supported: kiln engines take numeric tensors")
	}
	return 0, fmt.Errorf("unknown datatype %q (want one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BF16)", s)
}

// elements is the element count of shape, refusing negative dims and
// counts whose bytes overflow.
func elements(shape []int64, d ir.DType) (int64, error) {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("shape %v has a negative dim", shape)
		}
		if s != 0 && n > math.MaxInt64/int64(max(d.Size(), 1))/s {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= s
	}
	return n, nil
}

// decodeJSONData reads a tensor's "data" member: numbers (or true/false
// for BOOL) in row-major order, flat or nested as the shape; "NaN", "Inf"
// and "-Inf" as strings for float types, which JSON numbers cannot hold.
func decodeJSONData(raw json.RawMessage, d ir.DType, shape []int64) (*ir.Tensor, error) {
	n, err := elements(shape, d)
	if err != nil {
		return nil, err
	}
	t := ir.NewTensor(d, shape...)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("data must be an array of numbers")
	}
	i := int64(0)
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed data: %v", err)
		}
		switch tok {
		case json.Delim('['):
			depth++
			continue
		case json.Delim(']'):
			depth--
			continue
		case json.Delim('{'):
			return nil, fmt.Errorf("data holds an object; want numbers in (possibly nested) arrays")
		}
		if i >= n {
			return nil, fmt.Errorf("data has more than the %d elements shape %v holds", n, shape)
		}
		if err := setElement(t, int(i), tok); err != nil {
			return nil, fmt.Errorf("element %d: %v", i, err)
		}
		i++
	}
	if i != n {
		return nil, fmt.Errorf("data has %d elements, shape %v holds %d", i, shape, n)
	}
	return t, nil
}

// setElement stores one JSON value into element i of t, refusing values
// the element type cannot hold.
func setElement(t *ir.Tensor, i int, tok json.Token) error {
	d := t.DType
	if d == ir.Bool {
		b, ok := tok.(bool)
		if !ok {
			return fmt.Errorf("%v is not true or false (datatype BOOL)", tok)
		}
		if b {
			t.Raw[i] = 1
		}
		return nil
	}
	var text string
	switch v := tok.(type) {
	case json.Number:
		text = v.String()
	case string:
		if !d.IsFloat() {
			return fmt.Errorf("%q is not a number", v)
		}
		switch v {
		case "NaN", "Inf", "-Inf", "Infinity", "-Infinity":
			text = strings.TrimSuffix(v, "inity")
		default:
			return fmt.Errorf("%q is not a number (strings stand only for NaN, Inf, -Inf)", v)
		}
	default:
		return fmt.Errorf("%v is not a number", tok)
	}
	if d.IsFloat() {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRange(err) {
			return fmt.Errorf("%s is not a number", text)
		}
		putFloat(t, i, f)
		return nil
	}
	if d.IsSigned() {
		v, err := strconv.ParseInt(text, 10, d.Size()*8)
		if err != nil {
			return fmt.Errorf("%s is not an integer in %s's range", text, Datatype(d))
		}
		putUint(t, i, uint64(v))
		return nil
	}
	v, err := strconv.ParseUint(text, 10, d.Size()*8)
	if err != nil {
		return fmt.Errorf("%s is not an integer in %s's range", text, Datatype(d))
	}
	putUint(t, i, v)
	return nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func putFloat(t *ir.Tensor, i int, f float64) {
	switch t.DType {
	case ir.Float32:
		binary.LittleEndian.PutUint32(t.Raw[4*i:], math.Float32bits(float32(f)))
	case ir.Float64:
		binary.LittleEndian.PutUint64(t.Raw[8*i:], math.Float64bits(f))
	case ir.Float16:
		binary.LittleEndian.PutUint16(t.Raw[2*i:], ir.Float32ToHalf(float32(f)))
	case ir.BFloat16:
		binary.LittleEndian.PutUint16(t.Raw[2*i:], ir.Float32ToBFloat16(float32(f)))
	}
}

// putUint stores v's low bytes (the element's size) little-endian.
func putUint(t *ir.Tensor, i int, v uint64) {
	size := t.DType.Size()
	for b := range size {
		t.Raw[size*i+b] = byte(v >> (8 * b))
	}
}

// appendJSONData writes t's elements as a flat JSON array.
func appendJSONData(buf []byte, t *ir.Tensor) []byte {
	buf = append(buf, '[')
	n := int(t.Len())
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch d := t.DType; {
		case d == ir.Bool:
			buf = strconv.AppendBool(buf, t.Raw[i] != 0)
		case d.IsFloat():
			f := t.Float64At(i)
			switch {
			case math.IsNaN(f):
				buf = append(buf, `"NaN"`...)
			case math.IsInf(f, 1):
				buf = append(buf, `"Inf"`...)
			case math.IsInf(f, -1):
				buf = append(buf, `"-Inf"`...)
			default:
				bits := 64
				if d != ir.Float64 {
					bits = 32
				}
				buf = strconv.AppendFloat(buf, f, 'g', -1, bits)
			}
		case d.IsSigned():
			buf = strconv.AppendInt(buf, t.Int64At(i), 10)
		default:
			buf = strconv.AppendUint(buf, uintAt(t, i), 10)
		}
	}
	return append(buf, ']')
}

func uintAt(t *ir.Tensor, i int) uint64 {
	size := t.DType.Size()
	var v uint64
	for b := range size {
		v |= uint64(t.Raw[size*i+b]) << (8 * b)
	}
	return v
}
