package cuda

import (
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// The nodes the tiled GEMM computes (gemm.go): MatMul, Gemm and 2-D
// convolutions without groups (an implicit GEMM of the weights by the
// input's windows), in float32, where the work pays for the tiles. Other
// nodes, and these below gemmWorth, run on their kernel-layer kernels.

var zero32 = constant.NewFloat(f32, 0)

// zeroValue is the value of a load that must not run (out of bounds).
func zeroValue() value.Value { return zero32 }

// at loads element idx of float buffer b.
func (p *prog) at(b *kernel.Buffer, idx value.Value) value.Value {
	return p.B.NewLoad(f32, p.B.NewGetElementPtr(f32, p.ptr(b), idx))
}

// result stores x, the micro-kernel's value at element idx of its node's
// output, through the epilogue fused into it (lower.Micro) when there is
// one: evaluated at idx's coordinates with x for the hole.
func (p *prog) result(m *lower.Micro, idx, x value.Value) {
	if m.Epilogue != nil {
		dims, _ := m.Out.Static()
		vars := make([]value.Value, len(dims))
		rest := idx
		for i := len(dims) - 1; i >= 0; i-- {
			vars[i] = p.B.NewSRem(rest, c64(dims[i]))
			rest = p.B.NewSDiv(rest, c64(dims[i]))
		}
		pt := llvm.NewPoint(p.Fn, vars)
		pt.Holes = map[string]value.Value{lower.AccHole: x}
		x = pt.Eval(m.Epilogue)
	}
	p.B.NewStore(x, p.B.NewGetElementPtr(f32, p.ptr(m.Out), idx))
}

// madd is x·c + y on i64.
func (p *prog) madd(x value.Value, c int64, y value.Value) value.Value {
	return p.B.NewAdd(p.B.NewMul(x, c64(c)), y)
}

// tiledFor returns node n's tiled GEMM (c its kernel-layer context, in
// and out its buffers), or nil.
func tiledFor(n *ir.Node, c *kernel.Ctx, in []*kernel.Buffer, out *kernel.Buffer) *gemmSpec {
	if n.Domain != "" && n.Domain != "ai.onnx" || len(n.Outputs) != 1 || n.Output(0) == nil || out.DType != ir.Float32 {
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
		s = matMulSpec(n, in)
	case "Gemm":
		s = gemmOpSpec(n, in)
	case "Conv":
		s = convSpec(n, c, in)
	}
	if s == nil || s.B*s.M*s.N*s.K < gemmWorth {
		return nil
	}
	s.name = n.OpType
	return s
}

func matMulSpec(n *ir.Node, in []*kernel.Buffer) *gemmSpec {
	a, b := in[0], in[1]
	ad, bd, od := dimsOf(n.Inputs[0]), dimsOf(n.Inputs[1]), dimsOf(n.Outputs[0])
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
		index: func(p *prog, bi, m, nn value.Value) value.Value {
			return p.B.NewAdd(p.B.NewMul(bi, c64(M*N)), p.madd(m, N, nn))
		}}
}

func gemmOpSpec(n *ir.Node, in []*kernel.Buffer) *gemmSpec {
	a, b := in[0], in[1]
	var c *kernel.Buffer
	if len(in) > 2 {
		c = in[2]
	}
	ad, bd, od := dimsOf(n.Inputs[0]), dimsOf(n.Inputs[1]), dimsOf(n.Outputs[0])
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
		cd, _ := c.Static()
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
		value: func(p *prog, _, m, nn, acc value.Value) value.Value {
			v := value.Value(p.B.NewFMul(acc, constant.NewFloat(f32, float64(alpha))))
			if c != nil && beta != 0 {
				cv := p.at(c, p.B.NewAdd(p.B.NewMul(m, c64(cRow)), p.B.NewMul(nn, c64(cCol))))
				v = p.B.NewFAdd(v, p.B.NewFMul(cv, constant.NewFloat(f32, float64(beta))))
			}
			return v
		},
		index: func(p *prog, _, m, nn value.Value) value.Value { return p.madd(m, N, nn) }}
}

func convSpec(n *ir.Node, c *kernel.Ctx, in []*kernel.Buffer) *gemmSpec {
	x, w := in[0], in[1]
	var bias *kernel.Buffer
	if len(in) > 2 {
		bias = in[2]
	}
	xd, wd, od := dimsOf(n.Inputs[0]), dimsOf(n.Inputs[1]), dimsOf(n.Outputs[0])
	if len(xd) != 4 || len(wd) != 4 || len(od) != 4 {
		return nil
	}
	if at := n.Attr("group"); at != nil && at.I != 1 {
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
			return p.IfValue(inside, func() value.Value {
				return p.at(x, p.madd(p.madd(p.madd(bi, C, ch), H, ih), W, iw))
			}, zeroValue)
		},
		value: func(p *prog, _, m, _, acc value.Value) value.Value {
			if bias != nil {
				return p.B.NewFAdd(acc, p.at(bias, m))
			}
			return acc
		},
		index: func(p *prog, bi, m, nn value.Value) value.Value { return p.madd(p.madd(bi, OC, m), OH*OW, nn) }}
}
