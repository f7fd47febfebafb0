package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// ---- Conv ----

type convGeom struct {
	N, C, H, W, OC, OH, OW int64
	kh, kw, sh, sw         int64
	ph, pw, dh, dw         int64
	group                  int64
	// runtime: the weights or the bias are known only at run time. Only
	// the algorithms that read them as laid out run it (im2col, 1×1,
	// grouped); the others pack them at compile time.
	runtime bool
}

// convGeom reads a 2-D convolution's geometry, or a 1-D one's as a 2-D
// convolution of height 1.
func (g *gen) convGeom(n *ir.Node) (convGeom, error) {
	x, w, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	c, err := g.convGeomOf(n, x, w, y)
	if err != nil {
		return convGeom{}, err
	}
	c.runtime = g.constOf(w) == nil || n.Input(2) != nil && g.constOf(n.Input(2)) == nil
	return c, nil
}

// convGeomOf reads the geometry of a convolution of x by w into y with n's
// attributes (Conv's, QLinearConv's, ConvInteger's), ir/ops resolving the
// window; a 1-D one as 2-D of height 1.
func (g *gen) convGeomOf(n *ir.Node, x, w, y *ir.Value) (convGeom, error) {
	xd, wd, yd := dimsOf(x), dimsOf(w), dimsOf(y)
	if len(xd) != 4 && len(xd) != 3 || len(wd) != len(xd) || len(yd) != len(xd) {
		return convGeom{}, fmt.Errorf("only 1-D and 2-D convolution")
	}
	a := g.attrs(n)
	win, err := a.Window(wd[2:], xd[2:])
	if err != nil {
		return convGeom{}, err
	}
	if len(xd) == 3 {
		one := func(d []int64) []int64 { return []int64{d[0], d[1], 1, d[2]} }
		xd, wd, yd = one(xd), one(wd), one(yd)
		for _, l := range []*[]int64{&win.Strides, &win.Dilations, &win.PadBegin} {
			*l = []int64{1, (*l)[0]}
		}
		win.PadBegin[0] = 0
	}
	c := convGeom{N: xd[0], C: xd[1], H: xd[2], W: xd[3], OC: yd[1], OH: yd[2], OW: yd[3], kh: wd[2], kw: wd[3], group: a.Int("group")}
	if c.group == 0 {
		c.group = 1
	}
	c.sh, c.sw, c.dh, c.dw, c.ph, c.pw = win.Strides[0], win.Strides[1], win.Dilations[0], win.Dilations[1], win.PadBegin[0], win.PadBegin[1]
	return c, nil
}

func (c convGeom) pointwise() bool {
	return c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0
}

func convCheck(g *gen, n *ir.Node) error {
	_, err := g.convGeom(n)
	return err
}

func convScratch(g *gen, n *ir.Node) int64 {
	if a := g.plan(n).expansion; a != nil {
		return expandDWScratch(g, a)
	}
	if g.splitKSource(n) != nil {
		return splitKScratch(g, n)
	}
	c, err := g.convGeom(n)
	if err != nil || c.group != 1 || c.pointwise() {
		return 0
	}
	if s := g.plan(n).winograd; s != nil {
		return newWinoGeom(c, s).scratchBytes()
	}
	if bd, ok := g.bands(c); ok {
		return threadSlots * bd.slot
	}
	vl := int64(g.vl)
	ldb := (c.OH*c.OW + vl - 1) / vl * vl
	return 4 * c.N * c.C * c.kh * c.kw * ldb
}

func (g *gen) lowerConv(n *ir.Node) error {
	c, _ := g.convGeom(n)
	if c.group != 1 {
		return g.lowerConvGrouped(n, c)
	}
	if s := g.plan(n).winograd; s != nil {
		g.lowerWinograd(n, c, s)
		return nil
	}
	if bd, ok := g.bands(c); ok {
		g.lowerConvBanded(n, c, bd)
		return nil
	}
	if src := g.splitKSource(n); src != nil {
		g.lowerConv1x1SplitK(n, c, src)
		return nil
	}
	X, Y := n.Inputs[0], g.outValue(n)
	M, N, K := c.OC, c.OH*c.OW, c.C*c.kh*c.kw
	gm := g.newGemm(M, N, K)
	gm.batch = c.N
	// A squeeze-excitation's 1×1 convs (one pixel) do 2 flops per
	// weight: reading the weights, from beyond the L2, is their cost,
	// and two cores read them twice as fast.
	gm.parallel = 2*M*N*K*c.N >= 1<<18 || 4*M*K >= 1<<16
	if c.runtime {
		// The weights [OC][C·kh·kw] as they are: A row-major.
		W := n.Inputs[1]
		gm.a = func(k *kfn) value.Value { return k.ptr(W) }
		gm.aTile, gm.aRi, gm.aKi = gm.mr*K, K, 1
	} else {
		wf := floatsOf(g.constOf(n.Inputs[1]))
		g.packA(gm, func(m, k int64) float32 { return wf[m*K+k] })
	}
	if b := n.Input(2); b != nil {
		gm.bias = func(k *kfn) value.Value { return k.ptr(b) }
		if !c.runtime {
			off := g.addFloats(floatsOf(g.constOf(b)))
			gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
		}
		gm.biasRs, gm.biasCs = 1, 0
	}
	gm.c = func(k *kfn) value.Value { return k.ptr(Y) }
	gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(M*N)) }
	g.epilogue(n, gm)
	if c.pointwise() {
		gm.b = func(k *kfn) value.Value { return k.ptr(X) }
		gm.bTile, gm.bKi = gm.nb(), N
		gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(K*N)) }
		g.step("Conv1x1", !gm.parallel, gm.emit)
		return nil
	}
	vl := int64(g.vl)
	ldb := (N + vl - 1) / vl * vl
	g.emitIm2col(X, c, ldb, gm.parallel)
	gm.b = func(k *kfn) value.Value { return k.scratchPtr(0) }
	gm.bTile, gm.bKi, gm.bPadded = gm.nb(), ldb, true
	gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(K*ldb)) }
	g.step("Conv", !gm.parallel, gm.emit)
	return nil
}

