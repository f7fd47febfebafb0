package llvm

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Host is what generated code reads from its surroundings: the target's
// code generator implements it.
type Host interface {
	// Ptr returns a pointer to b's first element, of type MemType(b.DType)*,
	// valid anywhere in f (emitted in f's entry block).
	Ptr(f *Fn, b *kernel.Buffer) value.Value
	// Sym returns the value (i64) of a dimension known at run time.
	Sym(f *Fn, name string) value.Value
}

// Fn builds one LLVM function: the block being filled, the thread id and
// count its work splits by, and helpers that fold integer arithmetic on
// constants (most shapes and strides are).
type Fn struct {
	Mod      *ll.Module
	F        *ll.Func
	B        *ll.Block
	Tid, Nth value.Value
	Host     Host
	decls    map[string]*ll.Func
	// gpu marks a GPU schedule's emission (gpu.go): every point is a
	// thread's row, and threads take rows tid, tid+nth, ... (adjacent
	// threads, adjacent elements: coalesced) instead of one block each.
	gpu bool
}

// NewFn starts filling f (which must have an entry block) at its entry.
// decls caches intrinsic declarations across the module's functions.
func NewFn(mod *ll.Module, f *ll.Func, tid, nth value.Value, host Host, decls map[string]*ll.Func) *Fn {
	if len(f.Blocks) == 0 {
		f.NewBlock("")
	}
	return &Fn{Mod: mod, F: f, B: f.Blocks[len(f.Blocks)-1], Tid: tid, Nth: nth, Host: host, decls: decls}
}

// EntryPtr returns a pointer of type pt computed at the top of f's entry
// block, so valid anywhere in f: off bytes into base (an i8*), or, when
// slots is non-nil, into the buffer whose i8* is in slot slot of slots
// (an i8** table of inputs and outputs); then, when scale is not 0, a
// further scale·dyn bytes (dyn an i64 valid in the entry block, such as a
// parameter). Backends cache the result per place.
func EntryPtr(f *ll.Func, base, slots value.Value, slot, off int64, dyn value.Value, scale int64, pt types.Type) value.Value {
	byteT := types.I8
	var insts []ll.Instruction
	raw := base
	if slots != nil {
		at := ll.NewGetElementPtr(types.NewPointer(byteT), slots, I64(slot))
		ld := ll.NewLoad(types.NewPointer(byteT), at)
		insts, raw = append(insts, at, ld), ld
	}
	if off != 0 || slots == nil {
		gp := ll.NewGetElementPtr(byteT, raw, I64(off))
		insts, raw = append(insts, gp), gp
	}
	if scale != 0 {
		o := ll.NewMul(dyn, I64(scale))
		gp := ll.NewGetElementPtr(byteT, raw, o)
		insts, raw = append(insts, o, gp), gp
	}
	cast := ll.NewBitCast(raw, pt)
	entry := f.Blocks[0]
	entry.Insts = append(append(insts, cast), entry.Insts...)
	return cast
}

// Shorthand LLVM types.
var (
	i1  = types.I1
	i8  = types.I8
	i16 = types.I16
	i32 = types.I32
	i64 = types.I64
	f32 = types.Float
	f64 = types.Double
)

// I64 is an i64 constant.
func I64(v int64) *constant.Int { return constant.NewInt(i64, v) }

// RegType is the LLVM type a value of compute type d lives in.
func RegType(d ir.DType) types.Type {
	switch d {
	case ir.Float32:
		return f32
	case ir.Float64:
		return f64
	case ir.Bool:
		return i1
	case ir.Int8, ir.Uint8:
		return i8
	case ir.Int16, ir.Uint16:
		return i16
	case ir.Int32, ir.Uint32:
		return i32
	case ir.Int64, ir.Uint64:
		return i64
	}
	panic(fmt.Sprintf("kernel: no register type for %s", d))
}

// MemType is the LLVM type an element of type d is stored as.
func MemType(d ir.DType) types.Type {
	switch d {
	case ir.Float16, ir.BFloat16:
		return i16
	case ir.Bool:
		return i8
	}
	return RegType(d)
}

// vecOf is t as n lanes (t itself when n is 0).
func vecOf(t types.Type, n int) types.Type {
	if n == 0 {
		return t
	}
	return types.NewVector(uint64(n), t)
}

// lanes is the lane count of a vector value (0 for a scalar).
func lanes(v value.Value) int {
	if vt, ok := v.Type().(*types.VectorType); ok {
		return int(vt.Len)
	}
	return 0
}

