package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// qlin is an integer convolution or matrix product with its store, in
// numbers: what a qconv/qgemm/qmatmul fusion group (ops_qgroup.go) or an
// ONNX integer op (QLinearConv, QLinearMatMul, ConvInteger,
// MatMulInteger) computes, read once when the node is prepared.
type qlin struct {
	x, y *ir.Value
	conv bool
	cg   convGeom // a convolution's geometry (N at the maxima)
	K    int64    // products per output (C/group·kh·kw, or a matmul's K)
	// ch is the output channels: a convolution's OC, a matmul's N.
	ch int64
	// w holds the weights minus their zero point, [ch][K] row-major.
	w       []int8
	xSigned bool  // s8 activations (flipped to u8 in the kernels)
	zpX     int64 // the activations' zero point as stored
	bias    []int32
	// The store: per channel, y = round(clamp((acc + bias)·mult + fbias
	// + (r - resZp)·resMult, lo, hi)) + zpY.
	out       qOut
	mult      []float64
	fbias     []float32 // nil: none
	res       *ir.Value
	resSigned bool
	resZp     int64
	resMult   float32
	lo, hi    float64
	zpY       int64
	ySigned   bool
}

// qCentered returns the weights minus their zero point (zp[c] of channel
// c: chOf maps a flat index to its channel) as s8, or an error when one
// does not fit.
func qCentered(w *ir.Tensor, zp []int64, chOf func(i int) int) ([]int8, error) {
	out := make([]int8, w.Len())
	for i := range out {
		v := w.Int64At(i)
		if zp != nil {
			v -= zp[chOf(i)]
		}
		if v < -128 || v > 127 {
			return nil, fmt.Errorf("weight %d minus its zero point is %d, outside int8 (the integer kernels need s8 weights)", i, v)
		}
		out[i] = int8(v)
	}
	return out, nil
}

// qBounds sets ql's clamp from the activation's bounds (in real units,
// ±Inf for none) over the output's scale, and the output type's range.
func (ql *qlin) qBounds(actLo, actHi, sy float64) {
	qmin, qmax := 0.0, 255.0
	if ql.ySigned {
		qmin, qmax = -128, 127
	}
	smin, smax := qmin-float64(ql.zpY), qmax-float64(ql.zpY)
	alo, ahi := actLo/sy, actHi/sy
	lo, hi := math.Max(smin, alo), math.Min(smax, ahi)
	switch {
	case ahi < smin: // the activation's range lies below the type's
		lo, hi = smin, smin
	case alo > smax:
		lo, hi = smax, smax
	case lo > hi:
		lo = hi
	}
	ql.lo, ql.hi = lo, hi
}

// corr is each channel's accumulator start: bias - zp·Σw, with zp the
// zero point of the u8 the kernel reads (s8 activations flip to u8: +128).
func (ql *qlin) corr() []int32 {
	zp := ql.zpX
	if ql.xSigned {
		zp += 128
	}
	out := make([]int32, ql.ch)
	for c := int64(0); c < ql.ch; c++ {
		var s int64
		for _, v := range ql.w[c*ql.K : (c+1)*ql.K] {
			s += int64(v)
		}
		b := int64(0)
		if ql.bias != nil {
			b = int64(ql.bias[c])
		}
		out[c] = int32(b - zp*s)
	}
	return out
}

// channelParams stores the per-channel arrays into the weights blob,
// padded by pad zero channels so that whole vectors load past the last
// (corr nil: the store's sums start elsewhere).
func (g *gen) channelParams(ql *qlin, st *qstore, corr []int32, pad int64) {
	n := ql.ch + pad
	if corr != nil {
		c := make([]int32, n)
		copy(c, corr)
		g.flipCorr(ql, c)
		st.corr = g.addInt32s(c)
	}
	st.out = ql.out
	st.fbias = -1
	switch ql.out {
	case qOutF64:
		m := make([]float64, n)
		copy(m, ql.mult)
		st.mult = g.addFloat64s(m)
	case qOutF32:
		m := make([]float32, n)
		for i, v := range ql.mult {
			m[i] = float32(v)
		}
		st.mult = g.addFloats(m)
		if ql.fbias != nil {
			// Offset by the zero point's even part: the store adds both at
			// once (qstore.store).
			even, _ := qZeroPointSplit(ql.zpY)
			b := make([]float32, n)
			for i, v := range ql.fbias {
				b[i] = v + float32(even)
			}
			st.fbias = g.addFloats(b)
		}
	}
	st.lo, st.hi, st.zpY, st.signed = ql.lo, ql.hi, ql.zpY, ql.ySigned
	if ql.res != nil {
		r := ql.res
		st.res = func(k *kfn) value.Value { return k.ptr(r) }
		st.resSigned, st.resZp, st.resMult = ql.resSigned, ql.resZp, ql.resMult
	}
}

// ---- convolution ----

// qconvGeom reads a convolution's geometry from x, w and y (any op whose
// attributes are Conv's), checking its groups.
func (g *gen) qconvGeom(n *ir.Node, x, w, y *ir.Value) (convGeom, error) {
	c, err := g.convGeomOf(n, x, w, y)
	if err != nil {
		return convGeom{}, err
	}
	if c.C%c.group != 0 || c.OC%c.group != 0 || dimsOf(w)[1] != c.C/c.group {
		return convGeom{}, fmt.Errorf("inconsistent groups")
	}
	return c, nil
}

