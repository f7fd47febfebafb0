package cpu

import (
	"fmt"

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
// i8* arena, i8** io), through the LLVM builder the kernel layer uses
// (llvm.Fn: its block, thread id and count, integer arithmetic folded on
// constants, loops and branches), plus this backend's memory and vector
// helpers.
type kfn struct {
	*llvm.Fn
	g    *gen
	w, a value.Value
	io   value.Value
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

func (k *kfn) icmp(p enum.IPred, x, y value.Value) value.Value { return k.B.NewICmp(p, x, y) }

func (k *kfn) sel(c, x, y value.Value) value.Value { return k.B.NewSelect(c, x, y) }

// gep indexes a typed pointer.
func (k *kfn) gep(p, idx value.Value) value.Value {
	if c, ok := isConst(idx); ok && c == 0 {
		return p
	}
	return k.B.NewGetElementPtr(p.Type().(*types.PointerType).ElemType, p, idx)
}

func (k *kfn) load(p, idx value.Value) value.Value {
	q := k.gep(p, idx)
	return k.B.NewLoad(q.Type().(*types.PointerType).ElemType, q)
}

func (k *kfn) store(v, p, idx value.Value) { k.B.NewStore(v, k.gep(p, idx)) }

// loopN is a loop over constant bounds (straight-line for one iteration).
func (k *kfn) loopN(lo, hi int64, body func(i value.Value)) { k.Loop(c64(lo), c64(hi), body) }

// split returns this thread's share [lo, hi) of total work items.
func (k *kfn) split(total int64) (lo, hi value.Value) { return k.Split(c64(total)) }

// splitCapped is split over at most limit threads: threads from limit on
// get no work.
func (k *kfn) splitCapped(total, limit int64) (lo, hi value.Value) {
	nth := k.B.NewSelect(k.B.NewICmp(enum.IPredSGT, k.Nth, c64(limit)), c64(limit), k.Nth)
	t := c64(total)
	lo = k.B.NewSDiv(k.B.NewMul(k.Tid, t), nth)
	hi = k.B.NewSDiv(k.B.NewMul(k.B.NewAdd(k.Tid, c64(1)), t), nth)
	idle := k.B.NewICmp(enum.IPredSGE, k.Tid, nth)
	return k.B.NewSelect(idle, c64(0), lo), k.B.NewSelect(idle, c64(0), hi)
}

// call calls a declared function (intrinsic).
func (k *kfn) call(name string, ret types.Type, args ...value.Value) value.Value {
	params := make([]types.Type, len(args))
	for i, a := range args {
		params[i] = a.Type()
	}
	return k.B.NewCall(k.g.declare(name, ret, params...), args...)
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

func (k *kfn) fadd(x, y value.Value) value.Value { return k.B.NewFAdd(x, y) }
func (k *kfn) fsub(x, y value.Value) value.Value { return k.B.NewFSub(x, y) }
func (k *kfn) fmul(x, y value.Value) value.Value { return k.B.NewFMul(x, y) }
func (k *kfn) fdiv(x, y value.Value) value.Value { return k.B.NewFDiv(x, y) }

func (k *kfn) fma(a, b, c value.Value) value.Value {
	return k.call("llvm.fma."+suffix(a.Type()), a.Type(), a, b, c)
}

func (k *kfn) sqrt(x value.Value) value.Value {
	return k.call("llvm.sqrt."+suffix(x.Type()), x.Type(), x)
}

// ---- vectors ----

func vecT(n int) *types.VectorType { return types.NewVector(uint64(n), f32) }

// vsplat broadcasts a scalar float to a vector.
func (k *kfn) vsplat(x value.Value, n int) value.Value {
	vt := vecT(n)
	v := k.B.NewInsertElement(constant.NewUndef(vt), x, c32(0))
	return k.B.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(types.NewVector(uint64(n), i32)))
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
	q := k.B.NewBitCast(k.gep(p, idx), types.NewPointer(vt))
	if valid >= n {
		ld := k.B.NewLoad(vt, q)
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
	q := k.B.NewBitCast(k.gep(p, idx), i8p)
	k.B.NewCall(k.g.declare("llvm.prefetch.p0i8", types.Void, i8p, types.I32, types.I32, types.I32), q, c32(write), c32(3), c32(1))
}

// vstore stores n floats at p[idx], only the first valid lanes.
func (k *kfn) vstore(v, p, idx value.Value, n, valid int) {
	vt := vecT(n)
	q := k.B.NewBitCast(k.gep(p, idx), types.NewPointer(vt))
	if valid >= n {
		st := k.B.NewStore(v, q)
		st.Align = 4
		return
	}
	k.call(fmt.Sprintf("llvm.masked.store.v%df32.p0v%df32", n, n), types.Void, v, q, c32(4), maskConst(n, valid))
}
