package kernel

import (
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Elementwise ops: each output element is a function of the inputs'
// elements at the same (broadcast) index.

// Broadcast is the index into b for the point Vars(outRank) of a space
// b broadcasts to (numpy rules, aligned at the last axis): axes of static
// extent 1 read index 0; axes whose extent equals the space's read the
// coordinate; others decide at run time.
func Broadcast(b *Buffer, space []*Expr) []*Expr {
	off := len(space) - b.Rank()
	idx := make([]*Expr, b.Rank())
	for i, d := range b.Dims {
		v := Var(off + i)
		switch n, ok := d.IntValue(); {
		case ok && n == 1:
			idx[i] = C(0)
		case sameExtent(d, space[off+i]):
			idx[i] = v
		default:
			idx[i] = Select(Eq(d, C(1)), C(0), v)
		}
	}
	return idx
}

// sameExtent reports whether two extents are provably equal.
func sameExtent(a, b *Expr) bool {
	if a == b {
		return true
	}
	x, ok1 := a.IntValue()
	y, ok2 := b.IntValue()
	if ok1 && ok2 {
		return x == y
	}
	return a.Op == OpSym && b.Op == OpSym && a.Name == b.Name
}

// Elementwise returns the kernel writing out from f of the inputs read
// with broadcasting.
func Elementwise(out *Buffer, f func(xs []*Expr) *Expr, ins ...*Buffer) *Kernel {
	xs := make([]*Expr, len(ins))
	for i, b := range ins {
		xs[i] = Load(b, Broadcast(b, out.Dims)...)
	}
	return &Kernel{Out: out, Space: out.Dims, Value: StoreAs(f(xs), out.DType)}
}

// StoreAs converts v for storing as type d: Float16 and BFloat16 outputs
// take float32 values (the store rounds them).
func StoreAs(v *Expr, d ir.DType) *Expr {
	if ComputeType(d) == v.Type {
		return v
	}
	return CastTo(v, d)
}

// unary defines an op y = f(x) computed in x's compute type.
func unaryDef(types []ir.DType, f func(c *Ctx, x *Expr) *Expr) *OpDef {
	return &OpDef{Types: types, Elementwise: true, Build: func(c *Ctx) error {
		c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr { return f(c, xs[0]) }, c.In[0]))
		return nil
	}}
}

// floatOp defines a float function; integer inputs (Erf takes them) are
// computed in float64 and converted back.
func floatOp(types []ir.DType, f func(x *Expr) *Expr) *OpDef {
	return unaryDef(types, func(c *Ctx, x *Expr) *Expr {
		if !x.Type.IsFloat() {
			return CastTo(f(CastTo(x, ir.Float64)), x.Type)
		}
		return f(x)
	})
}

func binaryDef(types []ir.DType, f func(c *Ctx, x, y *Expr) *Expr) *OpDef {
	return &OpDef{Types: types, Elementwise: true, Build: func(c *Ctx) error {
		c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr { return f(c, xs[0], xs[1]) }, c.In[0], c.In[1]))
		return nil
	}}
}

// variadic defines Max, Min, Sum and Mean over any number of inputs.
func variadic(types []ir.DType, f func(x, y *Expr) *Expr, mean bool) *OpDef {
	return &OpDef{Types: types, Elementwise: true, Build: func(c *Ctx) error {
		c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr {
			acc := xs[0]
			for _, x := range xs[1:] {
				acc = f(acc, x)
			}
			if mean {
				acc = Div(acc, Const(acc.Type, float64(len(xs))))
			}
			return acc
		}, c.In...))
		return nil
	}}
}

// attrF is a float attribute as a constant of x's type.
func attrF(c *Ctx, x *Expr, name string) *Expr { return Const(x.Type, float64(c.Float(name))) }

func num(x *Expr, v float64) *Expr { return Const(x.Type, v) }

// Composite float functions, built from the primitives.

