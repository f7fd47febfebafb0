package cuda

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
	"slices"
)

// The nodes the tiled GEMM computes (gemm.go): MatMul, Gemm and 2-D
// convolutions without groups (an implicit GEMM of the weights by the
// input's windows), in float32, where the work pays for the tiles. Other
// nodes, and these below gemmWorth, run on their kernel-layer kernels.

var zero32 = constant.NewFloat(f32, 0)

// at loads element idx of the float buffer of v.
func (p *prog) at(v *ir.Value, idx value.Value) value.Value {
	return p.B.NewLoad(f32, p.B.NewGetElementPtr(f32, p.ptr(p.g.buffer(v)), idx))
}

func (p *prog) put(v *ir.Value, idx, x value.Value) {
	p.B.NewStore(x, p.B.NewGetElementPtr(f32, p.ptr(p.g.buffer(v)), idx))
}

// madd is x·c + y on i64.
func (p *prog) madd(x value.Value, c int64, y value.Value) value.Value {
	return p.B.NewAdd(p.B.NewMul(x, c64(c)), y)
}

// tiledFor returns node n's tiled lowering, or nil.
func (g *gen) tiledFor(n *ir.Node) func() {
	if n.Domain != "" && n.Domain != "ai.onnx" || len(n.Outputs) != 1 || n.Output(0) == nil {
		return nil
	}
	for _, v := range n.Inputs {
		if v != nil && v.Type.Elem != ir.Float32 {
			return nil
		}
	}
	var s *gemmSpec
	switch n.OpType {
	case "MatMul":
		s = g.matMulSpec(n)
	case "Gemm":
		s = g.gemmOpSpec(n)
	case "Conv":
		s = g.convSpec(n)
	}
	if s == nil || s.B*s.M*s.N*s.K < gemmWorth {
		return nil
	}
	s.name = n.OpType
	return func() { g.emitGemm(*s) }
}

func (g *gen) matMulSpec(n *ir.Node) *gemmSpec {
	a, b, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	ad, bd, od := dimsOf(a), dimsOf(b), dimsOf(y)
	if len(ad) < 2 || len(bd) < 2 || len(od) < 2 {
		return nil
	}
	M, K, N := ad[len(ad)-2], ad[len(ad)-1], bd[len(bd)-1]
	batch := ir.Product(od[:len(od)-2])
	// Each operand is either one matrix for every batch or one per batch
	// laid out as the output's.
	stride := func(d []int64, size int64) (int64, bool) {
		pb := ir.Product(d[:len(d)-2])
		switch {
		case pb == 1:
			return 0, true
		case pb == batch && len(d) == len(od) && slices.Equal(d[:len(d)-2], od[:len(od)-2]):
			return size, true
		}
		return 0, false
	}
	as, ok1 := stride(ad, M*K)
	bs, ok2 := stride(bd, K*N)
	if !ok1 || !ok2 {
		return nil
	}
	return &gemmSpec{M: M, N: N, K: K, B: batch,
		loadA: func(p *prog, bi, m, k value.Value) value.Value {
			return p.at(a, p.B.NewAdd(p.B.NewMul(bi, c64(as)), p.madd(m, K, k)))
		},
		loadB: func(p *prog, bi, k, nn value.Value) value.Value {
			return p.at(b, p.B.NewAdd(p.B.NewMul(bi, c64(bs)), p.madd(k, N, nn)))
		},
		store: func(p *prog, bi, m, nn, acc value.Value) {
			p.put(y, p.B.NewAdd(p.B.NewMul(bi, c64(M*N)), p.madd(m, N, nn)), acc)
		}}
}

