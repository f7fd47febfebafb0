package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// The 8-bit integer GEMM: u8 activations times s8 weights summed in int32,
// the requantization fused into the store (the INT8 contract's qconv,
// qgemm and qmatmul groups and the ONNX integer ops lower to it).
//
// K is taken four values at a time: with AVX512-VNNI (or AVX-VNNI) one
// vpdpbusd adds four u8·s8 products into each int32 lane exactly. One
// operand is read as vectors of lanes columns × 4 K values ([K/4][cols][4]
// bytes, "K interleaved by 4"), the other one dword (4 K values) per row,
// broadcast: a convolution (NCHW) broadcasts the weights (rows = output
// channels) over vectors of 16 output pixels of its im2col, a matrix
// product broadcasts the activations (rows of A, row-major) over vectors of
// 16 output columns of the packed weights. Without VNNI (x86-64-v3,
// AVX-512 without VNNI) the same layout is multiplied exactly by widening
// to int16 pairs and vpmaddwd (vpmaddubsw would saturate 255·127·2): the
// activations' even and odd bytes are split in the kernel, the weights
// packed as int16 pairs of their even and odd K values.
//
// Zero points are handled algebraically: the weights are symmetric (zero
// point 0, or subtracted at packing when that still fits in s8), and
// Σ(x - zp_x)·w = Σx·w - zp_x·Σw, so each output channel's accumulator
// starts at bias - zp_x·Σw, computed at packing. s8 activations become u8
// by flipping their top bit (x + 128) with zp_x + 128. K's padding to a
// multiple of 4 carries zero weights.

// qISA is how the integer kernels multiply 8-bit values.
type qISA int

const (
	qVNNI qISA = iota // vpdpbusd
	qMadd             // int16 pairs and vpmaddwd (exact)
)

// qTarget picks the instructions and the int32 lanes per vector.
func (g *gen) qTarget() (qISA, int64) {
	if g.arm64() {
		return g.neonQTarget()
	}
	avx512 := hasFeature(g.feats, "avx512bw") && g.vl == 16
	switch {
	case avx512 && hasFeature(g.feats, "avx512_vnni"):
		return qVNNI, 16
	case hasFeature(g.feats, "avx_vnni"):
		return qVNNI, 8
	case avx512:
		return qMadd, 16
	}
	return qMadd, 8
}

// qOut is what the store computes from an int32 sum.
type qOut int

const (
	qOutInt32 qOut = iota // the sum itself (ConvInteger, MatMulInteger)
	qOutF32               // requantized in float32 (fusion groups)
	qOutF64               // requantized in float64 (QLinearConv, QLinearMatMul: the reference's arithmetic, bit for bit)
)

// qstore is the requantizing store of a tile: per output channel c,
//
//	y = clamp(float(acc)·mult[c] + fbias[c] + (r - resZp)·resMult, lo, hi) + zpY
//
// rounded half to even, stored as u8 or s8; acc started at corr[c].
type qstore struct {
	c       func(k *kfn) value.Value // output, element pointer
	ldc     int64                    // elements between rows
	cBatch  func(k *kfn, b value.Value) value.Value
	perRow  bool // the channel is the row (convolution), else the column
	chBatch func(k *kfn, b value.Value) value.Value
	out     qOut
	// weights offsets of per-channel arrays (padded past the last channel
	// so whole vectors load): corr int32, mult float32 (float64 in qOutF64),
	// fbias float32 (-1: none).
	corr, mult, fbias int64
	res               func(k *kfn) value.Value // residual, laid out as the output (nil: none)
	resSigned         bool
	resZp             int64
	resMult           float32
	lo, hi            float64 // in output steps, before zpY
	zpY               int64
	signed            bool // s8 output
}

// qgemm is one integer GEMM: batch × (M rows × N columns) over K.
type qgemm struct {
	M, N, K, batch int64
	mr, nv, lanes  int64
	isa            qISA
	// bc, the broadcast operand: the dword of row i of row tile t, K group
	// q lies at byte bcTile·t + bcRow·i + bcGroup·q (+ bcBatch). With
	// qMadd, weights here are two dwords (even, odd K as int16 pairs).
	bc                     func(k *kfn) value.Value
	bcTile, bcRow, bcGroup int64
	bcBatch                func(k *kfn, b value.Value) value.Value
	// acts: bc holds the activations (u8, or s8 with flip) and vec the
	// weights; else the reverse. kTail: the activations are rows of K
	// bytes, whose last group reads past the row: it is loaded bytewise.
	acts, flip, kTail bool
	// vec, the vector operand: column tile t's K group q starts at byte
	// vecTile·t + vecGroup·q (+ vecBatch): lanes·4 bytes per vector. With
	// qMadd, weights here are per group the even vectors, then the odd.
	vec               func(k *kfn) value.Value
	vecTile, vecGroup int64
	vecBatch          func(k *kfn, b value.Value) value.Value
	st                qstore
	parallel          bool
	amx               bool // tiles (qamx.go): mr and nb are 16 or 32
}

