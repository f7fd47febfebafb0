package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// epilogue applies a fused activation (Relu/Clip folded into the producer).
func (g *gen) epilogue(n *ir.Node, gm *gemm) {
	if act := g.fusedAct[n]; act != nil {
		if act.OpType == "Relu" {
			gm.lo = 0
		} else {
			gm.lo, gm.hi, _ = clipBounds(g, act)
		}
	}
}

// outValue is where node n's (first) output is written: the fused
// activation's output when one was folded in.
func (g *gen) outValue(n *ir.Node) *ir.Value {
	if act := g.fusedAct[n]; act != nil {
		return act.Outputs[0]
	}
	return n.Outputs[0]
}

func floatsOf(t *ir.Tensor) []float32 {
	out := make([]float32, t.Len())
	for i := range out {
		out[i] = float32(t.Float64At(i))
	}
	return out
}

// ---- Gemm ----

func gemmCheck(g *gen, n *ir.Node) error {
	a := g.attrs(n)
	if g.constOf(n.Inputs[1]) == nil && (a.Int("transB") != 0 || a.Float("alpha") != 1) {
		return fmt.Errorf("non-constant B with transB or alpha")
	}
	if c := n.Input(2); c != nil && g.constOf(c) == nil && a.Float("beta") != 1 {
		return fmt.Errorf("non-constant C with beta != 1")
	}
	return nil
}

func (g *gen) lowerGemm(n *ir.Node) error {
	a := g.attrs(n)
	A, B, Y := n.Inputs[0], n.Inputs[1], g.outValue(n)
	ad, bd := dimsOf(A), dimsOf(B)
	transA, transB := a.Int("transA") != 0, a.Int("transB") != 0
	alpha, beta := a.Float("alpha"), a.Float("beta")
	M, K := ad[0], ad[1]
	if transA {
		M, K = K, M
	}
	N := bd[1]
	if transB {
		N = bd[0]
	}
	gm := g.newGemm(M, N, K)
	gm.a = func(k *kfn) value.Value { return k.ptr(A) }
	if transA {
		gm.aTile, gm.aRi, gm.aKi = gm.mr, 1, M
	} else {
		gm.aTile, gm.aRi, gm.aKi = gm.mr*K, K, 1
	}
	if bt := g.constOf(B); bt != nil {
		bf := floatsOf(bt)
		g.packB(gm, func(k, nn int64) float32 {
			if transB {
				return alpha * bf[nn*K+k]
			}
			return alpha * bf[k*N+nn]
		})
	} else {
		gm.b = func(k *kfn) value.Value { return k.ptr(B) }
		gm.bTile, gm.bKi = gm.nb(), N
	}
	if C := n.Input(2); C != nil {
		cd := dimsOf(C)
		s := bstrides(cd, []int64{M, N})
		gm.biasRs, gm.biasCs = s[0], s[1]
		if ct := g.constOf(C); ct != nil {
			cf := floatsOf(ct)
			for i := range cf {
				cf[i] *= beta
			}
			off := g.addFloats(cf)
			gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
		} else {
			gm.bias = func(k *kfn) value.Value { return k.ptr(C) }
		}
	}
	gm.c = func(k *kfn) value.Value { return k.ptr(Y) }
	g.epilogue(n, gm)
	g.step("Gemm", !gm.parallel, gm.emit)
	return nil
}

// ---- MatMul ----

