package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/cpuabi"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// The derive entry point, beside kiln_run (see cpuabi):
//
//	void kiln_derive(int64_t index, int64_t lo, int64_t hi, uint8_t *weights);
//
// computes output channels [lo, hi) of derived range index (g.derived; lo
// a multiple of its MR) from its source in the live weights. The loader
// calls it for blocks of channels of every range from all its cores, once
// the stored weights are in place. Each range's geometry and transform are
// constants here, so a call is a loop of vector code for this CPU.

// emitDerive writes kiln_derive when the engine has derived weights.
func (g *gen) emitDerive() {
	if len(g.derived) == 0 {
		return
	}
	f := g.mod.NewFunc(cpuabi.DeriveEntryPoint, types.Void, ll.NewParam("index", i64), ll.NewParam("lo", i64),
		ll.NewParam("hi", i64), ll.NewParam("w", i8p))
	k := &kfn{Fn: llvm.NewFn(g.mod, f, nil, nil, nil, g.decls), g: g, w: f.Params[3]}
	for i := range g.derived {
		d := &g.derived[i]
		k.If(k.icmp(enum.IPredEQ, f.Params[0], c64(int64(i))), func() { k.deriveWinograd(d, f.Params[1], f.Params[2]) })
	}
	k.B.NewRet(nil)
}

// deriveWinograd computes U = G g Gᵀ (cpuabi.DerivedWinograd) for output
// channels [lo, hi) of d, vl lanes at a time along a panel: lane j of a
// panel of MR rows is row j%MR of input channel j/MR, so each of the a²
// points' stores is a whole vector, and the lanes gather their 3×3
// kernels. The arithmetic is the runtime's reference transform's, in the
// same order in double precision, rounded once: the results match it bit
// for bit.
func (k *kfn) deriveWinograd(d *cpuabi.Derived, lo, hi value.Value) {
	vl := k.g.vl
	A := int64(len(d.G))
	J := d.C * d.MR                       // floats of one point's panel of MR rows
	panel := (d.OC + d.MR - 1) / d.MR * J // floats of one point's panels
	it := i32                             // gather indices: 32 bits where the source allows
	if d.OC*d.C*9 > math.MaxInt32 {
		it = i64
	}
	ivec := func(v int64) constant.Constant { return splat(vl, constant.NewInt(it, v)) }
	lanes := make([]constant.Constant, vl)
	for i := range lanes {
		lanes[i] = constant.NewInt(it, int64(i))
	}
	iota := constant.NewVector(types.NewVector(uint64(vl), it), lanes...)
	dt := types.NewVector(uint64(vl), types.Double)
	G := make([][3]value.Value, A)
	for a := range A {
		for j := range 3 {
			G[a][j] = splat(vl, constant.NewFloat(types.Double, d.G[a][j]))
		}
	}
	src := k.B.NewBitCast(k.gep(k.w, c64(d.Src)), types.NewPointer(f32))
	u := k.B.NewBitCast(k.gep(k.w, c64(d.Off)), types.NewPointer(f32))
	gather := fmt.Sprintf("llvm.masked.gather.v%df32.v%dp0f32", vl, vl)
	zero := constant.NewZeroInitializer(vecT(vl))

	// lanesAt computes the vector at float v·vl of panel pb, valid lanes.
	lanesAt := func(pb, v value.Value, valid int) {
		b := k.B
		j := b.NewAdd(k.isplat(k.toInt(k.Mul(v, c64(int64(vl))), it), it), iota)
		row, ic := b.NewURem(j, ivec(d.MR)), b.NewUDiv(j, ivec(d.MR))
		oc := b.NewAdd(k.isplat(k.toInt(k.Mul(pb, c64(d.MR)), it), it), row)
		mask := value.Value(b.NewICmp(enum.IPredULT, oc, ivec(d.OC)))
		if valid < vl {
			mask = b.NewAnd(mask, maskConst(vl, valid))
		}
		at := b.NewMul(b.NewAdd(b.NewMul(oc, ivec(d.C)), ic), ivec(9))
		var gk [9]value.Value
		for i := range gk {
			ptrs := b.NewGetElementPtr(f32, src, b.NewAdd(at, ivec(int64(i))))
			gk[i] = b.NewFPExt(k.call(gather, vecT(vl), ptrs, c32(4), mask, zero), dt)
		}
		// t = G g, then U = t Gᵀ: each a sum of three products, left to right.
		sum3 := func(x0, y0, x1, y1, x2, y2 value.Value) value.Value {
			return b.NewFAdd(b.NewFAdd(b.NewFMul(x0, y0), b.NewFMul(x1, y1)), b.NewFMul(x2, y2))
		}
		t := make([][3]value.Value, A)
		for a := range A {
			for c := range 3 {
				t[a][c] = sum3(G[a][0], gk[c], G[a][1], gk[3+c], G[a][2], gk[6+c])
			}
		}
		base := k.Add(k.Mul(pb, c64(J)), k.Mul(v, c64(int64(vl))))
		for a := range A {
			for bb := range A {
				var x value.Value = b.NewFPTrunc(sum3(t[a][0], G[bb][0], t[a][1], G[bb][1], t[a][2], G[bb][2]), vecT(vl))
				if d.OC%d.MR != 0 {
					// Rows past OC are padding, zero as the buffer is (a
					// product with a zero may be -0).
					x = b.NewSelect(mask, x, zero)
				}
				k.vstore(x, u, k.Add(base, c64((a*A+bb)*panel)), vl, valid)
			}
		}
	}
	pb0 := k.B.NewSDiv(lo, c64(d.MR))
	pb1 := k.B.NewSDiv(k.B.NewAdd(hi, c64(d.MR-1)), c64(d.MR))
	k.Loop(pb0, pb1, func(pb value.Value) {
		if full := J / int64(vl); full > 0 {
			k.Loop(c64(0), c64(full), func(v value.Value) { lanesAt(pb, v, vl) })
		}
		if tail := J % int64(vl); tail > 0 {
			lanesAt(pb, c64(J/int64(vl)), int(tail))
		}
	})
}

// toInt converts an i64 to integer type t.
func (k *kfn) toInt(x value.Value, t *types.IntType) value.Value {
	if t == i64 {
		return x
	}
	return k.B.NewTrunc(x, t)
}

// isplat broadcasts an integer of type t to a vector of vl lanes.
func (k *kfn) isplat(x value.Value, t *types.IntType) value.Value {
	vl := k.g.vl
	vt := types.NewVector(uint64(vl), t)
	v := k.B.NewInsertElement(constant.NewUndef(vt), x, c32(0))
	return k.B.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(types.NewVector(uint64(vl), i32)))
}
