package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/value"
)

// LSTM (forward, reverse, bidirectional; layout 0 and 1; peepholes, clip,
// input_forget; Sigmoid/Tanh/Relu activations) in one serial step:
//
//  1. the input projection of every time step and direction is one GEMM,
//     G[row, d*4H + j] = X[row] · W[d, j]ᵀ + Wb[d, j] + Rb[d, j], into
//     scratch;
//  2. the recurrence runs, per direction and batch entry, a vectorized
//     matrix-vector product R·h for blocks of vl hidden units, all four
//     gates of a block in registers (R is packed [unit block][k][gate][vl]
//     so that each k step reads 4 contiguous vectors), then the cell update
//     on those registers.
//
// The recurrence is latency-bound and small (a few hundred KiB of R), so it
// runs on thread 0: splitting it would cost a barrier per time step.

// lstmGeom is one LSTM node's sizes and settings.
type lstmGeom struct {
	seq, batch, in, hidden, dirs int64
	layout                       int64 // 1: X [batch, seq, in], Y [batch, seq, dirs, H]
	reverse                      bool  // a forward-only node running backwards
	inputForget                  bool
	clip                         float64 // +Inf without clipping
	acts                         [][3]string
}

// lstmActs are the activations the backend lowers (those without
// alpha/beta parameters).
var lstmActs = map[string]func(k *kfn, x value.Value) value.Value{
	"sigmoid": func(k *kfn, x value.Value) value.Value { return k.Sigmoid(x) },
	"tanh":    func(k *kfn, x value.Value) value.Value { return k.Tanh(x) },
	"relu":    func(k *kfn, x value.Value) value.Value { return k.FMax(x, fconst(x.Type(), 0)) },
}

// lstmGeom reads an LSTM node's sizes and its spec (ops.RNNSpecOf, the
// reference's), and refuses what this lowering does not compute.
func (g *gen) lstmGeom(n *ir.Node) (lstmGeom, error) {
	spec, err := ops.RNNSpecOf(g.attrs(n))
	if err != nil {
		return lstmGeom{}, err
	}
	xd := dimsOf(n.Inputs[0])
	if len(xd) != 3 {
		return lstmGeom{}, fmt.Errorf("X must have rank 3")
	}
	lg := lstmGeom{seq: xd[0], batch: xd[1], in: xd[2], dirs: int64(spec.Dirs), clip: spec.Clip,
		reverse: spec.Direction == "reverse", inputForget: spec.InputForget}
	if spec.BatchMajor {
		lg.layout = 1
		lg.seq, lg.batch = lg.batch, lg.seq
	}
	if lg.hidden, err = spec.Hidden(lg.in, dimsOf(n.Inputs[1]), dimsOf(n.Inputs[2])); err != nil {
		return lg, err
	}
	for _, list := range spec.Activations {
		var names [3]string
		for i, act := range list {
			if lstmActs[act.Name] == nil {
				return lg, fmt.Errorf("activation %q (in activations) not supported by this lowering", act.Name)
			}
			names[i] = act.Name
		}
		lg.acts = append(lg.acts, names)
	}
	if g.constOf(n.Inputs[1]) == nil || g.constOf(n.Inputs[2]) == nil {
		return lg, fmt.Errorf("non-constant W or R")
	}
	if b := n.Input(3); b != nil && g.constOf(b) == nil {
		return lg, fmt.Errorf("non-constant B")
	}
	if sl := n.Input(4); sl != nil {
		t := g.constOf(sl)
		if t == nil {
			return lg, fmt.Errorf("non-constant sequence_lens")
		}
		for i := 0; i < int(t.Len()); i++ {
			if t.Int64At(i) != lg.seq {
				return lg, fmt.Errorf("sequence_lens shorter than the sequence")
			}
		}
	}
	return lg, nil
}

// Scratch: G [seq*batch][dirs*4H], the cell state [dirs*batch][Hp] and two
// hidden-state buffers [2][dirs*batch][Hp] (Hp: H padded to vectors).
func (g *gen) lstmScratchLayout(lg lstmGeom) (gOff, cOff, hOff, total int64) {
	hp := (lg.hidden + int64(g.vl) - 1) / int64(g.vl) * int64(g.vl)
	gOff = 0
	cOff = align64(4 * lg.seq * lg.batch * lg.dirs * 4 * lg.hidden)
	hOff = cOff + align64(4*lg.dirs*lg.batch*hp)
	total = hOff + 4*2*lg.dirs*lg.batch*hp
	return
}

func lstmScratch(g *gen, n *ir.Node) int64 {
	lg, err := g.lstmGeom(n)
	if err != nil {
		return 0
	}
	_, _, _, total := g.lstmScratchLayout(lg)
	return total
}