func elemOf(t types.Type) types.Type {
	if vt, ok := t.(*types.VectorType); ok {
		return vt.ElemType
	}
	return t
}

// declare returns the module's declaration of an external function.
func (f *Fn) declare(name string, ret types.Type, params ...types.Type) *ll.Func {
	return Declare(f.Mod, f.decls, name, ret, params...)
}

// Declare returns mod's declaration of an external function (an LLVM
// intrinsic), made once and kept in decls.
func Declare(mod *ll.Module, decls map[string]*ll.Func, name string, ret types.Type, params ...types.Type) *ll.Func {
	if d, ok := decls[name]; ok {
		return d
	}
	ps := make([]*ll.Param, len(params))
	for i, t := range params {
		ps[i] = ll.NewParam("", t)
	}
	d := mod.NewFunc(name, ret, ps...)
	decls[name] = d
	return d
}

// Call calls an intrinsic by name.
func (f *Fn) Call(name string, ret types.Type, args ...value.Value) value.Value {
	ps := make([]types.Type, len(args))
	for i, a := range args {
		ps[i] = a.Type()
	}
	return f.B.NewCall(f.declare(name, ret, ps...), args...)
}

// Block starts a new basic block (not yet the current one).
func (f *Fn) Block() *ll.Block { return f.F.NewBlock("") }

// ---- i64 arithmetic folded on constants ----

func intConst(v value.Value) (int64, bool) {
	if c, ok := v.(*constant.Int); ok {
		return c.X.Int64(), true
	}
	return 0, false
}

// Add is x + y on i64.
func (f *Fn) Add(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	switch {
	case ok1 && ok2:
		return I64(a + b)
	case ok1 && a == 0:
		return y
	case ok2 && b == 0:
		return x
	}
	return f.B.NewAdd(x, y)
}

// Sub is x - y on i64.
func (f *Fn) Sub(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	switch {
	case ok1 && ok2:
		return I64(a - b)
	case ok2 && b == 0:
		return x
	}
	return f.B.NewSub(x, y)
}

// Mul is x * y on i64.
func (f *Fn) Mul(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	switch {
	case ok1 && ok2:
		return I64(a * b)
	case ok1 && a == 0, ok2 && b == 0:
		return I64(0)
	case ok1 && a == 1:
		return y
	case ok2 && b == 1:
		return x
	}
	return f.B.NewMul(x, y)
}

// Div is x / y on non-negative i64 (y > 0).
func (f *Fn) Div(x, y value.Value) value.Value { return f.divRem(x, y, false, false) }

// Rem is x % y on non-negative i64 (y > 0).
func (f *Fn) Rem(x, y value.Value) value.Value { return f.divRem(x, y, false, true) }

// SDiv is x / y on i64, truncated toward zero (y != 0).
func (f *Fn) SDiv(x, y value.Value) value.Value { return f.divRem(x, y, true, false) }

// SRem is x % y on i64, of x's sign (y != 0).
func (f *Fn) SRem(x, y value.Value) value.Value { return f.divRem(x, y, true, true) }

// divRem is x / y or x % y, folded when both are constants or y is 1.
func (f *Fn) divRem(x, y value.Value, signed, rem bool) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	switch {
	case ok1 && ok2 && rem:
		return I64(a % b)
	case ok1 && ok2:
		return I64(a / b)
	case ok2 && b == 1 && rem:
		return I64(0)
	case ok2 && b == 1:
		return x
	case signed && rem:
		return f.B.NewSRem(x, y)
	case signed:
		return f.B.NewSDiv(x, y)
	case rem:
		return f.B.NewURem(x, y)
	}
	return f.B.NewUDiv(x, y)
}

// Min is min(x, y) on i64.
func (f *Fn) Min(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	if ok1 && ok2 {
		return I64(min(a, b))
	}
	return f.B.NewSelect(f.B.NewICmp(enum.IPredSLT, x, y), x, y)
}

// Max is max(x, y) on i64.
func (f *Fn) Max(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	if ok1 && ok2 {
		return I64(max(a, b))
	}
	return f.B.NewSelect(f.B.NewICmp(enum.IPredSGT, x, y), x, y)
}

