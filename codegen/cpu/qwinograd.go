package cpu

import (
	"math"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// Winograd F(2×2, 3×3) for integer 3×3 stride-1 convolutions: the
// multiplications of direct convolution over 2.25, at vpdpbusd's full
// rate. As in the float version (winograd.go), each 2×2 output tile comes
// from a 4×4 input patch d as Y = Aᵀ[U ⊙ V]A, U = G g Gᵀ, V = Bᵀ d B, and
// the channel sum becomes 16 GEMMs, one per patch position p:
//
//	V[p][c][t]  = (Bᵀ (x - zx) B)[p], requantized to u8: step sp[p], zero point vz[p]
//	M[p][oc][t] = Σ_c Uq[p][oc][c]·(V[p][c][t] - vz[p])   (the integer GEMM, int32)
//	Y[oc][t]    = Aᵀ (M[·][oc][t]·sp[p]·us[p][oc]) A + bias, requantized as the direct store does
//
// Bᵀ's entries are 0 and ±1, so V is exact in 11 bits; its requantization
// to 8 bits, with the step that no input can overflow (4 input steps for
// a zero point of 0), is the one rounding direct convolution does not
// have. U is (G g Gᵀ) of the s8 weights, multiples of 1/4, requantized per
// (position, channel) to s8 (exactly where they fit). The transforms are
// float on vectors of tiles along a tile row; the GEMM is the direct
// convolution's (qgemm), batched over images and positions.
//
// Only fusion groups (float32 requantization) take it, at --winograd auto
// or on: QLinearConv keeps the reference's arithmetic bit for bit.

// qWinoMinChannels: below this many input or output channels the
// transforms cost more than the GEMM saves.
const qWinoMinChannels = 16

// qWinoLayout is where the convolution's scratch holds the padded input,
// V and M, and how V is quantized.
type qWinoLayout struct {
	TH, TW, T, Tpad, C4 int64
	Hp, Wp              int64 // the padded copy's planes
	padBytes            int64
	vOff, mOff, bytes   int64 // V and M in the scratch; the scratch's size
	vStep               [16]float64
	vZero               [16]int64
}

// qWinograd reports whether convolution ql runs as integer Winograd.
func (g *gen) qWinograd(ql *qlin) bool {
	c := ql.cg
	return ql.conv && ql.out == qOutF32 && g.opts.Winograd != WinogradOff && !c.runtime && c.group == 1 &&
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
	// V's range at each position, from the inputs' (x - zx).
	xlo, xhi := -ql.zpX, 255-ql.zpX
	if ql.xSigned {
		xlo, xhi = -128-ql.zpX, 127-ql.zpX
	}
	bt := winoF2.bt
	for a := range 4 {
		for b := range 4 {
			var lo, hi float64
			for i := range 4 {
				for j := range 4 {
					switch cf := bt[a][i] * bt[b][j]; {
					case cf > 0:
						lo, hi = lo+cf*float64(xlo), hi+cf*float64(xhi)
					case cf < 0:
						lo, hi = lo+cf*float64(xhi), hi+cf*float64(xlo)
					}
				}
			}
			p := a*4 + b
			l.vStep[p] = math.Max((hi-lo)/255, 1)
			l.vZero[p] = min(max(int64(math.Round(-lo/l.vStep[p])), 0), 255)
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
	real := make([]float64, 16*OC*C)
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
					real[((int64(a*4+b))*OC+oc)*C+c] = t[a][0]*G[b][0] + t[a][1]*G[b][1] + t[a][2]*G[b][2]
				}
			}
		}
	}
	for p := range 16 {
		u[p] = make([]int8, OC*C)
		step[p] = make([]float64, OC)
		for oc := range OC {
			row := real[(int64(p)*OC+oc)*C : (int64(p)*OC+oc+1)*C]
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
			scale[int64(p)*OCp+oc] = float32(l.vStep[p] * ustep[p][oc])
		}
	}
	wOff := g.addWeights(wb)
	q.bc = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: wOff}, i8) }
	q.bcBatch = func(k *kfn, b value.Value) value.Value { return k.mul(k.rem(b, c64(16)), c64(posBytes)) }
	vPos, mPos := l.C4*l.Tpad*4, c.OC*l.Tpad // bytes of V, int32s of M per (image, position)
	q.vec = func(k *kfn) value.Value { return k.bytesAt(k.scratchPtr(0), c64(l.vOff)) }
	q.vecTile, q.vecGroup = q.nb()*4, l.Tpad*4
	q.vecBatch = func(k *kfn, b value.Value) value.Value { return k.mul(b, c64(vPos)) }
	q.st = qstore{out: qOutInt32, corr: g.addInt32s(corr), ldc: l.Tpad, perRow: true}
	q.st.c = func(k *kfn) value.Value { return k.bytesAt(k.scratchPtr(0), c64(l.mOff)) }
	q.st.cBatch = func(k *kfn, b value.Value) value.Value { return k.mul(b, c64(mPos)) }
	q.st.chBatch = func(k *kfn, b value.Value) value.Value { return k.mul(k.rem(b, c64(16)), c64(OCp)) }

	var st qstore
	g.channelParams(ql, &st, nil, 0)
	bias := make([]float32, c.OC)
	for oc := range bias {
		if ql.bias != nil {
			bias[oc] = float32(ql.bias[oc])
		}
	}
	scaleOff, biasOff := g.addFloats(scale), g.addFloats(bias)

	g.emitQPad(ql, c, qconvLayout{Hp: l.Hp, Wp: l.Wp})
	g.qWinoInput(ql, c, l)
	g.step("QWinogradGemm", !q.parallel, q.emit)
	g.qWinoOutput(ql, c, l, &st, OCp, scaleOff, biasOff)
}