func (q *qgemm) nb() int64 { return q.nv * q.lanes }
func (q *qgemm) k4() int64 { return (q.K + 3) / 4 }

// qBlocking picks the register tile for M×N: as many accumulators as the
// registers hold (24 of AVX-512's 32, 12 of AVX2's 16), wide tiles first.
func qBlocking(M, N, lanes int64) (mr, nv int64) {
	budget := int64(24)
	if lanes == 8 {
		budget = 12
	}
	vecs := (N + lanes - 1) / lanes
	nv = min(vecs, 3)
	if lanes == 8 {
		nv = min(vecs, 2)
	}
	if M < budget/nv { // few rows: wider tiles
		nv = min(vecs, budget/max(M, 1))
	}
	nv = max(nv, 1)
	mr = min(budget/nv, M)
	return max(mr, 1), nv
}

// ---- vector helpers (8-bit and int32 lanes) ----

func ivec(n int64, t types.Type) *types.VectorType { return types.NewVector(uint64(n), t) }

func isplat(n int64, v int64) constant.Constant { return splat(int(n), c32(v)) }

// bytesAt is i8* p advanced by off bytes.
func (k *kfn) bytesAt(p, off value.Value) value.Value {
	if p.Type() != i8p {
		p = k.B.NewBitCast(p, i8p)
	}
	if c, ok := isConst(off); ok && c == 0 {
		return p
	}
	return k.B.NewGetElementPtr(i8, p, off)
}

// loadAt loads a value of type t at byte offset off of p (unaligned).
func (k *kfn) loadAt(t types.Type, p, off value.Value) value.Value {
	q := k.B.NewBitCast(k.bytesAt(p, off), types.NewPointer(t))
	ld := k.B.NewLoad(t, q)
	ld.Align = 1
	return ld
}

func (k *kfn) storeAt(v, p, off value.Value) {
	q := k.B.NewBitCast(k.bytesAt(p, off), types.NewPointer(v.Type()))
	st := k.B.NewStore(v, q)
	st.Align = 1
}

func llvmTypeName(t types.Type) string {
	if vt, ok := t.(*types.VectorType); ok {
		return fmt.Sprintf("v%d%s", vt.Len, llvmTypeName(vt.ElemType))
	}
	switch t {
	case i8:
		return "i8"
	case types.I16:
		return "i16"
	case i32:
		return "i32"
	case f32:
		return "f32"
	case types.Double:
		return "f64"
	}
	return t.String()
}

// maskedLoadAt loads the first valid lanes of vector type vt at byte
// offset off (the others pass, a constant vector, nil: zeros); lanes past
// valid are never read.
func (k *kfn) maskedLoadAt(vt *types.VectorType, p, off value.Value, valid int64, pass value.Value) value.Value {
	if valid >= int64(vt.Len) && pass == nil {
		return k.loadAt(vt, p, off)
	}
	if pass == nil {
		pass = constant.NewZeroInitializer(vt)
	}
	q := k.B.NewBitCast(k.bytesAt(p, off), types.NewPointer(vt))
	n := llvmTypeName(vt)
	return k.call(fmt.Sprintf("llvm.masked.load.%s.p0%s", n, n), vt, q, c32(1), maskConst(int(vt.Len), int(valid)), pass)
}

// maskedStoreAt stores the first valid lanes of v at byte offset off.
func (k *kfn) maskedStoreAt(v, p, off value.Value, valid int64) {
	vt := v.Type().(*types.VectorType)
	if valid >= int64(vt.Len) {
		k.storeAt(v, p, off)
		return
	}
	q := k.B.NewBitCast(k.bytesAt(p, off), types.NewPointer(vt))
	n := llvmTypeName(vt)
	k.call(fmt.Sprintf("llvm.masked.store.%s.p0%s", n, n), types.Void, v, q, c32(1), maskConst(int(vt.Len), int(valid)))
}

