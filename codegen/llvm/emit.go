package llvm

import (
	"fmt"
	"github.com/kiln-ml/kiln/codegen/kernel"
	"math"

	"github.com/kiln-ml/kiln/ir"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Point evaluates expressions at one point of an iteration space, in the
// function's current block. One axis may be in lanes: its coordinate is
// then lane 0's, and expressions that depend on it are vectors of VL
// lanes (the rest stay scalars); Mask, when set, marks the lanes that
// exist (the rest compute nothing that shows: loads and stores skip them).
type Point struct {
	F     *Fn
	Vars  []value.Value // i64 coordinates of Var(i)
	RVars []value.Value // i64 coordinates of RVar(i)
	VL    int           // lanes (0: scalar)
	Mask  value.Value   // <VL x i1>, nil: all lanes
	Holes map[string]value.Value
	Acc   value.Value

	vec    kernel.AxisRef
	memo   map[*kernel.Expr]value.Value
	parent *Point // values computed before this scope began
	lane0  *Point // the same point with the vector axis at lane 0, scalar
	varies map[*kernel.Expr]bool
}

// NewPoint returns a scalar point.
func NewPoint(f *Fn, vars []value.Value) *Point {
	return &Point{F: f, Vars: vars, vec: kernel.NoAxis, memo: map[*kernel.Expr]value.Value{}, varies: map[*kernel.Expr]bool{}}
}

// Vector puts axis Var(i) (or RVar(i) when reduction is set) in vl lanes.
func (p *Point) Vector(i int, reduction bool, vl int, mask value.Value) *Point {
	q := p.Scope()
	q.vec = kernel.AxisRef{Op: kernel.OpVar, I: int64(i)}
	if reduction {
		q.vec.Op = kernel.OpRVar
	}
	q.VL, q.Mask, q.memo, q.varies, q.lane0 = vl, mask, map[*kernel.Expr]value.Value{}, map[*kernel.Expr]bool{}, nil
	q.parent = nil // scalar values of the outer point stay valid, but in a new lane layout none are reused
	return q
}

// Scope returns a child point for a nested block (a loop body): values it
// computes are not visible to p, while p's are visible to it.
func (p *Point) Scope() *Point {
	q := *p
	q.memo = map[*kernel.Expr]value.Value{}
	q.parent = p
	q.lane0 = nil
	q.Vars = append([]value.Value(nil), p.Vars...)
	q.RVars = append([]value.Value(nil), p.RVars...)
	return &q
}

func (p *Point) lookup(e *kernel.Expr) (value.Value, bool) {
	for q := p; q != nil; q = q.parent {
		if v, ok := q.memo[e]; ok {
			return v, true
		}
	}
	return nil, false
}

// Varies reports whether e depends on the axis in lanes.
func (p *Point) Varies(e *kernel.Expr) bool {
	if p.VL == 0 {
		return false
	}
	if v, ok := p.varies[e]; ok {
		return v
	}
	// A reduction's result (Acc, in Post) varies when it was reduced in
	// lanes.
	v := p.vec.Is(e) || e.Op == kernel.OpAcc && p.Acc != nil && lanes(p.Acc) > 0
	for _, a := range e.Args {
		v = v || p.Varies(a)
	}
	p.varies[e] = v
	return v
}

// scalar returns the point's lane-0 twin: scalar evaluation with the vector
// axis at its base coordinate.
func (p *Point) scalar() *Point {
	if p.VL == 0 {
		return p
	}
	if p.lane0 == nil {
		q := *p
		q.VL, q.Mask, q.vec, q.memo, q.parent, q.lane0, q.varies = 0, nil, kernel.NoAxis, map[*kernel.Expr]value.Value{}, nil, nil, map[*kernel.Expr]bool{}
		p.lane0 = &q
	}
	return p.lane0
}

// Eval emits e's value: a scalar when it does not vary across lanes, else a
// vector of VL lanes.
func (p *Point) Eval(e *kernel.Expr) value.Value {
	if v, ok := p.lookup(e); ok {
		return v
	}
	v := p.eval(e)
	p.memo[e] = v
	return v
}

// EvalVec is Eval widened to VL lanes (splatting a uniform value).
func (p *Point) EvalVec(e *kernel.Expr) value.Value {
	v := p.Eval(e)
	if p.VL > 0 && lanes(v) == 0 {
		return p.F.Splat(v, p.VL)
	}
	return v
}

// args evaluates e's operands, widened to lanes when any varies.
func (p *Point) args(e *kernel.Expr) []value.Value {
	vals := make([]value.Value, len(e.Args))
	wide := false
	for i, a := range e.Args {
		vals[i] = p.Eval(a)
		wide = wide || lanes(vals[i]) > 0
	}
	if wide {
		for i, v := range vals {
			if lanes(v) == 0 {
				vals[i] = p.F.Splat(v, p.VL)
			}
		}
	}
	return vals
}

func (p *Point) eval(e *kernel.Expr) value.Value {
	f := p.F
	switch e.Op {
	case kernel.OpConst:
		switch {
		case e.Type == ir.Bool:
			return constant.NewBool(e.Int != 0)
		case e.Type.IsFloat():
			return constant.NewFloat(RegType(e.Type).(*types.FloatType), e.Float)
		}
		return constant.NewInt(RegType(e.Type).(*types.IntType), e.Int)
	case kernel.OpVar, kernel.OpRVar:
		vs := p.Vars
		if e.Op == kernel.OpRVar {
			vs = p.RVars
		}
		if int(e.Int) >= len(vs) || vs[e.Int] == nil {
			panic(fmt.Sprintf("kernel: %s has no coordinate here", e))
		}
		if p.vec.Is(e) {
			return f.Iota(vs[e.Int], p.VL)
		}
		return vs[e.Int]
	case kernel.OpSym:
		return f.Host.Sym(f, e.Name)
	case kernel.OpHole:
		v, ok := p.Holes[e.Name]
		if !ok {
			panic(fmt.Sprintf("kernel: hole %q is not filled", e.Name))
		}
		return v
	case kernel.OpAcc:
		if p.Acc == nil {
			panic("kernel: acc outside a reduction's post")
		}
		return p.Acc
	case kernel.OpLoad, kernel.OpLoadOr:
		return p.load(e)
	case kernel.OpSelect:
		if p.VL == 0 && !f.gpu && (costly(e.Args[1]) || costly(e.Args[2])) {
			if c := p.Eval(e.Args[0]); lanes(c) == 0 {
				return p.branch(c, e.Args[1], e.Args[2])
			}
		}
		a := p.args(e)
		return f.B.NewSelect(a[0], a[1], a[2])
	case kernel.OpCast:
		if clampedToInt32(e) {
			return f.castInRange(p.Eval(e.Args[0]), e.Type)
		}
		return f.cast(p.Eval(e.Args[0]), e.Args[0].Type, e.Type, e.Round)
	case kernel.OpBitcast:
		x := p.Eval(e.Args[0])
		if t := vecOf(RegType(e.Type), lanes(x)); !t.Equal(x.Type()) { // Int32 as Uint32 is the same i32
			return f.B.NewBitCast(x, t)
		}
		return x
	}
	a := p.args(e)
	if len(a) == 1 {
		return f.unaryOp(e.Op, e.Args[0].Type, a[0])
	}
	return f.binaryOp(e.Op, e.Args[0].Type, a[0], a[1])
}

// branch evaluates x where c holds and y elsewhere, each in a block of
// its own (scopes whose values are dropped after: they dominate only
// their block), so scalar code computes one of them: a recurrence's
// serial kernel selects among its phases' gates per column.
func (p *Point) branch(c value.Value, x, y *kernel.Expr) value.Value {
	f := p.F
	if k, ok := c.(*constant.Int); ok {
		if k.X.Sign() != 0 {
			return p.Eval(x)
		}
		return p.Eval(y)
	}
	tb, eb, done := f.Block(), f.Block(), f.Block()
	f.B.NewCondBr(c, tb, eb)
	f.B = tb
	xv := p.Scope().Eval(x)
	xEnd := f.B
	f.B.NewBr(done)
	f.B = eb
	yv := p.Scope().Eval(y)
	yEnd := f.B
	f.B.NewBr(done)
	f.B = done
	return f.B.NewPhi(ll.NewIncoming(xv, xEnd), ll.NewIncoming(yv, yEnd))
}

// costly reports whether evaluating e takes a function's polynomial
// (exp, log, tanh, ...) or a division: worth a branch around it.
func costly(e *kernel.Expr) bool {
	found := false
	kernel.Walk(e, func(x *kernel.Expr) {
		switch x.Op {
		case kernel.OpExp, kernel.OpLog, kernel.OpTanh, kernel.OpSigmoid, kernel.OpErf, kernel.OpSin, kernel.OpCos,
			kernel.OpAtan, kernel.OpPow:
			found = true
		case kernel.OpDiv:
			found = found || x.Type.IsFloat()
		}
	})
	return found
}

// ---- memory ----

func (p *Point) load(e *kernel.Expr) value.Value {
	f := p.F
	b := e.Buf
	idx := e.Args
	var cond, other *kernel.Expr
	if e.Op == kernel.OpLoadOr {
		cond, other, idx = e.Args[0], e.Args[1], e.Args[2:]
	}
	off := kernel.Offset(b, idx)
	base := f.Host.Ptr(f, b)
	mt := MemType(b.DType)
	varies := p.Varies(off) || cond != nil && p.Varies(cond)
	if !varies {
		// One element for all lanes.
		o := p.Eval(off)
		if cond == nil {
			return f.widen(f.B.NewLoad(mt, f.B.NewGetElementPtr(mt, base, o)), b.DType)
		}
		c := p.Eval(cond)
		alt := p.Eval(other)
		if lanes(alt) > 0 { // the fallback varies: select per lane
			v := f.IfValue(c, func() value.Value {
				return f.widen(f.B.NewLoad(mt, f.B.NewGetElementPtr(mt, base, o)), b.DType)
			}, func() value.Value { return constant.NewZeroInitializer(RegType(kernel.ComputeType(b.DType))) })
			return f.B.NewSelect(f.Splat(c, p.VL), f.Splat(v, p.VL), alt)
		}
		return f.IfValue(c, func() value.Value {
			return f.widen(f.B.NewLoad(mt, f.B.NewGetElementPtr(mt, base, o)), b.DType)
		}, func() value.Value { return alt })
	}
	mask := p.Mask
	var passthru value.Value = constant.NewZeroInitializer(vecOf(mt, p.VL))
	if cond != nil {
		c := p.EvalVec(cond)
		if mask == nil {
			mask = c
		} else {
			mask = f.B.NewAnd(mask, c)
		}
	}
	var raw value.Value
	if c, ok := kernel.Coef(off, p.vec); ok && c == 1 {
		o := p.scalar().Eval(off)
		ptr := f.B.NewBitCast(f.B.NewGetElementPtr(mt, base, o), types.NewPointer(vecOf(mt, p.VL)))
		if mask == nil {
			ld := f.B.NewLoad(vecOf(mt, p.VL), ptr)
			ld.Align = ll.Align(align(b.DType))
			raw = ld
		} else {
			raw = f.Call(fmt.Sprintf("llvm.masked.load.%s.p0%s", suffix(vecOf(mt, p.VL)), suffix(vecOf(mt, p.VL))),
				vecOf(mt, p.VL), ptr, constant.NewInt(i32, int64(align(b.DType))), mask, passthru)
		}
	} else {
		o := p.EvalVec(off)
		ptrs := f.B.NewGetElementPtr(mt, base, o)
		if mask == nil {
			mask = allTrue(p.VL)
		}
		raw = f.Call(fmt.Sprintf("llvm.masked.gather.%s.v%dp0%s", suffix(vecOf(mt, p.VL)), p.VL, suffix(mt)),
			vecOf(mt, p.VL), ptrs, constant.NewInt(i32, int64(align(b.DType))), mask, passthru)
	}
	v := f.widen(raw, b.DType)
	if cond != nil {
		v = f.B.NewSelect(p.EvalVec(cond), v, p.EvalVec(other))
	}
	return v
}

// align is an element's alignment in bytes.
func align(d ir.DType) int { return max(1, d.Size()) }

func allTrue(n int) constant.Constant {
	elems := make([]constant.Constant, n)
	for i := range elems {
		elems[i] = constant.True
	}
	return constant.NewVector(types.NewVector(uint64(n), i1), elems...)
}

// widen converts loaded memory of type d to its compute type.
func (f *Fn) widen(v value.Value, d ir.DType) value.Value {
	n := lanes(v)
	switch d {
	case ir.Bool:
		return f.B.NewICmp(enum.IPredNE, v, intConstLike(v.Type(), 0))
	case ir.Float16:
		h := f.B.NewBitCast(v, vecOf(types.Half, n))
		return f.B.NewFPExt(h, vecOf(f32, n))
	case ir.BFloat16:
		w := f.B.NewZExt(v, vecOf(i32, n))
		return f.B.NewBitCast(f.B.NewShl(w, intConstLike(w.Type(), 16)), vecOf(f32, n))
	}
	return v
}

// narrow converts a computed value to memory type d.
func (f *Fn) narrow(v value.Value, d ir.DType) value.Value {
	n := lanes(v)
	switch d {
	case ir.Bool:
		return f.B.NewZExt(v, vecOf(i8, n))
	case ir.Float16:
		return f.B.NewBitCast(f.B.NewFPTrunc(v, vecOf(types.Half, n)), vecOf(i16, n))
	case ir.BFloat16:
		return f.B.NewTrunc(f.B.NewLShr(f.bf16Bits(v), intConstLike(vecOf(i32, n), 16)), vecOf(i16, n))
	}
	return v
}

// bf16Bits rounds float32 v to bfloat16 precision (nearest, ties to even;
// NaN stays a quiet NaN) and returns its bits as i32.
func (f *Fn) bf16Bits(v value.Value) value.Value {
	n := lanes(v)
	it := vecOf(i32, n)
	bits := f.B.NewBitCast(v, it)
	lsb := f.B.NewAnd(f.B.NewLShr(bits, intConstLike(it, 16)), intConstLike(it, 1))
	rounded := f.B.NewAnd(f.B.NewAdd(f.B.NewAdd(bits, intConstLike(it, 0x7fff)), lsb), intConstLike(it, -65536))
	nan := f.B.NewOr(f.B.NewAnd(bits, intConstLike(it, -65536)), intConstLike(it, 0x00400000))
	return f.B.NewSelect(f.B.NewFCmp(enum.FPredUNO, v, v), nan, rounded)
}

// Store writes v (a scalar, or a vector when the point has lanes) to b at
// idx. A vector store needs idx contiguous or scattered along the lane
// axis; mask (or the point's) limits the lanes written.
func (p *Point) Store(b *kernel.Buffer, idx []*kernel.Expr, v value.Value, mask value.Value) {
	f := p.F
	off := kernel.Offset(b, idx)
	base := f.Host.Ptr(f, b)
	mt := MemType(b.DType)
	if mask == nil {
		mask = p.Mask
	}
	if lanes(v) == 0 && p.VL > 0 && p.Varies(off) {
		v = f.Splat(v, p.VL)
	}
	data := f.narrow(v, b.DType)
	if lanes(v) == 0 {
		o := p.Eval(off)
		f.B.NewStore(data, f.B.NewGetElementPtr(mt, base, o))
		return
	}
	if c, ok := kernel.Coef(off, p.vec); ok && c == 1 {
		o := p.scalar().Eval(off)
		ptr := f.B.NewBitCast(f.B.NewGetElementPtr(mt, base, o), types.NewPointer(vecOf(mt, p.VL)))
		if mask == nil {
			st := f.B.NewStore(data, ptr)
			st.Align = ll.Align(align(b.DType))
			return
		}
		f.Call(fmt.Sprintf("llvm.masked.store.%s.p0%s", suffix(vecOf(mt, p.VL)), suffix(vecOf(mt, p.VL))),
			types.Void, data, ptr, constant.NewInt(i32, int64(align(b.DType))), mask)
		return
	}
	o := p.EvalVec(off)
	ptrs := f.B.NewGetElementPtr(mt, base, o)
	if mask == nil {
		mask = allTrue(p.VL)
	}
	f.Call(fmt.Sprintf("llvm.masked.scatter.%s.v%dp0%s", suffix(vecOf(mt, p.VL)), p.VL, suffix(mt)),
		types.Void, data, ptrs, constant.NewInt(i32, int64(align(b.DType))), mask)
}

// ---- arithmetic ----

func (f *Fn) unaryOp(op kernel.Op, t ir.DType, x value.Value) value.Value {
	ty := x.Type()
	if t.IsFloat() {
		switch op {
		case kernel.OpNeg:
			return f.B.NewFNeg(x)
		case kernel.OpAbs:
			return f.intrinsic1("fabs", x)
		case kernel.OpSqrt:
			return f.intrinsic1("sqrt", x)
		case kernel.OpFloor:
			return f.intrinsic1("floor", x)
		case kernel.OpCeil:
			return f.intrinsic1("ceil", x)
		case kernel.OpRound:
			return f.intrinsic1("rint", x) // the default rounding mode: half to even
		case kernel.OpIsNaN:
			return f.B.NewFCmp(enum.FPredUNO, x, x)
		}
		fn := map[kernel.Op]func(value.Value) value.Value{kernel.OpExp: f.Exp, kernel.OpLog: f.Log, kernel.OpSin: f.Sin, kernel.OpCos: f.Cos,
			kernel.OpAtan: f.Atan, kernel.OpTanh: f.Tanh, kernel.OpErf: f.Erf, kernel.OpSigmoid: f.Sigmoid}[op]
		if fn == nil {
			panic(fmt.Sprintf("kernel: %s on %s", op, t))
		}
		if t == ir.Float64 && op == kernel.OpExp {
			return f.Exp64(x)
		}
		if t == ir.Float64 && op == kernel.OpLog {
			return f.Log64(x)
		}
		if t == ir.Float64 && op == kernel.OpSigmoid {
			return f.Sigmoid(x)
		}
		if t == ir.Float64 { // the other polynomials are single precision: ~1e-7 relative
			n := lanes(x)
			return f.B.NewFPExt(fn(f.B.NewFPTrunc(x, vecOf(f32, n))), ty)
		}
		return fn(x)
	}
	switch op {
	case kernel.OpNeg:
		return f.B.NewSub(intConstLike(ty, 0), x)
	case kernel.OpAbs:
		if t.IsUnsigned() || t == ir.Bool {
			return x
		}
		return f.B.NewSelect(f.B.NewICmp(enum.IPredSLT, x, intConstLike(ty, 0)), f.B.NewSub(intConstLike(ty, 0), x), x)
	case kernel.OpNot:
		return f.B.NewXor(x, intConstLike(ty, -1))
	}
	panic(fmt.Sprintf("kernel: %s on %s", op, t))
}

func (f *Fn) binaryOp(op kernel.Op, t ir.DType, x, y value.Value) value.Value {
	ty := x.Type()
	if t.IsFloat() {
		switch op {
		case kernel.OpAdd:
			return f.B.NewFAdd(x, y)
		case kernel.OpSub:
			return f.B.NewFSub(x, y)
		case kernel.OpMul:
			return f.B.NewFMul(x, y)
		case kernel.OpDiv:
			if isOneConst(x) {
				return f.Recip(y)
			}
			return f.B.NewFDiv(x, y)
		case kernel.OpRem:
			return f.fmod(x, y)
		case kernel.OpMax:
			return f.FMax(x, y)
		case kernel.OpMin:
			return f.FMin(x, y)
		case kernel.OpPow:
			return f.Pow(x, y)
		case kernel.OpEq, kernel.OpNe, kernel.OpLt, kernel.OpLe, kernel.OpGt, kernel.OpGe:
			pred := map[kernel.Op]enum.FPred{kernel.OpEq: enum.FPredOEQ, kernel.OpNe: enum.FPredUNE, kernel.OpLt: enum.FPredOLT,
				kernel.OpLe: enum.FPredOLE, kernel.OpGt: enum.FPredOGT, kernel.OpGe: enum.FPredOGE}[op]
			return f.B.NewFCmp(pred, x, y)
		}
		panic(fmt.Sprintf("kernel: %s on %s", op, t))
	}
	signed := t.IsSigned()
	switch op {
	case kernel.OpAdd:
		return f.B.NewAdd(x, y)
	case kernel.OpSub:
		return f.B.NewSub(x, y)
	case kernel.OpMul:
		return f.B.NewMul(x, y)
	case kernel.OpDiv, kernel.OpRem:
		return f.intDiv(op, signed, x, y)
	case kernel.OpMax, kernel.OpMin:
		if t == ir.Bool {
			if op == kernel.OpMax {
				return f.B.NewOr(x, y)
			}
			return f.B.NewAnd(x, y)
		}
		pred := map[bool]map[kernel.Op]enum.IPred{true: {kernel.OpMax: enum.IPredSGT, kernel.OpMin: enum.IPredSLT}, false: {kernel.OpMax: enum.IPredUGT, kernel.OpMin: enum.IPredULT}}[signed][op]
		return f.B.NewSelect(f.B.NewICmp(pred, x, y), x, y)
	case kernel.OpAnd:
		return f.B.NewAnd(x, y)
	case kernel.OpOr:
		return f.B.NewOr(x, y)
	case kernel.OpXor:
		return f.B.NewXor(x, y)
	case kernel.OpShl, kernel.OpShr:
		bits := int64(elemOf(ty).(*types.IntType).BitSize)
		over := f.B.NewICmp(enum.IPredUGE, y, intConstLike(ty, bits))
		var r value.Value
		switch {
		case op == kernel.OpShl:
			r = f.B.NewShl(x, y)
		case signed:
			r = f.B.NewAShr(x, y)
		default:
			r = f.B.NewLShr(x, y)
		}
		return f.B.NewSelect(over, intConstLike(ty, 0), r)
	case kernel.OpPow:
		return f.intPow(x, y, signed)
	case kernel.OpEq, kernel.OpNe, kernel.OpLt, kernel.OpLe, kernel.OpGt, kernel.OpGe:
		pred := map[kernel.Op]enum.IPred{kernel.OpEq: enum.IPredEQ, kernel.OpNe: enum.IPredNE, kernel.OpLt: enum.IPredULT, kernel.OpLe: enum.IPredULE, kernel.OpGt: enum.IPredUGT, kernel.OpGe: enum.IPredUGE}[op]
		if signed {
			pred = map[kernel.Op]enum.IPred{kernel.OpEq: enum.IPredEQ, kernel.OpNe: enum.IPredNE, kernel.OpLt: enum.IPredSLT, kernel.OpLe: enum.IPredSLE, kernel.OpGt: enum.IPredSGT, kernel.OpGe: enum.IPredSGE}[op]
		}
		return f.B.NewICmp(pred, x, y)
	}
	panic(fmt.Sprintf("kernel: %s on %s", op, t))
}

// intDiv divides integers without trapping: a zero divisor gives 0 and
// MinInt / -1 wraps, where the hardware would fault.
func (f *Fn) intDiv(op kernel.Op, signed bool, x, y value.Value) value.Value {
	ty := x.Type()
	zero := f.B.NewICmp(enum.IPredEQ, y, intConstLike(ty, 0))
	bad := value.Value(zero)
	if signed {
		bits := elemOf(ty).(*types.IntType).BitSize
		minInt := intConstLike(ty, int64(-1)<<(bits-1))
		if bits == 64 {
			minInt = intConstLike(ty, math.MinInt64)
		}
		ovf := f.B.NewAnd(f.B.NewICmp(enum.IPredEQ, x, minInt), f.B.NewICmp(enum.IPredEQ, y, intConstLike(ty, -1)))
		bad = f.B.NewOr(zero, ovf)
	}
	safe := f.B.NewSelect(bad, intConstLike(ty, 1), y)
	var r value.Value
	switch {
	case op == kernel.OpDiv && signed:
		r = f.B.NewSDiv(x, safe)
	case op == kernel.OpDiv:
		r = f.B.NewUDiv(x, safe)
	case signed:
		r = f.B.NewSRem(x, safe)
	default:
		r = f.B.NewURem(x, safe)
	}
	if op == kernel.OpDiv {
		// MinInt / -1 divided by 1 above gives MinInt: the wrapped quotient.
		return f.B.NewSelect(zero, intConstLike(ty, 0), r)
	}
	return f.B.NewSelect(bad, intConstLike(ty, 0), r)
}

// intPow is x^y by squaring over every bit of y, wrapping to the type as
// the reference does (3^64 is 3^64 mod 2^64, not 0); a negative signed y
// gives 1/x^|y| truncated: 0 except for ±1.
func (f *Fn) intPow(x, y value.Value, signed bool) value.Value {
	ty := x.Type()
	one, zero := intConstLike(ty, 1), intConstLike(ty, 0)
	r, b := value.Value(one), x
	bits := int(elemOf(ty).(*types.IntType).BitSize)
	for bit := 0; bit < bits; bit++ {
		set := f.B.NewICmp(enum.IPredNE, f.B.NewAnd(f.B.NewLShr(y, intConstLike(ty, int64(bit))), one), zero)
		r = f.B.NewSelect(set, f.B.NewMul(r, b), r)
		if bit < bits-1 {
			b = f.B.NewMul(b, b)
		}
	}
	if !signed {
		return r
	}
	odd := f.B.NewICmp(enum.IPredNE, f.B.NewAnd(y, one), zero)
	minus1 := f.B.NewICmp(enum.IPredEQ, x, intConstLike(ty, -1))
	signOne := f.B.NewSelect(odd, intConstLike(ty, -1), one)
	neg := f.B.NewICmp(enum.IPredSLT, y, zero)
	negR := f.B.NewSelect(f.B.NewICmp(enum.IPredEQ, x, one), one, f.B.NewSelect(minus1, signOne, zero))
	return f.B.NewSelect(neg, negR, r)
}

// fmod is C's fmod (the dividend's sign), computed in double precision as
// x - y·trunc(x/y): exact while the quotient fits 2^24 for float32 data.
func (f *Fn) fmod(x, y value.Value) value.Value {
	n := lanes(x)
	wide := elemOf(x.Type()).Equal(f32)
	xd, yd := x, y
	if wide {
		xd, yd = f.B.NewFPExt(x, vecOf(f64, n)), f.B.NewFPExt(y, vecOf(f64, n))
	}
	q := f.intrinsic1("trunc", f.B.NewFDiv(xd, yd))
	var r value.Value = f.B.NewFSub(xd, f.B.NewFMul(yd, q))
	// Infinite y leaves x; keep the sign of x for a zero result.
	r = f.B.NewSelect(f.B.NewFCmp(enum.FPredOEQ, f.intrinsic1("fabs", yd), typedConst(yd.Type(), math.Inf(1))), xd, r)
	r = f.Call("llvm.copysign."+suffix(r.Type()), r.Type(), r, xd)
	if wide {
		return f.B.NewFPTrunc(r, x.Type())
	}
	return r
}

// cast converts x from type from to type to (ONNX Cast, as the reference
// computes it; see CastTo).
func (f *Fn) cast(x value.Value, from, to ir.DType, round ir.DType) value.Value {
	n := lanes(x)
	rt := vecOf(RegType(to), n)
	switch {
	case from.IsFloat() && to.IsFloat():
		var r value.Value = x
		switch {
		case from == ir.Float32 && to == ir.Float64:
			r = f.B.NewFPExt(x, rt)
		case from == ir.Float64 && to == ir.Float32:
			r = f.B.NewFPTrunc(x, rt)
		}
		switch round {
		case ir.Float16:
			r = f.B.NewFPExt(f.B.NewFPTrunc(r, vecOf(types.Half, n)), rt)
		case ir.BFloat16:
			r = f.B.NewBitCast(f.bf16Bits(r), rt)
		}
		return r
	case from.IsFloat() && to == ir.Bool:
		return f.B.NewFCmp(enum.FPredUNE, x, typedConst(x.Type(), 0))
	case from.IsFloat():
		it := vecOf(i64, n)
		s := f.Call(fmt.Sprintf("llvm.fptosi.sat.%s.%s", suffix(it), suffix(x.Type())), it, x)
		var r value.Value = s
		if to == ir.Uint64 {
			u := f.Call(fmt.Sprintf("llvm.fptoui.sat.%s.%s", suffix(it), suffix(x.Type())), it, x)
			r = f.B.NewSelect(f.B.NewFCmp(enum.FPredOGE, x, typedConst(x.Type(), math.MaxInt64)), u, s)
		}
		return f.intResize(r, ir.Int64, to)
	case to.IsFloat():
		if from.IsSigned() {
			return f.B.NewSIToFP(x, rt)
		}
		return f.B.NewUIToFP(x, rt)
	case to == ir.Bool:
		return f.B.NewICmp(enum.IPredNE, x, intConstLike(x.Type(), 0))
	}
	return f.intResize(x, from, to)
}

// clampedToInt32 reports whether cast e converts a float clamped to
// constant bounds within int32 (Clamp: Min(Max(x, lo), hi)), as every
// quantization's saturation does, to an integer of at most 32 bits: its
// value is then a NaN or in range, so castInRange gives what cast does
// without cast's 64-bit saturating conversion, which LLVM does not
// vectorize.
func clampedToInt32(e *kernel.Expr) bool {
	x := e.Args[0]
	if !x.Type.IsFloat() || !e.Type.IsInt() || RegType(e.Type).(*types.IntType).BitSize > 32 || x.Op != kernel.OpMin || x.Args[0].Op != kernel.OpMax {
		return false
	}
	lo, hi := x.Args[0].Args[1], x.Args[1]
	return lo.Op == kernel.OpConst && hi.Op == kernel.OpConst && lo.Float >= math.MinInt32 && hi.Float <= math.MaxInt32
}

// castInRange converts a float that is NaN or within int32 to integer type
// to: NaN gives 0, as cast's saturating conversion does.
func (f *Fn) castInRange(x value.Value, to ir.DType) value.Value {
	n := lanes(x)
	x = f.B.NewSelect(f.B.NewFCmp(enum.FPredUNO, x, x), typedConst(x.Type(), 0), x)
	return f.intResize(f.B.NewFPToSI(x, vecOf(types.I32, n)), ir.Int32, to)
}

// intResize changes an integer's width: truncating, or extending by the
// source's signedness (Bool zero-extends).
func (f *Fn) intResize(x value.Value, from, to ir.DType) value.Value {
	n := lanes(x)
	rt := vecOf(RegType(to), n)
	fb := elemOf(x.Type()).(*types.IntType).BitSize
	tb := elemOf(rt).(*types.IntType).BitSize
	switch {
	case fb == tb:
		return x
	case fb > tb:
		return f.B.NewTrunc(x, rt)
	case from.IsSigned():
		return f.B.NewSExt(x, rt)
	}
	return f.B.NewZExt(x, rt)
}
