package cpu

import (
	"fmt"

	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/kiln-ml/kiln/codegen/llvm"
)

// Shorthand LLVM types.
var (
	i1   = types.I1
	i8   = types.I8
	i32  = types.I32
	i64  = types.I64
	f32  = types.Float
	i8p  = types.NewPointer(types.I8)
	i8pp = types.NewPointer(i8p)
	i64p = types.NewPointer(types.I64)
)

// kfn builds one step function: void(i64 tid, i64 nthreads, i8* weights,
// i8* arena, i8** io). Its helpers fold integer arithmetic on constants,
// since nearly every shape and stride is known at compile time.
type kfn struct {
	g        *gen
	f        *ll.Func
	b        *ll.Block
	tid, nth value.Value
	w, a     value.Value
	io       value.Value
	// sample is the step's sample index (0 but in per-sample steps).
	sample value.Value
	bases  map[string]value.Value
	// counters are this step's work-stealing counters (steal.go).
	counters []counterRange
}

func c64(v int64) *constant.Int    { return constant.NewInt(i64, v) }
func c32(v int64) *constant.Int    { return constant.NewInt(i32, v) }
func cf(v float64) *constant.Float { return constant.NewFloat(f32, float64(float32(v))) }

// splat returns a constant vector of n copies of c.
func splat(n int, c constant.Constant) constant.Constant {
	elems := make([]constant.Constant, n)
	for i := range elems {
		elems[i] = c
	}
	return constant.NewVector(types.NewVector(uint64(n), c.Type()), elems...)
}

func isConst(v value.Value) (int64, bool) {
	if c, ok := v.(*constant.Int); ok {
		return c.X.Int64(), true
	}
	return 0, false
}

func (k *kfn) add(x, y value.Value) value.Value {
	a, ok1 := isConst(x)
	b, ok2 := isConst(y)
	switch {
	case ok1 && ok2:
		return c64(a + b)
	case ok1 && a == 0:
		return y
	case ok2 && b == 0:
		return x
	}
	return k.b.NewAdd(x, y)
}

func (k *kfn) sub(x, y value.Value) value.Value {
	a, ok1 := isConst(x)
	b, ok2 := isConst(y)
	switch {
	case ok1 && ok2:
		return c64(a - b)
	case ok2 && b == 0:
		return x
	}
	return k.b.NewSub(x, y)
}

func (k *kfn) mul(x, y value.Value) value.Value {
	a, ok1 := isConst(x)
	b, ok2 := isConst(y)
	switch {
	case ok1 && ok2:
		return c64(a * b)
	case ok1 && a == 0, ok2 && b == 0:
		return c64(0)
	case ok1 && a == 1:
		return y
	case ok2 && b == 1:
		return x
	}
	return k.b.NewMul(x, y)
}

func (k *kfn) div(x, y value.Value) value.Value {
	a, ok1 := isConst(x)
	b, ok2 := isConst(y)
	switch {
	case ok1 && ok2:
		return c64(a / b)
	case ok2 && b == 1:
		return x
	}
	return k.b.NewSDiv(x, y)
}

func (k *kfn) rem(x, y value.Value) value.Value {
	a, ok1 := isConst(x)
	b, ok2 := isConst(y)
	switch {
	case ok1 && ok2:
		return c64(a % b)
	case ok2 && b == 1:
		return c64(0)
	}
	return k.b.NewSRem(x, y)
}

func (k *kfn) icmp(p enum.IPred, x, y value.Value) value.Value { return k.b.NewICmp(p, x, y) }

func (k *kfn) sel(c, x, y value.Value) value.Value { return k.b.NewSelect(c, x, y) }

// gep indexes a typed pointer.
func (k *kfn) gep(p, idx value.Value) value.Value {
	if c, ok := isConst(idx); ok && c == 0 {
		return p
	}
	return k.b.NewGetElementPtr(p.Type().(*types.PointerType).ElemType, p, idx)
}

func (k *kfn) load(p, idx value.Value) value.Value {
	q := k.gep(p, idx)
	return k.b.NewLoad(q.Type().(*types.PointerType).ElemType, q)
}

func (k *kfn) store(v, p, idx value.Value) { k.b.NewStore(v, k.gep(p, idx)) }

// newBlock starts a fresh basic block in the function.
func (k *kfn) newBlock() *ll.Block { return k.f.NewBlock("") }