func (g *gen) lowerMatMul(n *ir.Node) error {
	A, B, Y := n.Inputs[0], n.Inputs[1], g.outValue(n)
	ad, bd, yd := dimsOf(A), dimsOf(B), dimsOf(Y)
	if len(ad) == 1 {
		ad = []int64{1, ad[0]}
	}
	if len(bd) == 1 {
		bd = []int64{bd[0], 1}
	}
	M, K, N := ad[len(ad)-2], ad[len(ad)-1], bd[len(bd)-1]
	batchDims := yd[:max(0, len(yd)-2)]
	if len(dimsOf(A)) == 1 || len(dimsOf(B)) == 1 {
		// 1-D operands: the output drops a unit dim; batch is what remains.
		rank := max(len(ad), len(bd)) - 2
		batchDims = make([]int64, rank)
		ab, bb := ad[:len(ad)-2], bd[:len(bd)-2]
		for i := range batchDims {
			batchDims[i] = 1
			if j := i - (rank - len(ab)); j >= 0 && ab[j] != 1 {
				batchDims[i] = ab[j]
			}
			if j := i - (rank - len(bb)); j >= 0 && bb[j] != 1 {
				batchDims[i] = bb[j]
			}
		}
	}
	batch := ir.Product(batchDims)
	gm := g.newGemm(M, N, K)
	gm.batch = batch
	gm.parallel = 2*M*N*K*batch >= 1<<18
	gm.a = func(k *kfn) value.Value { return k.ptr(A) }
	gm.aTile, gm.aRi, gm.aKi = gm.mr*K, K, 1
	if batch > 1 {
		as := bstrides(ad[:len(ad)-2], batchDims)
		for i := range as {
			as[i] *= M * K
		}
		gm.aBatch = batchOffset(batchDims, as)
		gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.mul(bi, c64(M*N)) }
	}
	bt := g.constOf(B)
	if bt != nil && ir.Product(bd[:len(bd)-2]) == 1 {
		bf := floatsOf(bt)
		g.packB(gm, func(k, nn int64) float32 { return bf[k*N+nn] })
	} else {
		gm.b = func(k *kfn) value.Value { return k.ptr(B) }
		gm.bTile, gm.bKi = gm.nb(), N
		if batch > 1 {
			bs := bstrides(bd[:len(bd)-2], batchDims)
			for i := range bs {
				bs[i] *= K * N
			}
			gm.bBatch = batchOffset(batchDims, bs)
		}
	}
	gm.c = func(k *kfn) value.Value { return k.ptr(Y) }
	g.epilogue(n, gm)
	g.step("MatMul", !gm.parallel, gm.emit)
	return nil
}

// ---- Conv ----

type convGeom struct {
	N, C, H, W, OC, OH, OW int64
	kh, kw, sh, sw         int64
	ph, pw, dh, dw         int64
	group                  int64
}

func (g *gen) convGeom(n *ir.Node) (convGeom, error) {
	x, w, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	xd, wd, yd := dimsOf(x), dimsOf(w), dimsOf(y)
	if len(xd) != 4 {
		return convGeom{}, fmt.Errorf("only 2-D convolution")
	}
	a := g.attrs(n)
	c := convGeom{N: xd[0], C: xd[1], H: xd[2], W: xd[3], OC: yd[1], OH: yd[2], OW: yd[3], kh: wd[2], kw: wd[3],
		sh: 1, sw: 1, dh: 1, dw: 1, group: a.Int("group")}
	if c.group == 0 {
		c.group = 1
	}
	if s := a.Ints("strides"); len(s) == 2 {
		c.sh, c.sw = s[0], s[1]
	}
	if s := a.Ints("dilations"); len(s) == 2 {
		c.dh, c.dw = s[0], s[1]
	}
	switch ap := a.String("auto_pad"); ap {
	case "", "NOTSET":
		if pads := a.Ints("pads"); len(pads) == 4 {
			c.ph, c.pw = pads[0], pads[1]
		}
	case "VALID":
	case "SAME_UPPER", "SAME_LOWER":
		th := max(0, (c.OH-1)*c.sh+(c.kh-1)*c.dh+1-c.H)
		tw := max(0, (c.OW-1)*c.sw+(c.kw-1)*c.dw+1-c.W)
		if ap == "SAME_UPPER" {
			c.ph, c.pw = th/2, tw/2
		} else {
			c.ph, c.pw = th-th/2, tw-tw/2
		}
	}
	return c, nil
}

func (c convGeom) pointwise() bool {
	return c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0
}

func convCheck(g *gen, n *ir.Node) error {
	if g.constOf(n.Inputs[1]) == nil {
		return fmt.Errorf("non-constant weights")
	}
	if b := n.Input(2); b != nil && g.constOf(b) == nil {
		return fmt.Errorf("non-constant bias")
	}
	_, err := g.convGeom(n)
	return err
}

func convScratch(g *gen, n *ir.Node) int64 {
	c, err := g.convGeom(n)
	if err != nil || c.group != 1 || c.pointwise() {
		return 0
	}
	vl := int64(g.vl)
	ldb := (c.OH*c.OW + vl - 1) / vl * vl
	return 4 * c.N * c.C * c.kh * c.kw * ldb
}