// Expm1 is e^x - 1, by its Taylor series near 0 where the subtraction
// would cancel.
func Expm1(x *Expr) *Expr {
	small := Lt(Abs(x), num(x, 1e-3))
	series := Mul(x, Add(num(x, 1), Mul(x, Add(num(x, 0.5), Mul(x, num(x, 1.0/6))))))
	return Select(small, series, Sub(Exp(x), num(x, 1)))
}

// Softplus is log(1+e^x) without overflow.
func Softplus(x *Expr) *Expr {
	return Add(Max(x, num(x, 0)), Log(Add(num(x, 1), Exp(Neg(Abs(x))))))
}

// Tan is sin/cos.
func Tan(x *Expr) *Expr { return Div(Sin(x), Cos(x)) }

// Asin is atan(x/√(1-x²)) (NaN beyond ±1).
func Asin(x *Expr) *Expr { return Atan(Div(x, Sqrt(Sub(num(x, 1), Mul(x, x))))) }

// Acos is 2·atan(√((1-x)/(1+x))), accurate near both ends.
func Acos(x *Expr) *Expr {
	return Mul(num(x, 2), Atan(Sqrt(Div(Sub(num(x, 1), x), Add(num(x, 1), x)))))
}

// Sinh is (e^x - e^-x)/2, by its series near 0.
func Sinh(x *Expr) *Expr {
	x2 := Mul(x, x)
	series := Mul(x, Add(num(x, 1), Mul(x2, Add(num(x, 1.0/6), Mul(x2, num(x, 1.0/120))))))
	e := Exp(x)
	return Select(Lt(Abs(x), num(x, 0.1)), series, Mul(num(x, 0.5), Sub(e, Div(num(x, 1), e))))
}

// Cosh is (e^x + e^-x)/2.
func Cosh(x *Expr) *Expr {
	e := Exp(Abs(x))
	return Mul(num(x, 0.5), Add(e, Div(num(x, 1), e)))
}

// smallArg is where the inverse hyperbolic functions take their series:
// log(1 + t) for a small t loses its relative precision (float64's cutoff
// is lower, its series error being larger against its epsilon).
func smallArg(x *Expr) *Expr {
	if x.Type == ir.Float64 {
		return num(x, 0.01)
	}
	return num(x, 0.1)
}

// logLarge is log(2a) for an a whose square would overflow: there
// a + √(a²±1) is 2a to the type's precision.
func logLarge(a *Expr) *Expr { return Add(Log(a), num(a, math.Ln2)) }

// hugeArg is where a² overflows float32 (and is far past float64's
// rounding of a + √(a²±1) to 2a).
func hugeArg(x *Expr) *Expr { return num(x, 1e18) }

// Asinh is sign(x)·log(|x| + √(x²+1)), by its series near 0.
func Asinh(x *Expr) *Expr {
	a, x2 := Abs(x), Mul(x, x)
	series := Mul(x, Add(num(x, 1), Mul(x2, Add(num(x, -1.0/6), Mul(x2, Add(num(x, 3.0/40), Mul(x2, Add(num(x, -15.0/336), Mul(x2, num(x, 105.0/3456))))))))))
	big := Select(Gt(a, hugeArg(x)), logLarge(a), Log(Add(a, Sqrt(Add(Mul(a, a), num(x, 1))))))
	return Select(Lt(a, smallArg(x)), series, Select(Lt(x, num(x, 0)), Neg(big), big))
}

// Acosh is log(x + √(x²-1)) (NaN below 1).
func Acosh(x *Expr) *Expr {
	return Select(Gt(x, hugeArg(x)), logLarge(x), Log(Add(x, Sqrt(Sub(Mul(x, x), num(x, 1))))))
}

// Atanh is log((1+x)/(1-x))/2, by its series near 0.
func Atanh(x *Expr) *Expr {
	x2 := Mul(x, x)
	series := Mul(x, Add(num(x, 1), Mul(x2, Add(num(x, 1.0/3), Mul(x2, Add(num(x, 1.0/5), Mul(x2, Add(num(x, 1.0/7), Mul(x2, num(x, 1.0/9))))))))))
	return Select(Lt(Abs(x), smallArg(x)), series, Mul(num(x, 0.5), Log(Div(Add(num(x, 1), x), Sub(num(x, 1), x)))))
}

