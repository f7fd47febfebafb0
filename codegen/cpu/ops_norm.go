package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/value"
)

// layerNorm is a decomposed LayerNormalization over the last axis, as
// PyTorch exports it before opset 17:
//
//	mean = ReduceMean(x, -1); d = Sub(x, mean)
//	var = ReduceMean(Pow(d, 2), -1)     (or Mul(d, d))
//	y = Div(d, Sqrt(Add(var, eps)))
//
// lowered as one row-wise kernel; pro computes x on the fly and epi (its
// hole is y) is applied to the result as it is stored (fuse.go).
type layerNorm struct {
	nodes    []*ir.Node // the pattern, in graph order
	x, y     *ir.Value
	eps      float64
	pro, epi *ewGroup
}

// out is the value the kernel writes.
func (ln *layerNorm) out() *ir.Value {
	if ln.epi != nil {
		return ln.epi.out
	}
	return ln.y
}

// reads lists the tensors the kernel reads.
func (ln *layerNorm) reads() []*ir.Value {
	var vs []*ir.Value
	if ln.pro != nil {
		vs = ln.pro.reads()
	} else {
		vs = []*ir.Value{ln.x}
	}
	if ln.epi != nil {
		vs = append(vs, ln.epi.reads()...)
	}
	return vs
}

// lastAxisMean reports whether n is a ReduceMean over the last axis that
// keeps dims.
func (f *fusion) lastAxisMean(n *ir.Node) bool {
	if n == nil || n.OpType != "ReduceMean" || n.Domain != "" || f.g.skip[n] || f.taken[n] || n.Inputs[0].Type.Elem != ir.Float32 {
		return false
	}
	if n.Attr("keepdims") != nil && f.g.attrs(n).Int("keepdims") == 0 {
		return false
	}
	axes, err := reduceAxes(f.g, n)
	rank := len(dimsOf(n.Inputs[0]))
	return err == nil && len(axes) == 1 && axes[0] == rank-1
}

// is reports whether n is a live node of the given op taking ins (nil
// matches anything) in order.
func (f *fusion) is(n *ir.Node, op string, ins ...*ir.Value) bool {
	if n == nil || n.OpType != op || n.Domain != "" || f.g.skip[n] || f.taken[n] || len(n.Inputs) < len(ins) {
		return false
	}
	for i, v := range ins {
		if v != nil && n.Inputs[i] != v {
			return false
		}
	}
	return true
}

// matchLayerNorm matches the pattern rooted at ReduceMean n and marks its
// nodes taken.
func (f *fusion) matchLayerNorm(n *ir.Node) *layerNorm {
	if !f.lastAxisMean(n) {
		return nil
	}
	x, mean := n.Inputs[0], n.Outputs[0]
	sub := f.single(mean)
	if !f.is(sub, "Sub", x, mean) || f.outSet[sub.Outputs[0]] {
		return nil
	}
	d := sub.Outputs[0]
	us := f.uses[d]
	if len(us) != 2 {
		return nil
	}
	sq, div := us[0], us[1]
	if f.is(sq, "Div", d) {
		sq, div = div, sq
	}
	if !f.is(div, "Div", d) || !(f.is(sq, "Mul", d, d) || f.is(sq, "Pow", d) && f.scalar(sq.Inputs[1]) == 2) {
		return nil
	}
	r2 := f.single(sq.Outputs[0])
	if !f.lastAxisMean(r2) {
		return nil
	}
	add := f.single(r2.Outputs[0])
	if !f.is(add, "Add") || len(add.Inputs) != 2 {
		return nil
	}
	epsV := add.Inputs[1]
	if add.Inputs[1] == r2.Outputs[0] {
		epsV = add.Inputs[0]
	}
	eps := f.scalar(epsV)
	if eps != eps { // NaN: not a constant
		return nil
	}
	sqrt := f.single(add.Outputs[0])
	if !f.is(sqrt, "Sqrt") || f.single(sqrt.Outputs[0]) != div || div.Inputs[1] != sqrt.Outputs[0] {
		return nil
	}
	ln := &layerNorm{nodes: []*ir.Node{n, sub, sq, r2, add, sqrt, div}, x: x, y: div.Outputs[0], eps: eps}
	f.takeAll(ln.nodes)
	return ln
}

// scalar returns the value of a one-element float constant, else NaN.
func (f *fusion) scalar(v *ir.Value) float64 {
	if t := f.g.constOf(v); t != nil && t.Len() == 1 && v.Type.Elem == ir.Float32 {
		return t.Float64At(0)
	}
	return math.NaN()
}

func (g *gen) lowerLayerNorm(ln *layerNorm) error {
	dims := dimsOf(ln.x)
	L := dims[len(dims)-1]
	rows := numel(ln.x) / L
	out := ln.out()
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
		k.loop(lo, hi, func(r value.Value) {
			base := k.mul(r, c64(L))
			read := func(col value.Value, valid int) value.Value {
				return k.vload(xp, k.add(base, col), vl, valid)
			}
			if ln.pro != nil {
				at := ln.pro.atRow(k, r)
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
				epi = ln.epi.atRow(k, r)
			}
			k.colLoop(L, func(col value.Value, valid int) {
				y := k.fmul(k.fsub(read(col, valid), mv), rstd)
				if epi != nil {
					y = epi(col, valid, y)
				}
				k.vstore(y, op, k.add(base, col), vl, valid)
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
	k.loopN(0, n/vl, func(i value.Value) { body(k.mul(i, c64(vl)), int(vl)) })
	if t := n % vl; t != 0 {
		body(c64(n-t), int(t))
	}
}

// colReduce is colLoop carrying an accumulator.
func (k *kfn) colReduce(n int64, init value.Value, body func(col value.Value, valid int, acc value.Value) value.Value) value.Value {
	vl := int64(k.g.vl)
	acc := k.loopAcc(c64(0), c64(n/vl), []value.Value{init}, func(i value.Value, acc []value.Value) []value.Value {
		return []value.Value{body(k.mul(i, c64(vl)), int(vl), acc[0])}
	})[0]
	if t := n % vl; t != 0 {
		acc = body(c64(n-t), int(t), acc)
	}
	return acc
}

// hsum and hmax reduce a vector to a scalar.
func (k *kfn) hsum(v value.Value) value.Value {
	return k.call(fmt.Sprintf("llvm.vector.reduce.fadd.v%df32", vecLen(v.Type())), f32, cf(0), v)
}

func (k *kfn) hmax(v value.Value) value.Value {
	return k.call(fmt.Sprintf("llvm.vector.reduce.fmax.v%df32", vecLen(v.Type())), f32, v)
}
