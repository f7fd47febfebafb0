package ir

import (
	"fmt"
	"math"
)

// The 8-, 4- and 2-bit element types: what each code stands for and how a
// value is rounded into one, as ONNX defines them (docs/Operators.md, Cast;
// docs/docsgen/source/technical/float8.md, float4.md, int4.md, int2.md).
// Kiln computes with them through float64 (Tensor.Float64At, Tensor.Code)
// in the ops that take them: Cast, CastLike, QuantizeLinear and
// DequantizeLinear.

// smallFloat is the layout of an 8- or 4-bit float type: sign, exponent
// and mantissa bits, with the specials each type reserves.
type smallFloat struct {
	exp, man int
	bias     int
	special  specials
	max      float64 // the largest finite value
}

// specials are the codes a small float type reserves.
type specials uint8

const (
	ieeeSpecials specials = iota // E5M2: the all-ones exponent is ±inf (mantissa 0) or NaN
	fnSpecials                   // E4M3FN: only S.1111.111 is NaN; no infinities
	uzSpecials                   // FNUZ: 0x80 (negative zero's code) is the one NaN; no -0, no infinities
	noSpecials                   // E2M1: every code is a number
)

var smallFloats = map[DType]smallFloat{
	Float8E4M3FN:   {exp: 4, man: 3, bias: 7, special: fnSpecials, max: 448},
	Float8E4M3FNUZ: {exp: 4, man: 3, bias: 8, special: uzSpecials, max: 240},
	Float8E5M2:     {exp: 5, man: 2, bias: 15, special: ieeeSpecials, max: 57344},
	Float8E5M2FNUZ: {exp: 5, man: 2, bias: 16, special: uzSpecials, max: 57344},
	Float4E2M1:     {exp: 2, man: 1, bias: 1, special: noSpecials, max: 6},
}

// IsSmallFloat reports whether d is one of the 8- and 4-bit float types
// (float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz, float8e8m0,
// float4e2m1), which kiln converts to and from float64 but does not
// compute with natively.
func (d DType) IsSmallFloat() bool {
	_, ok := smallFloats[d]
	return ok || d == Float8E8M0
}

// IsPackedInt reports whether d is one of the packed sub-byte integer
// types (int4, uint4, int2, uint2).
func (d DType) IsPackedInt() bool { return d.PackedBits() > 0 && d != Float4E2M1 }

// PackedIntRange is the range of a packed integer type: [-8, 7] for int4,
// [0, 15] for uint4, [-2, 1] for int2, [0, 3] for uint2.
func PackedIntRange(d DType) (lo, hi int64) {
	b := d.PackedBits()
	if d == Int4 || d == Int2 {
		return -1 << (b - 1), 1<<(b-1) - 1
	}
	return 0, 1<<b - 1
}

// RoundMode is how a value is rounded into float8e8m0, which holds only
// powers of two (Cast-24's round_mode).
type RoundMode uint8

const (
	RoundUp      RoundMode = iota // to the nearest power of two away from zero (Cast's default)
	RoundDown                     // to the nearest power of two toward zero
	RoundNearest                  // to the nearer power of two, ties (1.5·2^k) up
)

// ParseRoundMode reads Cast's round_mode attribute.
func ParseRoundMode(s string) (RoundMode, error) {
	switch s {
	case "up":
		return RoundUp, nil
	case "down":
		return RoundDown, nil
	case "nearest":
		return RoundNearest, nil
	}
	return 0, fmt.Errorf("round_mode is %q, want up, down or nearest", s)
}

// e8m0NaN is float8e8m0's one special code; the others are 2^(code-127).
const e8m0NaN = 0xff

// DecodeSmallFloat returns the value of code in small float type d
// (IsSmallFloat): exact, as every such value is a float32 too. It panics
// for another type.
func DecodeSmallFloat(d DType, code uint8) float64 {
	if d == Float8E8M0 {
		if code == e8m0NaN {
			return math.NaN()
		}
		return math.Ldexp(1, int(code)-127)
	}
	f, ok := smallFloats[d]
	if !ok {
		panic(fmt.Sprintf("ir.DecodeSmallFloat: %s is not a small float type", d))
	}
	return f.decode(code)
}

// EncodeSmallFloat rounds x into small float type d (IsSmallFloat) as
// ONNX's Cast does: to nearest, ties to even (float8e8m0: RoundUp). With
// saturate, values beyond the largest finite one and infinities become it
// (with their sign); without, they become infinity where the type has it
// (E5M2) and NaN where it does not. float4e2m1 always saturates, having
// neither. It panics for another type.
func EncodeSmallFloat(d DType, x float64, saturate bool) uint8 {
	if d == Float8E8M0 {
		return EncodeFloat8E8M0(x, saturate, RoundUp)
	}
	f, ok := smallFloats[d]
	if !ok {
		panic(fmt.Sprintf("ir.EncodeSmallFloat: %s is not a small float type", d))
	}
	return f.encode(x, saturate)
}

func (f smallFloat) signBit() uint8  { return 1 << (f.exp + f.man) }
func (f smallFloat) expMask() int    { return 1<<f.exp - 1 }
func (f smallFloat) manMask() int    { return 1<<f.man - 1 }
func (f smallFloat) minNormExp() int { return 1 - f.bias }

