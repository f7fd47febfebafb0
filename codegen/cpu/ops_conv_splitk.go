package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// A conv-dw kernel leaves each thread the channel blocks it computed, in
// its core's cache. The 1×1 projection that reads them (MobileNet's
// linear bottleneck) would have every thread read every channel, half of
// them from the other core, which on a VM can cost more than the
// arithmetic. Instead each thread multiplies the channels it owns (the
// same split) into a partial output, and a second step adds the partials
// with the bias, residual and clamp: what crosses cores is the M-channel
// output, not the K-channel input.

// splitKSource returns the conv-dw node whose channel split projection n
// follows, or nil: n is a batch-1, 1×1 convolution reading a conv-dw
// group's output, which that kernel computes in parallel. Its weights
// may be computed at run time: a squeeze-excitation gate moved into them
// (passes' conv-scale), EfficientNet's and MobileNetV3's projections.
func (g *gen) splitKSource(n *ir.Node) *ir.Node {
	c, err := g.convGeom(n)
	if err != nil || !c.pointwise() || c.group != 1 || c.N != 1 {
		return nil
	}
	for _, d := range g.nodes {
		a := g.plan(d).expansion
		if a == nil || g.outValue(d) != n.Inputs[0] {
			continue
		}
		if _, par := g.expandDWSplit(a); par {
			return d
		}
	}
	return nil
}

// expandDWSplit returns the channel block size of conv-dw expansion a and
// whether its kernel splits the blocks between threads.
func (g *gen) expandDWSplit(a *ir.Node) (rows int64, parallel bool) {
	gm, ca := g.expandDWBlock(a)
	items := ca.N * ((ca.OC + gm.mr - 1) / gm.mr)
	return gm.mr, items > 1 && 2*ca.N*ca.OC*ca.H*ca.W*ca.C >= 1<<17
}

func splitKScratch(g *gen, n *ir.Node) int64 {
	c, _ := g.convGeom(n)
	return (threadSlots - 1) * align64(4*c.OC*c.OH*c.OW)
}

func (g *gen) lowerConv1x1SplitK(n *ir.Node, c convGeom, src *ir.Node) {
	X, Y := n.Inputs[0], g.outValue(n)
	rows, _ := g.expandDWSplit(g.plan(src).expansion)
	M, N, K := c.OC, c.OH*c.OW, c.C
	nblk := (K + rows - 1) / rows
	gm := g.newGemm(M, N, K)
	if W := n.Inputs[1]; g.constOf(W) == nil {
		// The weights [OC][C] as computed: A row-major.
		gm.a = func(k *kfn) value.Value { return k.ptr(W) }
		gm.aTile, gm.aRi, gm.aKi = gm.mr*K, K, 1
	} else {
		wf := floatsOf(g.constOf(W))
		g.packA(gm, func(m, k int64) float32 { return wf[m*K+k] })
	}
	gm.parallel = false
	gm.bTile, gm.bKi = gm.nb(), N
	// biasPtr is the bias, stored or computed, or nil.
	biasPtr := func(*kfn) value.Value { return nil }
	if b := n.Input(2); b != nil && g.constOf(b) == nil {
		biasPtr = func(k *kfn) value.Value { return k.ptr(b) }
	} else if b != nil {
		off := g.addFloats(floatsOf(g.constOf(b)))
		biasPtr = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
	}
	// On one thread the product is whole: the usual fused store.
	whole := *gm
	if n.Input(2) != nil {
		whole.bias = biasPtr
		whole.biasRs, whole.biasCs = 1, 0
	}
	g.epilogue(n, &whole)
	slotFloats := align64(4*M*N) / 4
	// active is how many threads hold channels: the conv-dw kernel's cap.
	active := func(k *kfn) value.Value {
		return k.sel(k.icmp(enum.IPredSGT, k.Nth, c64(threadSlots)), c64(threadSlots), k.Nth)
	}
	g.step("Conv1x1SplitK", false, func(k *kfn) {
		blo, bhi := k.splitCapped(nblk, threadSlots)
		kLo := k.Mul(blo, c64(rows))
		kHi := k.sel(k.icmp(enum.IPredSLT, k.Mul(bhi, c64(rows)), c64(K)), k.Mul(bhi, c64(rows)), c64(K))
		gm.kRange = func(*kfn) (value.Value, value.Value) { return kLo, kHi }
		gm.b = func(*kfn) value.Value { return k.ptr(X) }
		// Thread 0 writes its partial into Y, thread t into slot t-1.
		slot := k.gep(k.scratchPtr(0), k.Mul(k.Sub(k.Tid, c64(1)), c64(slotFloats)))
		dst := k.sel(k.icmp(enum.IPredEQ, k.Tid, c64(0)), k.ptr(Y), slot)
		gm.c = func(*kfn) value.Value { return dst }
		whole.b, whole.c = gm.b, func(*kfn) value.Value { return k.ptr(Y) }
		k.IfElse(k.icmp(enum.IPredEQ, k.Nth, c64(1)), func() { whole.emit(k) }, func() {
			k.If(k.icmp(enum.IPredSLT, k.Tid, active(k)), func() { gm.emit(k) })
		})
	})
	act := g.storeActOf(n)
	res := g.residualOf(n)
	vl := int64(g.vl)
	chunks := (N + vl - 1) / vl
	g.step("SplitKSum", false, func(k *kfn) {
		done := k.Block()
		body := k.Block()
		k.B.NewCondBr(k.icmp(enum.IPredEQ, k.Nth, c64(1)), done, body)
		k.B = body
		defer func() { k.B.NewBr(done); k.B = done }()
		yp, sp, bp := k.ptr(Y), k.scratchPtr(0), biasPtr(k)
		var rp value.Value
		if res != nil {
			rp = k.ptr(res)
		}
		parts := active(k)
		from, to := k.split(M * chunks)
		k.Loop(from, to, func(it value.Value) {
			m, ch := k.SDiv(it, c64(chunks)), k.SRem(it, c64(chunks))
			sum := func(valid int) {
				at := k.Add(k.Mul(m, c64(N)), k.Mul(ch, c64(vl)))
				v := k.vload(yp, at, int(vl), valid)
				v = k.LoopAcc(c64(1), parts, 1, []value.Value{v}, func(t value.Value, acc []value.Value) []value.Value {
					off := k.Add(k.Mul(k.Sub(t, c64(1)), c64(slotFloats)), at)
					return []value.Value{k.fadd(acc[0], k.vload(sp, off, int(vl), valid))}
				})[0]
				if bp != nil {
					v = k.fadd(v, k.vsplat(k.load(bp, m), int(vl)))
				}
				if rp != nil {
					v = k.fadd(v, k.vload(rp, at, int(vl), valid))
				}
				k.vstore(act.apply(k, v), yp, at, int(vl), valid)
			}
			if tail := N - (chunks-1)*vl; tail != vl {
				k.IfElse(k.icmp(enum.IPredEQ, ch, c64(chunks-1)), func() { sum(int(tail)) }, func() { sum(int(vl)) })
			} else {
				sum(int(vl))
			}
		})
	})
}