// splatOf broadcasts scalar x to n lanes.
func (k *kfn) splatOf(x value.Value, n int64) value.Value {
	vt := ivec(n, x.Type())
	v := k.B.NewInsertElement(constant.NewUndef(vt), x, c32(0))
	return k.B.NewShuffleVector(v, constant.NewUndef(vt), constant.NewZeroInitializer(ivec(n, i32)))
}

// dot4 adds, per int32 lane, the four products of u's u8 and s's s8 bytes
// to acc: vpdpbusd.
func (k *kfn) dot4(acc, u, s value.Value, lanes int64) value.Value {
	if k.g.arm64() {
		return k.neonDot4(acc, u, s, lanes)
	}
	vt := ivec(lanes, i32)
	return k.call(fmt.Sprintf("llvm.x86.avx512.vpdpbusd.%d", lanes*32), vt, acc, u, s)
}

// pmaddwd is vpmaddwd: per int32 lane, the sum of the two int16 products.
func (k *kfn) pmaddwd(a, b value.Value, lanes int64) value.Value {
	wt := ivec(2*lanes, types.I16)
	a, b = k.B.NewBitCast(a, wt), k.B.NewBitCast(b, wt)
	if k.g.arm64() {
		return k.genericMaddwd(a, b, lanes)
	}
	name := map[int64]string{16: "llvm.x86.avx512.pmaddw.d.512", 8: "llvm.x86.avx2.pmadd.wd", 4: "llvm.x86.sse2.pmadd.wd"}[lanes]
	return k.call(name, ivec(lanes, i32), a, b)
}

// splitU8 splits dwords of four u8 into the int16 pairs of their even and
// odd bytes.
func (k *kfn) splitU8(v value.Value, lanes int64) (even, odd value.Value) {
	m := isplat(lanes, 0x00FF00FF)
	return k.B.NewAnd(v, m), k.B.NewAnd(k.B.NewLShr(v, isplat(lanes, 8)), m)
}

// cvtRound converts floats to int32, rounding half to even (the current
// rounding mode): one vcvtps2dq / vcvtpd2dq.
func (k *kfn) cvtRound(f value.Value) value.Value {
	vt := f.Type().(*types.VectorType)
	n := int64(vt.Len)
	it := ivec(n, i32)
	switch {
	case k.g.arm64(): // frintx + fcvtzs (or fcvtns)
		return k.B.NewFPToSI(k.call(fmt.Sprintf("llvm.rint.%s", llvmTypeName(vt)), vt, f), it)
	case vt.ElemType == types.Double && n == 8:
		return k.call("llvm.x86.avx512.mask.cvtpd2dq.512", it, f, constant.NewUndef(it), constant.NewInt(i8, -1), c32(4))
	case vt.ElemType == types.Double && n == 4:
		return k.call("llvm.x86.avx.cvt.pd2dq.256", it, f)
	case vt.ElemType == types.Double:
		return k.B.NewFPToSI(k.call(fmt.Sprintf("llvm.rint.v%df64", n), vt, f), it)
	case n == 16:
		return k.call("llvm.x86.avx512.mask.cvtps2dq.512", it, f, constant.NewUndef(it), constant.NewInt(types.I16, -1), c32(4))
	case n == 8:
		return k.call("llvm.x86.avx.cvt.ps2dq.256", it, f)
	}
	return k.call("llvm.x86.sse2.cvtps2dq", it, f)
}

// fclamp is min(max(x, lo), hi) on numbers (x is never NaN here).
func (k *kfn) fclamp(x value.Value, lo, hi float64) value.Value {
	t := x.Type()
	cst := func(v float64) value.Value {
		vt := t.(*types.VectorType)
		if vt.ElemType == types.Double {
			return splat(int(vt.Len), constant.NewFloat(types.Double, v))
		}
		return fconst(t, v)
	}
	if !math.IsInf(lo, -1) {
		c := cst(lo)
		x = k.B.NewSelect(k.B.NewFCmp(enum.FPredOGT, x, c), x, c)
	}
	if !math.IsInf(hi, 1) {
		c := cst(hi)
		x = k.B.NewSelect(k.B.NewFCmp(enum.FPredOLT, x, c), x, c)
	}
	return x
}

// ---- the tile loop ----

