package cpu

import (
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Winograd F(2×2, 3×3) for integer 3×3 stride-1 convolutions: the
// multiplications of direct convolution over 2.25, at vpdpbusd's full
// rate. As in the float version (winograd.go), each 2×2 output tile comes
// from a 4×4 input patch d as Y = Aᵀ[U ⊙ V]A, U = G g Gᵀ, V = Bᵀ d B, and
// the channel sum becomes 16 GEMMs, one per patch position p:
//
//	V[p][c][t]  = (Bᵀ (x - zx) B)[p] / 4, rounded, + vz[p]   (u8)
//	M[p][oc][t] = Σ_c Uq[p][oc][c]·(V[p][c][t] - vz[p])     (the integer GEMM, int32)
//	Y[oc][t]    = Aᵀ (M[·][oc][t]·4·us[p][oc]) A + bias, requantized as the direct store does
//
// Bᵀ's entries are 0 and ±1, so Bᵀ d B is exact in 11 bits; its
// requantization to 8 bits (a step of 4 input steps, which no input can
// overflow) is the one rounding direct convolution does not have: on
// uniform random inputs, its worst case, outputs keep 30–48 dB of SQNR.
// U is G g Gᵀ of the s8 weights, multiples of 1/4, requantized per
// (position, channel) to s8 with step us (exactly where they fit). The
// input transform is int16 arithmetic, the output transform float, both
// on vectors of tiles along a tile row; the GEMM is the direct
// convolution's (qgemm), batched over positions. Large layers run the
// three per block of tile rows, so that V and M stay in L2.
//
// Only fusion groups (float32 requantization) take it, and only at
// --winograd on: QLinearConv keeps the reference's arithmetic bit for bit.
// Not with AMX: its tiles make the direct GEMM cheaper than the transforms
// (resnet18 INT8 2.6 ms direct, 4.3 ms Winograd, on Sapphire Rapids).

// Integer Winograd applies, at --winograd on, to 3×3 stride-1
// convolutions of at least qWinoMinChannels input and output channels.
// It pays with the channels: the transforms cost in proportion to them,
// the GEMM saves in proportion to their product (measured on this Zen 4,
// a layer of 64 to 64 channels at 56×56 is 20% faster, of 32 to 128 at
// 27×27 as fast, of 16 to 64 at 55×55 23% slower). Auto leaves integer
// convolutions direct: the transformed input's rounding compounds over
// deep 3×3 stacks (resnet18's cosine with FP32 goes from 0.9993 to 0.998,
// a random-weight VGG-16's from 0.976 to 0.913), which only data can judge.
const qWinoMinChannels = 16

// V and M larger than qWinoFuseAbove bytes (L2) are made and used per
// block of tile rows, in slices of about qWinoSlice bytes, and of at
// least qWinoMinVectors vectors of tiles for the GEMM (variables: tests
// fuse small layers in one-row blocks).
var qWinoFuseAbove, qWinoSlice, qWinoMinVectors int64 = 1 << 20, 512 << 10, 2

// qWinoLayout is where the convolution's scratch holds the padded input,
// V and M, and how V is quantized.
type qWinoLayout struct {
	TH, TW, T, Tpad, C4 int64
	Hp, Wp              int64 // the padded copy's planes
	padBytes            int64
	vOff, mOff, bytes   int64 // V and M in the scratch; the scratch's size
	// rows > 0: the three steps are fused per block of that many tile
	// rows, V and M in a per-thread slice (sTpad tiles a row, M at
	// sMOff) that stays in L2, instead of whole V and M in memory.
	rows, sTpad, sMOff, sliceBytes int64
	vZero                          [16]int64 // V's zero point per position
	vOff16                         [16]int64 // what the input transform adds before it rounds
}

// qWinoVStep is V's step in input steps: every position of Bᵀ ⊗ Bᵀ sums
// four inputs with coefficients ±1, so V spans 4·255 steps, whatever the
// zero point.
const qWinoVStep = 4

// qWinograd reports whether convolution ql runs as integer Winograd.
func (g *gen) qWinograd(ql *qlin) bool {
	c := ql.cg
	return g.opts.Winograd == WinogradOn && !g.hasAMX() && ql.conv && ql.out == qOutF32 && !c.runtime && c.group == 1 &&
		c.kh == 3 && c.kw == 3 && c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 &&
		c.C >= qWinoMinChannels && c.OC >= qWinoMinChannels && c.OH >= 4 && c.OW >= 4
}

func (g *gen) qWinoLayout(ql *qlin, N int64) qWinoLayout {
	c := ql.cg
	_, L := g.qTarget()
	var l qWinoLayout
	l.TH, l.TW = (c.OH+1)/2, (c.OW+1)/2
	l.T = l.TH * l.TW
	l.Tpad = (l.T+L-1)/L*L + L // the GEMM's last column tile reads whole vectors
	l.C4 = (c.C + 3) / 4
	l.Hp, l.Wp = max(2*l.TH+2, c.H+c.ph), max(2*l.TW+2, c.W+c.pw)
	// Slack: a tile row's bytes load as one vector of 4·L.
	l.padBytes = align64(N*c.C*l.Hp*l.Wp + 4*L)
	l.vOff = l.padBytes
	l.mOff = align64(l.vOff + N*16*l.C4*l.Tpad*4)
	l.bytes = l.mOff + N*16*c.OC*l.Tpad*4
	perTile := 16 * (4*l.C4 + 4*c.OC) // bytes of V and M
	if N*l.T*perTile > qWinoFuseAbove {
		// Blocks of at least qWinoMinVectors vectors of tiles, as many as
		// the slice holds.
		R := min(max(qWinoSlice/(perTile*l.TW), (qWinoMinVectors*L+l.TW-1)/l.TW, 1), l.TH)
		if N*((l.TH+R-1)/R) >= 2 {
			l.rows = R
			l.sTpad = (R*l.TW+L-1)/L*L + L
			l.sMOff = align64(16 * l.C4 * l.sTpad * 4)
			l.sliceBytes = align64(l.sMOff + 16*c.OC*l.sTpad*4)
			l.bytes = l.padBytes + threadSlots*l.sliceBytes
		}
	}
	// V's lowest value at each position, from the inputs' (x - zx), sets
	// its zero point.
	xlo, xhi := -ql.zpX, 255-ql.zpX
	if ql.xSigned {
		xlo, xhi = -128-ql.zpX, 127-ql.zpX
	}
	bt := winoF2.bt
	for a := range 4 {
		for b := range 4 {
			var lo, sum float64
			for i := range 4 {
				for j := range 4 {
					cf := bt[a][i] * bt[b][j]
					sum += cf
					switch {
					case cf > 0:
						lo += cf * float64(xlo)
					case cf < 0:
						lo += cf * float64(xhi)
					}
				}
			}
			p := a*4 + b
			l.vZero[p] = min(max(int64(math.Round(-lo/qWinoVStep)), 0), 255)
			l.vOff16[p] = qWinoVStep*l.vZero[p] - ql.zpX*int64(sum)
		}
	}
	return l
}

// qWinoWeights returns U = G g Gᵀ of the centered s8 weights per position,
// [16][OC][C], requantized to s8 per (position, channel), and the steps
// (in weight steps).
func qWinoWeights(ql *qlin) (u [16][]int8, step [16][]float64) {
	C, OC := ql.cg.C, ql.cg.OC
	G := winoF2.g
	all := make([]float64, 16*OC*C) // U in weight steps, exact
	for oc := range OC {
		for c := range C {
			w := ql.w[(oc*C+c)*9:]
			var t [4][3]float64
			for a := range 4 {
				for j := range 3 {
					t[a][j] = G[a][0]*float64(w[j]) + G[a][1]*float64(w[3+j]) + G[a][2]*float64(w[6+j])
				}
			}
			for a := range 4 {
				for b := range 4 {
					all[(int64(a*4+b)*OC+oc)*C+c] = t[a][0]*G[b][0] + t[a][1]*G[b][1] + t[a][2]*G[b][2]
				}
			}
		}
	}
	for p := range 16 {
		u[p] = make([]int8, OC*C)
		step[p] = make([]float64, OC)
		for oc := range OC {
			row := all[(int64(p)*OC+oc)*C : (int64(p)*OC+oc+1)*C]
			var m float64
			whole, halves := true, true
			for _, v := range row {
				m = math.Max(m, math.Abs(v))
				whole = whole && v == math.Trunc(v)
				halves = halves && 2*v == math.Trunc(2*v)
			}
			// An exact step where one fits (U is in quarters), else m/127.
			s := m / 127
			switch {
			case s <= 0.25:
				s = 0.25
			case s <= 0.5 && halves:
				s = 0.5
			case s <= 1 && whole:
				s = 1
			}
			step[p][oc] = s
			for c, v := range row {
				u[p][oc*C+int64(c)] = int8(math.Round(v / s))
			}
		}
	}
	return u, step
}

func (g *gen) lowerQWinograd(ql *qlin, c convGeom) {
	isa, L := g.qTarget()
	l := g.qWinoLayout(ql, c.N)
	q := &qgemm{M: c.OC, N: l.T, K: c.C, batch: c.N * 16, lanes: L, isa: isa}
	q.mr, q.nv = qBlocking(q.M, q.N, L)
	q.parallel = 2*q.M*q.N*q.K*q.batch >= 1<<18
	pad := q.mr + q.nb()
	OCp := c.OC + pad

	u, ustep := qWinoWeights(ql)
	pk := qPacker{isa: isa, lanes: L}
	var wb []byte
	var posBytes int64
	corr := make([]int32, 16*OCp)
	scale := make([]float32, 16*OCp)
	for p := range 16 {
		b, tile, row, group := pk.packRows(u[p], c.OC, c.C, q.mr)
		q.bcTile, q.bcRow, q.bcGroup, posBytes = tile, row, group, int64(len(b))
		wb = append(wb, b...)
		for oc := range c.OC {
			var s int64
			for _, v := range u[p][oc*c.C : (oc+1)*c.C] {
				s += int64(v)
			}
			zp := l.vZero[p]
			if g.sdotFlips() {
				zp -= 128
			}
			corr[int64(p)*OCp+oc] = int32(-zp * s)
			scale[int64(p)*OCp+oc] = float32(qWinoVStep * ustep[p][oc])
		}
	}
	wOff := g.addWeights(wb)
	q.bc = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: wOff}, i8) }
	q.st = qstore{out: qOutInt32, corr: g.addInt32s(corr), perRow: true}
	// over lays the GEMM over V and M regions of tpad tiles a row, batch
	// index image·16 + position.
	over := func(q *qgemm, v, m func(k *kfn) value.Value, tpad int64) {
		vPos, mPos := l.C4*tpad*4, c.OC*tpad // bytes of V, int32s of M per (image, position)
		q.bcBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(k.SRem(b, c64(16)), c64(posBytes)) }
		q.vec, q.vecTile, q.vecGroup = v, q.nb()*4, tpad*4
		q.vecBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(b, c64(vPos)) }
		q.st.c, q.st.ldc = m, tpad
		q.st.cBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(b, c64(mPos)) }
		q.st.chBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(k.SRem(b, c64(16)), c64(OCp)) }
	}

	var st qstore
	g.channelParams(ql, &st, nil, 0)
	bias := make([]float32, c.OC)
	for oc := range bias {
		if ql.bias != nil {
			bias[oc] = float32(ql.bias[oc])
		}
	}
	out := qWinoOut{st: &st, OCp: OCp, scale: g.addFloats(scale), bias: g.addFloats(bias)}

	g.emitQPad(ql, c, qconvLayout{Hp: l.Hp, Wp: l.Wp})
	if l.rows > 0 {
		g.qWinoFused(ql, c, l, q, over, out)
		return
	}
	over(q, func(k *kfn) value.Value { return k.bytesAt(k.scratchPtr(0), c64(l.vOff)) },
		func(k *kfn) value.Value { return k.bytesAt(k.scratchPtr(0), c64(l.mOff)) }, l.Tpad)
	// Items of whole images' tiles when they are few vectors, else of a
	// tile row.
	R := int64(1)
	if l.T <= 4*L {
		R = l.TH
	}
	blocks := l.TH / R
	g.step("QWinogradIn", false, func(k *kfn) {
		xp, vp := k.bytesAt(k.scratchPtr(0), c64(0)), k.bytesAt(k.scratchPtr(0), c64(l.vOff))
		k.parLoop(c.N*l.C4*blocks, true, func(it value.Value) {
			th0 := k.Mul(k.SRem(it, c64(blocks)), c64(R))
			rest := k.SDiv(it, c64(blocks))
			cg, img := k.SRem(rest, c64(l.C4)), k.SDiv(rest, c64(l.C4))
			vAt := k.bytesAt(vp, k.Mul(k.Add(k.Mul(img, c64(16*l.C4*l.Tpad)), k.Mul(th0, c64(l.TW))), c64(4)))
			g.qWinoInRows(k, ql, c, l, xp, vAt, l.Tpad, img, cg, th0, R)
		})
	})
	g.step("QWinogradGemm", !q.parallel, q.emit)
	g.step("QWinogradOut", false, func(k *kfn) {
		mp := k.bytesAt(k.scratchPtr(0), c64(l.mOff))
		k.parLoop(c.N*c.OC*blocks, true, func(it value.Value) {
			blk := k.SRem(it, c64(blocks))
			plane := k.SDiv(it, c64(blocks)) // img·OC + oc
			oc, img := k.SRem(plane, c64(c.OC)), k.SDiv(plane, c64(c.OC))
			th0 := k.Mul(blk, c64(R))
			mAt := k.bytesAt(mp, k.Mul(k.Add(k.Mul(img, c64(16*c.OC*l.Tpad)), k.Mul(th0, c64(l.TW))), c64(4)))
			g.qWinoOutRows(k, ql, c, l, out, mAt, l.Tpad, img, oc, th0, R)
		})
	})
}

