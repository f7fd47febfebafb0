package text

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/kiln-ml/kiln/ir"
)

// literal is one element of a tensor literal or attribute: a token and
// whether a separate '-' preceded it.
type literal struct {
	neg bool
	tok lexer.Token
}

// constDims returns the numeric dims of a tensor constant's type, whose
// size must be within the limits: a hostile dims list fails cleanly
// instead of overflowing or exhausting memory.
func (r *resolver) constDims(a *astType) (ir.DType, []int64, error) {
	if a == nil || a.Tensor == nil {
		pos := lexer.Position{}
		if a != nil {
			pos = a.Pos
		}
		return 0, nil, errorf(pos, "tensor data needs a tensor type")
	}
	t, err := tensorType(a.Tensor)
	if err != nil {
		return 0, nil, err
	}
	if !t.Shape.Ranked {
		return 0, nil, errorf(a.Pos, "tensor data needs a known rank")
	}
	dims, ok := t.Shape.Ints()
	if !ok {
		return 0, nil, errorf(a.Pos, "tensor data needs numeric dims, not %s", t.Shape)
	}
	if _, err := r.lim.CheckTensor("tensor", t.Elem, dims); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", a.Pos, err)
	}
	return t.Elem, dims, nil
}

// tensor builds a tensor constant from its type and data.
func (r *resolver) tensor(typ *astType, d *astData) (*ir.Tensor, error) {
	dtype, dims, err := r.constDims(typ)
	if err != nil {
		return nil, err
	}
	if d.Inline == nil {
		return r.externalTensor(dtype, dims, d)
	}
	// Count first, so a declared shape far larger than the data fails
	// before anything is allocated.
	n := ir.Product(dims)
	per := int64(1)
	if dtype == ir.Complex64 || dtype == ir.Complex128 {
		per = 2 // real and imaginary parts
	}
	count, err := eachLiteral(*d.Inline, nil)
	if err != nil {
		return nil, err
	}
	if int64(count) != n*per {
		return nil, errorf(d.Pos, "%s%v needs %d values, found %d", dtype, dims, n*per, count)
	}
	if dtype == ir.String {
		t := &ir.Tensor{DType: dtype, Dims: dims, Strings: make([]string, 0, n)}
		_, err := eachLiteral(*d.Inline, func(_ int, l literal) error {
			if l.tok.Type != tokString || l.neg {
				return errorf(l.tok.Pos, "expected a string, found %s", l.tok.Value)
			}
			t.Strings = append(t.Strings, unquote(l.tok))
			return nil
		})
		return t, err
	}
	if dtype.Size() == 0 {
		return nil, errorf(d.Pos, "cannot hold data of type %s", dtype)
	}
	t := ir.NewTensor(dtype, dims...)
	_, err = eachLiteral(*d.Inline, func(i int, l literal) error { return putElem(t, i, l) })
	return t, err
}

// eachLiteral scans a `{v, -v, ...}` token, checking the commas, and calls
// fn (when not nil) with each element; it returns the element count.
func eachLiteral(data lexer.Token, fn func(int, literal) error) (int, error) {
	pos := data.Pos
	pos.Column++
	pos.Offset++
	s := &scanner{src: data.Value[1 : len(data.Value)-1], pos: pos}
	n := 0
	want := "value" // what the grammar needs next: "value" or "','"
	neg := false
	for {
		tok, err := s.Next()
		if err != nil {
			return n, err
		}
		switch {
		case tok.Type == lexer.EOF:
			if want == "value" && (n > 0 || neg) {
				return n, errorf(tok.Pos, "expected a value before '}'")
			}
			return n, nil
		case tok.Type == tokPunct && tok.Value == "-" && want == "value" && !neg:
			neg = true
		case tok.Type == tokPunct && tok.Value == "," && want == "','":
			want = "value"
		case want == "value" && (tok.Type == tokInt || tok.Type == tokFloat || tok.Type == tokString || tok.Type == tokIdent):
			if fn != nil {
				if err := fn(n, literal{neg: neg, tok: tok}); err != nil {
					return n, err
				}
			}
			n++
			want, neg = "','", false
		default:
			return n, errorf(tok.Pos, "expected %s, found %s", want, tok.Value)
		}
	}
}

// number returns the literal's text with its sign, or an error if it is not
// a number.
func (l literal) number() (string, error) {
	s := l.tok.Value
	switch l.tok.Type {
	case tokInt, tokFloat:
	case tokIdent:
		if !isSpecialFloat(s) {
			return "", errorf(l.tok.Pos, "expected a number, found %s", s)
		}
	default:
		return "", errorf(l.tok.Pos, "expected a number, found %s", s)
	}
	if l.neg {
		if strings.HasPrefix(s, "-") {
			return "", errorf(l.tok.Pos, "unexpected '-'")
		}
		s = "-" + s
	}
	return s, nil
}