func (g *gen) gemmOpSpec(n *ir.Node) *gemmSpec {
	a, b, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	c := n.Input(2)
	ad, bd, od := dimsOf(a), dimsOf(b), dimsOf(y)
	if len(ad) != 2 || len(bd) != 2 || len(od) != 2 {
		return nil
	}
	attr := func(name string, def int64) int64 {
		if at := n.Attr(name); at != nil {
			return at.I
		}
		return def
	}
	alpha, beta := float32(1), float32(1)
	if at := n.Attr("alpha"); at != nil {
		alpha = at.F
	}
	if at := n.Attr("beta"); at != nil {
		beta = at.F
	}
	ta, tb := attr("transA", 0) != 0, attr("transB", 0) != 0
	M, N := od[0], od[1]
	K := ad[1]
	if ta {
		K = ad[0]
	}
	// C broadcasts to [M, N]: its row and column steps (0 along a dim of 1).
	var cRow, cCol int64
	if c != nil {
		cd := dimsOf(c)
		switch len(cd) {
		case 0:
		case 1:
			if cd[0] == N && N > 1 {
				cCol = 1
			}
		case 2:
			if cd[1] == N && N > 1 {
				cCol = 1
			}
			if cd[0] == M && M > 1 {
				cRow = cd[1]
			}
		default:
			return nil
		}
	}
	return &gemmSpec{M: M, N: N, K: K, B: 1,
		loadA: func(p *prog, _, m, k value.Value) value.Value {
			if ta {
				return p.at(a, p.madd(k, M, m))
			}
			return p.at(a, p.madd(m, K, k))
		},
		loadB: func(p *prog, _, k, nn value.Value) value.Value {
			if tb {
				return p.at(b, p.madd(nn, K, k))
			}
			return p.at(b, p.madd(k, N, nn))
		},
		store: func(p *prog, _, m, nn, acc value.Value) {
			v := value.Value(p.B.NewFMul(acc, constant.NewFloat(f32, float64(alpha))))
			if c != nil && beta != 0 {
				cv := p.at(c, p.B.NewAdd(p.B.NewMul(m, c64(cRow)), p.B.NewMul(nn, c64(cCol))))
				v = p.B.NewFAdd(v, p.B.NewFMul(cv, constant.NewFloat(f32, float64(beta))))
			}
			p.put(y, p.madd(m, N, nn), v)
		}}
}

func (g *gen) convSpec(n *ir.Node) *gemmSpec {
	x, w, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	bias := n.Input(2)
	xd, wd, od := dimsOf(x), dimsOf(w), dimsOf(y)
	if len(xd) != 4 || len(wd) != 4 || len(od) != 4 {
		return nil
	}
	if at := n.Attr("group"); at != nil && at.I != 1 {
		return nil
	}
	c := g.ctxs[n]
	if c == nil {
		return nil
	}
	win, err := c.Window(wd[2:], xd[2:])
	if err != nil || win.Out[0] != od[2] || win.Out[1] != od[3] {
		return nil
	}
	C, H, W := xd[1], xd[2], xd[3]
	OC, KH, KW, OH, OW := wd[0], wd[2], wd[3], od[2], od[3]
	K := C * KH * KW
	return &gemmSpec{M: OC, N: OH * OW, K: K, B: xd[0],
		loadA: func(p *prog, _, m, k value.Value) value.Value { return p.at(w, p.madd(m, K, k)) },
		loadB: func(p *prog, bi, k, nn value.Value) value.Value {
			ch := p.B.NewSDiv(k, c64(KH*KW))
			r := p.B.NewSRem(k, c64(KH*KW))
			kh, kw := p.B.NewSDiv(r, c64(KW)), p.B.NewSRem(r, c64(KW))
			oh, ow := p.B.NewSDiv(nn, c64(OW)), p.B.NewSRem(nn, c64(OW))
			ih := p.B.NewAdd(p.madd(oh, win.Strides[0], c64(-win.PadBegin[0])), p.B.NewMul(kh, c64(win.Dilations[0])))
			iw := p.B.NewAdd(p.madd(ow, win.Strides[1], c64(-win.PadBegin[1])), p.B.NewMul(kw, c64(win.Dilations[1])))
			inside := p.B.NewAnd(
				p.B.NewAnd(p.B.NewICmp(enum.IPredSGE, ih, c64(0)), p.B.NewICmp(enum.IPredSLT, ih, c64(H))),
				p.B.NewAnd(p.B.NewICmp(enum.IPredSGE, iw, c64(0)), p.B.NewICmp(enum.IPredSLT, iw, c64(W))))
			return p.ifValue(inside, func() value.Value {
				return p.at(x, p.madd(p.madd(p.madd(bi, C, ch), H, ih), W, iw))
			})
		},
		store: func(p *prog, bi, m, nn, acc value.Value) {
			v := acc
			if bias != nil {
				v = p.B.NewFAdd(acc, p.at(bias, m))
			}
			p.put(y, p.madd(p.madd(bi, OC, m), OH*OW, nn), v)
		}}
}
