package cpu

import (
	"fmt"
	"github.com/kiln-ml/kiln/codegen/kernel"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/value"
)

// residual returns the operand of Add node a other than v when both have
// v's shape (no broadcasting), or nil.
func residual(a *ir.Node, v *ir.Value) *ir.Value {
	if len(a.Inputs) != 2 || a.Inputs[0] == a.Inputs[1] {
		return nil
	}
	r := a.Inputs[0]
	if r == v {
		r = a.Inputs[1]
	}
	if r == nil || r.Type.Elem != ir.Float32 || !slices.Equal(dimsOf(r), dimsOf(v)) {
		return nil
	}
	return r
}

// residualOf returns the tensor the residual Add fused into n adds, or
// nil: the Add's operand other than the fused chain's value (after the
// bias Add when there is one).
func (g *gen) residualOf(n *ir.Node) *ir.Value {
	p := g.plan(n)
	a := p.residualAdd
	if a == nil {
		return nil
	}
	v := n.Outputs[0]
	if b := p.biasAdd; b != nil {
		v = b.Outputs[0]
	}
	return residual(a, v)
}

// reads lists the values node n reads, its fused residual included.
func (g *gen) reads(n *ir.Node) []*ir.Value {
	ins := n.Inputs
	if a := g.plan(n).expansion; a != nil {
		ins = append(slices.Clip(ins), a.Inputs...)
	}
	if r := g.residualOf(n); r != nil {
		ins = append(slices.Clip(ins), r)
	}
	return ins
}

// storeAct is the activation a kernel's store applies: a clamp to [lo,
// hi] (Relu, Clip), or an elementwise expression of the stored value
// (expr, its hole "y": SiLU, Sigmoid, HardSwish, GELU, ...), so that the
// output is written once, activated.
type storeAct struct {
	lo, hi float64
	expr   *kernel.Expr
}

var noAct = storeAct{lo: math.Inf(-1), hi: math.Inf(1)}

func (a storeAct) apply(k *kfn, v value.Value) value.Value {
	v = k.clip(v, a.lo, a.hi)
	if a.expr != nil {
		v = k.evalHole(a.expr, v)
	}
	return v
}

// storeActOf returns the activation fused into n's store.
func (g *gen) storeActOf(n *ir.Node) storeAct {
	p := g.plan(n)
	if e := p.clampExpr; e != nil {
		return storeAct{lo: math.Inf(-1), hi: math.Inf(1), expr: e}
	}
	act := p.clamp
	switch {
	case act == nil:
		return noAct
	case act.OpType == "Relu":
		return storeAct{lo: 0, hi: math.Inf(1)}
	}
	lo, hi, _ := clipBounds(g, act)
	return storeAct{lo: lo, hi: hi}
}

// epilogue sets gm's fused residual Add and activation.
func (g *gen) epilogue(n *ir.Node, gm *gemm) {
	gm.act = g.storeActOf(n)
	if r := g.residualOf(n); r != nil {
		gm.add = func(k *kfn) value.Value { return k.ptr(r) }
	}
}

// outValue is where node n's (first) output is written: its epilogue
// group's output when it is the base of one.
func (g *gen) outValue(n *ir.Node) *ir.Value {
	if v := g.plan(n).out; v != nil {
		return v
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
	if ir.Product(bd[:len(bd)-2]) == 1 && ir.Product(ad[:len(ad)-2]) == batch {
		// B is shared by every batch and A's batches are contiguous
		// [M,K] blocks, as are C's: one GEMM with batch·M rows keeps the
		// row tiles full (a [S,1,K]×[K,N] projection is S GEMMs of M=1
		// otherwise).
		M, batch = M*batch, 1
	}
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
		gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(M*N)) }
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
	if b := g.plan(n).biasAdd; b != nil {
		// A bias along the last dim: the same for every row and batch.
		C := b.Inputs[0]
		if C == n.Outputs[0] {
			C = b.Inputs[1]
		}
		off := g.addFloats(floatsOf(g.constOf(C)))
		gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
		gm.biasRs, gm.biasCs = 0, 1
	}
	gm.c = func(k *kfn) value.Value { return k.ptr(Y) }
	g.epilogue(n, gm)
	g.step("MatMul", !gm.parallel, gm.emit)
	return nil
}

func init() {
	register(map[string]*opInfo{
		"Gemm":   {types: floatOnly, lower: (*gen).lowerGemm, check: gemmCheck},
		"MatMul": {types: floatOnly, lower: (*gen).lowerMatMul},
	})
}