// qDepthwise reports whether the convolution runs on the depthwise kernel:
// one input channel per group, a window of at most 7×7 (its taps
// unrolled).
func (ql *qlin) qDepthwise() bool {
	c := ql.cg
	return ql.conv && c.C/c.group == 1 && c.group > 1 && c.kh*c.kw <= 49
}

// qconvLayout is where a convolution's scratch holds the padded input
// and the im2col panels.
type qconvLayout struct {
	pad             bool  // the input is copied with zp borders (or slack) first
	Hp, Wp          int64 // the (padded) input planes' dims as read
	rows, cols      int64 // output rows and columns as im2col walks them
	npix, npad      int64 // output pixels; im2col row length (padded)
	padBytes, cols0 int64 // bytes of the padded copy; offset of the panels
	panelBytes      int64 // one (image, group) panel
	// rowBlock > 0: im2col is fused into the convolution, per block of
	// that many output rows, into a slice of sliceBytes per thread
	// ([K/4][sliceNpad][4]) that stays in cache while every row tile
	// reads it, instead of panels too big for L2.
	rowBlock, sliceNpad, sliceBytes int64
}

// Im2col is fused into the convolution from panels of qFuseIm2colAbove
// bytes, in slices of about qFuseSlice bytes (in L2 beside the weights,
// and many row tiles long, so that few are tails), with at least
// qFuseIm2colItems blocks to share between threads (variables: tests fuse
// every convolution, in small blocks).
var qFuseIm2colAbove, qFuseSlice, qFuseIm2colItems int64 = 512 << 10, 192 << 10, 6

func (g *gen) qconvLayout(ql *qlin, N int64) qconvLayout {
	c := ql.cg
	_, L := g.qTarget()
	var l qconvLayout
	l.npix = c.OH * c.OW
	l.npad = (l.npix+L-1)/L*L + L
	l.rows, l.cols = c.OH, c.OW
	l.Hp, l.Wp = c.H, c.W
	// Reads stay inside the input unless there is padding; with AVX2 (and
	// NEON) the strided loads are whole vectors (masked byte loads would be
	// scalarized), so they get a copy with slack.
	needH := (c.OH-1)*c.sh + (c.kh-1)*c.dh + 1
	needW := (c.OW-1)*c.sw + (c.kw-1)*c.dw + 1
	l.pad = c.ph > 0 || c.pw > 0 || needH > c.H || needW > c.W || L < 16
	if l.pad {
		l.Hp, l.Wp = max(needH, c.H+c.ph), max(needW, c.W+c.pw)
		slack := L*max(c.sw, 1) + 64
		l.padBytes = align64(N*c.C*l.Hp*l.Wp + slack)
	} else if c.pointwise() {
		// A 1×1 convolution reads each plane as one row.
		l.rows, l.cols, l.Hp, l.Wp = 1, l.npix, 1, l.npix
	}
	k4 := (ql.K + 3) / 4
	l.panelBytes = g.qK4Room(ql.K) * l.npad * 4
	l.cols0 = l.padBytes
	if c.group == 1 && l.rows > 1 && l.panelBytes > qFuseIm2colAbove {
		R := min(max(qFuseSlice/(k4*4*l.cols), 1), l.rows)
		if N*((l.rows+R-1)/R) >= qFuseIm2colItems {
			l.rowBlock = R
			l.sliceNpad = (R*l.cols+L-1)/L*L + L
			l.sliceBytes = align64(g.qK4Room(ql.K) * l.sliceNpad * 4)
		}
	}
	return l
}

func (g *gen) qlinScratch(ql *qlin) int64 {
	if !ql.conv || ql.qDepthwise() {
		return 0
	}
	if g.qWinograd(ql) {
		return g.qWinoLayout(ql, ql.cg.N).bytes
	}
	l := g.qconvLayout(ql, ql.cg.N)
	if l.rowBlock > 0 {
		return l.cols0 + threadSlots*l.sliceBytes
	}
	return l.cols0 + ql.cg.N*ql.cg.group*l.panelBytes
}

// lowerQLin emits ql's steps.
func (g *gen) lowerQLin(ql *qlin) error {
	if !ql.conv {
		return g.lowerQMatMul(ql)
	}
	c := ql.cg
	c.N = dimsOf(ql.x)[0] // one sample when run per sample
	if ql.qDepthwise() {
		g.lowerQDepthwise(ql, c)
		return nil
	}
	return g.lowerQConvGemm(ql, c)
}

