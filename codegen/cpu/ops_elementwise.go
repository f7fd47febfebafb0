package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// operand is a strided view used by the generic loop nest: element
// (i0, i1, ...) of the iteration space is p[off + Σ i_d*str[d]].
type operand struct {
	p   value.Value
	off int64
	str []int64
}

func contiguous(d []int64) []int64 {
	s := make([]int64, len(d))
	acc := int64(1)
	for i := len(d) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= d[i]
	}
	return s
}

// bstrides are the strides of a tensor of dims d read broadcast into out.
func bstrides(d, out []int64) []int64 {
	cs := contiguous(d)
	s := make([]int64, len(out))
	off := len(out) - len(d)
	for i := range d {
		if d[i] != 1 {
			s[off+i] = cs[i]
		}
	}
	return s
}

type ldim struct {
	n int64
	s []int64
}

// collapse drops unit dims and merges dims that are contiguous for every
// operand.
func collapse(dims []int64, ops []operand) []ldim {
	var ds []ldim
	for i, n := range dims {
		if n == 1 {
			continue
		}
		s := make([]int64, len(ops))
		for j, o := range ops {
			s[j] = o.str[i]
		}
		if len(ds) > 0 {
			prev := &ds[len(ds)-1]
			ok := true
			for j := range s {
				ok = ok && prev.s[j] == s[j]*n
			}
			if ok {
				prev.n *= n
				prev.s = s
				continue
			}
		}
		ds = append(ds, ldim{n, s})
	}
	if len(ds) == 0 {
		ds = []ldim{{1, make([]int64, len(ops))}}
	}
	return ds
}

// offsets decomposes the flat index o over dims and returns each operand's
// element offset.
func (k *kfn) offsets(o value.Value, dims []ldim, ops []operand) []value.Value {
	offs := make([]value.Value, len(ops))
	for j, op := range ops {
		offs[j] = c64(op.off)
	}
	rest := o
	for d := len(dims) - 1; d >= 0; d-- {
		var idx value.Value
		if d == 0 {
			idx = rest
		} else {
			idx = k.rem(rest, c64(dims[d].n))
			rest = k.div(rest, c64(dims[d].n))
		}
		for j := range ops {
			offs[j] = k.add(offs[j], k.mul(idx, c64(dims[d].s[j])))
		}
	}
	return offs
}

// ewLoop runs f over an iteration space: ops[0] is written with f of the
// other operands' elements. parallel splits the work by thread. When every
// operand is float32, the output is contiguous along the innermost
// (collapsed) dim and the inputs are contiguous or broadcast there, f gets
// vectors of vl lanes (broadcast operands splatted) and the tail is masked.
func (k *kfn) ewLoop(dims []int64, ops []operand, parallel bool, f func(xs []value.Value) value.Value) {
	ds := collapse(dims, ops)
	inner := ds[len(ds)-1]
	outer := ds[:len(ds)-1]
	nOuter := int64(1)
	for _, d := range outer {
		nOuter *= d.n
	}
	chunks := int64(1)
	if parallel && nOuter < 32 && inner.n >= 2048 {
		chunks = min(64/nOuter+1, inner.n/1024)
	}
	cs := (inner.n + chunks - 1) / chunks
	cs = (cs + 15) &^ 15
	total := nOuter * chunks
	var lo, hi value.Value = c64(0), c64(total)
	if parallel {
		lo, hi = k.split(total)
	}
	vec := inner.n > 1 && inner.s[0] == 1
	for _, op := range ops {
		et := op.p.Type().(*types.PointerType).ElemType
		vec = vec && et.Equal(f32)
	}
	for _, s := range inner.s[1:] {
		vec = vec && (s == 0 || s == 1)
	}
	vl := int64(k.g.vl)
	k.loop(lo, hi, func(p value.Value) {
		o, c := p, value.Value(c64(0))
		if chunks > 1 {
			o, c = k.div(p, c64(chunks)), k.rem(p, c64(chunks))
		}
		offs := k.offsets(o, outer, ops)
		j0 := k.mul(c, c64(cs))
		var j1 value.Value = c64(inner.n)
		if chunks > 1 {
			e := k.add(j0, c64(cs))
			j1 = k.sel(k.icmp(enum.IPredSLT, e, c64(inner.n)), e, c64(inner.n))
		}
		if !vec {
			k.loop(j0, j1, func(i value.Value) {
				xs := make([]value.Value, len(ops)-1)
				for j := 1; j < len(ops); j++ {
					xs[j-1] = k.load(ops[j].p, k.add(offs[j], k.mul(i, c64(inner.s[j]))))
				}
				k.store(f(xs), ops[0].p, k.add(offs[0], k.mul(i, c64(inner.s[0]))))
			})
			return
		}
		at := func(i value.Value, valid int) {
			xs := make([]value.Value, len(ops)-1)
			for j := 1; j < len(ops); j++ {
				if inner.s[j] == 0 {
					xs[j-1] = k.vsplat(k.load(ops[j].p, offs[j]), int(vl))
				} else {
					xs[j-1] = k.vload(ops[j].p, k.add(offs[j], i), int(vl), valid)
				}
			}
			k.vstore(f(xs), ops[0].p, k.add(offs[0], i), int(vl), valid)
		}
		// Chunks are multiples of vl, so only the end of the row has a tail.
		k.loop(k.div(j0, c64(vl)), k.div(j1, c64(vl)), func(v value.Value) { at(k.mul(v, c64(vl)), int(vl)) })
		if tail := inner.n % vl; tail != 0 {
			last := func() { at(c64(inner.n-tail), int(tail)) }
			if chunks > 1 {
				k.ifThen(k.icmp(enum.IPredEQ, j1, c64(inner.n)), last)
			} else {
				last()
			}
		}
	})
}

// copyStep copies src (read through strides over dims) into dst.
func (g *gen) copyLoop(k *kfn, dims []int64, dst, src operand) {
	k.ewLoop(dims, []operand{dst, src}, parallelWorth(ir.Product(dims)), func(xs []value.Value) value.Value { return xs[0] })
}

func (g *gen) lowerCopy(n *ir.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	d := dimsOf(out)
	g.step(n.OpType, !parallelWorth(numel(out)), func(k *kfn) {
		g.copyLoop(k, d, operand{k.ptr(out), 0, contiguous(d)}, operand{k.ptr(in), 0, contiguous(d)})
	})
	return nil
}

// clipBounds returns Clip's bounds (±Inf when absent).
func clipBounds(g *gen, n *ir.Node) (lo, hi float64, err error) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if g.opsets[""] < 11 {
		a := g.attrs(n)
		if n.Attr("min") != nil {
			lo = float64(a.Float("min"))
		}
		if n.Attr("max") != nil {
			hi = float64(a.Float("max"))
		}
		return lo, hi, nil
	}
	for i, dst := range []*float64{&lo, &hi} {
		v := n.Input(i + 1)
		if v == nil {
			continue
		}
		t := g.constOf(v)
		if t == nil || t.Len() != 1 {
			return 0, 0, fmt.Errorf("bounds must be constant")
		}
		*dst = t.Float64At(0)
	}
	return lo, hi, nil
}

func (k *kfn) clip(x value.Value, lo, hi float64) value.Value {
	if !math.IsInf(lo, -1) {
		x = k.fmax(x, fconst(x.Type(), lo))
	}
	if !math.IsInf(hi, 1) {
		x = k.fmin(x, fconst(x.Type(), hi))
	}
	return x
}