// qWinoInput writes V: one work item per (image, group of four channels,
// tile row), each vector of tiles' four channels as the GEMM's dwords.
func (g *gen) qWinoInput(ql *qlin, c convGeom, l qWinoLayout) {
	_, L := g.qTarget()
	vl := int(L)
	items := c.N * l.C4 * l.TH
	g.step("QWinogradIn", false, func(k *kfn) {
		xp := k.bytesAt(k.scratchPtr(0), c64(0))
		vp := k.bytesAt(k.scratchPtr(0), c64(l.vOff))
		k.parLoop(items, true, func(it value.Value) {
			th := k.rem(it, c64(l.TH))
			rest := k.div(it, c64(l.TH))
			cg, img := k.rem(rest, c64(l.C4)), k.div(rest, c64(l.C4))
			for tw0 := int64(0); tw0 < l.TW; tw0 += L {
				valid := min(L, l.TW-tw0)
				var words [16]value.Value
				for j := range int64(4) {
					ch := k.add(k.mul(cg, c64(4)), c64(j))
					var ok value.Value
					if c.C%4 != 0 && j >= c.C%4 {
						ok = k.icmp(enum.IPredULT, ch, c64(c.C))
						ch = k.sel(ok, ch, c64(c.C-1))
					}
					plane := k.add(k.mul(img, c64(c.C)), ch)
					d := make([][]value.Value, 4)
					for i := range int64(4) {
						row := k.add(k.mul(k.add(k.mul(plane, c64(l.Hp)), k.add(k.mul(th, c64(2)), c64(i))), c64(l.Wp)), c64(2*tw0))
						span := k.loadAt(ivec(4*L, i8), xp, row)
						d[i] = make([]value.Value, 4)
						for jj := range 4 {
							idx := make([]constant.Constant, vl)
							for e := range idx {
								idx[e] = c32(int64(2*e + jj))
							}
							b := k.b.NewShuffleVector(span, constant.NewUndef(span.Type()), constant.NewVector(ivec(L, i32), idx...))
							var x value.Value
							if ql.xSigned {
								x = k.b.NewSExt(b, ivec(L, i32))
							} else {
								x = k.b.NewZExt(b, ivec(L, i32))
							}
							x = k.b.NewSIToFP(x, vecT(vl))
							if ql.zpX != 0 {
								x = k.fsub(x, fconst(vecT(vl), float64(ql.zpX)))
							}
							d[i][jj] = x
						}
					}
					t := make([][]value.Value, 4)
					for i := range t {
						t[i] = k.matVec(winoF2.bt, d[i])
					}
					for b := range int64(4) {
						for a, v := range k.matVec(winoF2.bt, column(t, b)) {
							p := int64(a)*4 + b
							v = k.fma(v, fconst(vecT(vl), 1/l.vStep[p]), fconst(vecT(vl), float64(l.vZero[p])))
							qv := k.cvtRound(k.fclamp(v, 0, 255))
							if ok != nil {
								qv = k.sel(ok, qv, constant.NewZeroInitializer(ivec(L, i32)))
							}
							if j > 0 {
								qv = k.b.NewOr(words[p], k.b.NewShl(qv, isplat(L, 8*j)))
							}
							words[p] = qv
						}
					}
				}
				t0 := k.add(k.mul(th, c64(l.TW)), c64(tw0))
				for p, w := range words {
					at := k.add(k.mul(k.add(k.mul(k.add(k.mul(img, c64(16)), c64(int64(p))), c64(l.C4)), cg), c64(l.Tpad)), t0)
					k.maskedStoreAt(w, vp, k.mul(at, c64(4)), valid)
				}
			}
		})
	})
}