func (g *gen) lowerQConvGemm(ql *qlin, c convGeom) error {
	if g.qWinograd(ql) {
		g.lowerQWinograd(ql, c)
		return nil
	}
	isa, L := g.qTarget()
	l := g.qconvLayout(ql, c.N)
	ocg := c.OC / c.group
	K, k4 := ql.K, (ql.K+3)/4
	q := &qgemm{M: ocg, N: l.npix, K: K, batch: c.N * c.group, lanes: L, isa: isa}
	q.mr, q.nv = qBlocking(q.M, q.N, L)
	if l.rowBlock > 0 {
		q.mr, q.nv = qBlocking(q.M, l.rowBlock*l.cols, L)
	}
	g.qUseAMX(q)
	q.parallel = 2*q.M*q.N*K*q.batch >= 1<<18
	// Weights: each group's rows packed on their own.
	pk := qPacker{isa: isa, lanes: L}
	var wb []byte
	var grpBytes int64
	for grp := int64(0); grp < c.group; grp++ {
		b, tile, row, group := pk.pack(q, ql.w[grp*ocg*K:(grp+1)*ocg*K], ocg, K)
		q.bcTile, q.bcRow, q.bcGroup, grpBytes = tile, row, group, int64(len(b))
		wb = append(wb, b...)
	}
	wOff := g.addWeights(wb)
	q.bc = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: wOff}, i8) }
	if c.group > 1 {
		q.bcBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(k.SRem(b, c64(c.group)), c64(grpBytes)) }
		q.st.chBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(k.SRem(b, c64(c.group)), c64(ocg)) }
	}
	cols0 := l.cols0
	q.vec = func(k *kfn) value.Value { return k.bytesAt(k.scratchPtr(0), c64(cols0)) }
	q.vecTile, q.vecGroup = q.nb()*4, l.npad*4
	q.vecBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(b, c64(l.panelBytes)) }
	Y := ql.y
	q.st.c = func(k *kfn) value.Value { return k.ptr(Y) }
	q.st.ldc, q.st.perRow = l.npix, true
	q.st.cBatch = func(k *kfn, b value.Value) value.Value { return k.Mul(b, c64(ocg*l.npix)) }
	g.channelParams(ql, &q.st, ql.corr(), q.mr+q.nb())
	if l.pad {
		g.emitQPad(ql, c, l)
	}
	if l.rowBlock > 0 {
		g.emitQConvRows(ql, c, l, q)
		return nil
	}
	g.emitQIm2col(ql, c, l, k4, q.parallel)
	g.step("QConv", !q.parallel, q.emit)
	return nil
}

// emitQConvRows is the convolution with im2col fused (l.rowBlock): per
// image and block of output rows, the block's panel goes to the thread's
// slice, then every row tile runs over it.
func (g *gen) emitQConvRows(ql *qlin, c convGeom, l qconvLayout, q *qgemm) {
	R, k4 := l.rowBlock, q.k4()
	blocks := (l.rows + R - 1) / R
	pairs := g.qRowPairs(ql, c, l, k4)
	g.step("QConv", !q.parallel, func(k *kfn) {
		src := g.qIm2colSource(k, ql, l)
		slot := k.Tid
		if !q.parallel {
			slot = c64(0)
		}
		slice := k.bytesAt(k.scratchPtr(0), k.Add(c64(l.cols0), k.Mul(slot, c64(l.sliceBytes))))
		k.parLoop(c.N*blocks, q.parallel, func(it value.Value) {
			img, blk := k.SDiv(it, c64(blocks)), k.SRem(it, c64(blocks))
			r0 := k.Mul(blk, c64(R))
			run := func(rows int64) {
				k.Loop(c64(0), c64(k4), func(qg value.Value) {
					out := k.Mul(qg, c64(l.sliceNpad*4))
					g.qIm2colRows(k, ql, c, l, pairs, src, slice, out, img, qg, r0, rows)
				})
				t := *q
				t.N, t.batch, t.parallel = rows*l.cols, 1, false
				t.vec = func(*kfn) value.Value { return slice }
				t.vecTile, t.vecGroup, t.vecBatch = t.nb()*4, l.sliceNpad*4, nil
				first := k.Add(k.Mul(img, c64(c.OC*l.npix)), k.Mul(r0, c64(l.cols)))
				t.st.cBatch = func(*kfn, value.Value) value.Value { return first }
				t.emit(k)
			}
			if tail := l.rows % R; tail > 0 {
				k.IfElse(k.icmp(enum.IPredEQ, blk, c64(blocks-1)), func() { run(tail) }, func() { run(R) })
			} else {
				run(R)
			}
		})
	})
}

// emitQPad copies the input into the scratch with zp borders: planes of
// Hp×Wp, the input at (ph, pw).
func (g *gen) emitQPad(ql *qlin, c convGeom, l qconvLayout) {
	X := ql.x
	planes := c.N * c.C
	zp := constant.NewInt(i8, ql.zpX)
	par := planes*l.Hp*l.Wp >= 1<<16
	g.step("QPad", !par, func(k *kfn) {
		xp, sp := k.ptr(X), k.bytesAt(k.scratchPtr(0), c64(0))
		k.parLoop(planes, par, func(pl value.Value) {
			src := k.Mul(pl, c64(c.H*c.W))
			dst := k.Mul(pl, c64(l.Hp*l.Wp))
			k.Loop(c64(0), c64(l.Hp), func(r value.Value) {
				row := k.Add(dst, k.Mul(r, c64(l.Wp)))
				ih := k.Sub(r, c64(c.ph))
				inside := k.B.NewAnd(k.icmp(enum.IPredSGE, ih, c64(0)), k.icmp(enum.IPredSLT, ih, c64(c.H)))
				w := min(c.W, l.Wp-c.pw)
				k.IfElse(inside, func() {
					k.fillBytes(sp, row, c.pw, zp)
					k.copyBytes(xp, k.Add(src, k.Mul(ih, c64(c.W))), sp, k.Add(row, c64(c.pw)), w)
					k.fillBytes(sp, k.Add(row, c64(c.pw+w)), l.Wp-c.pw-w, zp)
				}, func() {
					k.fillBytes(sp, row, l.Wp, zp)
				})
			})
		})
	})
}