func isSpecialFloat(s string) bool {
	switch strings.ToLower(s) {
	case "inf", "infinity", "nan":
		return true
	}
	return false
}

// floatBits parses a float literal at the given precision (32 or 64) and
// returns its IEEE bits. NaN keeps its sign and gets the quiet-NaN payload
// numpy and PyTorch use.
func (l literal) floatBits(size int) (uint64, error) {
	s, err := l.number()
	if err != nil {
		return 0, err
	}
	neg := strings.HasPrefix(s, "-")
	if strings.EqualFold(strings.TrimLeft(s, "-+"), "nan") {
		if size == 32 {
			b := uint64(0x7fc00000)
			if neg {
				b |= 1 << 31
			}
			return b, nil
		}
		b := uint64(0x7ff8000000000000)
		if neg {
			b |= 1 << 63
		}
		return b, nil
	}
	f, err := strconv.ParseFloat(s, size)
	if err != nil {
		return 0, errorf(l.tok.Pos, "bad float %s", s)
	}
	if size == 32 {
		return uint64(math.Float32bits(float32(f))), nil
	}
	return math.Float64bits(f), nil
}

// intValue parses an integer literal that must fit bits (signed or not).
func (l literal) intValue(signed bool, bits int) (uint64, error) {
	s, err := l.number()
	if err != nil {
		return 0, err
	}
	if l.tok.Type != tokInt {
		return 0, errorf(l.tok.Pos, "expected an integer, found %s", s)
	}
	if signed {
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, errorf(l.tok.Pos, "%s is out of range for %d-bit integers", s, bits)
		}
		return uint64(v), nil
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, errorf(l.tok.Pos, "%s is out of range for %d-bit unsigned integers", s, bits)
	}
	return v, nil
}

// halfBits reads a float16 or bfloat16 element: an integer literal is the
// bit pattern (ONNX's convention), anything else a value to round.
func (l literal) halfBits(dtype ir.DType) (uint64, error) {
	if l.tok.Type == tokInt {
		return l.intValue(false, 16)
	}
	b, err := l.floatBits(32)
	if err != nil {
		return 0, err
	}
	f := math.Float32frombits(uint32(b))
	if dtype == ir.BFloat16 {
		return uint64(ir.Float32ToBFloat16(f)), nil
	}
	return uint64(ir.Float32ToHalf(f)), nil
}

// putElem stores literal number i of a numeric tensor.
func putElem(t *ir.Tensor, i int, l literal) error {
	raw := t.Raw
	var (
		v   uint64
		err error
	)
	switch t.DType {
	case ir.Float32, ir.Complex64:
		v, err = l.floatBits(32)
	case ir.Float64, ir.Complex128:
		v, err = l.floatBits(64)
	case ir.Float16, ir.BFloat16:
		v, err = l.halfBits(t.DType)
	case ir.Int8, ir.Int16, ir.Int32, ir.Int64:
		v, err = l.intValue(true, 8*t.DType.Size())
	case ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64, ir.Bool,
		ir.Float8E4M3FN, ir.Float8E4M3FNUZ, ir.Float8E5M2, ir.Float8E5M2FNUZ, ir.Float8E8M0:
		v, err = l.intValue(false, 8*t.DType.Size())
	case ir.Int4, ir.Uint4, ir.Float4E2M1, ir.Int2, ir.Uint2:
		// float4e2m1 is written as its bit pattern, like the float8 types.
		bits := t.DType.PackedBits()
		if v, err = l.intValue(t.DType == ir.Int4 || t.DType == ir.Int2, bits); err != nil {
			return err
		}
		k := int(t.DType.PerByte()) // the first element of a byte is its low bits
		raw[i/k] |= byte(v&(1<<bits-1)) << (bits * (i % k))
		return nil
	default:
		return errorf(l.tok.Pos, "cannot hold data of type %s", t.DType)
	}
	if err != nil {
		return err
	}
	switch size := t.DType.Size(); {
	case t.DType == ir.Complex64:
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	case t.DType == ir.Complex128:
		binary.LittleEndian.PutUint64(raw[8*i:], v)
	case size == 1:
		raw[i] = byte(v)
	case size == 2:
		binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
	case size == 4:
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(raw[8*i:], v)
	}
	return nil
}