// Sign is -1, 0 or 1 (NaN stays NaN).
func Sign(x *Expr) *Expr {
	s := Select(Gt(x, num(x, 0)), num(x, 1), Select(Lt(x, num(x, 0)), num(x, -1), num(x, 0)))
	if x.Type.IsFloat() {
		s = Select(IsNaN(x), x, s)
	}
	return s
}

// FloorModOf is x mod y with the divisor's sign (Python's %).
func FloorModOf(x, y *Expr) *Expr {
	r := Rem(x, y)
	zero := num(r, 0)
	adjust := And(Ne(r, zero), Ne(Lt(r, zero), Lt(y, zero)))
	if x.Type.IsUnsigned() {
		return r
	}
	return Select(adjust, Add(r, y), r)
}

// Relu is max(x, 0), NaN kept.
func Relu(x *Expr) *Expr { return Max(x, num(x, 0)) }

func init() {
	floats := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	signed := []ir.DType{ir.Int8, ir.Int16, ir.Int32, ir.Int64}
	unsigned := []ir.DType{ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
	numeric := concat(floats, signed, unsigned)
	signedFloat := concat(floats, signed)
	integers := concat(signed, unsigned)
	boolean := []ir.DType{ir.Bool}
	all := concat(numeric, boolean)
	castable := concat(all, smallTypes)

	fl := func(f func(x *Expr) *Expr) *OpDef { return floatOp(floats, f) }
	rows := map[string]*OpDef{
		"Sqrt":  fl(Sqrt),
		"Exp":   fl(Exp),
		"Log":   fl(Log),
		"Sin":   fl(Sin),
		"Cos":   fl(Cos),
		"Tan":   fl(Tan),
		"Asin":  fl(Asin),
		"Acos":  fl(Acos),
		"Atan":  fl(Atan),
		"Sinh":  fl(Sinh),
		"Cosh":  fl(Cosh),
		"Asinh": fl(Asinh),
		"Acosh": fl(Acosh),
		"Atanh": fl(Atanh),
		"Tanh":  fl(Tanh),
		"Erf": unaryDef(numeric, func(_ *Ctx, x *Expr) *Expr {
			if !x.Type.IsFloat() {
				// The reference truncates erf computed in float64, which
				// rounds to ±1 from |x| = 6 on (erf 5 = 1 - 1.5e-12).
				big := Ge(x, IntConst(x.Type, 6))
				if x.Type.IsSigned() {
					big = Or(big, Le(x, IntConst(x.Type, -6)))
				}
				return Select(big, Sign(x), IntConst(x.Type, 0))
			}
			return Erf(x)
		}),
		"Floor":      fl(Floor),
		"Ceil":       fl(Ceil),
		"Round":      fl(Round),
		"Reciprocal": fl(func(x *Expr) *Expr { return Div(num(x, 1), x) }),
		"Sigmoid":    fl(Sigmoid),
		"Softplus":   fl(Softplus),
		"Softsign":   fl(func(x *Expr) *Expr { return Div(x, Add(num(x, 1), Abs(x))) }),
		"Mish":       fl(func(x *Expr) *Expr { return Mul(x, Tanh(Softplus(x))) }),
		"HardSwish": fl(func(x *Expr) *Expr {
			return Mul(x, Clamp(Add(Mul(x, num(x, 1.0/6)), num(x, 0.5)), num(x, 0), num(x, 1)))
		}),
		"IsNaN":      fl(IsNaN),
		"Gelu":       {Types: floats, Elementwise: true, Build: defGelu},
		"Swish":      unaryDef(floats, func(c *Ctx, x *Expr) *Expr { return Mul(x, Sigmoid(Mul(attrF(c, x, "alpha"), x))) }),
		"BitwiseNot": unaryDef(integers, func(_ *Ctx, x *Expr) *Expr { return Not(x) }),
		"BitwiseAnd": binaryDef(integers, func(_ *Ctx, x, y *Expr) *Expr { return And(x, y) }),
		"BitwiseOr":  binaryDef(integers, func(_ *Ctx, x, y *Expr) *Expr { return Or(x, y) }),
		"BitwiseXor": binaryDef(integers, func(_ *Ctx, x, y *Expr) *Expr { return Xor(x, y) }),
		"BitShift":   {Types: unsigned, Elementwise: true, Build: defBitShift},
		"Neg":        unaryDef(signedFloat, func(_ *Ctx, x *Expr) *Expr { return Neg(x) }),
		"Abs":        unaryDef(numeric, func(_ *Ctx, x *Expr) *Expr { return Abs(x) }),
		"Sign":       unaryDef(numeric, func(_ *Ctx, x *Expr) *Expr { return Sign(x) }),
		"Relu":       unaryDef(signedFloat, func(_ *Ctx, x *Expr) *Expr { return Relu(x) }),
		"Not":        unaryDef(boolean, func(_ *Ctx, x *Expr) *Expr { return Not(x) }),
		"LeakyRelu": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			return Select(Lt(x, num(x, 0)), Mul(attrF(c, x, "alpha"), x), x)
		}),
		"ThresholdedRelu": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			return Select(Gt(x, attrF(c, x, "alpha")), x, num(x, 0))
		}),
		"Elu": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			return Select(Lt(x, num(x, 0)), Mul(attrF(c, x, "alpha"), Expm1(x)), x)
		}),
		"Selu": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			a, g := attrF(c, x, "alpha"), attrF(c, x, "gamma")
			return Select(Le(x, num(x, 0)), Mul(Mul(g, a), Expm1(x)), Mul(g, x))
		}),
		"Celu": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			a := attrF(c, x, "alpha")
			return Add(Max(x, num(x, 0)), Min(num(x, 0), Mul(a, Expm1(Div(x, a)))))
		}),
		"HardSigmoid": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			return Clamp(Add(Mul(attrF(c, x, "alpha"), x), attrF(c, x, "beta")), num(x, 0), num(x, 1))
		}),
		"Shrink": unaryDef(numeric, func(c *Ctx, x *Expr) *Expr {
			// The bounds compare in float64 so integer inputs see the
			// fractional lambd as the reference does.
			xf := CastTo(x, ir.Float64)
			bias, lambd := Const(ir.Float64, float64(c.Float("bias"))), Const(ir.Float64, float64(c.Float("lambd")))
			r := Select(Lt(xf, Neg(lambd)), Add(xf, bias), Select(Gt(xf, lambd), Sub(xf, bias), Const(ir.Float64, 0)))
			return CastTo(r, x.Type)
		}),
		"IsInf": unaryDef(floats, func(c *Ctx, x *Expr) *Expr {
			r := Bool(false)
			if c.Int("detect_positive") != 0 {
				r = Or(r, Eq(x, num(x, math.Inf(1))))
			}
			if c.Int("detect_negative") != 0 {
				r = Or(r, Eq(x, num(x, math.Inf(-1))))
			}
			return r
		}),
		"Cast": {Types: castable, Elementwise: true, Build: func(c *Ctx) error {
			return defCast(c, ir.DType(c.Int("to")), castable)
		}},
		// BitCast moves bits: input and output are read and written as
		// the types that hold their bits (BitsType), so no Float16 widens
		// and no signaling NaN meets a float operation. Not elementwise:
		// its views of other types read memory a fused loop never writes.
		"BitCast": {Types: all, Build: func(c *Ctx) error {
			from, to := c.In[0].DType, ir.DType(c.Int("to"))
			if !slices.Contains(all, to) {
				return &ops.UnsupportedError{Op: "BitCast", Opset: c.Opset, DType: to, Reason: "no kernel computes with this type"}
			}
			if from.Size() != to.Size() {
				return c.Unsupported("cannot reinterpret %s as %s: their widths differ", from, to)
			}
			bits := BitsType(to)
			c.Emit(Elementwise(Reinterpret(c.Out[0], bits), func(xs []*Expr) *Expr { return Bitcast(xs[0], bits) },
				Reinterpret(c.In[0], BitsType(from))))
			return nil
		}},
		"CastLike": {Types: castable, Elementwise: true, Build: func(c *Ctx) error {
			return defCast(c, c.Out[0].DType, castable) // input 1's type; its values are not read
		}},
		"Add": binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Add(x, y) }),
		"Sub": binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Sub(x, y) }),
		"Mul": binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Mul(x, y) }),
		"Div": binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Div(x, y) }),
		"Mod": binaryDef(numeric, func(c *Ctx, x, y *Expr) *Expr {
			if c.Int("fmod") != 0 {
				return Rem(x, y)
			}
			return FloorModOf(x, y)
		}),
		"Pow": binaryDef(concat(floats, []ir.DType{ir.Int32, ir.Int64}), func(_ *Ctx, x, y *Expr) *Expr {
			if x.Type.IsFloat() {
				return Pow(x, CastTo(y, x.Type))
			}
			if y.Type.IsFloat() { // an integer base to a float power
				return CastTo(Pow(CastTo(x, ir.Float64), CastTo(y, ir.Float64)), x.Type)
			}
			return Pow(x, CastTo(y, x.Type))
		}),
		"PRelu": binaryDef(concat(floats, []ir.DType{ir.Int32, ir.Int64, ir.Uint32, ir.Uint64}), func(_ *Ctx, x, s *Expr) *Expr {
			return Select(Lt(x, num(x, 0)), Mul(s, x), x)
		}),

		"Equal":          binaryDef(all, func(_ *Ctx, x, y *Expr) *Expr { return Eq(x, y) }),
		"Less":           binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Lt(x, y) }),
		"LessOrEqual":    binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Le(x, y) }),
		"Greater":        binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Gt(x, y) }),
		"GreaterOrEqual": binaryDef(numeric, func(_ *Ctx, x, y *Expr) *Expr { return Ge(x, y) }),
		"And":            binaryDef(boolean, func(_ *Ctx, x, y *Expr) *Expr { return And(x, y) }),
		"Or":             binaryDef(boolean, func(_ *Ctx, x, y *Expr) *Expr { return Or(x, y) }),
		"Xor":            binaryDef(boolean, func(_ *Ctx, x, y *Expr) *Expr { return Xor(x, y) }),

		"Max":  variadic(numeric, Max, false),
		"Min":  variadic(numeric, Min, false),
		"Sum":  variadic(floats, Add, false),
		"Mean": variadic(floats, Add, true),

		"Where": {Types: boolean, Elementwise: true, Build: func(c *Ctx) error {
			c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr { return Select(xs[0], xs[1], xs[2]) }, c.In...))
			return nil
		}},
		"Clip":    {Types: numeric, Elementwise: true, Build: buildClip},
		"Dropout": {Types: floats, Build: defDropout},
	}
	define(rows)
}