// emit writes the tile loop into the current step.
func (q *qgemm) emit(k *kfn) {
	nb := q.nb()
	bcp, vecp, cp := q.bc(k), q.vec(k), q.st.c(k)
	var resp value.Value
	if q.st.res != nil {
		resp = q.st.res(k)
	}
	if q.amx {
		k.amxBegin()
	}
	k.eachTile(q.batch, q.M, q.N, q.mr, nb, q.parallel, (q.N+nb-1)/nb < rowMajorBelow, func(bi, mi, ni value.Value, rows, cols int64) {
		off := func(base value.Value, f func(k *kfn, b value.Value) value.Value) value.Value {
			if f != nil {
				return k.Add(base, f(k, bi))
			}
			return base
		}
		bcOff := off(k.Mul(mi, c64(q.bcTile)), q.bcBatch)
		vecOff := off(k.Mul(ni, c64(q.vecTile)), q.vecBatch)
		cOff := off(k.Add(k.Mul(mi, c64(q.mr*q.st.ldc)), k.Mul(ni, c64(nb))), q.st.cBatch)
		ch := off(c64(0), q.st.chBatch)
		m0, n0 := k.Mul(mi, c64(q.mr)), k.Mul(ni, c64(nb))
		if q.amx {
			q.microAMX(k, rows, cols, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, n0, ch)
			return
		}
		if q.turnTail(rows, cols) {
			q.microT(k, rows, cols, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, ch)
			return
		}
		q.micro(k, rows, cols, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, n0, ch)
	})
	if q.amx {
		k.amxEnd()
	}
}

// micro computes one tile of rows × cols into the output. A last vector
// that is mostly tail is narrower (8 or 4 lanes: ymm and xmm VNNI run
// twice as many per cycle as zmm), so a 49-pixel row of 7×7 is three zmm
// and one xmm, not four zmm.
func (q *qgemm) micro(k *kfn, rows, cols int64, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, n0, ch value.Value) {
	L := q.lanes
	width := q.widths(cols)
	nv := int64(len(width))
	madd := q.isa == qMadd
	// Each accumulator starts at its channel's corr.
	init := make([]value.Value, rows*nv)
	for i := int64(0); i < rows; i++ {
		for j := int64(0); j < nv; j++ {
			init[i*nv+j] = q.corr(k, q.channel(k, ch, m0, n0, i, j*L), width[j])
		}
	}
	vecLoad := func(g value.Value, j int64, odd bool) value.Value {
		o := k.Add(vecOff, k.Add(k.Mul(g, c64(q.vecGroup)), c64(j*L*4)))
		if odd {
			o = k.Add(o, c64(q.nb()*4))
		}
		return k.loadAt(ivec(width[j], i32), vecp, o)
	}
	// splats broadcasts a dword to each width the tile uses.
	splats := func(d value.Value) map[int64]value.Value {
		out := map[int64]value.Value{}
		for _, w := range width {
			if out[w] == nil {
				out[w] = k.splatOf(d, w)
			}
		}
		return out
	}
	flip := func(v value.Value, w int64) value.Value {
		if !q.flip {
			return v
		}
		return k.B.NewXor(v, isplat(w, -0x7F7F7F80)) // 0x80808080
	}
	step := func(g value.Value, acc []value.Value, bcDword func(i int64) value.Value) []value.Value {
		out := make([]value.Value, len(acc))
		if !q.acts {
			// vec: activations (u8); bc: weights.
			av := make([]value.Value, nv)
			ev, od := make([]value.Value, nv), make([]value.Value, nv)
			for j := int64(0); j < nv; j++ {
				av[j] = vecLoad(g, j, false)
				if madd {
					ev[j], od[j] = k.splitU8(av[j], width[j])
				}
			}
			for i := int64(0); i < rows; i++ {
				if madd {
					base := k.Add(bcOff, k.Add(k.Mul(g, c64(q.bcGroup)), c64(i*q.bcRow)))
					we := splats(k.loadAt(i32, bcp, base))
					wo := splats(k.loadAt(i32, bcp, k.Add(base, c64(4))))
					for j := int64(0); j < nv; j++ {
						w := width[j]
						s := k.B.NewAdd(k.pmaddwd(ev[j], we[w], w), k.pmaddwd(od[j], wo[w], w))
						out[i*nv+j] = k.B.NewAdd(acc[i*nv+j], s)
					}
					continue
				}
				wv := splats(bcDword(i))
				for j := int64(0); j < nv; j++ {
					out[i*nv+j] = k.dot4(acc[i*nv+j], av[j], wv[width[j]], width[j])
				}
			}
			return out
		}
		// bc: activations; vec: weights.
		wv := make([]value.Value, nv)
		wo := make([]value.Value, nv)
		for j := int64(0); j < nv; j++ {
			wv[j] = vecLoad(g, j, false)
			if madd {
				wo[j] = vecLoad(g, j, true)
			}
		}
		for i := int64(0); i < rows; i++ {
			a := splats(bcDword(i))
			for j := int64(0); j < nv; j++ {
				w := width[j]
				av := flip(a[w], w)
				if madd {
					ev, od := k.splitU8(av, w)
					s := k.B.NewAdd(k.pmaddwd(ev, wv[j], w), k.pmaddwd(od, wo[j], w))
					out[i*nv+j] = k.B.NewAdd(acc[i*nv+j], s)
					continue
				}
				out[i*nv+j] = k.dot4(acc[i*nv+j], av, wv[j], w)
			}
		}
		return out
	}
	dword := func(g value.Value) func(i int64) value.Value {
		return func(i int64) value.Value {
			return k.loadAt(i32, bcp, k.Add(bcOff, k.Add(k.Mul(g, c64(q.bcGroup)), c64(i*q.bcRow))))
		}
	}
	k4 := q.k4()
	main := k4
	if q.kTail && q.K%4 != 0 {
		main--
	}
	acc := k.LoopAcc(c64(0), c64(main), 1, init, func(g value.Value, acc []value.Value) []value.Value {
		return step(g, acc, dword(g))
	})
	if main < k4 {
		// The last group's bytes past K are not read (they may lie past the
		// data); the weights there are zero.
		g := c64(main)
		acc = step(g, acc, func(i int64) value.Value {
			base := k.Add(bcOff, k.Add(k.Mul(g, c64(q.bcGroup)), c64(i*q.bcRow)))
			var d value.Value = c32(0)
			for b := int64(0); b < q.K%4; b++ {
				by := k.B.NewZExt(k.loadAt(i8, bcp, k.Add(base, c64(b))), i32)
				d = k.B.NewOr(d, k.B.NewShl(by, c32(8*b)))
			}
			return d
		})
	}
	for i := int64(0); i < rows; i++ {
		for j := int64(0); j < nv; j++ {
			valid := min(width[j], cols-j*L)
			at := k.Add(cOff, c64(i*q.st.ldc+j*L))
			q.st.store(k, acc[i*nv+j], cp, resp, at, q.channel(k, ch, m0, n0, i, j*L), width[j], valid)
		}
	}
}

