package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// transposePerm returns a Transpose's permutation (reversal by default).
func (g *gen) transposePerm(n *ir.Node) []int64 {
	perm := g.attrs(n).Ints("perm")
	if len(perm) == 0 {
		for i := len(dimsOf(n.Inputs[0])) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	return perm
}

// transposeIsView reports whether a Transpose only moves unit dims: the
// bytes are the same, so its output can alias its input.
func transposeIsView(g *gen, n *ir.Node) bool {
	var kept []int64
	id := dimsOf(n.Inputs[0])
	for _, p := range g.transposePerm(n) {
		if id[p] != 1 {
			kept = append(kept, p)
		}
	}
	for i := 1; i < len(kept); i++ {
		if kept[i] < kept[i-1] {
			return false
		}
	}
	return true
}

func (g *gen) lowerTranspose(n *ir.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	id, od := dimsOf(in), dimsOf(out)
	perm := g.transposePerm(n)
	is := contiguous(id)
	str := make([]int64, len(od))
	for i, p := range perm {
		str[i] = is[p]
	}
	g.step("Transpose", !parallelWorth(numel(out)), func(k *kfn) {
		g.copyLoop(k, od, operand{k.ptr(out), 0, contiguous(od)}, operand{k.ptr(in), 0, str})
	})
	return nil
}

func (g *gen) lowerExpand(n *ir.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	od := dimsOf(out)
	g.step("Expand", !parallelWorth(numel(out)), func(k *kfn) {
		g.copyLoop(k, od, operand{k.ptr(out), 0, contiguous(od)}, operand{k.ptr(in), 0, bstrides(dimsOf(in), od)})
	})
	return nil
}

func normAxis(a int64, rank int) int {
	if a < 0 {
		a += int64(rank)
	}
	return int(a)
}

func (g *gen) lowerConcat(n *ir.Node) error {
	out := n.Outputs[0]
	od := dimsOf(out)
	axis := normAxis(g.attrs(n).Int("axis"), len(od))
	os := contiguous(od)
	g.step("Concat", !parallelWorth(numel(out)), func(k *kfn) {
		pos := int64(0)
		for _, in := range n.Inputs {
			id := dimsOf(in)
			g.copyLoop(k, id, operand{k.ptr(out), pos * os[axis], os}, operand{k.ptr(in), 0, contiguous(id)})
			pos += id[axis]
		}
	})
	return nil
}

// sliceParams returns per-axis start and step of a Slice with constant
// parameters.
func sliceParams(g *gen, n *ir.Node) (starts, steps []int64, err error) {
	id := dimsOf(n.Inputs[0])
	var st, ax, sp []int64
	if g.opsets[""] < 10 {
		a := g.attrs(n)
		st, ax = a.Ints("starts"), a.Ints("axes")
	} else {
		get := func(i int) ([]int64, error) {
			v := n.Input(i)
			if v == nil {
				return nil, nil
			}
			t := g.constOf(v)
			if t == nil {
				return nil, fmt.Errorf("input %d must be constant", i)
			}
			out := make([]int64, t.Len())
			for j := range out {
				out[j] = t.Int64At(j)
			}
			return out, nil
		}
		if st, err = get(1); err != nil {
			return
		}
		if _, err = get(2); err != nil {
			return
		}
		if ax, err = get(3); err != nil {
			return
		}
		if sp, err = get(4); err != nil {
			return
		}
	}
	starts = make([]int64, len(id))
	steps = make([]int64, len(id))
	for i := range steps {
		steps[i] = 1
	}
	for i := range st {
		a := i
		if ax != nil {
			a = normAxis(ax[i], len(id))
		}
		step := int64(1)
		if sp != nil {
			step = sp[i]
		}
		dim := id[a]
		s := st[i]
		if s < 0 {
			s += dim
		}
		if step > 0 {
			s = max(0, min(s, dim))
		} else {
			s = max(-1, min(s, dim-1))
		}
		starts[a], steps[a] = s, step
	}
	return starts, steps, nil
}

func (g *gen) lowerSlice(n *ir.Node) error {
	starts, steps, err := sliceParams(g, n)
	if err != nil {
		return err
	}
	in, out := n.Inputs[0], n.Outputs[0]
	is, od := contiguous(dimsOf(in)), dimsOf(out)
	off := int64(0)
	str := make([]int64, len(od))
	for a := range od {
		off += starts[a] * is[a]
		str[a] = is[a] * steps[a]
	}
	g.step("Slice", !parallelWorth(numel(out)), func(k *kfn) {
		g.copyLoop(k, od, operand{k.ptr(out), 0, contiguous(od)}, operand{k.ptr(in), off, str})
	})
	return nil
}

func (g *gen) lowerGather(n *ir.Node) error {
	data, ind, out := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	dd := dimsOf(data)
	axis := normAxis(g.attrs(n).Int("axis"), len(dd))
	outer := ir.Product(dd[:axis])
	inner := ir.Product(dd[axis+1:])
	dim := dd[axis]
	ni := numel(ind)
	par := parallelWorth(numel(out))
	g.step("Gather", !par, func(k *kfn) {
		dp, ip, op := k.ptr(data), k.ptr(ind), k.ptr(out)
		var lo, hi value.Value = c64(0), c64(outer * ni)
		if par {
			lo, hi = k.split(outer * ni)
		}
		k.loop(lo, hi, func(p value.Value) {
			o, i := k.div(p, c64(ni)), k.rem(p, c64(ni))
			idx := k.load(ip, i)
			if idx.Type() != i64 {
				idx = k.b.NewSExt(idx, i64)
			}
			idx = k.sel(k.icmp(enum.IPredSLT, idx, c64(0)), k.add(idx, c64(dim)), idx)
			src := k.add(k.mul(o, c64(dim*inner)), k.mul(idx, c64(inner)))
			dst := k.mul(p, c64(inner))
			k.loopN(0, inner, func(r value.Value) {
				k.store(k.load(dp, k.add(src, r)), op, k.add(dst, r))
			})
		})
	})
	return nil
}

func init() {
	view := func() *opInfo { return &opInfo{types: anyFixed, view: true, lower: (*gen).lowerCopy} }
	register(map[string]*opInfo{
		"Reshape":   view(),
		"Flatten":   view(),
		"Squeeze":   view(),
		"Unsqueeze": view(),
		"Identity":  view(),
		"Dropout": {types: floatOnly, view: true, lower: (*gen).lowerCopy, check: func(g *gen, n *ir.Node) error {
			if len(n.Outputs) > 1 && n.Outputs[1] != nil {
				return fmt.Errorf("mask output not supported")
			}
			// Only inference mode is a copy: training_mode must be absent or
			// a constant false.
			if t := n.Input(2); t != nil {
				c := g.constOf(t)
				if c == nil || c.Len() != 1 || c.Int64At(0) != 0 {
					return fmt.Errorf("training mode not supported")
				}
			}
			return nil
		}},
	})
}