// Lt is x < y on i64, folded when both are constants.
func (f *Fn) Lt(x, y value.Value) value.Value {
	a, ok1 := intConst(x)
	b, ok2 := intConst(y)
	if ok1 && ok2 {
		return constant.NewBool(a < b)
	}
	return f.B.NewICmp(enum.IPredSLT, x, y)
}

// ---- control flow ----

// Loop emits for i := lo; i < hi; i++ { body(i) }, straight-line when it
// runs once and not at all when it runs never (constant bounds).
func (f *Fn) Loop(lo, hi value.Value, body func(i value.Value)) {
	f.LoopStep(lo, hi, 1, body)
}

// LoopStep is Loop with a step.
func (f *Fn) LoopStep(lo, hi value.Value, step int64, body func(i value.Value)) {
	f.LoopAcc(lo, hi, step, nil, func(i value.Value, _ []value.Value) []value.Value {
		body(i)
		return nil
	})
}

// LoopAcc emits a loop carrying values from one iteration to the next and
// returns their final values.
func (f *Fn) LoopAcc(lo, hi value.Value, step int64, init []value.Value, body func(i value.Value, acc []value.Value) []value.Value) []value.Value {
	a, ok1 := intConst(lo)
	b, ok2 := intConst(hi)
	if ok1 && ok2 {
		if b <= a {
			return init
		}
		if b-a <= step {
			return body(I64(a), init)
		}
	}
	pre := f.B
	hdr, bodyB, exit := f.Block(), f.Block(), f.Block()
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ll.NewIncoming(lo, pre))
	phis := make([]*ll.InstPhi, len(init))
	accs := make([]value.Value, len(init))
	for j, v := range init {
		phis[j] = hdr.NewPhi(ll.NewIncoming(v, pre))
		accs[j] = phis[j]
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), bodyB, exit)
	f.B = bodyB
	next := body(iv, accs)
	inc := f.B.NewAdd(iv, I64(step))
	iv.Incs = append(iv.Incs, ll.NewIncoming(inc, f.B))
	for j := range phis {
		phis[j].Incs = append(phis[j].Incs, ll.NewIncoming(next[j], f.B))
	}
	f.B.NewBr(hdr)
	f.B = exit
	return accs
}

// If emits if cond { then() }.
func (f *Fn) If(cond value.Value, then func()) {
	if c, ok := cond.(*constant.Int); ok {
		if c.X.Sign() != 0 {
			then()
		}
		return
	}
	tb, done := f.Block(), f.Block()
	f.B.NewCondBr(cond, tb, done)
	f.B = tb
	then()
	f.B.NewBr(done)
	f.B = done
}

// IfElse emits if cond { then() } else { els() }.
func (f *Fn) IfElse(cond value.Value, then, els func()) {
	tb, eb, done := f.Block(), f.Block(), f.Block()
	f.B.NewCondBr(cond, tb, eb)
	f.B = tb
	then()
	f.B.NewBr(done)
	f.B = eb
	els()
	f.B.NewBr(done)
	f.B = done
}

// IfValue emits cond ? then() : els() as a branch joined by a phi (for
// values that must not be computed when not taken, such as loads).
func (f *Fn) IfValue(cond value.Value, then, els func() value.Value) value.Value {
	tb, eb, done := f.Block(), f.Block(), f.Block()
	f.B.NewCondBr(cond, tb, eb)
	f.B = tb
	tv := then()
	tEnd := f.B
	f.B.NewBr(done)
	f.B = eb
	ev := els()
	eEnd := f.B
	f.B.NewBr(done)
	f.B = done
	return done.NewPhi(ll.NewIncoming(tv, tEnd), ll.NewIncoming(ev, eEnd))
}

// Split returns this thread's share [lo, hi) of n work items (i64).
func (f *Fn) Split(n value.Value) (lo, hi value.Value) {
	lo = f.B.NewSDiv(f.B.NewMul(f.Tid, n), f.Nth)
	hi = f.B.NewSDiv(f.B.NewMul(f.B.NewAdd(f.Tid, I64(1)), n), f.Nth)
	return lo, hi
}

// ---- vectors ----

// Splat broadcasts scalar x to n lanes (x when n is 0).
func (f *Fn) Splat(x value.Value, n int) value.Value {
	if n == 0 {
		return x
	}
	vt := types.NewVector(uint64(n), x.Type())
	if c, ok := x.(constant.Constant); ok {
		return splatConst(vt, c)
	}
	v := f.B.NewInsertElement(constant.NewUndef(vt), x, constant.NewInt(i32, 0))
	return f.B.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(types.NewVector(uint64(n), i32)))
}