// buildClip clamps to bounds from attributes (before opset 11) or from
// optional inputs, constant or read at run time.
func buildClip(c *Ctx) error {
	x := Load(c.In[0], Vars(c.In[0].Rank())...)
	lo, hi := (*Expr)(nil), (*Expr)(nil)
	if c.Opset < 11 {
		if c.Node.Attr("min") != nil {
			lo = Const(x.Type, float64(c.Float("min")))
		}
		if c.Node.Attr("max") != nil {
			hi = Const(x.Type, float64(c.Float("max")))
		}
	} else {
		lo, _ = c.Scalar(1, x.Type)
		hi, _ = c.Scalar(2, x.Type)
	}
	v := x
	if lo != nil {
		v = Max(v, lo)
	}
	if hi != nil {
		v = Min(v, hi)
	}
	c.Emit(&Kernel{Out: c.Out[0], Space: c.Out[0].Dims, Value: StoreAs(v, c.Out[0].DType)})
	return nil
}

// defGelu is x·Φ(x), Φ the normal CDF, or with approximate "tanh" its
// tanh form; the attribute's values are ir/ops' (GeluApproximate).
func defGelu(c *Ctx) error {
	tanh, err := c.GeluTanh()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr {
		x := xs[0]
		var phi *Expr // 2Φ(x)
		if tanh {
			inner := Mul(num(x, math.Sqrt(2/math.Pi)), Add(x, Mul(num(x, 0.044715), Mul(x, Mul(x, x)))))
			phi = Add(num(x, 1), Tanh(inner))
		} else {
			phi = Add(num(x, 1), Erf(Mul(x, num(x, 1/math.Sqrt2))))
		}
		return Mul(Mul(num(x, 0.5), x), phi)
	}, c.In[0]))
	return nil
}

