package cpu

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/llir/llvm/ir/value"
)

// layerNorm is a decomposed LayerNormalization over the last axis, as
// PyTorch exports it before opset 17 (passes/fuse_layernorm.go):
//
//	mean = ReduceMean(x, -1); d = Sub(x, mean)
//	var = ReduceMean(Pow(d, 2), -1)     (or Mul(d, d))
//	y = Div(d, Sqrt(Add(var, eps)))
//
// lowered as one row-wise kernel writing out; pro computes x on the fly
// and epi (its hole is y) is applied to the result as it is stored.
type layerNorm struct {
	x, y *ir.Value
	out  *ir.Value
	eps  float64
	// pro computes x and epi the output from y (a kernel.Hole), as
	// kernel-layer expressions over out's coordinates; nil when absent.
	pro, epi *kernel.Expr
}

// layerNormOf reads a layernorm group's body by its roles: the
// prologue's nodes, the seven nodes of the pattern, the epilogue's nodes.
func (g *gen) layerNormOf(body []*ir.Node, roles []ops.Role, out *ir.Value) (*layerNorm, error) {
	i, k := slices.Index(roles, ops.RoleMean), len(ops.LayerNormCore)
	if i < 0 || len(body) < i+k || !slices.Equal(roles[i:i+k], ops.LayerNormCore) {
		return nil, fmt.Errorf("a layernorm group without the LayerNorm pattern")
	}
	core := body[i : i+7]
	for j, op := range []string{"ReduceMean", "Sub", "", "ReduceMean", "Add", "Sqrt", "Div"} {
		if op != "" && core[j].OpType != op {
			return nil, fmt.Errorf("layernorm group: %s where the pattern has %s", core[j], op)
		}
	}
	add, r2 := core[4], core[3].Outputs[0]
	epsV := add.Inputs[0]
	if epsV == r2 {
		epsV = add.Inputs[1]
	}
	t := g.constOf(epsV)
	if t == nil || t.Len() != 1 {
		return nil, fmt.Errorf("layernorm group: epsilon is not a constant")
	}
	ln := &layerNorm{x: core[0].Inputs[0], y: core[6].Outputs[0], out: out, eps: t.Float64At(0)}
	if pro := body[:i]; len(pro) > 0 {
		m, err := g.fusedMap(pro, ln.x)
		if err != nil {
			return nil, err
		}
		if pro[len(pro)-1].Outputs[0] != ln.x {
			return nil, fmt.Errorf("layernorm group: the prologue does not compute the input")
		}
		ln.pro = m.Value
	}
	if epi := body[i+7:]; len(epi) > 0 {
		m, err := g.fusedMap(epi, out)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(dimsOf(out), dimsOf(ln.y)) {
			return nil, fmt.Errorf("layernorm group: the epilogue cannot be applied row by row")
		}
		yb := g.buffer(ln.y)
		ln.epi = kernel.Inline(m.Value, map[*kernel.Buffer]*kernel.Kernel{
			yb: {Out: yb, Value: kernel.Hole("y", ir.Float32)}})
	}
	return ln, nil
}

// rowEval prepares evaluating expression e (over dims' coordinates) along
// row r (the leading dims flattened) in vectors of the last dim: the
// returned function computes the lanes from column col (valid of them;
// the others are masked) with y filling the expression's hole.
func (g *gen) rowEval(k *kfn, e *kernel.Expr, dims []int64, r value.Value) func(col value.Value, valid int, y value.Value) value.Value {
	rank := len(dims)
	vars := make([]value.Value, rank)
	rest := r
	for d := rank - 2; d >= 0; d-- {
		if d == 0 {
			vars[0] = rest
			break
		}
		vars[d] = k.SRem(rest, c64(dims[d]))
		rest = k.SDiv(rest, c64(dims[d]))
	}
	return func(col value.Value, valid int, y value.Value) value.Value {
		f := llvm.NewFn(g.mod, k.F, k.Tid, k.Nth, kernelHost{g: g, k: k}, g.decls)
		f.B = k.B
		vars[rank-1] = col
		var mask value.Value
		if valid < g.vl {
			mask = maskConst(g.vl, valid)
		}
		p := llvm.NewPoint(f, vars).Vector(rank-1, false, g.vl, mask)
		p.Holes = map[string]value.Value{"y": y}
		v := p.EvalVec(e)
		k.B = f.B
		return v
	}
}

