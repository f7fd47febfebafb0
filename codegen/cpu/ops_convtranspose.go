package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/value"
)

// A float32 ConvTranspose of one group runs as a GEMM and a sum. The GEMM
// (the hand-written micro-kernel) gives the products of every input
// position with every tap, summed over the input channels,
//
//	col[n, m·K + k, i] = Σ_c W[c, m·K + k] · X[n, c, i]
//
// (K taps, W read as the [C, M·K] matrix it is: A is its transpose, packed
// when W is known at compile time), into the node's scratch; the kernel
// layer then sums for each output the entries that reach it, plus the bias
// (kernel.ConvTransposeFromProducts: one kernel per output phase). U-Net's
// 2×2 stride-2 upsampling is thus a GEMM and a strided copy. Other
// ConvTransposes (groups, other types, dynamic dims) run on the kernel
// layer's direct form.

func convTransposeCheck(g *gen, n *ir.Node) error {
	if a := g.attrs(n); a.Int("group") > 1 {
		return fmt.Errorf("grouped")
	}
	for _, v := range []*ir.Value{n.Inputs[0], n.Outputs[0]} {
		if _, dyn := g.symShapes[v]; dyn {
			return fmt.Errorf("dynamic dims")
		}
	}
	if len(dimsOf(n.Inputs[0])) < 3 {
		return fmt.Errorf("input of rank %d", len(dimsOf(n.Inputs[0])))
	}
	_, _, err := g.convTransposeSum(n)
	return err
}

// convTransposeSum returns node n's kernel-layer context holding the
// kernels that sum the products col (its first scratch buffer).
func (g *gen) convTransposeSum(n *ir.Node) (*kernel.Ctx, *kernel.Buffer, error) {
	in := make([]*kernel.Buffer, len(n.Inputs))
	consts := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = g.buffer(v)
		consts[i] = g.constOf(v)
	}
	c, err := kernel.NewCtx(n, g.opsets, in, []*kernel.Buffer{g.buffer(n.Outputs[0])}, consts)
	if err != nil {
		return nil, nil, err
	}
	xd, wd := dimsOf(n.Inputs[0]), dimsOf(n.Inputs[1])
	col := c.Temp(ir.Float32, kernel.Ints(append(append([]int64{xd[0], wd[1]}, wd[2:]...), xd[2:]...)...)...)
	if err := kernel.ConvTransposeFromProducts(c, col); err != nil {
		return nil, nil, err
	}
	return c, col, nil
}

func convTransposeScratch(g *gen, n *ir.Node) int64 {
	c, _, err := g.convTransposeSum(n)
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range c.Temps {
		total += align64(g.tempBytes(t))
	}
	return total
}

func (g *gen) lowerConvTranspose(n *ir.Node) error {
	c, _, err := g.convTransposeSum(n)
	if err != nil {
		return err
	}
	X, W := n.Inputs[0], n.Inputs[1]
	xd, wd := dimsOf(X), dimsOf(W)
	M, N, K := ir.Product(wd[1:]), ir.Product(xd[2:]), xd[1]
	gm := g.newGemm(M, N, K)
	gm.batch = xd[0]
	gm.parallel = 2*M*N*K*xd[0] >= 1<<18
	if wt := g.constOf(W); wt != nil {
		wf := floatsOf(wt)
		g.packA(gm, func(m, k int64) float32 { return wf[k*M+m] })
	} else {
		gm.a = func(k *kfn) value.Value { return k.ptr(W) }
		gm.aTile, gm.aRi, gm.aKi = gm.mr, 1, M
	}
	gm.b = func(k *kfn) value.Value { return k.ptr(X) }
	gm.bTile, gm.bKi = gm.nb(), N
	gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(K*N)) }
	gm.c = func(k *kfn) value.Value { return k.scratchPtr(0) }
	gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(M*N)) }
	g.step("ConvTransposeGemm", !gm.parallel, gm.emit)
	temps := map[*kernel.Buffer]int64{}
	var off int64
	for _, t := range c.Temps {
		temps[t] = off
		off += align64(g.tempBytes(t))
	}
	for _, kern := range c.Kernels {
		g.emitKernel(kern, temps)
	}
	return nil
}

func init() {
	register(map[string]*opInfo{
		"ConvTranspose": {types: floatOnly, lower: (*gen).lowerConvTranspose, check: convTransposeCheck, scratch: convTransposeScratch},
	})
}