// qWinoFused is the convolution in one step: per image and block of tile
// rows, V's rows into the thread's slice, the 16 GEMMs, then the output
// rows, while the slice is in L2.
func (g *gen) qWinoFused(ql *qlin, c convGeom, l qWinoLayout, q *qgemm, over func(*qgemm, func(*kfn) value.Value, func(*kfn) value.Value, int64), out qWinoOut) {
	R := l.rows
	blocks := (l.TH + R - 1) / R
	par := q.parallel
	g.step("QWinograd", !par, func(k *kfn) {
		xp := k.bytesAt(k.scratchPtr(0), c64(0))
		slot := k.Tid
		if !par {
			slot = c64(0)
		}
		vs := k.bytesAt(k.scratchPtr(0), k.Add(c64(l.padBytes), k.Mul(slot, c64(l.sliceBytes))))
		ms := k.bytesAt(vs, c64(l.sMOff))
		k.parLoop(c.N*blocks, par, func(it value.Value) {
			img, blk := k.SDiv(it, c64(blocks)), k.SRem(it, c64(blocks))
			th0 := k.Mul(blk, c64(R))
			run := func(rows int64) {
				k.Loop(c64(0), c64(l.C4), func(cg value.Value) {
					g.qWinoInRows(k, ql, c, l, xp, vs, l.sTpad, img, cg, th0, rows)
				})
				t := *q
				t.N, t.batch, t.parallel = rows*l.TW, 16, false
				over(&t, func(*kfn) value.Value { return vs }, func(*kfn) value.Value { return ms }, l.sTpad)
				t.emit(k)
				k.Loop(c64(0), c64(c.OC), func(oc value.Value) {
					g.qWinoOutRows(k, ql, c, l, out, ms, l.sTpad, img, oc, th0, rows)
				})
			}
			if tail := l.TH % R; tail > 0 {
				k.IfElse(k.icmp(enum.IPredEQ, blk, c64(blocks-1)), func() { run(tail) }, func() { run(R) })
			} else {
				run(R)
			}
		})
	})
}