// copyBytes copies n bytes (n known) from src[so] to dst[do] in 64-byte
// vectors; the tail masked.
func (k *kfn) copyBytes(src, so, dst, do value.Value, n int64) {
	vt := ivec(64, i8)
	if full := n / 64; full > 0 {
		k.Loop(c64(0), c64(full), func(i value.Value) {
			o := k.Mul(i, c64(64))
			k.storeAt(k.loadAt(vt, src, k.Add(so, o)), dst, k.Add(do, o))
		})
	}
	if t := n % 64; t > 0 {
		var o value.Value = c64(n - t)
		for _, w := range []int64{32, 16, 8, 4, 2, 1} {
			if t >= w {
				wt := ivec(w, i8)
				if w == 1 {
					k.storeAt(k.loadAt(i8, src, k.Add(so, o)), dst, k.Add(do, o))
				} else {
					k.storeAt(k.loadAt(wt, src, k.Add(so, o)), dst, k.Add(do, o))
				}
				o = k.Add(o, c64(w))
				t -= w
			}
		}
	}
}

// fillBytes sets n bytes (n known) at dst[do] to v.
func (k *kfn) fillBytes(dst, do value.Value, n int64, v *constant.Int) {
	if n <= 0 {
		return
	}
	vec := splat(64, v)
	if full := n / 64; full > 0 {
		k.Loop(c64(0), c64(full), func(i value.Value) { k.storeAt(vec, dst, k.Add(do, k.Mul(i, c64(64)))) })
	}
	t := n % 64
	var o value.Value = c64(n - t)
	for _, w := range []int64{32, 16, 8, 4, 2, 1} {
		if t >= w {
			if w == 1 {
				k.storeAt(v, dst, k.Add(do, o))
			} else {
				k.storeAt(splat(int(w), v), dst, k.Add(do, o))
			}
			o = k.Add(o, c64(w))
			t -= w
		}
	}
}

// emitQIm2col writes each (image, group)'s panel [K/4][npad][4]: for K
// group q and output pixel p, the 4 input bytes of K indices 4q..4q+3
// (c, kh, kw) that p's window reads (indices past K repeat the last:
// their weights are zero). Work items are (panel, K group); each walks
// its output rows in order, so a row's tail vector may spill into the
// next row's start, which that row then overwrites.
func (g *gen) emitQIm2col(ql *qlin, c convGeom, l qconvLayout, k4 int64, par bool) {
	items := c.N * c.group * k4
	pairs := g.qRowPairs(ql, c, l, k4)
	g.step("QIm2col", !par, func(k *kfn) {
		src := g.qIm2colSource(k, ql, l)
		dst := k.bytesAt(k.scratchPtr(0), c64(l.cols0))
		k.parLoop(items, par, func(it value.Value) {
			b := k.SDiv(it, c64(k4))
			qg := k.SRem(it, c64(k4))
			out := k.Add(k.Mul(b, c64(l.panelBytes)), k.Mul(qg, c64(l.npad*4)))
			g.qIm2colRows(k, ql, c, l, pairs, src, dst, out, b, qg, c64(0), l.rows)
		})
	})
}

// qIm2colSource is the input im2col reads: the padded copy, or the input.
func (g *gen) qIm2colSource(k *kfn, ql *qlin, l qconvLayout) value.Value {
	if l.pad {
		return k.bytesAt(k.scratchPtr(0), c64(0))
	}
	return k.bytesAt(k.ptr(ql.x), c64(0))
}

// qIm2colRows writes output rows [r0, r0+rows) of K group qg of panel b
// (image·group + group) at dst[out], the first row's first pixel first.
func (g *gen) qIm2colRows(k *kfn, ql *qlin, c convGeom, l qconvLayout, pairs *qRowPairs, src, dst, out, b, qg, r0 value.Value, rows int64) {
	_, L := g.qTarget()
	taps := c.kh * c.kw
	cg := c.C / c.group
	img, grp := k.SDiv(b, c64(c.group)), k.SRem(b, c64(c.group))
	chan0 := k.Add(k.Mul(img, c64(c.C)), k.Mul(grp, c64(cg)))
	var bases [4]value.Value
	for j := int64(0); j < 4; j++ {
		kk := k.Add(k.Mul(qg, c64(4)), c64(j))
		kk = k.sel(k.icmp(enum.IPredSLT, kk, c64(ql.K)), kk, c64(ql.K-1))
		ch, t := k.SDiv(kk, c64(taps)), k.SRem(kk, c64(taps))
		kh, kw := k.SDiv(t, c64(c.kw)), k.SRem(t, c64(c.kw))
		plane := k.Mul(k.Add(chan0, ch), c64(l.Hp*l.Wp))
		bases[j] = k.Add(plane, k.Add(k.Mul(kh, c64(c.dh*l.Wp)), k.Mul(kw, c64(c.dw))))
	}
	if pairs != nil {
		pairs.emit(k, src, dst, out, bases, qg, r0, rows, ql.xSigned)
		return
	}
	sw := c.sw
	if l.rows == 1 && l.cols == l.npix && !l.pad {
		sw = 1
	}
	chunk := func(rowOff, outPix value.Value, c0 value.Value, n int64) {
		var vs [4]value.Value
		for j := range vs {
			vs[j] = k.loadBytesStrided(src, k.Add(bases[j], k.Add(rowOff, k.Mul(c0, c64(sw)))), sw, L, n, !l.pad)
		}
		v := k.interleave4(vs, L)
		if ql.xSigned {
			v = k.B.NewXor(v, splat(int(4*L), constant.NewInt(i8, -128)))
		}
		k.storeAt(v, dst, k.Add(out, k.Mul(k.Add(outPix, c0), c64(4))))
	}
	k.Loop(c64(0), c64(rows), func(r value.Value) {
		oh := k.Add(r0, r)
		rowOff := k.Mul(oh, c64(c.sh*l.Wp))
		outPix := k.Mul(r, c64(l.cols))
		full := l.cols / L
		if full > 0 {
			k.Loop(c64(0), c64(full), func(ci value.Value) { chunk(rowOff, outPix, k.Mul(ci, c64(L)), L) })
		}
		if t := l.cols % L; t > 0 {
			chunk(rowOff, outPix, c64(full*L), t)
		}
	})
}

