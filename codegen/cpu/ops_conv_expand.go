package cpu

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// A conv-dw group (passes' fuse-epilogue) is MobileNet's expansion: a 1×1
// Conv (with a clamp, or EfficientNet's SiLU) whose only reader is a
// depthwise Conv. The expanded
// tensor is the block's largest (96×112×112 floats, 4.8 MB, in
// MobileNetV2) and would go through memory twice; here it never does. A
// thread computes a block of mr expanded channels, all pixels, into its
// slot of the scratch, and runs the depthwise convolution of those
// channels straight from it. Threads split the channel blocks, so each
// reads back only what it wrote.

// prepareExpandDW reads a conv-dw body: the 1×1 Conv and its optional
// activation, then the depthwise Conv's epilogue group.
func (g *gen) prepareExpandDW(fg *ir.Node, body []*ir.Node, roles []ops.Role) (*ir.Node, error) {
	i := slices.Index(roles, ops.RoleDepthwise)
	if roles[0] != ops.RoleExpand || i < 1 {
		return nil, fmt.Errorf("a conv-dw group is a 1×1 Conv, its activation and a depthwise Conv's group")
	}
	a, d := body[0], body[i]
	pa := g.plan(a)
	if acts := body[1:i]; len(acts) == 1 && g.storeActivation(acts[0]) {
		pa.clamp = acts[0]
	} else if len(acts) > 0 {
		// Any other function of the expanded value alone (SiLU) is
		// computed in the expansion's store.
		post, err := g.fusedMap(acts, acts[len(acts)-1].Outputs[0])
		if err != nil {
			return nil, err
		}
		if pa.clampExpr = g.storeActExpr(post, a.Outputs[0]); pa.clampExpr == nil {
			return nil, fmt.Errorf("the expansion's activation %s is not a function of its value alone", acts[len(acts)-1])
		}
	}
	ca, err := g.convGeom(a)
	if err != nil {
		return nil, err
	}
	cd, err := g.convGeom(d)
	if err != nil {
		return nil, err
	}
	if a.OpType != "Conv" || a.Domain != "" || ca.runtime || cd.runtime || !ca.pointwise() || ca.group != 1 || cd.group != cd.C || cd.OC != cd.C || cd.C != ca.OC ||
		d.Inputs[0] != body[i-1].Outputs[0] {
		return nil, fmt.Errorf("%s and %s are not a 1×1 expansion feeding a depthwise convolution", a, d)
	}
	dwRoles := append([]ops.Role{ops.RoleBase}, roles[i+1:]...)
	if _, err := g.prepareEpilogue(fg, body[i:], dwRoles); err != nil {
		return nil, err
	}
	pd := g.plan(d)
	if pd.lower != nil {
		return nil, fmt.Errorf("%s: only a clamp or a residual may follow the depthwise convolution", fg)
	}
	pd.expansion = a
	pd.lower = func() error { return g.lowerExpandDW(a, d, ca, cd) }
	return d, nil
}

// expandDWBlock is the channels one work item expands: the GEMM's row tile.
func (g *gen) expandDWBlock(a *ir.Node) (*gemm, convGeom) {
	ca, _ := g.convGeom(a)
	return g.newGemm(ca.OC, ca.H*ca.W, ca.C), ca
}

// expandSeparately reports whether conv-dw expansion a runs as two steps,
// every channel block expanded and then every depthwise plane, instead
// of block by block. Where the expanded tensor is small enough to stay in
// the L2 anyway (a third of it: EfficientNet-B0's 7×7 and 14×14
// blocks) there is no memory traffic to save, and alternating a block's
// GEMM with its depthwise planes measured slower: 192→1152 channels at
// 7×7, 0.43 ms against 0.27 as two steps, the GEMM's K loop running
// slower by a time proportional to K.
func (g *gen) expandSeparately(a *ir.Node) bool {
	ca, _ := g.convGeom(a)
	return 4*ca.OC*ca.H*ca.W <= g.l2/3
}

