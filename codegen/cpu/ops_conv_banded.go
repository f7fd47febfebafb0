package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// Large convolutions that neither Winograd nor the 1×1 path take (the
// strided stems of ResNet, SqueezeNet and MobileNet) unfold their input a
// band of output rows at a time into a per-thread slot of the node's
// scratch and multiply each band at once, while it is still in cache: the
// whole im2col matrix (7 MB for ResNet-18's 7×7 stem) never goes through
// memory.

const (
	// threadSlots bounds the threads a kernel with per-thread buffers in
	// its scratch (banded im2col, conv-dw) uses: each owns one slot.
	threadSlots = 16
	// bandBytes caps a band buffer, so it stays in the core's L2.
	bandBytes = 192 << 10
	// bandMinPixels is the columns one band gives the GEMM at least,
	// enough for full micro-tiles; bandMinCount bands per image are needed
	// for the threads to share.
	bandMinPixels = 512
	bandMinCount  = 8
)

type convBands struct {
	rows, count int64 // output rows per band; bands per image
	ldb         int64 // floats per band-buffer row (a multiple of vl)
	slot        int64 // bytes per band buffer
}

// bands returns the band layout of c, or false when c is too small for
// banding to pay (or not a plain convolution). Winograd is chosen first.
func (g *gen) bands(c convGeom) (convBands, bool) {
	if c.runtime || c.group != 1 || c.pointwise() {
		return convBands{}, false
	}
	K := c.C * c.kh * c.kw
	rows := min(c.OH, (bandMinPixels+c.OW-1)/c.OW)
	if cap := bandBytes / (4 * K * c.OW); cap < rows {
		rows = max(1, cap)
	}
	b := convBands{rows: rows, count: (c.OH + rows - 1) / rows}
	if b.count < bandMinCount || rows*c.OW < 64 {
		return convBands{}, false
	}
	vl := int64(g.vl)
	b.ldb = (rows*c.OW + vl - 1) / vl * vl
	b.slot = align64(4 * K * b.ldb)
	return b, true
}

func (g *gen) lowerConvBanded(n *ir.Node, c convGeom, bd convBands) {
	X, Y := n.Inputs[0], g.outValue(n)
	wf := floatsOf(g.constOf(n.Inputs[1]))
	M, K := c.OC, c.C*c.kh*c.kw
	P := c.OH * c.OW
	// One GEMM per band height: full bands and the last, shorter one.
	lastRows := c.OH - (bd.count-1)*bd.rows
	full := g.newGemm(M, bd.rows*c.OW, K)
	g.packA(full, func(m, k int64) float32 { return wf[m*K+k] })
	full.parallel, full.ldc = false, P
	// The last band shares the packed weights, so it keeps the full
	// band's tile shape.
	last := *full
	last.N = lastRows * c.OW
	var biasOff int64 = -1
	if b := n.Input(2); b != nil {
		biasOff = g.addFloats(floatsOf(g.constOf(b)))
	}
	for _, gm := range []*gemm{full, &last} {
		if biasOff >= 0 {
			gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: biasOff}, f32) }
			gm.biasRs, gm.biasCs = 1, 0
		}
		g.epilogue(n, gm)
		gm.bTile, gm.bKi, gm.bPadded = gm.nb(), bd.ldb, true
	}
	parallel := 2*M*P*K*c.N >= 1<<18
	g.step("ConvBanded", !parallel, func(k *kfn) {
		total := c.N * bd.count
		slot := k.gep(k.scratchPtr(0), k.Mul(k.Tid, c64(bd.slot/4)))
		if !parallel {
			slot = k.scratchPtr(0)
		}
		xp, yp := k.ptr(X), k.ptr(Y)
		var addP value.Value
		if full.add != nil {
			addP = full.add(k)
		}
		k.parLoop(total, parallel, func(t value.Value) {
			img, band := k.SDiv(t, c64(bd.count)), k.SRem(t, c64(bd.count))
			oh0 := k.Mul(band, c64(bd.rows))
			x := k.gep(xp, k.Mul(img, c64(c.C*c.H*c.W)))
			out := k.Add(k.Mul(img, c64(M*P)), k.Mul(oh0, c64(c.OW)))
			run := func(gm *gemm, rows int64) {
				g.emitIm2colBand(k, x, slot, c, bd.ldb, oh0, rows)
				gm.b = func(*kfn) value.Value { return slot }
				gm.c = func(*kfn) value.Value { return k.gep(yp, out) }
				if addP != nil {
					gm.add = func(*kfn) value.Value { return k.gep(addP, out) }
				}
				gm.emit(k)
			}
			if lastRows == bd.rows {
				run(full, bd.rows)
				return
			}
			k.IfElse(k.icmp(enum.IPredEQ, band, c64(bd.count-1)), func() { run(&last, lastRows) }, func() { run(full, bd.rows) })
		})
	})
}

// emitIm2colBand unfolds output rows [oh0, oh0+rows) of one image x into
// the band buffer sp: row (c, kh, kw) holds, for each output pixel of the
// band, the input value that tap multiplies (0 in the padding).
func (g *gen) emitIm2colBand(k *kfn, x, sp value.Value, c convGeom, ldb int64, oh0 value.Value, rows int64) {
	taps := c.kh * c.kw
	zero := func(base, from, to value.Value) {
		k.Loop(from, to, func(i value.Value) { k.store(cf(0), sp, k.Add(base, i)) })
	}
	smax := func(a, b value.Value) value.Value { return k.sel(k.icmp(enum.IPredSGT, a, b), a, b) }
	smin := func(a, b value.Value) value.Value { return k.sel(k.icmp(enum.IPredSLT, a, b), a, b) }
	end := k.Add(oh0, c64(rows))
	k.Loop(c64(0), c64(c.C), func(ch value.Value) {
		src := k.Mul(ch, c64(c.H*c.W))
		for kh := int64(0); kh < c.kh; kh++ {
			ohLo, ohHi := validRange(c.OH, c.sh, kh*c.dh-c.ph, c.H)
			a := smin(smax(oh0, c64(ohLo)), end)
			b := smax(smin(end, c64(ohHi)), a)
			for kw := int64(0); kw < c.kw; kw++ {
				owLo, owHi := validRange(c.OW, c.sw, kw*c.dw-c.pw, c.W)
				row := k.Mul(k.Add(k.Mul(ch, c64(taps)), c64(kh*c.kw+kw)), c64(ldb))
				// Output rows of the band the tap reads outside the input are 0.
				zero(row, c64(0), k.Mul(k.Sub(a, oh0), c64(c.OW)))
				zero(row, k.Mul(k.Sub(b, oh0), c64(c.OW)), c64(rows*c.OW))
				k.Loop(a, b, func(oh value.Value) {
					dst := k.Add(row, k.Mul(k.Sub(oh, oh0), c64(c.OW)))
					ih := k.Add(k.Mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
					sbase := k.Add(src, k.Add(k.Mul(ih, c64(c.W)), c64(kw*c.dw-c.pw)))
					g.im2colRow(k, x, sbase, sp, dst, c, owLo, owHi)
				})
			}
		}
	})
}