// Iota is the i64 vector <base, base+1, ..., base+n-1>.
func (f *Fn) Iota(base value.Value, n int) value.Value {
	elems := make([]constant.Constant, n)
	for i := range elems {
		elems[i] = I64(int64(i))
	}
	steps := constant.NewVector(types.NewVector(uint64(n), i64), elems...)
	if b, ok := intConst(base); ok && b == 0 {
		return steps
	}
	return f.B.NewAdd(f.Splat(base, n), steps)
}

// LaneMask is the <n x i1> mask of the lanes below valid (an i64).
func (f *Fn) LaneMask(valid value.Value, n int) value.Value {
	if v, ok := intConst(valid); ok {
		elems := make([]constant.Constant, n)
		for i := range elems {
			elems[i] = constant.NewBool(int64(i) < v)
		}
		return constant.NewVector(types.NewVector(uint64(n), i1), elems...)
	}
	return f.B.NewICmp(enum.IPredSLT, f.Iota(I64(0), n), f.Splat(valid, n))
}

// ExtractLane returns lane i of vector v.
func (f *Fn) ExtractLane(v value.Value, i int) value.Value {
	return f.B.NewExtractElement(v, constant.NewInt(i32, int64(i)))
}

// typedConst returns c as a constant of register type t (scalar or
// vector), for integer and float types.
func typedConst(t types.Type, c float64) value.Value {
	et := elemOf(t)
	var s constant.Constant
	switch et := et.(type) {
	case *types.FloatType:
		if et.Kind == types.FloatKindFloat {
			c = float64(float32(c)) // LLVM wants float constants exact in float
		}
		s = constant.NewFloat(et, c)
	case *types.IntType:
		s = constant.NewInt(et, int64(c))
	default:
		panic(fmt.Sprintf("kernel: constant of type %s", t))
	}
	if vt, ok := t.(*types.VectorType); ok {
		return splatConst(vt, s)
	}
	return s
}

// intConstLike returns the integer c in type t (scalar or vector), whose
// element is an integer type.
func intConstLike(t types.Type, c int64) value.Value {
	et := elemOf(t).(*types.IntType)
	var s constant.Constant = constant.NewInt(et, c)
	if et.BitSize == 1 {
		s = constant.NewBool(c&1 != 0)
	}
	if vt, ok := t.(*types.VectorType); ok {
		return splatConst(vt, s)
	}
	return s
}

// splatConst is the vector of type vt with every lane c. An all-zero one
// is zeroinitializer: the IR of a long fused chain (Relu's max with 0)
// names its zero once per use, and 16 printed lanes each time made its
// text tens of megabytes.
func splatConst(vt *types.VectorType, c constant.Constant) constant.Constant {
	if isZeroConst(c) {
		return constant.NewZeroInitializer(vt)
	}
	elems := make([]constant.Constant, vt.Len)
	for i := range elems {
		elems[i] = c
	}
	return constant.NewVector(vt, elems...)
}

// isZeroConst reports whether c is an integer 0 or a float +0 (not -0,
// whose bits are not zero).
func isZeroConst(c constant.Constant) bool {
	switch c := c.(type) {
	case *constant.Int:
		return c.X.Sign() == 0
	case *constant.Float:
		return c.X.Sign() == 0 && !c.X.Signbit() && !c.NaN
	}
	return false
}

// intTypeLike is the integer type of t's bit width (same lanes).
func intTypeLike(t types.Type) types.Type {
	bits := 32
	if elemOf(t).Equal(f64) {
		bits = 64
	}
	it := types.NewInt(uint64(bits))
	return vecOf(it, lanes0(t))
}

func lanes0(t types.Type) int {
	if vt, ok := t.(*types.VectorType); ok {
		return int(vt.Len)
	}
	return 0
}

// suffix is an intrinsic's type suffix for t: f32, v16f32, i64, ...
func suffix(t types.Type) string {
	var s string
	switch et := elemOf(t).(type) {
	case *types.FloatType:
		s = map[types.FloatKind]string{types.FloatKindFloat: "f32", types.FloatKindDouble: "f64", types.FloatKindHalf: "f16"}[et.Kind]
	case *types.IntType:
		s = fmt.Sprintf("i%d", et.BitSize)
	}
	if n := lanes0(t); n > 0 {
		return fmt.Sprintf("v%d%s", n, s)
	}
	return s
}