// channel is the output channel of a tile's row i and its vector at
// column col: the row's (perRow: convolutions), else the vector's first
// column's (matrix products, whose channels run along the lanes).
func (q *qgemm) channel(k *kfn, ch, m0, n0 value.Value, i, col int64) value.Value {
	if q.st.perRow {
		return k.Add(ch, k.Add(m0, c64(i)))
	}
	return k.Add(ch, k.Add(n0, c64(col)))
}

// corr is channel c's sum correction for a vector of width int32 lanes:
// one per row splat, or the lanes' own.
func (q *qgemm) corr(k *kfn, c value.Value, width int64) value.Value {
	corrP := k.locPtr(loc{space: inWeights, off: q.st.corr}, i8)
	if q.st.perRow {
		return k.splatOf(k.loadAt(i32, corrP, k.Mul(c, c64(4))), width)
	}
	return k.loadAt(ivec(width, i32), corrP, k.Mul(c, c64(4)))
}

// widths are the vector widths (int32 lanes) micro covers cols with.
func (q *qgemm) widths(cols int64) []int64 {
	L := q.lanes
	nv := (cols + L - 1) / L
	width := make([]int64, nv)
	for j := range width {
		width[j] = L
	}
	if rem := cols - (nv-1)*L; rem <= L/2 {
		w := L / 2
		for w/2 >= rem && w/2 >= 4 {
			w /= 2
		}
		width[nv-1] = w
	}
	return width
}

// vpdpbusdCost is a vpdpbusd's cost in zmm issues: the narrower forms run
// two per cycle (Ice Lake, Zen 4).
func vpdpbusdCost(lanes int64) float64 {
	if lanes >= 16 {
		return 1
	}
	return 0.5
}