func (g *gen) lowerLSTM(n *ir.Node) error {
	lg, err := g.lstmGeom(n)
	if err != nil {
		return err
	}
	H, vl := lg.hidden, int64(g.vl)
	G4 := 4 * H
	nub := (H + vl - 1) / vl // unit blocks
	hp := nub * vl
	gOff, cOff, hOff, _ := g.lstmScratchLayout(lg)

	// Input projection: one GEMM over all rows and both directions.
	wf := floatsOf(g.constOf(n.Inputs[1]))
	rows, N := lg.seq*lg.batch, lg.dirs*G4
	gm := g.newGemm(rows, N, lg.in)
	gm.parallel = false
	gm.a = func(k *kfn) value.Value { return k.ptr(n.Inputs[0]) }
	gm.aTile, gm.aRi, gm.aKi = gm.mr*lg.in, lg.in, 1
	g.packB(gm, func(kk, nn int64) float32 { return wf[nn*lg.in+kk] })
	if b := n.Input(3); b != nil {
		bf := floatsOf(g.constOf(b))
		bias := make([]float32, N)
		for d := int64(0); d < lg.dirs; d++ {
			for j := int64(0); j < G4; j++ {
				bias[d*G4+j] = bf[d*2*G4+j] + bf[d*2*G4+G4+j]
			}
		}
		off := g.addFloats(bias)
		gm.bias = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
		gm.biasRs, gm.biasCs = 0, 1
	}
	gm.c = func(k *kfn) value.Value { return k.scratchPtr(gOff) }

	// R packed per direction as [unit block][k][gate][vl], zero padded.
	rf := floatsOf(g.constOf(n.Inputs[2]))
	rp := make([]float32, lg.dirs*nub*H*4*vl)
	for d := int64(0); d < lg.dirs; d++ {
		for ub := int64(0); ub < nub; ub++ {
			for kk := int64(0); kk < H; kk++ {
				for q := int64(0); q < 4; q++ {
					for l := int64(0); l < vl; l++ {
						if u := ub*vl + l; u < H {
							rp[(((d*nub+ub)*H+kk)*4+q)*vl+l] = rf[(d*G4+q*H+u)*H+kk]
						}
					}
				}
			}
		}
	}
	rOff := g.addFloats(rp)

	// Row of X (and G) and offsets of Y and the states, by layout.
	xRow := func(k *kfn, t, b value.Value) value.Value {
		if lg.layout == 1 {
			return k.Add(k.Mul(b, c64(lg.seq)), t)
		}
		return k.Add(k.Mul(t, c64(lg.batch)), b)
	}
	yAt := func(k *kfn, t, b value.Value, d int64) value.Value {
		if lg.layout == 1 {
			return k.Mul(k.Add(k.Mul(k.Add(k.Mul(b, c64(lg.seq)), t), c64(lg.dirs)), c64(d)), c64(H))
		}
		return k.Mul(k.Add(k.Mul(k.Add(k.Mul(t, c64(lg.dirs)), c64(d)), c64(lg.batch)), b), c64(H))
	}
	stateAt := func(k *kfn, b value.Value, d int64) value.Value {
		if lg.layout == 1 {
			return k.Mul(k.Add(k.Mul(b, c64(lg.dirs)), c64(d)), c64(H))
		}
		return k.Mul(k.Add(k.Mul(c64(d), c64(lg.batch)), b), c64(H))
	}
	out := func(i int) *ir.Value {
		if i < len(n.Outputs) {
			return n.Outputs[i]
		}
		return nil
	}

	g.step("LSTM", true, func(k *kfn) {
		gm.emit(k)
		gp, cp, hbuf := k.scratchPtr(gOff), k.scratchPtr(cOff), k.scratchPtr(hOff)
		rpp := k.locPtr(loc{space: inWeights, off: rOff}, f32)
		var h0p, c0p, pp, yp, yhp, ycp value.Value
		if v := n.Input(5); v != nil {
			h0p = k.ptr(v)
		}
		if v := n.Input(6); v != nil {
			c0p = k.ptr(v)
		}
		if v := n.Input(7); v != nil {
			pp = k.ptr(v)
		}
		if v := out(0); v != nil {
			yp = k.ptr(v)
		}
		if v := out(1); v != nil {
			yhp = k.ptr(v)
		}
		if v := out(2); v != nil {
			ycp = k.ptr(v)
		}
		zero := constant.NewZeroInitializer(vecT(int(vl)))
		valid := func(ub int64) int { return int(min(vl, H-ub*vl)) }
		for d := int64(0); d < lg.dirs; d++ {
			acts := [3]func(k *kfn, x value.Value) value.Value{lstmActs[lg.acts[d][0]], lstmActs[lg.acts[d][1]], lstmActs[lg.acts[d][2]]}
			clip := func(x value.Value) value.Value { return k.clip(x, -lg.clip, lg.clip) }
			k.loopN(0, lg.batch, func(b value.Value) {
				slot := k.Mul(k.Add(k.Mul(c64(d), c64(lg.batch)), b), c64(hp)) // in the state buffers
				st := stateAt(k, b, d)
				// Initial states. Padding lanes (units ≥ H) may hold
				// anything later: they are never read as R·h inputs and
				// never stored to outputs.
				for ub := int64(0); ub < nub; ub++ {
					at := k.Add(st, c64(ub*vl))
					hv, cv := value.Value(zero), value.Value(zero)
					if h0p != nil {
						hv = k.vload(h0p, at, int(vl), valid(ub))
					}
					if c0p != nil {
						cv = k.vload(c0p, at, int(vl), valid(ub))
					}
					k.vstore(hv, hbuf, k.Add(slot, c64(ub*vl)), int(vl), int(vl))
					k.vstore(cv, cp, k.Add(slot, c64(ub*vl)), int(vl), int(vl))
				}
				k.loopN(0, lg.seq, func(i value.Value) {
					t := i
					if lg.reverse || d == 1 {
						t = k.Sub(c64(lg.seq-1), i)
					}
					par := k.SRem(i, c64(2))
					hPrev := k.Add(k.Mul(par, c64(lg.dirs*lg.batch*hp)), slot)
					hNext := k.Add(k.Mul(k.Sub(c64(1), par), c64(lg.dirs*lg.batch*hp)), slot)
					gRow := k.Add(k.Mul(xRow(k, t, b), c64(lg.dirs*G4)), c64(d*G4))
					// One group of unit blocks: R·h for their 4 gates, then
					// the cell update.
					group := func(ub0 value.Value, nb int64, lastValid int) {
						init := make([]value.Value, nb*4)
						for j := range init {
							init[j] = zero
						}
						acc := k.LoopAcc(c64(0), c64(H), 1, init, func(kk value.Value, acc []value.Value) []value.Value {
							hv := k.vsplat(k.load(hbuf, k.Add(hPrev, kk)), int(vl))
							next := make([]value.Value, len(acc))
							for bb := int64(0); bb < nb; bb++ {
								base := k.Mul(k.Add(k.Mul(k.Add(c64(d*nub), k.Add(ub0, c64(bb))), c64(H)), kk), c64(4*vl))
								for q := int64(0); q < 4; q++ {
									rv := k.vload(rpp, k.Add(base, c64(q*vl)), int(vl), int(vl))
									next[bb*4+q] = k.fma(hv, rv, acc[bb*4+q])
								}
							}
							return next
						})
						for bb := int64(0); bb < nb; bb++ {
							u0 := k.Mul(k.Add(ub0, c64(bb)), c64(vl))
							nv := int(vl)
							if bb == nb-1 {
								nv = lastValid
							}
							pre := make([]value.Value, 4)
							for q := int64(0); q < 4; q++ {
								gx := k.vload(gp, k.Add(gRow, k.Add(c64(q*H), u0)), int(vl), nv)
								pre[q] = k.fadd(acc[bb*4+q], gx)
							}
							addPeep := func(x value.Value, q int64, c value.Value) value.Value {
								if pp == nil {
									return x
								}
								return k.fma(k.vload(pp, k.Add(c64(d*3*H+q*H), u0), int(vl), nv), c, x)
							}
							cPrev := k.vload(cp, k.Add(slot, u0), int(vl), int(vl))
							in := acts[0](k, clip(addPeep(pre[0], 0, cPrev)))
							var forget value.Value
							if lg.inputForget {
								forget = k.fsub(fconst(in.Type(), 1), in)
							} else {
								forget = acts[0](k, clip(addPeep(pre[2], 2, cPrev)))
							}
							cNew := k.fma(forget, cPrev, k.fmul(in, acts[1](k, clip(pre[3]))))
							o := acts[0](k, clip(addPeep(pre[1], 1, cNew)))
							h := k.fmul(o, acts[2](k, cNew))
							k.vstore(cNew, cp, k.Add(slot, u0), int(vl), int(vl))
							k.vstore(h, hbuf, k.Add(hNext, u0), int(vl), int(vl))
							if yp != nil {
								k.vstore(h, yp, k.Add(yAt(k, t, b, d), u0), int(vl), nv)
							}
						}
					}
					// Pairs of full blocks (8 accumulators), then the rest.
					full := H / vl
					k.loopN(0, full/2, func(p value.Value) { group(k.Mul(p, c64(2)), 2, int(vl)) })
					if full%2 == 1 {
						group(c64(full-1), 1, int(vl))
					}
					if H%vl != 0 {
						group(c64(full), 1, int(H%vl))
					}
				})
				final := k.Add(c64(lg.seq%2*lg.dirs*lg.batch*hp), slot)
				for ub := int64(0); ub < nub; ub++ {
					if yhp != nil {
						k.vstore(k.vload(hbuf, k.Add(final, c64(ub*vl)), int(vl), int(vl)), yhp, k.Add(st, c64(ub*vl)), int(vl), valid(ub))
					}
					if ycp != nil {
						k.vstore(k.vload(cp, k.Add(slot, c64(ub*vl)), int(vl), int(vl)), ycp, k.Add(st, c64(ub*vl)), int(vl), valid(ub))
					}
				}
			})
		}
	})
	return nil
}

func init() {
	register(map[string]*opInfo{
		"LSTM": {types: floatOnly, lower: (*gen).lowerLSTM, scratch: lstmScratch,
			check: func(g *gen, n *ir.Node) error { _, err := g.lstmGeom(n); return err }},
	})
}