func (g *gen) lowerLayerNorm(ln *layerNorm) error {
	dims := dimsOf(ln.x)
	L := dims[len(dims)-1]
	rows := numel(ln.x) / L
	out := ln.out
	par := parallelWorth(numel(out)) || rows >= 64 && numel(out) >= 4096
	g.step("LayerNorm", !par, func(k *kfn) {
		vl := g.vl
		op := k.ptr(out)
		var xp value.Value
		if ln.pro == nil {
			xp = k.ptr(ln.x)
		}
		var lo, hi value.Value = c64(0), c64(rows)
		if par {
			lo, hi = k.split(rows)
		}
		k.Loop(lo, hi, func(r value.Value) {
			base := k.Mul(r, c64(L))
			read := func(col value.Value, valid int) value.Value {
				return k.vload(xp, k.Add(base, col), vl, valid)
			}
			if ln.pro != nil {
				at := g.rowEval(k, ln.pro, dims, r)
				read = func(col value.Value, valid int) value.Value { return at(col, valid, nil) }
			}
			// Masked-off lanes of a computed input are not zero: zero them
			// before they reach a sum.
			readZ := func(col value.Value, valid int) value.Value {
				x := read(col, valid)
				if valid < vl && ln.pro != nil {
					x = k.sel(maskConst(vl, valid), x, fconst(x.Type(), 0))
				}
				return x
			}
			sum := k.colReduce(L, fconst(vecT(vl), 0), func(col value.Value, valid int, acc value.Value) value.Value {
				return k.fadd(acc, readZ(col, valid))
			})
			mean := k.fmul(k.hsum(sum), cf(1/float64(L)))
			mv := k.vsplat(mean, vl)
			sq := k.colReduce(L, fconst(vecT(vl), 0), func(col value.Value, valid int, acc value.Value) value.Value {
				d := k.fsub(readZ(col, valid), mv)
				if valid < vl {
					d = k.sel(maskConst(vl, valid), d, fconst(d.Type(), 0))
				}
				return k.fma(d, d, acc)
			})
			v := k.fadd(k.fmul(k.hsum(sq), cf(1/float64(L))), cf(ln.eps))
			rstd := k.vsplat(k.fdiv(cf(1), k.sqrt(v)), vl)
			var epi func(col value.Value, valid int, hole value.Value) value.Value
			if ln.epi != nil {
				epi = g.rowEval(k, ln.epi, dimsOf(out), r)
			}
			k.colLoop(L, func(col value.Value, valid int) {
				y := k.fmul(k.fsub(read(col, valid), mv), rstd)
				if epi != nil {
					y = epi(col, valid, y)
				}
				k.vstore(y, op, k.Add(base, col), vl, valid)
			})
		})
	})
	return nil
}

// ---- row helpers, shared by the row-wise kernels ----

// colLoop runs body over columns [0, n) of a row in vectors of vl, the
// last one masked to its valid lanes.
func (k *kfn) colLoop(n int64, body func(col value.Value, valid int)) {
	vl := int64(k.g.vl)
	k.loopN(0, n/vl, func(i value.Value) { body(k.Mul(i, c64(vl)), int(vl)) })
	if t := n % vl; t != 0 {
		body(c64(n-t), int(t))
	}
}

// colReduce is colLoop carrying an accumulator.
func (k *kfn) colReduce(n int64, init value.Value, body func(col value.Value, valid int, acc value.Value) value.Value) value.Value {
	vl := int64(k.g.vl)
	acc := k.LoopAcc(c64(0), c64(n/vl), 1, []value.Value{init}, func(i value.Value, acc []value.Value) []value.Value {
		return []value.Value{body(k.Mul(i, c64(vl)), int(vl), acc[0])}
	})[0]
	if t := n % vl; t != 0 {
		acc = body(c64(n-t), int(t), acc)
	}
	return acc
}

// hsum reduces a vector to a scalar.
func (k *kfn) hsum(v value.Value) value.Value {
	return k.call(fmt.Sprintf("llvm.vector.reduce.fadd.v%df32", vecLen(v.Type())), f32, cf(0), v)
}