func expandDWScratch(g *gen, a *ir.Node) int64 {
	gm, ca := g.expandDWBlock(a)
	slot := align64(4 * gm.mr * ca.H * ca.W)
	if g.expandSeparately(a) {
		return ca.N * ((ca.OC + gm.mr - 1) / gm.mr) * slot
	}
	return threadSlots * slot
}

func (g *gen) lowerExpandDW(a, d *ir.Node, ca, cd convGeom) error {
	X, Y := a.Inputs[0], g.outValue(d)
	gm, _ := g.expandDWBlock(a)
	M, K, HW := ca.OC, ca.C, ca.H*ca.W
	wf := floatsOf(g.constOf(a.Inputs[1]))
	g.packA(gm, func(m, k int64) float32 { return wf[m*K+k] })
	gm.parallel = false
	gm.act = g.storeActOf(a)
	gm.bTile, gm.bKi = gm.nb(), HW
	var biasOff int64 = -1
	if b := a.Input(2); b != nil {
		biasOff = g.addFloats(floatsOf(g.constOf(b)))
		gm.biasRs, gm.biasCs = 1, 0
	}
	// From here gm is one block's GEMM: mr rows of the packed weights.
	nblk := (M + gm.mr - 1) / gm.mr
	gm.M = gm.mr
	tail := *gm
	tail.M = M - (nblk-1)*gm.mr
	pl := g.groupedPlanes(d, cd)
	slotFloats := align64(4*gm.mr*HW) / 4
	items := ca.N * nblk
	par := items > 1 && 2*ca.N*M*HW*K >= 1<<17
	separate := g.expandSeparately(a)
	packed := gm.a
	// blocks emits, for this thread's work items (image, channel block),
	// the expansion into the item's slot, its depthwise planes, or both.
	// Both steps of a separate expansion split the items alike, so each
	// thread reads back only what it wrote, and a split-K projection
	// after it finds the channels where it expects them.
	blocks := func(expand, depthwise bool) func(k *kfn) {
		return func(k *kfn) {
			var lo, hi value.Value = c64(0), c64(items)
			slot := k.scratchPtr(0)
			if par {
				lo, hi = k.splitCapped(items, threadSlots)
				if !separate {
					slot = k.gep(slot, k.Mul(k.Tid, c64(slotFloats)))
				}
			}
			xp, yp, ap := k.ptr(X), k.ptr(Y), packed(k)
			// This step's copies: run points their operands at its values.
			full, last := *gm, tail
			var biasP value.Value
			if biasOff >= 0 {
				biasP = k.locPtr(loc{space: inWeights, off: biasOff}, f32)
			}
			k.Loop(lo, hi, func(it value.Value) {
				img, blk := k.SDiv(it, c64(nblk)), k.SRem(it, c64(nblk))
				at := slot
				if separate {
					at = k.gep(slot, k.Mul(it, c64(slotFloats)))
				}
				run := func(sub *gemm) {
					if expand {
						sub.a = func(*kfn) value.Value { return k.gep(ap, k.Mul(blk, c64(gm.aTile))) }
						sub.b = func(*kfn) value.Value { return k.gep(xp, k.Mul(img, c64(K*HW))) }
						sub.c = func(*kfn) value.Value { return at }
						if biasP != nil {
							sub.bias = func(*kfn) value.Value { return k.gep(biasP, k.Mul(blk, c64(gm.mr))) }
						}
						sub.emit(k)
					}
					if depthwise {
						k.loopN(0, sub.M, func(j value.Value) {
							p := k.Add(k.Mul(img, c64(M)), k.Add(k.Mul(blk, c64(gm.mr)), j))
							pl.emit(k, at, k.Mul(j, c64(HW)), yp, p)
						})
					}
				}
				if last.M == full.M {
					run(&full)
					return
				}
				k.IfElse(k.icmp(enum.IPredEQ, blk, c64(nblk-1)), func() { run(&last) }, func() { run(&full) })
			})
		}
	}
	if separate {
		g.step("ConvExpand", !par, blocks(true, false))
		g.step("ConvExpandDW", !par, blocks(false, true))
		return nil
	}
	g.step("ConvExpandDW", !par, blocks(true, true))
	return nil
}