// defBitShift shifts unsigned integers; a shift by the type's width or
// more gives 0, as the reference's wider shift narrowed back does.
func defBitShift(c *Ctx) error {
	left, err := c.BitShiftLeft()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	shift := Shr
	if left {
		shift = Shl
	}
	c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr { return shift(xs[0], xs[1]) }, c.In[0], c.In[1]))
	return nil
}

// defCast converts input 0 to type to (Cast's to, CastLike's second
// input's type), one of types; a small type on either side converts
// through its codes (castSmall).
func defCast(c *Ctx, to ir.DType, types []ir.DType) error {
	if !slices.Contains(types, to) {
		return &ops.UnsupportedError{Op: c.Node.OpType, Opset: c.Opset, DType: to, Reason: "no kernel computes with this type"}
	}
	if IsSmallType(c.In[0].DType) || IsSmallType(to) {
		return castSmall(c, to)
	}
	c.Emit(Elementwise(c.Out[0], func(xs []*Expr) *Expr { return CastTo(xs[0], to) }, c.In[0]))
	return nil
}

func concat(sets ...[]ir.DType) []ir.DType {
	var out []ir.DType
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// defDropout is the identity outside training mode. In training mode the
// mask compares the reference's own uniform draws for the node's seed (a
// table computed at compile time) with the ratio, which, like the mode,
// may be read at run time: y = u >= ratio ? x/(1-ratio) : 0.
func defDropout(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	t := ComputeType(x.DType)
	xv := Load(x, Vars(x.Rank())...)
	keep := Bool(true)
	v := xv
	if c.Opset >= 12 {
		train, ok := c.Scalar(2, ir.Bool)
		if !ok {
			train = Bool(false)
		}
		ratio, ok := c.Scalar(1, ir.Float64)
		if !ok {
			ratio = Const(ir.Float64, 0.5)
		}
		if !(train.Op == OpConst && train.Int == 0) {
			dims, static := x.Static()
			if !static {
				return c.Unsupported("training-mode Dropout of dynamic dims")
			}
			n := int64(1)
			for _, d := range dims {
				n *= d
			}
			u := c.Table(ir.FromSlice(ir.Float64, dims, ops.DropoutUniforms(c.Int("seed"), n)))
			active := And(train, Gt(ratio, Const(ir.Float64, 0)))
			keep = Or(Not(active), Ge(Load(u, Vars(x.Rank())...), ratio))
			scale := CastTo(Div(Const(ir.Float64, 1), Sub(Const(ir.Float64, 1), ratio)), t)
			v = Select(active, Select(keep, Mul(xv, scale), Const(t, 0)), xv)
		}
	}
	c.Emit(copyOf(y, StoreAs(v, y.DType)))
	if m := c.Output(1); m != nil {
		c.Emit(copyOf(m, StoreAs(CastTo(keep, ComputeType(m.DType)), m.DType)))
	}
	return nil
}