func (f smallFloat) decode(code uint8) float64 {
	code &= f.signBit()<<1 - 1
	e, m := int(code>>f.man)&f.expMask(), int(code)&f.manMask()
	var v float64
	switch {
	case f.special == uzSpecials && code == f.signBit(),
		f.special == fnSpecials && e == f.expMask() && m == f.manMask(),
		f.special == ieeeSpecials && e == f.expMask() && m != 0:
		v = math.NaN()
	case f.special == ieeeSpecials && e == f.expMask():
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), f.minNormExp()-f.man)
	default:
		v = math.Ldexp(float64(1<<f.man+m), e-f.bias-f.man)
	}
	// The sign bit signs NaNs too (FNUZ's one NaN decodes negative, as
	// ONNX's reference decodes it).
	if code&f.signBit() != 0 {
		v = math.Copysign(v, -1)
	}
	return v
}

// nanCode is the type's NaN, keeping x's sign where the type has signed
// NaNs. float4e2m1 has none; ONNX's reference (and its conformance data)
// writes a NaN as negative zero's code, 0x8, though float4.md's table says
// 6: kiln follows the reference.
func (f smallFloat) nanCode(sign uint8) uint8 {
	switch f.special {
	case ieeeSpecials:
		return sign | uint8(f.expMask()<<f.man) | 1<<(f.man-1) // quiet NaN: S.11111.10
	case fnSpecials:
		return sign | (f.signBit() - 1)
	}
	return f.signBit()
}

// overflowCode is what an out-of-range value becomes without saturation.
func (f smallFloat) overflowCode(sign uint8) uint8 {
	switch f.special {
	case ieeeSpecials:
		return sign | uint8(f.expMask()<<f.man)
	case noSpecials:
		return sign | f.maxCode()
	}
	return f.nanCode(sign)
}

// maxCode is the largest finite value's code.
func (f smallFloat) maxCode() uint8 { return f.exact(f.max) }

func (f smallFloat) encode(x float64, saturate bool) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign = f.signBit()
	}
	if math.IsNaN(x) {
		return f.nanCode(sign)
	}
	a := math.Abs(x)
	if !math.IsInf(a, 0) {
		// Round to the grid of a's binade, no finer than the subnormals':
		// a/q and n*q scale by powers of two, so both are exact.
		_, e := math.Frexp(a) // a = frac·2^e, frac in [0.5, 1)
		q := math.Ldexp(1, max(e-1, f.minNormExp())-f.man)
		a = math.RoundToEven(a/q) * q
	}
	switch {
	case a > f.max && (saturate || f.special == noSpecials):
		return sign | f.maxCode()
	case a > f.max:
		return f.overflowCode(sign)
	case a == 0 && f.special == uzSpecials:
		return 0
	}
	return sign | f.exact(a)
}

// exact is the code of a, a non-negative value the type holds exactly.
func (f smallFloat) exact(a float64) uint8 {
	if a == 0 {
		return 0
	}
	_, e := math.Frexp(a)
	if e-1 < f.minNormExp() {
		return uint8(math.Ldexp(a, f.man-f.minNormExp()))
	}
	m := math.Ldexp(a, f.man-(e-1)) - float64(int(1)<<f.man)
	return uint8((e-1+f.bias)<<f.man | int(m))
}

// EncodeFloat8E8M0 rounds x to a power of two in float8e8m0 (2^-127 to
// 2^127, code 255 NaN) by mode. With saturate, zero, values below 2^-127
// and (rounded) above 2^127, and infinity become the nearest end of the
// range; without, they become NaN. NaN stays NaN; negative values, whose
// result ONNX leaves unspecified, round by their magnitude, as ONNX's
// reference does (it reads the exponent bits).
func EncodeFloat8E8M0(x float64, saturate bool, mode RoundMode) uint8 {
	a := math.Abs(x)
	switch {
	case math.IsNaN(a):
		return e8m0NaN
	case math.IsInf(a, 0) && saturate:
		return e8m0NaN - 1
	case math.IsInf(a, 0):
		return e8m0NaN
	case a == 0 && saturate:
		return 0
	case a == 0:
		return e8m0NaN
	}
	frac, e := math.Frexp(a) // a = (2·frac)·2^(e-1), 2·frac in [1, 2)
	k := e - 1
	switch m := 2 * frac; {
	case mode == RoundUp && m > 1, mode == RoundNearest && m >= 1.5:
		k++
	}
	code := k + 127
	switch {
	case code > e8m0NaN-1 && saturate:
		return e8m0NaN - 1
	case code > e8m0NaN-1:
		return e8m0NaN
	case code < 0 && (saturate || mode == RoundUp):
		return 0 // rounding up lands on 2^-127 whatever saturate says
	case code < 0:
		return e8m0NaN
	}
	return uint8(code)
}

// Code returns the bits of element i of a tensor of a one-byte type or a
// packed one (its PackedBits, low bits first in each byte).
func (t *Tensor) Code(i int) uint8 {
	b := t.DType.PackedBits()
	if b == 0 {
		return t.Raw[i]
	}
	per := 8 / b
	return t.Raw[i/per] >> (uint(i%per) * uint(b)) & (1<<b - 1)
}

// SetCode sets the bits of element i of a tensor of a one-byte or packed
// type; bits beyond a packed type's width are dropped.
func (t *Tensor) SetCode(i int, code uint8) {
	b := t.DType.PackedBits()
	if b == 0 {
		t.Raw[i] = code
		return
	}
	per := 8 / b
	shift := uint(i%per) * uint(b)
	mask := uint8(1<<b-1) << shift
	t.Raw[i/per] = t.Raw[i/per]&^mask | code<<shift&mask
}

// packedIntAt is element i of a packed integer tensor, sign-extended for
// int4 and int2.
func (t *Tensor) packedIntAt(i int) int64 {
	v := int64(t.Code(i))
	if lo, _ := PackedIntRange(t.DType); lo < 0 && v > -lo-1 {
		v -= 1 << t.DType.PackedBits()
	}
	return v
}