// qRowPairs is im2col with AVX512-VBMI for kernels at least 3 wide: the
// four K indices of a group (c, kh, kw in order) lie in at most two input
// rows, so 16 output pixels' dwords are one vpermt2b of two 64-byte loads
// (the first row from the first tap's column, the second from column 0)
// by the group's index pattern, a compile-time table (patterns repeat
// every taps/gcd(taps, 4) groups; the last group, whose indices past K
// repeat the last, has its own).
type qRowPairs struct {
	c          convGeom
	l          qconvLayout
	k4, period int64
	tab        int64 // weights offset of the patterns, 64 bytes each
}

func (g *gen) qRowPairs(ql *qlin, c convGeom, l qconvLayout, k4 int64) *qRowPairs {
	_, L := g.qTarget()
	taps := c.kh * c.kw
	if L != 16 || !hasFeature(g.feats, "avx512vbmi") || !l.pad || c.kw < 3 || c.dw != 1 || 15*c.sw+c.kw > 64 {
		return nil
	}
	period := taps / gcd(taps, 4) // groups until a group starts a channel again
	tap := func(q, j int64) (row, kw int64) {
		kk := min(4*q+j, ql.K-1)
		return kk / c.kw, kk % c.kw // row: channel·kh + kh
	}
	pattern := func(q int64) []byte {
		p := make([]byte, 64)
		rowA, kwA := tap(q, 0)
		for j := int64(0); j < 4; j++ {
			row, kw := tap(q, j)
			var sel, off int64
			switch row {
			case rowA:
				off = kw - kwA
			default: // the next row, from its column 0
				sel, off = 64, kw
			}
			for o := int64(0); o < 16; o++ {
				p[4*o+j] = byte(sel + o*c.sw + off)
			}
		}
		return p
	}
	var tab []byte
	for q := int64(0); q < period; q++ {
		tab = append(tab, pattern(q)...)
	}
	tab = append(tab, pattern(k4-1)...)
	return &qRowPairs{c: c, l: l, k4: k4, period: period, tab: g.addWeights(tab)}
}