// turnTail reports whether a tile of rows × cols is cheaper with the
// roles turned (microT): few columns, a convolution's weights
// broadcast by row, and a row tile that is one vector of dwords.
func (q *qgemm) turnTail(rows, cols int64) bool {
	W := q.mr
	if q.isa != qVNNI || q.acts || !q.st.perRow || q.vecTile != q.nb()*4 || W > q.lanes || W&(W-1) != 0 || W < 4 || cols > 24 {
		return false
	}
	var now float64
	for _, w := range q.widths(cols) {
		now += float64(rows) * vpdpbusdCost(w)
	}
	return float64(cols)*vpdpbusdCost(W) < now
}

// microT computes a tile of few columns with the roles turned: a K
// group's dwords of the tile's mr rows (contiguous in the packing) are
// the vector, s8, and each column's activation dword is broadcast, u8, so
// the 49th pixel of a 7×7 layer costs one vpdpbusd per K group, not one
// per row. Lanes are channels: the store scatters them down the rows.
func (q *qgemm) microT(k *kfn, rows, cols int64, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, ch value.Value) {
	W := q.mr
	ch0 := k.Add(ch, m0)
	corrP := k.locPtr(loc{space: inWeights, off: q.st.corr}, i8)
	corr := k.loadAt(ivec(W, i32), corrP, k.Mul(ch0, c64(4)))
	// A few columns are a few dependency chains of vpdpbusd: U
	// interleaved K groups per iteration keep eight in flight.
	U := min(max(8/cols, 1), q.k4())
	zero := constant.NewZeroInitializer(ivec(W, i32))
	init := make([]value.Value, U*cols)
	for i := range init {
		init[i] = zero
	}
	step := func(g value.Value, acc []value.Value) []value.Value {
		wv := k.loadAt(ivec(W, i32), bcp, k.Add(bcOff, k.Mul(g, c64(q.bcGroup))))
		at := k.Add(vecOff, k.Mul(g, c64(q.vecGroup)))
		out := make([]value.Value, cols)
		for c := range out {
			d := k.loadAt(i32, vecp, k.Add(at, c64(int64(c)*4)))
			out[c] = k.dot4(acc[c], k.splatOf(d, W), wv, W)
		}
		return out
	}
	main := q.k4() / U
	acc := k.LoopAcc(c64(0), c64(main), 1, init, func(it value.Value, acc []value.Value) []value.Value {
		out := make([]value.Value, 0, len(acc))
		for u := int64(0); u < U; u++ {
			out = append(out, step(k.Add(k.Mul(it, c64(U)), c64(u)), acc[u*cols:(u+1)*cols])...)
		}
		return out
	})
	sum := acc[:cols]
	for g := main * U; g < q.k4(); g++ {
		sum = step(c64(g), sum)
	}
	for c := int64(0); c < cols; c++ {
		v := k.B.NewAdd(sum[c], corr)
		for u := int64(1); u < U; u++ {
			v = k.B.NewAdd(v, acc[u*cols+c])
		}
		q.st.storeDown(k, v, cp, resp, k.Add(cOff, c64(c)), ch0, W, rows)
	}
}

// store requantizes one vector of sums (channel ch: per row, or the first
// of lanes channels) and stores its first valid lanes at element at.
func (st *qstore) store(k *kfn, acc, cp, resp, at, ch value.Value, L, valid int64) {
	if st.out == qOutInt32 {
		k.maskedStoreAt(acc, cp, k.Mul(at, c64(4)), valid)
		return
	}
	var res value.Value
	if resp != nil {
		res = st.residual(k, k.maskedLoadAt(ivec(L, i8), resp, at, valid, nil), L)
	}
	q := st.requant(k, acc, res, ch, L, !st.perRow)
	k.maskedStoreAt(k.B.NewTrunc(q, ivec(L, i8)), cp, at, valid)
}

