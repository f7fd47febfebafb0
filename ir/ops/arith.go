package ops

import "math"

// Arith is arithmetic that an op's rule is written in once, for every
// executor: uint64 integers (wrapping) and float64 values, each operation
// rounded on its own (no fused multiply-add). Comparisons give a boolean
// that only Select reads. The reference implements it over Go values
// (goArith); the kernel layer over expressions, so both compute the same
// bits wherever IEEE arithmetic is honoured. The random ops' generator
// and MelWeightMatrix's filter edges are written in it; ln and e^x are
// polynomials here (arithLog, arithExp) rather than a library's, whose
// last bits differ between libms.
type Arith[V any] interface {
	Uint(c uint64) V
	Float(c float64) V
	IAdd(a, b V) V
	IMul(a, b V) V
	Xor(a, b V) V
	And(a, b V) V
	Or(a, b V) V
	Shl(a V, n uint) V
	Shr(a V, n uint) V // logical
	FAdd(a, b V) V
	FSub(a, b V) V
	FMul(a, b V) V
	FDiv(a, b V) V
	Sqrt(a V) V
	Abs(a V) V
	Less(a, b V) V   // ordered: false with a NaN
	LessEq(a, b V) V // ordered
	Select(c, a, b V) V
	ToFloat(a V) V  // uint64 → float64 (exact below 2^53)
	Bits(a V) V     // a float64's bits
	FromBits(a V) V // bits as a float64
}

// roundMagic: adding it to a float64 below 2^51 in magnitude leaves
// round-half-even(v) in the low bits of the sum.
const roundMagic = 0x1.8p52

// arithLog is ln x for a positive normal float: x = m·2^e with m in
// [√½, √2), ln m = 2 atanh(s), s = (m-1)/(m+1) (|s| < 0.172), as the
// series in s² to 2^-56; NaN for NaN and below 0, -Inf at 0 and +Inf at
// +Inf (subnormals are not scaled: they read as their exponent's floor).
func arithLog[V any](a Arith[V], x V) V {
	r := arithLogNormal(a, x)
	r = a.Select(a.LessEq(x, a.Float(0)), a.Float(math.Inf(-1)), r)
	r = a.Select(a.Less(x, a.Float(0)), a.Float(math.NaN()), r)
	r = a.Select(a.LessEq(a.Float(math.Inf(1)), x), x, r)
	return a.Select(a.LessEq(x, x), r, x) // a NaN stays
}

func arithLogNormal[V any](a Arith[V], x V) V {
	const mantissa, one = 1<<52 - 1, 1023 << 52
	bits := a.Bits(x)
	m := a.FromBits(a.Or(a.And(bits, a.Uint(mantissa)), a.Uint(one)))
	e := a.FSub(a.ToFloat(a.Shr(bits, 52)), a.Float(1023))
	big := a.Less(a.Float(math.Sqrt2), m)
	m = a.Select(big, a.FMul(m, a.Float(0.5)), m)
	e = a.Select(big, a.FAdd(e, a.Float(1)), e)
	s := a.FDiv(a.FSub(m, a.Float(1)), a.FAdd(m, a.Float(1)))
	z := a.FMul(s, s)
	p := a.Float(1.0 / 25)
	for k := 11; k >= 0; k-- {
		p = a.FAdd(a.FMul(p, z), a.Float(1/float64(2*k+1)))
	}
	return a.FAdd(a.FMul(e, a.Float(math.Ln2)), a.FMul(a.FMul(s, a.Float(2)), p))
}

// arithExp is e^d for d in [-708, 709.78] (NaN for NaN): 2^n·e^r,
// r = d - n·ln 2 (ln 2 in two parts), e^r as its Taylor series to r^13.
func arithExp[V any](a Arith[V], d V) V {
	const ln2Hi, ln2Lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	t := a.FAdd(a.FMul(d, a.Float(math.Log2E)), a.Float(roundMagic))
	n := a.FSub(t, a.Float(roundMagic))
	r := a.FSub(a.FSub(d, a.FMul(n, a.Float(ln2Hi))), a.FMul(n, a.Float(ln2Lo)))
	p := a.Float(1.0 / 6227020800) // 1/13!
	for k := 12; k >= 0; k-- {
		f := 1.0
		for j := 2; j <= k; j++ {
			f *= float64(j)
		}
		p = a.FAdd(a.FMul(p, r), a.Float(1/f))
	}
	// 2^n: n+1023 in the exponent field; t's bits are roundMagic's plus n.
	scale := a.FromBits(a.Shl(a.IAdd(a.Bits(t), a.Uint(1023-math.Float64bits(roundMagic))), 52))
	return a.FMul(p, scale)
}

// arithFloor is ⌊x⌋ for |x| < 2^51 (x itself is returned past it, where
// every float64 is an integer, and for NaN).
func arithFloor[V any](a Arith[V], x V) V {
	r := a.FSub(a.FAdd(x, a.Float(roundMagic)), a.Float(roundMagic))
	r = a.Select(a.Less(x, r), a.FSub(r, a.Float(1)), r)
	return a.Select(a.Less(a.Abs(x), a.Float(0x1p51)), r, x)
}

// goArith is Arith over Go values: uint64s, float64s as their bits,
// booleans as 0 and 1. The conversions float64(...) keep the compiler
// from fusing a product into a sum.
type goArith struct{}

func fl(v uint64) float64 { return math.Float64frombits(v) }
func bt(f float64) uint64 { return math.Float64bits(f) }

func (goArith) Uint(c uint64) uint64        { return c }
func (goArith) Float(c float64) uint64      { return bt(c) }
func (goArith) IAdd(a, b uint64) uint64     { return a + b }
func (goArith) IMul(a, b uint64) uint64     { return a * b }
func (goArith) Xor(a, b uint64) uint64      { return a ^ b }
func (goArith) And(a, b uint64) uint64      { return a & b }
func (goArith) Or(a, b uint64) uint64       { return a | b }
func (goArith) Shl(a uint64, n uint) uint64 { return a << n }
func (goArith) Shr(a uint64, n uint) uint64 { return a >> n }
func (goArith) FAdd(a, b uint64) uint64     { return bt(float64(fl(a) + fl(b))) }
func (goArith) FSub(a, b uint64) uint64     { return bt(float64(fl(a) - fl(b))) }
func (goArith) FMul(a, b uint64) uint64     { return bt(float64(fl(a) * fl(b))) }
func (goArith) FDiv(a, b uint64) uint64     { return bt(float64(fl(a) / fl(b))) }
func (goArith) Sqrt(a uint64) uint64        { return bt(math.Sqrt(fl(a))) }
func (goArith) Abs(a uint64) uint64         { return bt(math.Abs(fl(a))) }
func (goArith) ToFloat(a uint64) uint64     { return bt(float64(a)) }
func (goArith) Bits(a uint64) uint64        { return a }
func (goArith) FromBits(a uint64) uint64    { return a }

func (goArith) Less(a, b uint64) uint64   { return b2u(fl(a) < fl(b)) }
func (goArith) LessEq(a, b uint64) uint64 { return b2u(fl(a) <= fl(b)) }
func (goArith) Select(c, a, b uint64) uint64 {
	if c != 0 {
		return a
	}
	return b
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