func (g *gen) lowerConv(n *ir.Node) error {
	c, _ := g.convGeom(n)
	if c.group != 1 {
		return g.lowerConvDirect(n, c)
	}
	X, Y := n.Inputs[0], g.outValue(n)
	wf := floatsOf(g.constOf(n.Inputs[1]))
	M, N, K := c.OC, c.OH*c.OW, c.C*c.kh*c.kw
	gm := g.newGemm(M, N, K)
	gm.batch = c.N
	gm.parallel = 2*M*N*K*c.N >= 1<<18
	g.packA(gm, func(m, k int64) float32 { return wf[m*K+k] })
	if b := n.Input(2); b != nil {
		off := g.addFloats(floatsOf(g.constOf(b)))
		gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
		gm.biasRs, gm.biasCs = 1, 0
	}
	gm.c = func(k *kfn) value.Value { return k.ptr(Y) }
	gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.mul(bi, c64(M*N)) }
	g.epilogue(n, gm)
	if c.pointwise() {
		gm.b = func(k *kfn) value.Value { return k.ptr(X) }
		gm.bTile, gm.bKi = gm.nb(), N
		gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.mul(bi, c64(K*N)) }
		g.step("Conv1x1", !gm.parallel, gm.emit)
		return nil
	}
	vl := int64(g.vl)
	ldb := (N + vl - 1) / vl * vl
	g.emitIm2col(X, c, ldb, gm.parallel)
	gm.b = func(k *kfn) value.Value { return k.scratchPtr(0) }
	gm.bTile, gm.bKi, gm.bPadded = gm.nb(), ldb, true
	gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.mul(bi, c64(K*ldb)) }
	g.step("Conv", !gm.parallel, gm.emit)
	return nil
}

