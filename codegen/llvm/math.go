package llvm

import (
	"math"
	"math/big"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Float functions on float32 scalars or vectors, written as polynomials
// (Cephes' single-precision forms) so that they vectorize and call no
// library: engines are self-contained. NaN in gives NaN out; ±Inf and the
// edges of each domain give what C's libm gives.

func (f *Fn) fc(t value.Value, c float64) value.Value { return typedConst(t.Type(), c) }

func (f *Fn) fcmp(p enum.FPred, x, y value.Value) value.Value { return f.B.NewFCmp(p, x, y) }

func (f *Fn) sel(c, x, y value.Value) value.Value { return f.B.NewSelect(c, x, y) }

func (f *Fn) fma(a, b, c value.Value) value.Value {
	return f.Call("llvm.fma."+suffix(a.Type()), a.Type(), a, b, c)
}

func (f *Fn) intrinsic1(name string, x value.Value) value.Value {
	return f.Call("llvm."+name+"."+suffix(x.Type()), x.Type(), x)
}

// FMax is max(x, y) with NaN propagating from either operand (ONNX Max,
// Relu and Clip; numpy's maximum): y is kept only when x is not greater
// and not NaN.
func (f *Fn) FMax(x, y value.Value) value.Value {
	if isFloatConst(y) {
		// y is not NaN: x < y ? y : x keeps a NaN x and is one vmaxps.
		return f.sel(f.fcmp(enum.FPredOLT, x, y), y, x)
	}
	// x > y ? x : y is one vmaxps (y when either is NaN); then a NaN x.
	m := f.sel(f.fcmp(enum.FPredOGT, x, y), x, y)
	return f.sel(f.fcmp(enum.FPredUNO, x, x), x, m)
}

// FMin is min(x, y) with NaN propagating from either operand.
func (f *Fn) FMin(x, y value.Value) value.Value {
	if isFloatConst(y) {
		return f.sel(f.fcmp(enum.FPredOGT, x, y), y, x)
	}
	m := f.sel(f.fcmp(enum.FPredOLT, x, y), x, y)
	return f.sel(f.fcmp(enum.FPredUNO, x, x), x, m)
}

// isFloatConst reports whether v is a non-NaN float constant (or a vector
// of them).
func isFloatConst(v value.Value) bool {
	return everyFloatConst(v, func(c *constant.Float) bool { return !c.NaN })
}

// isOneConst reports whether v is the constant 1.0, or a vector of them.
func isOneConst(v value.Value) bool {
	return everyFloatConst(v, func(c *constant.Float) bool { return !c.NaN && c.X != nil && c.X.Cmp(big.NewFloat(1)) == 0 })
}

// everyFloatConst reports whether v is a float constant, or a non-empty
// vector of them, each meeting ok.
func everyFloatConst(v value.Value, ok func(*constant.Float) bool) bool {
	switch c := v.(type) {
	case *constant.Float:
		return ok(c)
	case *constant.Vector:
		for _, e := range c.Elems {
			if !everyFloatConst(e, ok) {
				return false
			}
		}
		return len(c.Elems) > 0
	case *constant.ZeroInitializer: // a vector of +0 (splatConst)
		if vt, isVec := c.Typ.(*types.VectorType); isVec {
			if ft, isFloat := vt.ElemType.(*types.FloatType); isFloat {
				return ok(constant.NewFloat(ft, 0))
			}
		}
	}
	return false
}

// FastMath is what a Host may offer beyond generic LLVM IR for vectors of
// type t (AVX-512's vscalefps and vrcp14ps on 16 floats): the pieces of
// Exp and of a reciprocal that otherwise take the exponent-bit trick with
// its edge selects and a vdivps (a third of EfficientNet's time went to
// its SiLUs).
type FastMath interface {
	Fast(t types.Type) bool
	// Scale is x·2^n, n integral (as float), saturating to ±Inf and 0.
	Scale(f *Fn, x, n value.Value) value.Value
	// RecipEstimate is 1/x within 2^-14 relative (±Inf at ±0, ±0 at ±Inf).
	RecipEstimate(f *Fn, x value.Value) value.Value
}

// fast returns the host's FastMath for vectors of x's type, or nil.
func (f *Fn) fast(x value.Value) FastMath {
	if fm, ok := f.Host.(FastMath); ok && fm.Fast(x.Type()) {
		return fm
	}
	return nil
}

// Recip is 1/x: with FastMath, the estimate and one Newton step (within
// an ulp or two of the division); where the step gives NaN (x ±0, ±Inf,
// NaN, or so small that 1/x overflows) the estimate, which is exact there.
func (f *Fn) Recip(x value.Value) value.Value {
	fm := f.fast(x)
	if fm == nil {
		return f.B.NewFDiv(f.fc(x, 1), x)
	}
	r := fm.RecipEstimate(f, x)
	e := f.fma(f.B.NewFNeg(x), r, f.fc(x, 1))
	r1 := f.fma(r, e, r)
	return f.sel(f.fcmp(enum.FPredUNO, r1, r1), r, r1)
}

// recipFinite is 1/x for x finite and nonzero (or NaN): Recip without the
// edge select, which only those edges need.
func (f *Fn) recipFinite(x value.Value) value.Value {
	fm := f.fast(x)
	if fm == nil {
		return f.B.NewFDiv(f.fc(x, 1), x)
	}
	r := fm.RecipEstimate(f, x)
	return f.fma(r, f.fma(f.B.NewFNeg(x), r, f.fc(x, 1)), r)
}

// Exp is e^x: range reduction by ln 2, a degree-5 polynomial and 2^n built
// in the exponent bits; above 88.72 it is +Inf, below -103.9 it is 0.
func (f *Fn) Exp(x value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	if fm := f.fast(x); fm != nil {
		// 2^n by vscalefps, which saturates above, and NaN stays NaN
		// through the clamps (FMax/FMin keep a NaN x). Below expMin the
		// result is 0, not the subnormal vscalefps would make: each of
		// those takes a microcode assist (a masked softmax's exp(-Inf)
		// ran 4× slower), and results below 2^-126 may flush to zero.
		xc := f.FMin(f.FMax(x, c(expMin)), c(89))
		n := f.expN(xc)
		y := fm.Scale(f, f.expPoly(xc, n), n)
		return f.sel(f.fcmp(enum.FPredOLT, x, c(expMin)), c(0), y)
	}
	y := f.ExpClamped(x)
	y = f.sel(f.fcmp(enum.FPredOGT, x, c(88.72283905206835)), c(math.Inf(1)), y)
	y = f.sel(f.fcmp(enum.FPredOLT, x, c(-103.97)), c(0), y)
	return f.sel(f.fcmp(enum.FPredUNO, x, x), x, y)
}

// ExpClamped is e^x for x clamped to [-87.3, 88.4] (so never 0 or Inf;
// NaN gives NaN): enough inside functions that saturate anyway, such as
// Tanh, without Exp's edge selects.
func (f *Fn) ExpClamped(x value.Value) value.Value {
	return f.expIn(f.FMin(f.FMax(x, f.fc(x, expMin)), f.fc(x, expMax)))
}

// ExpClamped's range: e^x is a normal float.
const expMin, expMax = -87.3365447504, 88.3762626647949

// expIn is e^x for x in [expMin, 89], or NaN: a normal float up to
// expMax, +Inf past 88.72.
func (f *Fn) expIn(x value.Value) value.Value {
	n := f.expN(x)
	y := f.expPoly(x, n)
	if fm := f.fast(x); fm != nil {
		return fm.Scale(f, y, n)
	}
	it := intTypeLike(x.Type())
	ni := f.B.NewFPToSI(n, it)
	bits := f.B.NewShl(f.B.NewAdd(ni, intConstLike(it, 127)), intConstLike(it, 23))
	return f.B.NewFMul(y, f.B.NewBitCast(bits, x.Type()))
}

// expN is round(x / ln 2) as a float, for |x| < 2^22: adding 1.5·2^23
// leaves the integer in the mantissa (an fma and a subtraction, where
// floor is two µops on x86).
func (f *Fn) expN(x value.Value) value.Value {
	const magic = 0x1.8p23
	return f.B.NewFSub(f.fma(x, f.fc(x, 1.44269504088896341), f.fc(x, magic)), f.fc(x, magic))
}

// expPoly is e^(x - n·ln 2) for n = round(x / ln 2): ln 2 in two parts,
// then a degree-5 polynomial.
func (f *Fn) expPoly(x, n value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	r := f.fma(n, c(-0.693359375), x)
	r = f.fma(n, c(2.12194440e-4), r)
	p := c(1.9875691500e-4)
	for _, k := range []float64{1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1} {
		p = f.fma(p, r, c(k))
	}
	// 1 + r + p·r² as 1 + r·(1 + p·r): two fmas where a multiply, an
	// fma and an add were three.
	return f.fma(f.fma(p, r, c(1)), r, c(1))
}

// Log is the natural logarithm: x = m·2^e with m in [√½, √2), log m by a
// degree-9 polynomial in m-1; log 0 is -Inf, log of a negative is NaN, log
// +Inf is +Inf. Subnormal x are scaled up first.
func (f *Fn) Log(x value.Value) value.Value {
	t := x.Type()
	c := func(v float64) value.Value { return f.fc(x, v) }
	it := intTypeLike(t)
	sub := f.fcmp(enum.FPredOLT, x, c(1.17549435e-38))
	xs := f.sel(sub, f.B.NewFMul(x, c(8388608)), x) // 2^23
	bits := f.B.NewBitCast(xs, it)
	var e value.Value = f.B.NewSIToFP(f.B.NewSub(f.B.NewAShr(bits, intConstLike(it, 23)), intConstLike(it, 126)), t)
	e = f.sel(sub, f.B.NewFSub(e, c(23)), e)
	mant := f.B.NewAnd(bits, intConstLike(it, -0x7f800001))
	var m value.Value = f.B.NewBitCast(f.B.NewOr(mant, intConstLike(it, 0x3f000000)), t)
	small := f.fcmp(enum.FPredOLT, m, c(0.707106781186547524))
	e = f.sel(small, f.B.NewFSub(e, c(1)), e)
	m = f.sel(small, f.B.NewFAdd(m, m), m)
	m = f.B.NewFSub(m, c(1))
	z := f.B.NewFMul(m, m)
	p := c(7.0376836292e-2)
	for _, k := range []float64{-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1} {
		p = f.fma(p, m, c(k))
	}
	var y value.Value = f.B.NewFMul(f.B.NewFMul(p, m), z)
	y = f.fma(e, c(-2.12194440e-4), y)
	y = f.fma(z, c(-0.5), y)
	r := f.fma(e, c(0.693359375), f.B.NewFAdd(m, y))
	r = f.sel(f.fcmp(enum.FPredOEQ, x, c(math.Inf(1))), x, r)
	r = f.sel(f.fcmp(enum.FPredOEQ, x, c(0)), c(math.Inf(-1)), r)
	return f.sel(f.fcmp(enum.FPredULT, x, c(0)), c(math.NaN()), r) // NaN or negative
}

// Erf is the rational approximation Eigen and XLA use for float32 (x
// clamped to [-4, 4], a few ulp).
func (f *Fn) Erf(x value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	x = f.FMax(f.FMin(x, c(4)), c(-4))
	x2 := f.B.NewFMul(x, x)
	p := f.fma(x2, c(-2.72614225801306e-10), c(2.77068142495902e-08))
	for _, k := range []float64{-2.10102402082508e-06, -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02} {
		p = f.fma(x2, p, c(k))
	}
	p = f.B.NewFMul(x, p)
	q := f.fma(x2, c(-1.45660718464996e-05), c(-2.13374055278905e-04))
	for _, k := range []float64{-1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02} {
		q = f.fma(x2, q, c(k))
	}
	return f.B.NewFDiv(p, q)
}

// Tanh is 1 - 2/(e^{2x}+1), and below |x| = 0.625, where that subtraction
// cancels (3,000 ulp at x = 5e-4), Cephes' odd polynomial x + x³·P(x²).
func (f *Fn) Tanh(x value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	e := f.ExpClamped(f.B.NewFMul(x, c(2)))
	y := f.fma(c(-2), f.recipFinite(f.B.NewFAdd(e, c(1))), c(1))
	z := f.B.NewFMul(x, x)
	p := c(-5.70498872745e-3)
	for _, k := range []float64{2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1} {
		p = f.fma(p, z, c(k))
	}
	small := f.fma(f.B.NewFMul(p, z), x, x)
	return f.sel(f.fcmp(enum.FPredOLT, f.intrinsic1("fabs", x), c(0.625)), small, y)
}

// Sigmoid is 1/(1+e^-x) for x clamped to [-89, 87.3]: the sum lies in
// [1, +Inf] and its reciprocal needs no edge select (results below 2^-126
// may flush to zero). Float64 keeps the division and Exp64.
func (f *Fn) Sigmoid(x value.Value) value.Value {
	one := f.fc(x, 1)
	if isF64(x) {
		return f.B.NewFDiv(one, f.B.NewFAdd(one, f.Exp64(f.B.NewFNeg(x))))
	}
	// Clamping x rather than -x lets the negation fold into expIn's fmas.
	xc := f.FMin(f.FMax(x, f.fc(x, -89)), f.fc(x, -expMin))
	d := f.B.NewFAdd(f.expIn(f.B.NewFNeg(xc)), one)
	fm := f.fast(x)
	if fm == nil {
		return f.B.NewFDiv(one, d)
	}
	// Below -88.72 e^-x is +Inf (vscalefps saturates) and its estimate 0;
	// the Newton step takes the sum capped at the largest float so that
	// it keeps that 0 (Sigmoid(-Inf) = 0, SiLU(-Inf) = NaN as in ONNX)
	// where Inf·0 would make it NaN.
	r := fm.RecipEstimate(f, d)
	dc := f.FMin(d, f.fc(x, math.MaxFloat32))
	return f.fma(r, f.fma(f.B.NewFNeg(dc), r, one), r)
}

// Sin and Cos reduce x by π/4 (Cody-Waite, three parts of π/4) and
// evaluate Cephes' sinf/cosf polynomials on [-π/4, π/4].
func (f *Fn) Sin(x value.Value) value.Value { return f.sinCos(x, false) }

// Cos is cos x; see Sin.
func (f *Fn) Cos(x value.Value) value.Value { return f.sinCos(x, true) }

func (f *Fn) sinCos(x value.Value, cos bool) value.Value {
	t := x.Type()
	c := func(v float64) value.Value { return f.fc(x, v) }
	it := intTypeLike(t)
	ax := f.intrinsic1("fabs", x)
	var j value.Value = f.B.NewFPToSI(f.B.NewFMul(ax, c(4/math.Pi)), it)
	// j rounded up to even, and y its float.
	j = f.B.NewAnd(f.B.NewAdd(j, intConstLike(it, 1)), intConstLike(it, -2))
	y := f.B.NewSIToFP(j, t)
	z := f.fma(y, c(-0.78515625), ax)
	z = f.fma(y, c(-2.4187564849853515625e-4), z)
	z = f.fma(y, c(-3.77489497744594108e-8), z)
	zz := f.B.NewFMul(z, z)
	// cos poly and sin poly on the reduced argument.
	pc := f.fma(f.fma(c(2.443315711809948e-5), zz, c(-1.388731625493765e-3)), zz, c(4.166664568298827e-2))
	pc = f.B.NewFAdd(f.B.NewFSub(f.B.NewFMul(f.B.NewFMul(pc, zz), zz), f.B.NewFMul(zz, c(0.5))), c(1))
	ps := f.fma(f.fma(c(-1.9515295891e-4), zz, c(8.3321608736e-3)), zz, c(-1.6666654611e-1))
	ps = f.fma(f.B.NewFMul(ps, zz), z, z)
	// Octant j (even, mod 8): which polynomial and which sign.
	if cos { // cos x = sin(x + π/2): two octants on
		j = f.B.NewAdd(j, intConstLike(it, 2))
	}
	swap := f.B.NewICmp(enum.IPredNE, f.B.NewAnd(j, intConstLike(it, 2)), intConstLike(it, 0))
	r := f.sel(swap, pc, ps)
	var neg value.Value = f.B.NewICmp(enum.IPredNE, f.B.NewAnd(j, intConstLike(it, 4)), intConstLike(it, 0))
	if !cos {
		// sin is odd: the sign of x flips the result.
		neg = f.B.NewXor(neg, f.fcmp(enum.FPredOLT, x, c(0)))
	}
	r = f.sel(neg, f.B.NewFNeg(r), r)
	// Beyond 2^24·π/4 the reduction loses every bit; ±Inf and NaN give NaN.
	bad := f.fcmp(enum.FPredUGE, ax, c(8192*math.Pi))
	return f.sel(bad, c(math.NaN()), r)
}

// Atan is Cephes' atanf: reduction to [0, tan π/8] by the identities for
// x > tan 3π/8 and x > tan π/8, then an odd polynomial.
func (f *Fn) Atan(x value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	ax := f.intrinsic1("fabs", x)
	big := f.fcmp(enum.FPredOGT, ax, c(2.414213562373095))
	mid := f.fcmp(enum.FPredOGT, ax, c(0.4142135623730950))
	xb := f.B.NewFDiv(c(-1), ax)
	xm := f.B.NewFDiv(f.B.NewFSub(ax, c(1)), f.B.NewFAdd(ax, c(1)))
	xr := f.sel(big, xb, f.sel(mid, xm, ax))
	y0 := f.sel(big, c(math.Pi/2), f.sel(mid, c(math.Pi/4), c(0)))
	z := f.B.NewFMul(xr, xr)
	p := f.fma(f.fma(f.fma(c(8.05374449538e-2), z, c(-1.38776856032e-1)), z, c(1.99777106478e-1)), z, c(-3.33329491539e-1))
	var r value.Value = f.B.NewFAdd(y0, f.fma(f.B.NewFMul(p, z), xr, xr))
	r = f.sel(f.fcmp(enum.FPredOLT, x, c(0)), f.B.NewFNeg(r), r)
	return f.sel(f.fcmp(enum.FPredUNO, x, x), x, r)
}

// Pow is x^y for floats: exp(y·log|x|), negated for a negative x and an
// odd integer y, NaN for a negative x and a non-integer y; x = 0 gives 0,
// 1 or +Inf by the sign of y, y = 0 gives 1, x = 1 gives 1. Doubles
// compute in double precision.
func (f *Fn) Pow(x, y value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	z := f.B.NewFMul(y, f.log(f.intrinsic1("fabs", x)))
	r := f.exp(z)
	isInt := f.fcmp(enum.FPredOEQ, f.intrinsic1("floor", y), y)
	half := f.B.NewFMul(y, c(0.5))
	odd := f.B.NewAnd(isInt, f.fcmp(enum.FPredONE, f.intrinsic1("floor", half), half))
	// A negative base takes the sign of an odd exponent; with any other
	// non-integer exponent it has no real power (NaN), except -Inf's.
	powered := f.B.NewOr(isInt, f.fcmp(enum.FPredOEQ, x, c(math.Inf(-1))))
	neg := f.sel(odd, f.B.NewFNeg(r), f.sel(powered, r, c(math.NaN())))
	r = f.sel(f.fcmp(enum.FPredOLT, x, c(0)), neg, r)
	atZero := f.sel(f.fcmp(enum.FPredOGT, y, c(0)), c(0), c(math.Inf(1)))
	r = f.sel(f.fcmp(enum.FPredOEQ, x, c(0)), atZero, r)
	// 1^y is 1 for every y, and so is (-1)^±Inf (C99, Go's math.Pow).
	unit := f.B.NewOr(f.fcmp(enum.FPredOEQ, x, c(1)),
		f.B.NewAnd(f.fcmp(enum.FPredOEQ, x, c(-1)), f.fcmp(enum.FPredOEQ, f.intrinsic1("fabs", y), c(math.Inf(1)))))
	r = f.sel(unit, c(1), r)
	r = f.sel(f.fcmp(enum.FPredOEQ, y, c(0)), c(1), r)
	// Integer exponents up to 127 multiply by squaring: exact where the
	// result is representable (3^6 is 729, not 728.99997).
	small := f.B.NewAnd(isInt, f.fcmp(enum.FPredOLE, f.intrinsic1("fabs", y), c(127)))
	it := intTypeLike(y.Type())
	e := f.B.NewFPToSI(f.FMin(f.intrinsic1("fabs", y), c(127)), it)
	var acc, base value.Value = c(1), x
	for bit := 0; bit < 7; bit++ {
		set := f.B.NewICmp(enum.IPredNE, f.B.NewAnd(e, intConstLike(it, 1<<bit)), intConstLike(it, 0))
		acc = f.sel(set, f.B.NewFMul(acc, base), acc)
		base = f.B.NewFMul(base, base)
	}
	acc = f.sel(f.fcmp(enum.FPredOLT, y, c(0)), f.B.NewFDiv(c(1), acc), acc)
	return f.sel(small, acc, r)
}

// isF64 reports whether v holds doubles.
func isF64(v value.Value) bool { return elemOf(v.Type()).Equal(f64) }

// exp and log pick the precision of x.
func (f *Fn) exp(x value.Value) value.Value {
	if isF64(x) {
		return f.Exp64(x)
	}
	return f.Exp(x)
}

func (f *Fn) log(x value.Value) value.Value {
	if isF64(x) {
		return f.Log64(x)
	}
	return f.Log(x)
}

// Exp64 is e^x in double precision: x = n·ln 2 + r with |r| ≤ ln2/2 (ln 2
// in two parts), e^r by its Taylor series to r^13 (error below 1e-15), and
// 2^n built in the exponent bits in two halves so that subnormal results
// and n = 1024 stay exact.
func (f *Fn) Exp64(x value.Value) value.Value {
	c := func(v float64) value.Value { return f.fc(x, v) }
	xc := f.FMin(f.FMax(x, c(-745.2)), c(709.8))
	n := f.intrinsic1("rint", f.B.NewFMul(xc, c(1/math.Ln2)))
	r := f.fma(n, c(-6.93147180369123816490e-01), xc)
	r = f.fma(n, c(-1.90821492927058770002e-10), r)
	p := c(1.0 / 6227020800) // 1/13!
	fact := 6227020800.0
	for k := 12; k >= 1; k-- {
		fact /= float64(k + 1)
		p = f.fma(p, r, c(1/fact))
	}
	y := f.fma(p, r, c(1))
	it := intTypeLike(x.Type())
	ni := f.B.NewFPToSI(n, it)
	half := f.B.NewAShr(ni, intConstLike(it, 1))
	rest := f.B.NewSub(ni, half)
	pow2 := func(e value.Value) value.Value {
		return f.B.NewBitCast(f.B.NewShl(f.B.NewAdd(e, intConstLike(it, 1023)), intConstLike(it, 52)), x.Type())
	}
	var out value.Value = f.B.NewFMul(f.B.NewFMul(y, pow2(half)), pow2(rest))
	out = f.sel(f.fcmp(enum.FPredOGT, x, c(709.782712893384)), c(math.Inf(1)), out)
	out = f.sel(f.fcmp(enum.FPredOLT, x, c(-745.2)), c(0), out)
	return f.sel(f.fcmp(enum.FPredUNO, x, x), x, out)
}

// Log64 is the natural logarithm in double precision: x = m·2^e with m in
// [√½, √2), log m = 2·atanh(s) for s = (m-1)/(m+1) by its series to s^21
// (|s| < 0.172: error below 1e-16); edges as Log.
func (f *Fn) Log64(x value.Value) value.Value {
	t := x.Type()
	c := func(v float64) value.Value { return f.fc(x, v) }
	it := intTypeLike(t)
	sub := f.fcmp(enum.FPredOLT, x, c(2.2250738585072014e-308))
	xs := f.sel(sub, f.B.NewFMul(x, c(18014398509481984)), x) // 2^54
	bits := f.B.NewBitCast(xs, it)
	var e value.Value = f.B.NewSIToFP(f.B.NewSub(f.B.NewLShr(bits, intConstLike(it, 52)), intConstLike(it, 1022)), t)
	e = f.sel(sub, f.B.NewFSub(e, c(54)), e)
	mant := f.B.NewAnd(bits, intConstLike(it, 0x000fffffffffffff))
	var m value.Value = f.B.NewBitCast(f.B.NewOr(mant, intConstLike(it, 0x3fe0000000000000)), t) // [0.5, 1)
	small := f.fcmp(enum.FPredOLT, m, c(math.Sqrt2/2))
	e = f.sel(small, f.B.NewFSub(e, c(1)), e)
	m = f.sel(small, f.B.NewFAdd(m, m), m)
	s := f.B.NewFDiv(f.B.NewFSub(m, c(1)), f.B.NewFAdd(m, c(1)))
	s2 := f.B.NewFMul(s, s)
	p := c(1.0 / 21)
	for k := 19; k >= 1; k -= 2 {
		p = f.fma(p, s2, c(1/float64(k)))
	}
	lm := f.B.NewFMul(f.B.NewFMul(s, p), c(2))
	r := f.fma(e, c(math.Ln2), lm)
	r = f.sel(f.fcmp(enum.FPredOEQ, x, c(math.Inf(1))), x, r)
	r = f.sel(f.fcmp(enum.FPredOEQ, x, c(0)), c(math.Inf(-1)), r)
	return f.sel(f.fcmp(enum.FPredULT, x, c(0)), c(math.NaN()), r)
}