// emit writes output rows [r0, r0+rows) of K group qg's panel: bases
// holds each of its four K indices' first byte in the padded input.
func (rp *qRowPairs) emit(k *kfn, src, dst, out value.Value, bases [4]value.Value, qg, r0 value.Value, rows int64, signed bool) {
	c, l := rp.c, rp.l
	const L = 16
	pi := k.SRem(qg, c64(rp.period))
	pi = k.sel(k.icmp(enum.IPredEQ, qg, c64(rp.k4-1)), c64(rp.period), pi)
	idx := k.loadAt(ivec(64, i8), k.locPtr(loc{space: inWeights, off: rp.tab}, i8), k.Mul(pi, c64(64)))
	// The second row starts at the last index's column 0 (bases are
	// rows of Wp plus a column).
	rowB := k.Sub(bases[3], k.SRem(bases[3], c64(l.Wp)))
	vt := ivec(64, i8)
	chunk := func(rowOff, outPix, c0 value.Value) {
		at := k.Add(rowOff, k.Mul(c0, c64(c.sw)))
		a := k.loadAt(vt, src, k.Add(bases[0], at))
		b := k.loadAt(vt, src, k.Add(rowB, at))
		v := k.call("llvm.x86.avx512.vpermi2var.qi.512", vt, a, idx, b)
		if signed {
			v = k.B.NewXor(v, splat(64, constant.NewInt(i8, -128)))
		}
		k.storeAt(v, dst, k.Add(out, k.Mul(k.Add(outPix, c0), c64(4))))
	}
	k.Loop(c64(0), c64(rows), func(r value.Value) {
		rowOff := k.Mul(k.Add(r0, r), c64(c.sh*l.Wp))
		outPix := k.Mul(r, c64(l.cols))
		n := (l.cols + L - 1) / L
		// Whole vectors: a row's tail spills into the next row's start,
		// which that row overwrites (or the panel's padding); the loads
		// stay inside the padded copy's slack.
		k.Loop(c64(0), c64(n), func(ci value.Value) { chunk(rowOff, outPix, k.Mul(ci, c64(L))) })
	})
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// loadBytesStrided loads L bytes p[at + l·s] (l < n; other lanes
// undefined). masked: bytes past the last used one are not read (they
// may lie past the data); else the whole span is read.
func (k *kfn) loadBytesStrided(p, at value.Value, s, L, n int64, masked bool) value.Value {
	span := (n-1)*s + 1
	if s > 4 {
		v := value.Value(constant.NewUndef(ivec(L, i8)))
		for l := int64(0); l < n; l++ {
			v = k.B.NewInsertElement(v, k.loadAt(i8, p, k.Add(at, c64(l*s))), c32(l))
		}
		return v
	}
	wide := ivec(L*s, i8)
	var v value.Value
	if masked && span < L*s {
		v = k.maskedLoadAt(wide, p, at, span, nil)
	} else {
		v = k.loadAt(wide, p, at)
	}
	if s == 1 {
		return v
	}
	idx := make([]constant.Constant, L)
	for l := range idx {
		idx[l] = c32(int64(l) * s)
	}
	return k.B.NewShuffleVector(v, constant.NewUndef(wide), constant.NewVector(ivec(L, i32), idx...))
}

// interleave4 makes [a0 b0 c0 d0 a1 b1 ...] of four L-byte vectors.
func (k *kfn) interleave4(v [4]value.Value, L int64) value.Value {
	cat := func(a, b value.Value) value.Value {
		idx := make([]constant.Constant, 2*L)
		for i := range idx {
			idx[i] = c32(int64(i))
		}
		return k.B.NewShuffleVector(a, b, constant.NewVector(ivec(2*L, i32), idx...))
	}
	ab, cd := cat(v[0], v[1]), cat(v[2], v[3])
	idx := make([]constant.Constant, 4*L)
	for p := int64(0); p < L; p++ {
		for j := int64(0); j < 4; j++ {
			src := j*L + p // in ab: a at [0,L), b at [L,2L); cd follows at 2L
			idx[4*p+j] = c32(src)
		}
	}
	return k.B.NewShuffleVector(ab, cd, constant.NewVector(ivec(4*L, i32), idx...))
}

// ---- depthwise ----

// lowerQDepthwise runs a convolution of one input channel per group
// directly on NCHW bytes, like lowerConvGrouped: per output plane, runs of
// rows with the same in-range taps, vectors of L output pixels. Taps go
// four at a time through vpdpbusd: the four taps' pixel vectors are
// interleaved into dwords (as im2col's), times the four weights
// broadcast. Every tap reads zp where it falls in the padding (a whole
// padded row is a constant vector), so each channel's sum starts at
// bias - zp·Σw over all taps, as in the GEMM.
func (g *gen) lowerQDepthwise(ql *qlin, c convGeom) {
	isa, L := g.qTarget()
	X := ql.x
	runs := tapRuns(c.OH, c.sh, c.ph, c.dh, c.kh, c.H)
	taps := c.kh * c.kw
	groups := (taps + 3) / 4
	// Weights per channel and tap group: one dword (qMadd: the even and
	// odd int16 pairs).
	pk := qPacker{isa: isa, lanes: L}
	per := int64(4)
	if isa == qMadd {
		per = 8
	}
	wb := make([]byte, c.OC*groups*per)
	for oc := int64(0); oc < c.OC; oc++ {
		for gi := int64(0); gi < groups; gi++ {
			var v [4]int8
			for j := int64(0); j < 4; j++ {
				if t := 4*gi + j; t < taps {
					v[j] = ql.w[oc*taps+t]
				}
			}
			pk.putGroup(wb[(oc*groups+gi)*per:], v, 0)
		}
	}
	wOff := g.addWeights(wb)
	// With AVX512-VBMI a row's taps come four at a time out of one load:
	// vpermb gathers output o's bytes o·s + j·d (j < 4) into its dword,
	// times the row's weights (w[kh][4g..4g+3]) broadcast.
	vbmi := isa == qVNNI && L == 16 && hasFeature(g.feats, "avx512vbmi") && 15*c.sw+3*c.dw+1 <= 64
	kwg := (c.kw + 3) / 4
	var rowOff, idxOff int64
	if vbmi {
		rb := make([]byte, c.OC*c.kh*kwg*4)
		for oc := int64(0); oc < c.OC; oc++ {
			for kh := int64(0); kh < c.kh; kh++ {
				for gi := int64(0); gi < kwg; gi++ {
					for j := int64(0); j < 4; j++ {
						if kw := 4*gi + j; kw < c.kw {
							rb[((oc*c.kh+kh)*kwg+gi)*4+j] = byte(ql.w[oc*taps+kh*c.kw+kw])
						}
					}
				}
			}
		}
		rowOff = g.addWeights(rb)
		idx := make([]byte, 64)
		for o := int64(0); o < 16; o++ {
			for j := int64(0); j < 4; j++ {
				idx[4*o+j] = byte(o*c.sw + j*c.dw)
			}
		}
		idxOff = g.addWeights(idx)
	}
	st := qstore{perRow: true}
	g.channelParams(ql, &st, ql.corr(), L)
	planes := c.N * c.OC
	par := planes > 1 && 2*planes*c.OH*c.OW*taps >= 1<<17
	mult := c.OC / c.group
	zpByte := constant.NewInt(i8, ql.zpX)
	g.step("QConvDW", !par, func(k *kfn) {
		xp, yp := k.bytesAt(k.ptr(X), c64(0)), k.ptr(ql.y)
		var resp value.Value
		if ql.res != nil {
			resp = k.ptr(ql.res)
		}
		wp := k.locPtr(loc{space: inWeights, off: wOff}, i8)
		corrP := k.locPtr(loc{space: inWeights, off: st.corr}, i32)
		k.parLoop(planes, par, func(p value.Value) {
			oc := k.SRem(p, c64(c.OC))
			img := k.SDiv(p, c64(c.OC))
			ic := k.SDiv(oc, c64(mult))
			xPlane := k.Mul(k.Add(k.Mul(img, c64(c.C)), ic), c64(c.H*c.W))
			start := k.splatOf(k.load(corrP, oc), L)
			wBase := k.Mul(oc, c64(groups*per))
			wv := make([][2]value.Value, groups)
			for gi := range wv {
				o := k.Add(wBase, c64(int64(gi)*per))
				wv[gi][0] = k.splatOf(k.loadAt(i32, wp, o), L)
				if isa == qMadd {
					wv[gi][1] = k.splatOf(k.loadAt(i32, wp, k.Add(o, c64(4))), L)
				}
			}
			var rowW [][]value.Value // [kh][kw group] splats (VBMI)
			var perm value.Value
			if vbmi {
				rp := k.locPtr(loc{space: inWeights, off: rowOff}, i8)
				rowW = make([][]value.Value, c.kh)
				for kh := range rowW {
					for gi := int64(0); gi < kwg; gi++ {
						o := k.Add(k.Mul(oc, c64(c.kh*kwg*4)), c64((int64(kh)*kwg+gi)*4))
						rowW[kh] = append(rowW[kh], k.splatOf(k.loadAt(i32, rp, o), L))
					}
				}
				perm = k.loadAt(ivec(64, i8), k.locPtr(loc{space: inWeights, off: idxOff}, i8), c64(0))
			}
			zpVec := k.B.NewBitCast(splat(int(4*L), zpByte), ivec(L, i32))
			if ql.xSigned {
				zpVec = k.B.NewBitCast(splat(int(4*L), constant.NewInt(i8, ql.zpX+128)), ivec(L, i32))
			}
			nch := (c.OW + L - 1) / L
			const chunkBlock = 8
			for _, run := range runs {
				inRun := map[int64]bool{}
				for _, kh := range run.taps {
					inRun[kh] = true
				}
				k.Loop(c64(run.lo), c64(run.hi), func(oh value.Value) {
					for cb := int64(0); cb < nch; cb += chunkBlock {
						ce := min(nch, cb+chunkBlock)
						accs := make([]value.Value, ce-cb)
						for i := range accs {
							accs[i] = start
						}
						if vbmi {
							for kh := int64(0); kh < c.kh; kh++ {
								for gi := int64(0); gi < kwg; gi++ {
									for j := cb; j < ce; j++ {
										if !inRun[kh] { // a padded row: zp times the row's weights
											accs[j-cb] = k.dot4(accs[j-cb], zpVec, rowW[kh][gi], L)
											continue
										}
										ih := k.Add(k.Mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
										row := k.Add(xPlane, k.Mul(ih, c64(c.W)))
										valid := min(L, c.OW-j*L)
										col0 := j*L*c.sw + 4*gi*c.dw - c.pw
										span := (valid-1)*c.sw + 3*c.dw + 1
										v := k.loadBytesMasked(xp, row, col0, 64, span, c.W, ql.zpX)
										v = k.call("llvm.x86.avx512.permvar.qi.512", v.Type(), v, perm)
										if ql.xSigned {
											v = k.B.NewXor(v, splat(64, constant.NewInt(i8, -128)))
										}
										accs[j-cb] = k.dot4(accs[j-cb], k.B.NewBitCast(v, ivec(L, i32)), rowW[kh][gi], L)
									}
								}
							}
						}
						for gi := int64(0); gi < groups && !vbmi; gi++ {
							for j := cb; j < ce; j++ {
								var vs [4]value.Value
								real := min(4, taps-4*gi)
								for tj := int64(0); tj < 4; tj++ {
									t := 4*gi + tj
									kh, kw := t/c.kw, t%c.kw
									if t >= taps || !inRun[kh] {
										vs[tj] = splat(int(L), zpByte) // a padded row (or past the taps: weight 0)
										continue
									}
									ih := k.Add(k.Mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
									row := k.Add(xPlane, k.Mul(ih, c64(c.W)))
									col0 := j*L*c.sw + kw*c.dw - c.pw
									vs[tj] = k.loadU8Strided(xp, row, col0, c.sw, c.W, L, min(L, c.OW-j*L), ql.zpX)
								}
								var x4 value.Value
								if real == 1 {
									// One tap (weights w, 0, 0, 0): its bytes
									// widened to dwords, no interleave.
									v := vs[0]
									if ql.xSigned {
										v = k.B.NewXor(v, splat(int(L), constant.NewInt(i8, -128)))
									}
									x4 = k.B.NewZExt(v, ivec(L, i32))
								} else {
									x4 = k.interleave4(vs, L)
									if ql.xSigned {
										x4 = k.B.NewXor(x4, splat(int(4*L), constant.NewInt(i8, -128)))
									}
									x4 = k.B.NewBitCast(x4, ivec(L, i32))
								}
								a := accs[j-cb]
								if isa == qMadd {
									ev, od := k.splitU8(x4, L)
									s := k.B.NewAdd(k.pmaddwd(ev, wv[gi][0], L), k.pmaddwd(od, wv[gi][1], L))
									accs[j-cb] = k.B.NewAdd(a, s)
								} else {
									accs[j-cb] = k.dot4(a, x4, wv[gi][0], L)
								}
							}
						}
						yRow := k.Add(k.Mul(p, c64(c.OH*c.OW)), k.Mul(oh, c64(c.OW)))
						for j := cb; j < ce; j++ {
							st.store(k, accs[j-cb], yp, resp, k.Add(yRow, c64(j*L)), oc, L, min(L, c.OW-j*L))
						}
					}
				})
			}
		})
	})
}

// loadBytesMasked loads n bytes x[row + col0 + b]: those with b < span
// whose column lies in [0, width), the others fill (never read).
func (k *kfn) loadBytesMasked(p, row value.Value, col0, n, span, width, fill int64) value.Value {
	mask := make([]constant.Constant, n)
	on := 0
	for b := range mask {
		c := col0 + int64(b)
		in := int64(b) < span && c >= 0 && c < width
		mask[b] = constant.NewBool(in)
		if in {
			on++
		}
	}
	vt := ivec(n, i8)
	fv := splat(int(n), constant.NewInt(i8, fill))
	if on == 0 {
		return fv
	}
	q := k.B.NewBitCast(k.bytesAt(p, k.Add(row, c64(col0))), types.NewPointer(vt))
	return k.call(fmt.Sprintf("llvm.masked.load.v%di8.p0v%di8", n, n), vt, q, c32(1), constant.NewVector(ivec(n, i1), mask...), fv)
}

// loadU8Strided loads lanes l < valid of x[row + col0 + l·stride] whose
// column lies in [0, width); the other lanes are fill. Bytes outside the
// row are never read.
func (k *kfn) loadU8Strided(p, row value.Value, col0, stride, width, L, valid int64, fill int64) value.Value {
	in := func(col int64) bool { return col >= 0 && col < width }
	fv := constant.NewInt(i8, fill)
	any := false
	for l := int64(0); l < valid; l++ {
		any = any || in(col0+l*stride)
	}
	if !any {
		return splat(int(L), fv)
	}
	if stride <= 2 {
		parts := make([]value.Value, stride)
		for s := range parts {
			mask := make([]constant.Constant, L)
			n := 0
			for e := range mask {
				pos := int64(s)*L + int64(e)
				on := pos%stride == 0 && pos/stride < valid && in(col0+pos)
				mask[e] = constant.NewBool(on)
				if on {
					n++
				}
			}
			vt := ivec(L, i8)
			at := k.Add(row, c64(col0+int64(s)*L))
			switch {
			case n == 0:
				parts[s] = splat(int(L), fv)
			case n == int(L):
				parts[s] = k.loadAt(vt, p, at)
			default:
				q := k.B.NewBitCast(k.bytesAt(p, at), types.NewPointer(vt))
				parts[s] = k.call(fmt.Sprintf("llvm.masked.load.v%di8.p0v%di8", L, L), vt, q, c32(1),
					constant.NewVector(ivec(L, i1), mask...), splat(int(L), fv))
			}
		}
		if stride == 1 {
			return parts[0]
		}
		idx := make([]constant.Constant, L)
		for l := range idx {
			idx[l] = c32(int64(2 * l))
		}
		return k.B.NewShuffleVector(parts[0], parts[1], constant.NewVector(ivec(L, i32), idx...))
	}
	v := value.Value(splat(int(L), fv))
	for l := int64(0); l < valid; l++ {
		if col := col0 + l*stride; in(col) {
			v = k.B.NewInsertElement(v, k.loadAt(i8, p, k.Add(row, c64(col))), c32(l))
		}
	}
	return v
}

// ---- matrix products ----

// lowerQMatMul: x [M, K] (leading dims flattened) times the packed
// weights, x broadcast a dword at a time over vectors of output columns.
func (g *gen) lowerQMatMul(ql *qlin) error {
	isa, L := g.qTarget()
	M := numel(ql.x) / ql.K
	N := ql.ch
	q := &qgemm{M: M, N: N, K: ql.K, batch: 1, lanes: L, isa: isa, acts: true, flip: ql.xSigned, kTail: ql.K%4 != 0}
	q.mr, q.nv = qBlocking(M, N, L)
	g.qUseAMX(q)
	q.parallel = 2*M*N*ql.K >= 1<<18
	X, Y := ql.x, ql.y
	q.bc = func(k *kfn) value.Value { return k.bytesAt(k.ptr(X), c64(0)) }
	q.bcTile, q.bcRow, q.bcGroup = q.mr*ql.K, ql.K, 4
	pk := qPacker{isa: isa, lanes: L, amx: q.amx}
	K := ql.K
	buf, tile, group := pk.packCols(func(k, n int64) int8 { return ql.w[n*K+k] }, K, N, q.nb())
	off := g.addWeights(buf)
	q.vec = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, i8) }
	q.vecTile, q.vecGroup = tile, group
	q.st.c = func(k *kfn) value.Value { return k.ptr(Y) }
	q.st.ldc = N
	g.channelParams(ql, &q.st, ql.corr(), q.nb()+L)
	g.step("QMatMul", !q.parallel, q.emit)
	return nil
}