// loop emits for i := lo; i < hi; i++ { body(i) }.
func (k *kfn) loop(lo, hi value.Value, body func(i value.Value)) {
	k.loopAcc(lo, hi, nil, func(i value.Value, _ []value.Value) []value.Value {
		body(i)
		return nil
	})
}

// loopN is loop over constant bounds; a single iteration is emitted
// straight-line.
func (k *kfn) loopN(lo, hi int64, body func(i value.Value)) {
	if hi <= lo {
		return
	}
	if hi-lo == 1 {
		body(c64(lo))
		return
	}
	k.loop(c64(lo), c64(hi), body)
}

// loopAcc emits a loop carrying values (accumulators) from one iteration to
// the next and returns their final values.
func (k *kfn) loopAcc(lo, hi value.Value, init []value.Value, body func(i value.Value, acc []value.Value) []value.Value) []value.Value {
	a, ok1 := isConst(lo)
	b, ok2 := isConst(hi)
	if ok1 && ok2 {
		if b <= a {
			return init
		}
		if b-a == 1 {
			return body(c64(a), init)
		}
	}
	pre := k.b
	hdr, bodyB, exit := k.newBlock(), k.newBlock(), k.newBlock()
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ll.NewIncoming(lo, pre))
	phis := make([]*ll.InstPhi, len(init))
	accs := make([]value.Value, len(init))
	for j, v := range init {
		phis[j] = hdr.NewPhi(ll.NewIncoming(v, pre))
		accs[j] = phis[j]
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), bodyB, exit)
	k.b = bodyB
	next := body(iv, accs)
	inc := k.b.NewAdd(iv, c64(1))
	iv.Incs = append(iv.Incs, ll.NewIncoming(inc, k.b))
	for j := range phis {
		phis[j].Incs = append(phis[j].Incs, ll.NewIncoming(next[j], k.b))
	}
	k.b.NewBr(hdr)
	k.b = exit
	return accs
}

// ifThen emits if cond { then() }.
func (k *kfn) ifThen(cond value.Value, then func()) {
	tb, done := k.newBlock(), k.newBlock()
	k.b.NewCondBr(cond, tb, done)
	k.b = tb
	then()
	k.b.NewBr(done)
	k.b = done
}

// ifElse emits if cond { then() } else { els() }.
func (k *kfn) ifElse(cond value.Value, then, els func()) {
	tb, eb, done := k.newBlock(), k.newBlock(), k.newBlock()
	k.b.NewCondBr(cond, tb, eb)
	k.b = tb
	then()
	k.b.NewBr(done)
	k.b = eb
	els()
	k.b.NewBr(done)
	k.b = done
}

// split returns this thread's share [lo, hi) of total work items.
func (k *kfn) split(total int64) (lo, hi value.Value) {
	t := c64(total)
	lo = k.b.NewSDiv(k.b.NewMul(k.tid, t), k.nth)
	hi = k.b.NewSDiv(k.b.NewMul(k.b.NewAdd(k.tid, c64(1)), t), k.nth)
	return lo, hi
}

// splitCapped is split over at most limit threads: threads from limit on
// get no work.
func (k *kfn) splitCapped(total, limit int64) (lo, hi value.Value) {
	nth := k.b.NewSelect(k.b.NewICmp(enum.IPredSGT, k.nth, c64(limit)), c64(limit), k.nth)
	t := c64(total)
	lo = k.b.NewSDiv(k.b.NewMul(k.tid, t), nth)
	hi = k.b.NewSDiv(k.b.NewMul(k.b.NewAdd(k.tid, c64(1)), t), nth)
	idle := k.b.NewICmp(enum.IPredSGE, k.tid, nth)
	return k.b.NewSelect(idle, c64(0), lo), k.b.NewSelect(idle, c64(0), hi)
}

// call calls a declared function (intrinsic).
func (k *kfn) call(name string, ret types.Type, args ...value.Value) value.Value {
	params := make([]types.Type, len(args))
	for i, a := range args {
		params[i] = a.Type()
	}
	return k.b.NewCall(k.g.declare(name, ret, params...), args...)
}

// ---- floating point on scalars or vectors ----

// fconst returns c as a constant of float type t (scalar or vector).
func fconst(t types.Type, c float64) value.Value {
	if vt, ok := t.(*types.VectorType); ok {
		return splat(int(vt.Len), cf(c))
	}
	return cf(c)
}