// storeDown is store for a vector whose lanes are channels ch, ch+1, ...
// (rows of the output): lane i goes to element at + i·ldc, for the first
// valid lanes.
func (st *qstore) storeDown(k *kfn, acc, cp, resp, at, ch value.Value, L, valid int64) {
	elem := func(i int64) value.Value { return k.Add(at, c64(i*st.ldc)) }
	if st.out == qOutInt32 {
		for i := int64(0); i < valid; i++ {
			k.storeAt(k.B.NewExtractElement(acc, c32(i)), cp, k.Mul(elem(i), c64(4)))
		}
		return
	}
	var res value.Value
	if resp != nil {
		var r value.Value = constant.NewZeroInitializer(ivec(L, i8))
		for i := int64(0); i < valid; i++ {
			r = k.B.NewInsertElement(r, k.loadAt(i8, resp, elem(i)), c32(i))
		}
		res = st.residual(k, r, L)
	}
	q := k.B.NewTrunc(st.requant(k, acc, res, ch, L, true), ivec(L, i8))
	for i := int64(0); i < valid; i++ {
		k.storeAt(k.B.NewExtractElement(q, c32(i)), cp, elem(i))
	}
}

// residual widens the residual's bytes to int32 less its zero point.
func (st *qstore) residual(k *kfn, r value.Value, L int64) value.Value {
	var res value.Value
	if st.resSigned {
		res = k.B.NewSExt(r, ivec(L, i32))
	} else {
		res = k.B.NewZExt(r, ivec(L, i32))
	}
	if st.resZp != 0 {
		res = k.B.NewSub(res, isplat(L, st.resZp))
	}
	return res
}

// requant is the store's arithmetic on one vector of sums: the output
// steps plus zero point, as int32. Its per-channel parameters are one per
// lane from channel ch on (byLane), or channel ch's splat.
func (st *qstore) requant(k *kfn, acc, res, ch value.Value, L int64, byLane bool) value.Value {
	param := func(off int64, t types.Type, size int64) value.Value {
		p := k.locPtr(loc{space: inWeights, off: off}, i8)
		if !byLane {
			return k.splatOf(k.loadAt(t, p, k.Mul(ch, c64(size))), L)
		}
		return k.loadAt(ivec(L, t), p, k.Mul(ch, c64(size)))
	}
	var q value.Value
	if st.out == qOutF64 {
		// Two halves of float64 lanes: the product rounds as the reference's.
		h := L / 2
		m := param(st.mult, types.Double, 8)
		var parts []value.Value
		for half := int64(0); half < 2; half++ {
			idx := make([]constant.Constant, h)
			for i := range idx {
				idx[i] = c32(half*h + int64(i))
			}
			sel := constant.NewVector(ivec(h, i32), idx...)
			a := k.B.NewSIToFP(k.B.NewShuffleVector(acc, constant.NewUndef(acc.Type()), sel), ivec(h, types.Double))
			mh := k.B.NewShuffleVector(m, constant.NewUndef(m.Type()), sel)
			f := k.fclamp(k.B.NewFMul(a, mh), st.lo, st.hi)
			parts = append(parts, k.cvtRound(f))
		}
		idx := make([]constant.Constant, L)
		for i := range idx {
			idx[i] = c32(int64(i))
		}
		q = k.B.NewShuffleVector(parts[0], parts[1], constant.NewVector(ivec(L, i32), idx...))
		if st.zpY != 0 {
			q = k.B.NewAdd(q, isplat(L, st.zpY))
		}
	} else {
		q = st.requantF(k, k.B.NewSIToFP(acc, ivec(L, f32)), res, ch, L, byLane)
	}
	return q
}

// requantF is requant's float32 arithmetic on sums already in float.
func (st *qstore) requantF(k *kfn, acc, res, ch value.Value, L int64, byLane bool) value.Value {
	param := func(off int64) value.Value {
		p := k.locPtr(loc{space: inWeights, off: off}, i8)
		if !byLane {
			return k.splatOf(k.loadAt(f32, p, k.Mul(ch, c64(4))), L)
		}
		return k.loadAt(ivec(L, f32), p, k.Mul(ch, c64(4)))
	}
	// The zero point's even part rides in the fma's addend (with the
	// float bias, which packing offset by it) and the clamp's bounds:
	// rounding half to even, round(v + 2j) = round(v) + 2j, which an
	// odd zero point would break at ties; its odd 1 is added after.
	zpF, zpI := qZeroPointSplit(st.zpY)
	var b value.Value = fconst(ivec(L, f32), float64(zpF))
	if st.fbias >= 0 {
		b = param(st.fbias)
	}
	f := k.fma(acc, param(st.mult), b)
	if res != nil {
		f = k.fma(k.B.NewSIToFP(res, ivec(L, f32)), k.splatOf(cf(float64(st.resMult)), L), f)
	}
	z := float64(zpF)
	q := k.cvtRound(k.fclamp(f, st.lo+z, st.hi+z))
	if zpI != 0 {
		q = k.B.NewAdd(q, isplat(L, zpI))
	}
	return q
}