// qWinoOutput turns M into the output: scaled to the direct sum's units,
// Aᵀ·A, the bias, then the direct store's requantization (residual and
// activation bounds included). One work item per (image, output channel,
// tile row).
func (g *gen) qWinoOutput(ql *qlin, c convGeom, l qWinoLayout, st *qstore, OCp, scaleOff, biasOff int64) {
	_, L := g.qTarget()
	vl := int(L)
	Y := ql.y
	items := c.N * c.OC * l.TH
	at := winoF2.at
	g.step("QWinogradOut", false, func(k *kfn) {
		mp := k.bytesAt(k.scratchPtr(0), c64(l.mOff))
		yp := k.bytesAt(k.ptr(Y), c64(0))
		var resp value.Value
		if st.res != nil {
			resp = k.bytesAt(st.res(k), c64(0))
		}
		scp := k.locPtr(loc{space: inWeights, off: scaleOff}, i8)
		bp := k.locPtr(loc{space: inWeights, off: biasOff}, i8)
		k.parLoop(items, true, func(it value.Value) {
			th := k.rem(it, c64(l.TH))
			plane := k.div(it, c64(l.TH)) // img·OC + oc
			oc, img := k.rem(plane, c64(c.OC)), k.div(plane, c64(c.OC))
			var sc [16]value.Value
			for p := range sc {
				sc[p] = k.splatOf(k.loadAt(f32, scp, k.mul(k.add(c64(int64(p)*OCp), oc), c64(4))), L)
			}
			bias := k.splatOf(k.loadAt(f32, bp, k.mul(oc, c64(4))), L)
			for tw0 := int64(0); tw0 < l.TW; tw0 += L {
				valid := min(L, l.TW-tw0)
				t0 := k.add(k.mul(th, c64(l.TW)), c64(tw0))
				s := make([][]value.Value, 4)
				for a := range int64(4) {
					m := make([]value.Value, 4)
					for b := range int64(4) {
						p := a*4 + b
						off := k.add(k.mul(k.add(k.mul(k.add(k.mul(img, c64(16)), c64(p)), c64(c.OC)), oc), c64(l.Tpad)), t0)
						v := k.maskedLoadAt(ivec(L, i32), mp, k.mul(off, c64(4)), valid, nil)
						m[b] = k.fmul(k.b.NewSIToFP(v, vecT(vl)), sc[p])
					}
					s[a] = k.matVec(at, m)
				}
				width := min(2*valid, c.OW-2*tw0)
				for r := int64(0); r < 2; r++ {
					y := make([]value.Value, 2)
					for qc := range y {
						y[qc] = k.fadd(k.matVec(at, column(s, int64(qc)))[r], bias)
					}
					store := func() {
						oh := k.add(k.mul(th, c64(2)), c64(r))
						rowAt := k.add(k.mul(k.add(k.mul(plane, c64(c.OH)), oh), c64(c.OW)), c64(2*tw0))
						for e0 := int64(0); e0 < width; e0 += L {
							v := k.pick(y, vl, func(e int) int {
								el := e0 + int64(e) // element 2l + q of the row segment
								return int(el%2)*vl + int(el/2)
							})
							pos, nv := k.add(rowAt, c64(e0)), min(L, width-e0)
							var res value.Value
							if resp != nil {
								res = st.residual(k, k.maskedLoadAt(ivec(L, i8), resp, pos, nv, nil), L)
							}
							qv := st.requantF(k, v, res, oc, L, false)
							k.maskedStoreAt(k.b.NewTrunc(qv, ivec(L, i8)), yp, pos, nv)
						}
					}
					if c.OH%2 != 0 && r == 1 {
						k.ifThen(k.icmp(enum.IPredULT, th, c64(l.TH-1)), store)
					} else {
						store()
					}
				}
			}
		})
	})
}
