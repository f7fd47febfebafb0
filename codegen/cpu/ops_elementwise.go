package cpu

import (
	"fmt"
	"github.com/kiln-ml/kiln/codegen/kernel"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/value"
)

// operand is a strided view used by the generic loop nest: element
// (i0, i1, ...) of the iteration space is at off + Σ i_d*str[d].
type operand struct {
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
			idx = k.SRem(rest, c64(dims[d].n))
			rest = k.SDiv(rest, c64(dims[d].n))
		}
		for j := range ops {
			offs[j] = k.Add(offs[j], k.Mul(idx, c64(dims[d].s[j])))
		}
	}
	return offs
}

// lowerCopy copies a view op's input to its output when the planner could
// not alias them (a graph output, say): one flat kernel-layer copy, of
// the bytes for a small type's codes.
func (g *gen) lowerCopy(n *ir.Node) error {
	in, out := g.buffer(n.Inputs[0]), g.buffer(n.Outputs[0])
	flat := func(b *kernel.Buffer) *kernel.Buffer {
		if kernel.IsSmallType(b.DType) {
			b = kernel.ByteView(b)
		}
		f := *b
		f.Dims = []*kernel.Expr{b.Numel()}
		return &f
	}
	fo, fi := flat(out), flat(in)
	g.emitKernel(&kernel.Kernel{Name: n.OpType, Out: fo, Space: fo.Dims, Value: kernel.Load(fi, kernel.Var(0))}, nil)
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
		x = k.FMax(x, fconst(x.Type(), lo))
	}
	if !math.IsInf(hi, 1) {
		x = k.FMin(x, fconst(x.Type(), hi))
	}
	return x
}