// appendFloat32 writes f so it reads back to the same bits and lexes as a
// float (never as an integer, which would mean a bit pattern or an int
// attribute).
func appendFloat32(b []byte, f float32) []byte {
	return appendFloat(b, float64(f), 32, math.Float32bits(f)>>31 != 0)
}

func appendFloat64(b []byte, f float64) []byte {
	return appendFloat(b, f, 64, math.Signbit(f))
}

func appendFloat(b []byte, f float64, size int, neg bool) []byte {
	switch {
	case math.IsNaN(f):
		if neg {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	return appendFloatLooking(strconv.AppendFloat(b, f, 'g', -1, size), len(b))
}

// appendFloatLooking adds ".0" to the number b[start:] if it would
// otherwise lex as an integer.
func appendFloatLooking(b []byte, start int) []byte {
	for _, c := range b[start:] {
		if c == '.' || c == 'e' {
			return b
		}
	}
	return append(b, ".0"...)
}

// appendTensorData writes the elements of t, comma-separated.
func appendTensorData(b []byte, t *ir.Tensor) []byte {
	if t.DType == ir.String {
		for i, s := range t.Strings {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendQuoted(b, s)
		}
		return b
	}
	raw := t.Raw
	n := int(t.Len())
	if t.DType == ir.Complex64 || t.DType == ir.Complex128 {
		n *= 2
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		switch t.DType {
		case ir.Float32, ir.Complex64:
			b = appendFloat32(b, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		case ir.Float64, ir.Complex128:
			b = appendFloat64(b, math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
		case ir.Float16, ir.BFloat16:
			b = appendHalf(b, t.DType, binary.LittleEndian.Uint16(raw[2*i:]))
		case ir.Int8:
			b = strconv.AppendInt(b, int64(int8(raw[i])), 10)
		case ir.Int16:
			b = strconv.AppendInt(b, int64(int16(binary.LittleEndian.Uint16(raw[2*i:]))), 10)
		case ir.Int32:
			b = strconv.AppendInt(b, int64(int32(binary.LittleEndian.Uint32(raw[4*i:]))), 10)
		case ir.Int64:
			b = strconv.AppendInt(b, int64(binary.LittleEndian.Uint64(raw[8*i:])), 10)
		case ir.Uint16:
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint16(raw[2*i:])), 10)
		case ir.Uint32:
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(raw[4*i:])), 10)
		case ir.Uint64:
			b = strconv.AppendUint(b, binary.LittleEndian.Uint64(raw[8*i:]), 10)
		case ir.Int4, ir.Uint4, ir.Float4E2M1, ir.Int2, ir.Uint2:
			bits, k := t.DType.PackedBits(), int(t.DType.PerByte())
			v := raw[i/k] >> (bits * (i % k)) & (1<<bits - 1)
			if t.DType == ir.Int4 || t.DType == ir.Int2 {
				b = strconv.AppendInt(b, int64(int8(v<<(8-bits))>>(8-bits)), 10)
			} else {
				b = strconv.AppendUint(b, uint64(v), 10)
			}
		default: // one-byte types: uint8, bool, float8 bit patterns
			b = strconv.AppendUint(b, uint64(raw[i]), 10)
		}
	}
	return b
}

// appendHalf writes a float16 or bfloat16 as the shortest decimal that
// reads back to the same bits, or as its bit pattern when no decimal does
// (NaN payloads).
func appendHalf(b []byte, dtype ir.DType, h uint16) []byte {
	toFloat, fromFloat := ir.HalfToFloat32, ir.Float32ToHalf
	if dtype == ir.BFloat16 {
		toFloat, fromFloat = ir.BFloat16ToFloat32, ir.Float32ToBFloat16
	}
	f := toFloat(h)
	if fromFloat(canonicalNaN(f)) != h {
		return strconv.AppendUint(b, uint64(h), 10)
	}
	if f != f || math.IsInf(float64(f), 0) {
		return appendFloat32(b, f)
	}
	// The float32 shortest form is exact but noisy (0.099975586 for the
	// float16 nearest 0.1); fewer digits usually suffice.
	for prec := 1; prec < 9; prec++ {
		s := strconv.FormatFloat(float64(f), 'g', prec, 32)
		if g, err := strconv.ParseFloat(s, 32); err == nil && fromFloat(float32(g)) == h && math.Signbit(g) == math.Signbit(float64(f)) {
			return appendFloat32(b, float32(g))
		}
	}
	return appendFloat32(b, f)
}

// canonicalNaN is what a printed "nan" or "-nan" parses back to.
func canonicalNaN(f float32) float32 {
	if f == f {
		return f
	}
	bits := uint32(0x7fc00000)
	bits |= math.Float32bits(f) & (1 << 31)
	return math.Float32frombits(bits)
}