// lowerConvDirect handles grouped and depthwise convolution with direct
// loops: one output row per work item.
func (g *gen) lowerConvDirect(n *ir.Node, c convGeom) error {
	X, Y := n.Inputs[0], g.outValue(n)
	wOff := g.constLoc(g.constOf(n.Inputs[1])).off
	var bOff int64 = -1
	if b := n.Input(2); b != nil {
		bOff = g.constLoc(g.constOf(b)).off
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if act := g.fusedAct[n]; act != nil {
		if act.OpType == "Relu" {
			lo = 0
		} else {
			lo, hi, _ = clipBounds(g, act)
		}
	}
	icg, ocg := c.C/c.group, c.OC/c.group
	rows := c.N * c.OC * c.OH
	par := 2*rows*c.OW*icg*c.kh*c.kw >= 1<<17
	g.step("ConvDirect", !par, func(k *kfn) {
		xp, yp := k.ptr(X), k.ptr(Y)
		wp := k.locPtr(loc{space: inWeights, off: wOff}, f32)
		var bp value.Value
		if bOff >= 0 {
			bp = k.locPtr(loc{space: inWeights, off: bOff}, f32)
		}
		var rlo, rhi value.Value = c64(0), c64(rows)
		if par {
			rlo, rhi = k.split(rows)
		}
		k.loop(rlo, rhi, func(r value.Value) {
			oh := k.rem(r, c64(c.OH))
			noc := k.div(r, c64(c.OH))
			oc := k.rem(noc, c64(c.OC))
			img := k.div(noc, c64(c.OC))
			grp := k.div(oc, c64(ocg))
			var init value.Value = cf(0)
			if bp != nil {
				init = k.load(bp, oc)
			}
			k.loopN(0, c.OW, func(ow value.Value) {
				acc := k.loopAcc(c64(0), c64(icg), []value.Value{init}, func(ci value.Value, acc []value.Value) []value.Value {
					ch := k.add(k.mul(grp, c64(icg)), ci)
					plane := k.mul(k.add(k.mul(img, c64(c.C)), ch), c64(c.H*c.W))
					wbase := k.mul(k.add(k.mul(oc, c64(icg)), ci), c64(c.kh*c.kw))
					return k.loopAcc(c64(0), c64(c.kh), acc, func(i value.Value, acc []value.Value) []value.Value {
						ih := k.add(k.add(k.mul(oh, c64(c.sh)), c64(-c.ph)), k.mul(i, c64(c.dh)))
						okh := k.icmp(enum.IPredULT, ih, c64(c.H))
						return k.loopAcc(c64(0), c64(c.kw), acc, func(j value.Value, acc []value.Value) []value.Value {
							iw := k.add(k.add(k.mul(ow, c64(c.sw)), c64(-c.pw)), k.mul(j, c64(c.dw)))
							ok := k.b.NewAnd(okh, k.icmp(enum.IPredULT, iw, c64(c.W)))
							x := k.load(xp, k.sel(ok, k.add(plane, k.add(k.mul(ih, c64(c.W)), iw)), c64(0)))
							x = k.sel(ok, x, cf(0))
							wv := k.load(wp, k.add(wbase, k.add(k.mul(i, c64(c.kw)), j)))
							return []value.Value{k.fma(x, wv, acc[0])}
						})
					})
				})[0]
				k.store(k.clip(acc, lo, hi), yp, k.add(k.mul(r, c64(c.OW)), ow))
			})
		})
	})
	return nil
}

func init() {
	register(map[string]*opInfo{
		"Gemm":   {types: floatOnly, lower: (*gen).lowerGemm, check: gemmCheck},
		"MatMul": {types: floatOnly, lower: (*gen).lowerMatMul},
		"Conv":   {types: floatOnly, lower: (*gen).lowerConv, check: convCheck, scratch: convScratch},
	})
}

// emitIm2col writes the im2col matrix [N*C*KH*KW][ldb] into the node's
// scratch. The taps (kh, kw) are unrolled at compile time, so each output
// row splits into static zero / copy / zero ranges: plain loops the
// vectorizer turns into vector moves.
func (g *gen) emitIm2col(X *ir.Value, c convGeom, ldb int64, par bool) {
	planes := c.N * c.C
	taps := c.kh * c.kw
	g.step("Im2col", !par, func(k *kfn) {
		xp, sp := k.ptr(X), k.scratchPtr(0)
		var lo, hi value.Value = c64(0), c64(planes)
		if par {
			lo, hi = k.split(planes)
		}
		k.loop(lo, hi, func(pl value.Value) {
			src := k.mul(pl, c64(c.H*c.W))
			for kh := int64(0); kh < c.kh; kh++ {
				// valid oh: 0 <= oh*sh - ph + kh*dh < H
				ohLo, ohHi := validRange(c.OH, c.sh, kh*c.dh-c.ph, c.H)
				for kw := int64(0); kw < c.kw; kw++ {
					owLo, owHi := validRange(c.OW, c.sw, kw*c.dw-c.pw, c.W)
					row := k.mul(k.add(k.mul(pl, c64(taps)), c64(kh*c.kw+kw)), c64(ldb))
					zero := func(from, to int64) {
						k.loopN(from, to, func(i value.Value) { k.store(cf(0), sp, k.add(row, i)) })
					}
					zero(0, ohLo*c.OW)
					zero(ohHi*c.OW, c.OH*c.OW)
					if ohLo >= ohHi {
						continue
					}
					k.loopN(ohLo, ohHi, func(oh value.Value) {
						dst := k.add(row, k.mul(oh, c64(c.OW)))
						ih := k.add(k.mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
						sbase := k.add(src, k.add(k.mul(ih, c64(c.W)), c64(kw*c.dw-c.pw)))
						k.loopN(0, owLo, func(i value.Value) { k.store(cf(0), sp, k.add(dst, i)) })
						k.loopN(owLo, owHi, func(ow value.Value) {
							k.store(k.load(xp, k.add(sbase, k.mul(ow, c64(c.sw)))), sp, k.add(dst, ow))
						})
						k.loopN(owHi, c.OW, func(i value.Value) { k.store(cf(0), sp, k.add(dst, i)) })
					})
				}
			}
		})
	})
}

// validRange returns the output positions o in [0, n) with
// 0 <= o*stride + off < size, as [lo, hi).
func validRange(n, stride, off, size int64) (lo, hi int64) {
	lo, hi = n, 0
	for o := int64(0); o < n; o++ {
		if p := o*stride + off; p >= 0 && p < size {
			lo, hi = min(lo, o), max(hi, o+1)
		}
	}
	if lo > hi {
		return 0, 0
	}
	return lo, hi
}