// qWinoInRows writes rows tile rows of V from tile row th0, for channel
// group cg of image img: at vp, rows of tpad tiles, th0's first tile
// first. Vectors run over the rows' tiles in order (a vector may end one
// tile row and start the next: its lanes are picked from each row's
// bytes). Per vector of tiles and channel, the patch's 16 bytes widen
// to int16, Bᵀ·B is adds and subtracts, and the requantization a shift:
// V's step is 4 input steps at every position, so v_q is Σ±x + off
// shifted right by 2, rounded half to even, with off = 4·vz - zx·Σ±1.
// The four channels' bytes interleave into the GEMM's dwords.
func (g *gen) qWinoInRows(k *kfn, ql *qlin, c convGeom, l qWinoLayout, xp, vp value.Value, tpad int64, img, cg, th0 value.Value, rows int64) {
	_, L := g.qTarget()
	vl := int(L)
	wt := ivec(L, types.I16)
	lanes := func(n int, f func(e int) int64) constant.Constant {
		idx := make([]constant.Constant, n)
		for e := range idx {
			idx[e] = c32(f(e))
		}
		return constant.NewVector(ivec(int64(n), i32), idx...)
	}
	i16s := func(v int64) constant.Constant { return splat(vl, constant.NewInt(types.I16, v)) }
	n := rows * l.TW
	for t0 := int64(0); t0 < n; t0 += L {
		valid := min(L, n-t0)
		thFirst := t0 / l.TW         // the tile rows this vector touches, from thFirst
		var bytes [4][16]value.Value // [channel][position]
		for j := range int64(4) {
			ch := k.Add(k.Mul(cg, c64(4)), c64(j))
			if c.C%4 != 0 && j >= c.C%4 {
				ch = k.sel(k.icmp(enum.IPredULT, ch, c64(c.C)), ch, c64(c.C-1)) // read a real channel; U's row is zero
			}
			plane := k.Add(k.Mul(img, c64(c.C)), ch)
			d := make([][]value.Value, 4)
			for i := range int64(4) {
				// One load per tile row: its tiles' patch row i, from the
				// first tile's column.
				var spans []value.Value
				for th := thFirst; th <= (t0+valid-1)/l.TW; th++ {
					tw := max(t0, th*l.TW) - th*l.TW
					row := k.Add(k.Mul(k.Add(k.Mul(plane, c64(l.Hp)), k.Add(k.Mul(k.Add(th0, c64(th)), c64(2)), c64(i))), c64(l.Wp)), c64(2*tw))
					spans = append(spans, k.loadAt(ivec(4*L, i8), xp, row))
				}
				d[i] = make([]value.Value, 4)
				for jj := range d[i] {
					b := k.pick(spans, vl, func(e int) int {
						if int64(e) >= valid {
							return -1
						}
						t := t0 + int64(e)
						th, first := t/l.TW, max(t0, t/l.TW*l.TW)
						return int(th-thFirst)*4*vl + int(2*(t-first)) + jj
					})
					if ql.xSigned {
						d[i][jj] = k.B.NewSExt(b, wt)
					} else {
						d[i][jj] = k.B.NewZExt(b, wt)
					}
				}
			}
			t := make([][]value.Value, 4)
			for i := range t {
				t[i] = k.imatVec(winoF2.bt, d[i])
			}
			for b := range int64(4) {
				for a, v := range k.imatVec(winoF2.bt, column(t, b)) {
					p := int64(a)*4 + b
					// Round half to even: +1, and +1 more when the quotient is odd.
					v = k.B.NewAdd(v, i16s(l.vOff16[p]))
					odd := k.B.NewAnd(k.B.NewAShr(v, i16s(2)), i16s(1))
					v = k.B.NewAShr(k.B.NewAdd(k.B.NewAdd(v, i16s(1)), odd), i16s(2))
					lo, hi := i16s(0), i16s(255)
					v = k.sel(k.icmp(enum.IPredSLT, v, lo), lo, v)
					v = k.sel(k.icmp(enum.IPredSGT, v, hi), hi, v)
					bytes[j][p] = k.B.NewTrunc(v, ivec(L, i8))
				}
			}
		}
		pairs := lanes(2*vl, func(e int) int64 { return int64(e/2 + e%2*vl) })
		for p := range int64(16) {
			lo := k.B.NewBitCast(k.B.NewShuffleVector(bytes[0][p], bytes[1][p], pairs), wt)
			hi := k.B.NewBitCast(k.B.NewShuffleVector(bytes[2][p], bytes[3][p], pairs), wt)
			w := k.B.NewBitCast(k.B.NewShuffleVector(lo, hi, pairs), ivec(L, i32))
			at := k.Add(k.Mul(k.Add(c64(p*l.C4), cg), c64(tpad)), c64(t0))
			k.maskedStoreAt(w, vp, k.Mul(at, c64(4)), valid)
		}
	}
}