// qZeroPointSplit splits a zero point into an even part (added in float
// before rounding) and the rest, -1, 0 or 1 (added after).
func qZeroPointSplit(zp int64) (even, rest int64) { return zp - zp%2, zp % 2 }

// ---- packing ----

// qPacker builds the weights-side arrays of a qgemm.
type qPacker struct {
	isa   qISA
	lanes int64
	amx   bool // packCols: K groups to a multiple of 16 (AMX's K block), zero past K
}

// packRows lays out weights w (rows × K, row-major, s8) as the broadcast
// operand: per tile of mr rows, per K group, each row's dword (qMadd: its
// even and odd int16 pairs). It returns the bytes and the strides.
func (p qPacker) packRows(w []int8, rows, K, mr int64) (buf []byte, tile, row, group int64) {
	k4 := (K + 3) / 4
	per := int64(4)
	if p.isa == qMadd {
		per = 8
	}
	mt := (rows + mr - 1) / mr
	row, group, tile = per, per*mr, per*mr*k4
	buf = make([]byte, mt*tile)
	at := func(r, k int64) int8 {
		if r < rows && k < K {
			return w[r*K+k]
		}
		return 0
	}
	for t := int64(0); t < mt; t++ {
		for q := int64(0); q < k4; q++ {
			for i := int64(0); i < mr; i++ {
				o := t*tile + q*group + i*row
				r := t*mr + i
				p.putGroup(buf[o:], [4]int8{at(r, 4*q), at(r, 4*q+1), at(r, 4*q+2), at(r, 4*q+3)}, 0)
			}
		}
	}
	return buf, tile, row, group
}

// pack lays out weights w (rows × K) as q's broadcast operand: AMX tiles
// or VNNI/qMadd dwords.
func (p qPacker) pack(q *qgemm, w []int8, rows, K int64) (buf []byte, tile, row, group int64) {
	if q.amx {
		return packRowsAMX(w, rows, K, q.mr)
	}
	return p.packRows(w, rows, K, q.mr)
}

// putGroup writes four K values: VNNI one dword of s8; qMadd the even
// pair (int16 w0, w2) at b[0:4] and the odd pair (w1, w3) at b[odd:odd+4]
// (odd 0: right after).
func (p qPacker) putGroup(b []byte, v [4]int8, odd int) {
	if p.isa == qVNNI {
		for i, x := range v {
			b[i] = byte(x)
		}
		return
	}
	if odd == 0 {
		odd = 4
	}
	binary.LittleEndian.PutUint16(b[0:], uint16(int16(v[0])))
	binary.LittleEndian.PutUint16(b[2:], uint16(int16(v[2])))
	binary.LittleEndian.PutUint16(b[odd:], uint16(int16(v[1])))
	binary.LittleEndian.PutUint16(b[odd+2:], uint16(int16(v[3])))
}

// packCols lays out weights (K × N, element get(k, n)) as the vector
// operand: per column tile of nb, per K group, nb dwords (qMadd: the nb
// even pairs, then the nb odd ones).
func (p qPacker) packCols(get func(k, n int64) int8, K, N, nb int64) (buf []byte, tile, group int64) {
	k4 := (K + 3) / 4
	if p.amx {
		k4 = amxK4(k4)
	}
	group = 4 * nb
	if p.isa == qMadd {
		group = 8 * nb
	}
	nt := (N + nb - 1) / nb
	tile = group * k4
	buf = make([]byte, nt*tile)
	at := func(k, n int64) int8 {
		if k < K && n < N {
			return get(k, n)
		}
		return 0
	}
	for t := int64(0); t < nt; t++ {
		for q := int64(0); q < k4; q++ {
			for j := int64(0); j < nb; j++ {
				n := t*nb + j
				o := t*tile + q*group + 4*j
				p.putGroup(buf[o:], [4]int8{at(4*q, n), at(4*q+1, n), at(4*q+2, n), at(4*q+3, n)}, int(4*nb))
			}
		}
	}
	return buf, tile, group
}

// addInt32s appends int32s to the weights blob.
func (g *gen) addInt32s(v []int32) int64 {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return g.addWeights(b)
}

func (g *gen) addFloat64s(v []float64) int64 {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return g.addWeights(b)
}

var _ = ll.NewParam