func init() {
	register(map[string]*opInfo{
		"Conv": {types: floatOnly, lower: (*gen).lowerConv, check: convCheck, scratch: convScratch},
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
		k.parLoop(planes, par, func(pl value.Value) {
			src := k.Mul(pl, c64(c.H*c.W))
			for kh := int64(0); kh < c.kh; kh++ {
				// valid oh: 0 <= oh*sh - ph + kh*dh < H
				ohLo, ohHi := validRange(c.OH, c.sh, kh*c.dh-c.ph, c.H)
				for kw := int64(0); kw < c.kw; kw++ {
					owLo, owHi := validRange(c.OW, c.sw, kw*c.dw-c.pw, c.W)
					row := k.Mul(k.Add(k.Mul(pl, c64(taps)), c64(kh*c.kw+kw)), c64(ldb))
					zero := func(from, to int64) {
						k.loopN(from, to, func(i value.Value) { k.store(cf(0), sp, k.Add(row, i)) })
					}
					zero(0, ohLo*c.OW)
					zero(ohHi*c.OW, c.OH*c.OW)
					if ohLo >= ohHi {
						continue
					}
					k.loopN(ohLo, ohHi, func(oh value.Value) {
						dst := k.Add(row, k.Mul(oh, c64(c.OW)))
						ih := k.Add(k.Mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
						sbase := k.Add(src, k.Add(k.Mul(ih, c64(c.W)), c64(kw*c.dw-c.pw)))
						g.im2colRow(k, xp, sbase, sp, dst, c, owLo, owHi)
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

// im2colRow writes one output row of one tap: zeros for the output columns
// whose input lies in the padding ([0, owLo) and [owHi, OW)), the input
// row (read at stride sw from sbase) for the others. Stride 1 moves whole
// (masked) vectors: the rows of small images are a few floats, which the
// loop vectorizer leaves scalar.
func (g *gen) im2colRow(k *kfn, xp, sbase, sp, dst value.Value, c convGeom, owLo, owHi int64) {
	if c.sw != 1 && c.sw != 2 {
		k.loopN(0, owLo, func(i value.Value) { k.store(cf(0), sp, k.Add(dst, i)) })
		k.loopN(owLo, owHi, func(ow value.Value) {
			k.store(k.load(xp, k.Add(sbase, k.Mul(ow, c64(c.sw)))), sp, k.Add(dst, ow))
		})
		k.loopN(owHi, c.OW, func(i value.Value) { k.store(cf(0), sp, k.Add(dst, i)) })
		return
	}
	// Vectors no wider than the run (masked lanes past a cache line or
	// page cost extra), whole where possible.
	span := func(from, to int64, src func(at int64, w, n int) value.Value) {
		for at := from; at < to; {
			w := int64(g.vl)
			for w > 4 && w/2 >= to-at {
				w /= 2
			}
			n := int(min(w, to-at))
			k.vstore(src(at, int(w), n), sp, k.Add(dst, c64(at)), int(w), n)
			at += int64(n)
		}
	}
	zero := func(_ int64, w, _ int) value.Value { return constant.NewZeroInitializer(vecT(w)) }
	span(0, owLo, zero)
	if c.sw == 1 {
		span(owLo, owHi, func(at int64, w, n int) value.Value { return k.vload(xp, k.Add(sbase, c64(at)), w, n) })
	} else {
		// Stride 2 (stems, downsampling convs): the even lanes of two
		// loads, masked so they read nothing past the last tap.
		span(owLo, owHi, func(at int64, w, n int) value.Value {
			need := 2*n - 1 // input floats from the first tap to the last
			src := k.Add(sbase, c64(2*at))
			lo := k.vload(xp, src, w, min(w, need))
			var hi value.Value = constant.NewZeroInitializer(vecT(w))
			if need > w {
				hi = k.vload(xp, k.Add(src, c64(int64(w))), w, need-w)
			}
			idx := make([]constant.Constant, w)
			for i := range idx {
				idx[i] = constant.NewInt(i32, int64(2*i))
			}
			return k.B.NewShuffleVector(lo, hi, constant.NewVector(types.NewVector(uint64(w), i32), idx...))
		})
	}
	span(owHi, c.OW, zero)
}
