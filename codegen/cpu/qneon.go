package cpu

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// The int8 kernels on AArch64 (qgemm.go's layout, four K values per int32
// lane). With i8mm, usdot is vpdpbusd exactly (u8·s8). With the dot
// product alone (ARMv8.2's asimddp), sdot multiplies s8·s8: the u8
// operand is flipped to s8 (u - 128, an xor of its top bits) and each
// channel's accumulator start gains 128·Σw (flipCorr), since
// Σu·w = Σ(u-128)·w + 128·Σw. Without either, the int16-pair path
// (qMadd) multiplies through generic IR (genericMaddwd), which llc lowers
// to smull/smlal and addp.

// neonQTarget is qTarget on AArch64: 128-bit vectors, four int32 lanes.
func (g *gen) neonQTarget() (qISA, int64) {
	if hasFeature(g.feats, "asimddp") || hasFeature(g.feats, "i8mm") {
		return qVNNI, 4
	}
	return qMadd, 4
}

// sdotFlips reports whether dot4 flips its u8 operand for sdot.
func (g *gen) sdotFlips() bool {
	return g.arm64() && !hasFeature(g.feats, "i8mm") && hasFeature(g.feats, "asimddp")
}

// flipCorr adds 128·Σw to each channel's accumulator start when dot4
// multiplies flipped activations (sdotFlips).
func (g *gen) flipCorr(ql *qlin, corr []int32) {
	if !g.sdotFlips() {
		return
	}
	for c := int64(0); c < ql.ch; c++ {
		var s int64
		for _, v := range ql.w[c*ql.K : (c+1)*ql.K] {
			s += int64(v)
		}
		corr[c] += int32(128 * s)
	}
}

// neonDot4 is dot4 on AArch64: usdot, or sdot of the flipped u8 operand.
func (k *kfn) neonDot4(acc, u, s value.Value, lanes int64) value.Value {
	if lanes != 2 && lanes != 4 {
		panic(fmt.Sprintf("codegen/cpu: a NEON dot product of %d lanes", lanes))
	}
	vt, bt := ivec(lanes, i32), ivec(4*lanes, i8)
	ub, sb := k.B.NewBitCast(u, bt), k.B.NewBitCast(s, bt)
	if hasFeature(k.g.feats, "i8mm") {
		return k.call(fmt.Sprintf("llvm.aarch64.neon.usdot.v%di32.v%di8", lanes, 4*lanes), vt, acc, ub, sb)
	}
	flipped := k.B.NewXor(ub, splat(int(4*lanes), constant.NewInt(types.I8, -128)))
	return k.call(fmt.Sprintf("llvm.aarch64.neon.sdot.v%di32.v%di8", lanes, 4*lanes), vt, acc, flipped, sb)
}

// genericMaddwd is vpmaddwd in generic IR: per int32 lane, the sum of
// the two products of a's and b's int16 pairs.
func (k *kfn) genericMaddwd(a, b value.Value, lanes int64) value.Value {
	wide := ivec(2*lanes, i32)
	p := k.B.NewMul(k.B.NewSExt(a, wide), k.B.NewSExt(b, wide))
	even, odd := make([]constant.Constant, lanes), make([]constant.Constant, lanes)
	for i := range even {
		even[i], odd[i] = c32(int64(2*i)), c32(int64(2*i+1))
	}
	mt := ivec(lanes, i32)
	return k.B.NewAdd(k.B.NewShuffleVector(p, p, constant.NewVector(mt, even...)), k.B.NewShuffleVector(p, p, constant.NewVector(mt, odd...)))
}