func vecLen(t types.Type) int {
	if vt, ok := t.(*types.VectorType); ok {
		return int(vt.Len)
	}
	return 0
}

func suffix(t types.Type) string {
	if n := vecLen(t); n > 0 {
		return fmt.Sprintf("v%df32", n)
	}
	return "f32"
}

func (k *kfn) fadd(x, y value.Value) value.Value { return k.b.NewFAdd(x, y) }
func (k *kfn) fsub(x, y value.Value) value.Value { return k.b.NewFSub(x, y) }
func (k *kfn) fmul(x, y value.Value) value.Value { return k.b.NewFMul(x, y) }
func (k *kfn) fdiv(x, y value.Value) value.Value { return k.b.NewFDiv(x, y) }

func (k *kfn) fma(a, b, c value.Value) value.Value {
	return k.call("llvm.fma."+suffix(a.Type()), a.Type(), a, b, c)
}

// kf returns the kernel layer's builder at k's current block, for its
// math (which adds no blocks): one implementation of each function.
func (k *kfn) kf() *llvm.Fn {
	f := llvm.NewFn(k.g.mod, k.f, k.tid, k.nth, nil, k.g.decls)
	f.B = k.b
	return f
}

// fmax and fmin propagate NaN from either operand (llvm.Fn.FMax).
func (k *kfn) fmax(x, y value.Value) value.Value { return k.kf().FMax(x, y) }
func (k *kfn) fmin(x, y value.Value) value.Value { return k.kf().FMin(x, y) }

func (k *kfn) sqrt(x value.Value) value.Value {
	return k.call("llvm.sqrt."+suffix(x.Type()), x.Type(), x)
}

// sigmoid and tanh are the kernel layer's (codegen/kernel/math.go).
func (k *kfn) tanh(x value.Value) value.Value { return k.kf().Tanh(x) }

func (k *kfn) sigmoid(x value.Value) value.Value { return k.kf().Sigmoid(x) }

// ---- vectors ----

func vecT(n int) *types.VectorType { return types.NewVector(uint64(n), f32) }

// vsplat broadcasts a scalar float to a vector.
func (k *kfn) vsplat(x value.Value, n int) value.Value {
	vt := vecT(n)
	v := k.b.NewInsertElement(constant.NewUndef(vt), x, c32(0))
	return k.b.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(types.NewVector(uint64(n), i32)))
}

func maskConst(n, valid int) constant.Constant {
	elems := make([]constant.Constant, n)
	for i := range elems {
		elems[i] = constant.NewBool(i < valid)
	}
	return constant.NewVector(types.NewVector(uint64(n), i1), elems...)
}

// vload loads n floats at p[idx]; valid < n masks the tail lanes (zeros).
func (k *kfn) vload(p, idx value.Value, n, valid int) value.Value {
	vt := vecT(n)
	q := k.b.NewBitCast(k.gep(p, idx), types.NewPointer(vt))
	if valid >= n {
		ld := k.b.NewLoad(vt, q)
		ld.Align = 4
		return ld
	}
	return k.call(fmt.Sprintf("llvm.masked.load.v%df32.p0v%df32", n, n), vt, q, c32(4), maskConst(n, valid), constant.NewZeroInitializer(vt))
}

// prefetch asks for the cache line holding p[idx], for reading, into
// every cache level, without waiting for it and without faulting.
func (k *kfn) prefetch(p, idx value.Value) { k.prefetchFor(p, idx, 0) }

// prefetchW is prefetch for writing (the line comes exclusive).
func (k *kfn) prefetchW(p, idx value.Value) { k.prefetchFor(p, idx, 1) }

func (k *kfn) prefetchFor(p, idx value.Value, write int64) {
	q := k.b.NewBitCast(k.gep(p, idx), i8p)
	k.b.NewCall(k.g.declare("llvm.prefetch.p0i8", types.Void, i8p, types.I32, types.I32, types.I32), q, c32(write), c32(3), c32(1))
}

// vstore stores n floats at p[idx], only the first valid lanes.
func (k *kfn) vstore(v, p, idx value.Value, n, valid int) {
	vt := vecT(n)
	q := k.b.NewBitCast(k.gep(p, idx), types.NewPointer(vt))
	if valid >= n {
		st := k.b.NewStore(v, q)
		st.Align = 4
		return
	}
	k.call(fmt.Sprintf("llvm.masked.store.v%df32.p0v%df32", n, n), types.Void, v, q, c32(4), maskConst(n, valid))
}
