package cuda

import (
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// The tiled GEMM: C[b] = A[b]·B[b] over K, blocks of 64×64 outputs, 256
// threads each computing a 4×4 of them in registers, K in steps of 8
// staged through shared memory (A's tile stored k-major, so a thread reads
// its 4 rows' values as one contiguous run). Two phases per K step: the
// block's threads load the tiles (two elements of each per thread,
// adjacent threads adjacent elements: coalesced), then multiply them.
// Operands are callbacks, so a convolution streams its input's windows as
// B (an implicit im2col) and a Gemm its transposes.

const (
	tileM, tileN, tileK = 64, 64, 8
	perM, perN          = 4, 4 // outputs per thread
	gemmThreads         = (tileM / perM) * (tileN / perN)
)

// gemmSpec is one tiled GEMM.
type gemmSpec struct {
	name       string
	M, N, K, B int64
	// loadA and loadB read A[b](m, k) and B[b](k, n), called only in
	// bounds; value is the node's output from C[b](m, n) (a bias added;
	// nil: C itself), index its element in the output.
	loadA func(p *prog, b, m, k value.Value) value.Value
	loadB func(p *prog, b, k, n value.Value) value.Value
	value func(p *prog, b, m, n, acc value.Value) value.Value
	index func(p *prog, b, m, n value.Value) value.Value
}

// gemmWorth is the work from which the tiled GEMM beats the kernel
// layer's thread-per-output reduction.
const gemmWorth = 1 << 16

// emitGemm emits micro-kernel mk, a tiled GEMM (its Data a *gemmSpec),
// storing through its epilogue.
func (g *gen) emitGemm(mk *lower.Micro) {
	s := *mk.Data.(*gemmSpec)
	mt, nt, kt := (s.M+tileM-1)/tileM, (s.N+tileN-1)/tileN, (s.K+tileK-1)/tileK
	as, bs := &sharedBuf{tileK * tileM}, &sharedBuf{tileK * tileN}
	acc := &localVar{perM * perN}
	k := &tiledKernel{name: s.name, grid: s.B * mt * nt, block: gemmThreads, shared: []*sharedBuf{as, bs}, locals: []*localVar{acc}}
	k.program = func(p *prog) {
		b := p.B.NewSDiv(p.bid, c64(mt*nt))
		r := p.B.NewSRem(p.bid, c64(mt*nt))
		m0 := p.B.NewMul(p.B.NewSDiv(r, c64(nt)), c64(tileM))
		n0 := p.B.NewMul(p.B.NewSRem(r, c64(nt)), c64(tileN))
		p.phase(func(t *thread) {
			for i := int64(0); i < perM*perN; i++ {
				p.B.NewStore(zero32, t.local(acc, i))
			}
		})
		p.Loop(c64(0), c64(kt), func(step value.Value) {
			k0 := p.B.NewMul(step, c64(tileK))
			p.phase(func(t *thread) {
				for e := int64(0); e < tileM*tileK/gemmThreads; e++ {
					idx := p.B.NewAdd(t.tid, c64(e*gemmThreads))
					ml, kl := p.B.NewSDiv(idx, c64(tileK)), p.B.NewSRem(idx, c64(tileK))
					m, kk := p.B.NewAdd(m0, ml), p.B.NewAdd(k0, kl)
					in := p.B.NewAnd(p.B.NewICmp(enum.IPredSLT, m, c64(s.M)), p.B.NewICmp(enum.IPredSLT, kk, c64(s.K)))
					v := p.IfValue(in, func() value.Value { return s.loadA(p, b, m, kk) }, zeroValue)
					p.B.NewStore(v, t.shared(as, p.B.NewAdd(p.B.NewMul(kl, c64(tileM)), ml)))
				}
				for e := int64(0); e < tileN*tileK/gemmThreads; e++ {
					idx := p.B.NewAdd(t.tid, c64(e*gemmThreads))
					kl, nl := p.B.NewSDiv(idx, c64(tileN)), p.B.NewSRem(idx, c64(tileN))
					kk, n := p.B.NewAdd(k0, kl), p.B.NewAdd(n0, nl)
					in := p.B.NewAnd(p.B.NewICmp(enum.IPredSLT, kk, c64(s.K)), p.B.NewICmp(enum.IPredSLT, n, c64(s.N)))
					v := p.IfValue(in, func() value.Value { return s.loadB(p, b, kk, n) }, zeroValue)
					p.B.NewStore(v, t.shared(bs, p.B.NewAdd(p.B.NewMul(kl, c64(tileN)), nl)))
				}
			})
			p.phase(func(t *thread) {
				ty := p.B.NewMul(p.B.NewSDiv(t.tid, c64(tileN/perN)), c64(perM))
				tx := p.B.NewMul(p.B.NewSRem(t.tid, c64(tileN/perN)), c64(perN))
				sums := make([]value.Value, perM*perN)
				for i := range sums {
					sums[i] = p.B.NewLoad(f32, t.local(acc, int64(i)))
				}
				for kl := int64(0); kl < tileK; kl++ {
					var av, bv [perM]value.Value
					for i := int64(0); i < perM; i++ {
						av[i] = p.B.NewLoad(f32, t.shared(as, p.B.NewAdd(c64(kl*tileM+i), ty)))
						bv[i] = p.B.NewLoad(f32, t.shared(bs, p.B.NewAdd(c64(kl*tileN+i), tx)))
					}
					for i := 0; i < perM; i++ {
						for j := 0; j < perN; j++ {
							sums[i*perN+j] = p.B.NewCall(p.g.declare("llvm.fma.f32", f32, f32, f32, f32), av[i], bv[j], sums[i*perN+j])
						}
					}
				}
				for i := range sums {
					p.B.NewStore(sums[i], t.local(acc, int64(i)))
				}
			})
		})
		p.phase(func(t *thread) {
			ty := p.B.NewMul(p.B.NewSDiv(t.tid, c64(tileN/perN)), c64(perM))
			tx := p.B.NewMul(p.B.NewSRem(t.tid, c64(tileN/perN)), c64(perN))
			for i := int64(0); i < perM; i++ {
				for j := int64(0); j < perN; j++ {
					m, n := p.B.NewAdd(m0, p.B.NewAdd(ty, c64(i))), p.B.NewAdd(n0, p.B.NewAdd(tx, c64(j)))
					in := p.B.NewAnd(p.B.NewICmp(enum.IPredSLT, m, c64(s.M)), p.B.NewICmp(enum.IPredSLT, n, c64(s.N)))
					p.If(in, func() {
						v := value.Value(p.B.NewLoad(f32, t.local(acc, i*perN+j)))
						if s.value != nil {
							v = s.value(p, b, m, n, v)
						}
						p.result(mk, s.index(p, b, m, n), v)
					})
				}
			}
		})
	}
	g.emitTiled(k)
}