// imatVec is matVec for a matrix of 0 and ±1 on integer vectors.
func (k *kfn) imatVec(m [][]float64, x []value.Value) []value.Value {
	out := make([]value.Value, len(m))
	for i, r := range m {
		var acc value.Value
		for j, c := range r {
			switch {
			case c == 0:
			case acc == nil && c == 1:
				acc = x[j]
			case acc == nil:
				acc = k.B.NewSub(constant.NewZeroInitializer(x[j].Type()), x[j])
			case c == 1:
				acc = k.B.NewAdd(acc, x[j])
			default:
				acc = k.B.NewSub(acc, x[j])
			}
		}
		out[i] = acc
	}
	return out
}

// qWinoOut is the output transform's store: the direct store's
// parameters (st), and the per-(position, channel) scales of M to the
// direct sum's units and the float bias, in the weights.
type qWinoOut struct {
	st               *qstore
	OCp, scale, bias int64
}

// qWinoOutRows turns rows tile rows of M for output channel oc of image
// img, from tile row th0 (at mp, rows of tpad tiles, th0's first tile
// first) into the output: scaled to the direct sum's units, Aᵀ·A, the
// bias, then the direct store's requantization (residual and activation
// bounds included). Vectors run over the rows' tiles in order, so a
// vector may end one tile row and start the next: its lanes are stored
// row segment by row segment.
func (g *gen) qWinoOutRows(k *kfn, ql *qlin, c convGeom, l qWinoLayout, o qWinoOut, mp value.Value, tpad int64, img, oc, th0 value.Value, rows int64) {
	_, L := g.qTarget()
	vl := int(L)
	at := winoF2.at
	st := o.st
	yp := k.bytesAt(k.ptr(ql.y), c64(0))
	var resp value.Value
	if st.res != nil {
		resp = k.bytesAt(st.res(k), c64(0))
	}
	plane := k.Add(k.Mul(img, c64(c.OC)), oc)
	scp := k.locPtr(loc{space: inWeights, off: o.scale}, i8)
	var sc [16]value.Value
	for p := range sc {
		sc[p] = k.splatOf(k.loadAt(f32, scp, k.Mul(k.Add(c64(int64(p)*o.OCp), oc), c64(4))), L)
	}
	bias := k.splatOf(k.loadAt(f32, k.locPtr(loc{space: inWeights, off: o.bias}, i8), k.Mul(oc, c64(4))), L)
	n := rows * l.TW
	for t0 := int64(0); t0 < n; t0 += L {
		valid := min(L, n-t0)
		s := make([][]value.Value, 4)
		for a := range int64(4) {
			m := make([]value.Value, 4)
			for b := range int64(4) {
				p := a*4 + b
				off := k.Add(k.Mul(k.Add(c64(p*c.OC), oc), c64(tpad)), c64(t0))
				v := k.maskedLoadAt(ivec(L, i32), mp, k.Mul(off, c64(4)), valid, nil)
				m[b] = k.fmul(k.B.NewSIToFP(v, vecT(vl)), sc[p])
			}
			s[a] = k.matVec(at, m)
		}
		var y [2][]value.Value // [r][q]: lane e is tile t0+e
		for r := range y {
			y[r] = make([]value.Value, 2)
			for qc := range y[r] {
				y[r][qc] = k.fadd(k.matVec(at, column(s, int64(qc)))[r], bias)
			}
		}
		for th := t0 / l.TW; th <= (t0+valid-1)/l.TW; th++ {
			first, end := max(t0, th*l.TW), min(t0+valid, (th+1)*l.TW) // the row's tiles in this vector
			tw0 := first - th*l.TW
			width := min(2*(end-first), c.OW-2*tw0)
			for r := int64(0); r < 2; r++ {
				store := func() {
					oh := k.Add(k.Mul(k.Add(th0, c64(th)), c64(2)), c64(r))
					rowAt := k.Add(k.Mul(k.Add(k.Mul(plane, c64(c.OH)), oh), c64(c.OW)), c64(2*tw0))
					for e0 := int64(0); e0 < width; e0 += L {
						v := k.pick(y[r], vl, func(e int) int {
							el := e0 + int64(e) // element 2·tile + q of the row segment
							return int(el%2)*vl + int(first-t0+el/2)
						})
						pos, nv := k.Add(rowAt, c64(e0)), min(L, width-e0)
						var res value.Value
						if resp != nil {
							res = st.residual(k, k.maskedLoadAt(ivec(L, i8), resp, pos, nv, nil), L)
						}
						qv := st.requantF(k, v, res, oc, L, false)
						k.maskedStoreAt(k.B.NewTrunc(qv, ivec(L, i8)), yp, pos, nv)
					}
				}
				if c.OH%2 != 0 && r == 1 {
					k.If(k.icmp(enum.IPredULT, k.Add(th0, c64(th)), c64(l.TH-1)), store)
				} else {
					store()
				}
			}
		}
	}
}
