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

// ---- elementwise ops ----

type binFn func(k *kfn, x, y value.Value) value.Value

// isFloat reports whether t is a float scalar or a vector of floats.
func isFloat(t types.Type) bool {
	if vt, ok := t.(*types.VectorType); ok {
		t = vt.ElemType
	}
	_, ok := t.(*types.FloatType)
	return ok
}

var binOps = map[string]binFn{
	"Add": func(k *kfn, x, y value.Value) value.Value {
		if isFloat(x.Type()) {
			return k.fadd(x, y)
		}
		return k.b.NewAdd(x, y)
	},
	"Sub": func(k *kfn, x, y value.Value) value.Value {
		if isFloat(x.Type()) {
			return k.fsub(x, y)
		}
		return k.b.NewSub(x, y)
	},
	"Mul": func(k *kfn, x, y value.Value) value.Value {
		if isFloat(x.Type()) {
			return k.fmul(x, y)
		}
		return k.b.NewMul(x, y)
	},
	"Div": func(k *kfn, x, y value.Value) value.Value {
		if isFloat(x.Type()) {
			return k.fdiv(x, y)
		}
		return k.b.NewSDiv(x, y)
	},
	"Max": func(k *kfn, x, y value.Value) value.Value { return k.fmax(x, y) },
	"Min": func(k *kfn, x, y value.Value) value.Value { return k.fmin(x, y) },
	"Pow": func(k *kfn, x, y value.Value) value.Value { return k.pow(x, y) },
}

var unaryOps = map[string]func(k *kfn, x value.Value) value.Value{
	"Relu":    func(k *kfn, x value.Value) value.Value { return k.fmax(x, fconst(x.Type(), 0)) },
	"Sqrt":    func(k *kfn, x value.Value) value.Value { return k.sqrt(x) },
	"Erf":     func(k *kfn, x value.Value) value.Value { return k.erf(x) },
	"Exp":     func(k *kfn, x value.Value) value.Value { return k.exp(x) },
	"Log":     func(k *kfn, x value.Value) value.Value { return k.log(x) },
	"Sigmoid": func(k *kfn, x value.Value) value.Value { return k.sigmoid(x) },
	"Tanh":    func(k *kfn, x value.Value) value.Value { return k.tanh(x) },
	"Neg":     func(k *kfn, x value.Value) value.Value { return k.b.NewFNeg(x) },
	"Abs":     func(k *kfn, x value.Value) value.Value { return k.fabs(x) },
	"Reciprocal": func(k *kfn, x value.Value) value.Value {
		return k.fdiv(fconst(x.Type(), 1), x)
	},
}

// ewFn returns how to compute elementwise node n from the values of its
// operand inputs (scalars or vectors), and which inputs are operands;
// constant parameters (Clip bounds, a scalar Pow exponent) are folded into
// the function. It returns nil for other ops. Every op the fusion pass may
// put in a group (passes/fuse_elementwise.go) must be here.
func (g *gen) ewFn(n *ir.Node) (func(k *kfn, xs []value.Value) value.Value, []int) {
	if n.Domain != "" {
		return nil, nil
	}
	if f, ok := unaryOps[n.OpType]; ok {
		return func(k *kfn, xs []value.Value) value.Value { return f(k, xs[0]) }, []int{0}
	}
	switch n.OpType {
	case "Clip":
		lo, hi, err := clipBounds(g, n)
		if err != nil {
			return nil, nil
		}
		return func(k *kfn, xs []value.Value) value.Value { return k.clip(xs[0], lo, hi) }, []int{0}
	case "LeakyRelu":
		alpha := float64(g.attrs(n).Float("alpha"))
		return func(k *kfn, xs []value.Value) value.Value {
			x := xs[0]
			neg := k.b.NewFCmp(enum.FPredOLT, x, fconst(x.Type(), 0))
			return k.sel(neg, k.fmul(x, fconst(x.Type(), alpha)), x)
		}, []int{0}
	case "HardSwish": // x·clamp(x/6 + 1/2, 0, 1)
		return func(k *kfn, xs []value.Value) value.Value {
			x := xs[0]
			return k.fmul(x, k.clip(k.fma(x, fconst(x.Type(), 1.0/6), fconst(x.Type(), 0.5)), 0, 1))
		}, []int{0}
	case "Pow":
		if t := g.constOf(n.Input(1)); t != nil && t.Len() == 1 {
			e := t.Float64At(0)
			return func(k *kfn, xs []value.Value) value.Value { return k.powConst(xs[0], e) }, []int{0}
		}
	}
	if f, ok := binOps[n.OpType]; ok && len(n.Inputs) == 2 {
		return func(k *kfn, xs []value.Value) value.Value { return f(k, xs[0], xs[1]) }, []int{0, 1}
	}
	return nil, nil
}

// ewGroup is a DAG of elementwise nodes over one iteration space (the
// root's output dims), computed element by element in one pass: values
// inside the group live in registers.
type ewGroup struct {
	nodes  []*ir.Node // in graph order; the last is the root
	out    *ir.Value  // where the root's value is written
	dims   []int64
	leaves []*ewLeaf // what the group reads from outside
	hole   *ir.Value // a leaf a host kernel supplies in registers (nil standalone)
}

// ewLeaf is a value a group reads: from buf through strides over the
// group's dims, or a scalar constant folded into the code.
type ewLeaf struct {
	v   *ir.Value // as the group's nodes see it
	buf *ir.Value // the tensor read: v, or an absorbed Transpose's input
	str []int64
	c   *float32
}

func (gr *ewGroup) root() *ir.Node { return gr.nodes[len(gr.nodes)-1] }

// mem returns the leaves read from memory (not constants, not the hole).
func (gr *ewGroup) mem() []*ewLeaf {
	var ls []*ewLeaf
	for _, l := range gr.leaves {
		if l.c == nil && l.v != gr.hole {
			ls = append(ls, l)
		}
	}
	return ls
}

// isLeaf reports whether the group reads v from outside.
func (gr *ewGroup) isLeaf(v *ir.Value) bool {
	for _, l := range gr.leaves {
		if l.v == v {
			return true
		}
	}
	return false
}

// rowFriendly reports whether a host kernel writing rows of the output's
// last dim can evaluate the group: every leaf is float32 and contiguous or
// broadcast along that dim.
func (gr *ewGroup) rowFriendly() bool {
	for _, l := range gr.mem() {
		if s := l.str[len(l.str)-1]; s > 1 || l.buf.Type.Elem != ir.Float32 {
			return false
		}
	}
	return len(gr.dims) > 0
}

// eval computes the group's root from its leaves' values (vals, filled in
// for memory leaves and the hole); lane is the type of one value.
func (gr *ewGroup) eval(k *kfn, vals map[*ir.Value]value.Value, lane types.Type) value.Value {
	for _, l := range gr.leaves {
		if l.c != nil {
			vals[l.v] = fconst(lane, float64(*l.c))
		}
	}
	for _, n := range gr.nodes {
		fn, operands := k.g.ewFn(n)
		xs := make([]value.Value, len(operands))
		for i, oi := range operands {
			xs[i] = vals[n.Inputs[oi]]
		}
		vals[n.Outputs[0]] = fn(k, xs)
	}
	return vals[gr.root().Outputs[0]]
}

// lowerGroup emits a group as its own step: one vectorized loop over the
// output.
func (g *gen) lowerGroup(gr *ewGroup) error {
	mem := gr.mem()
	if len(mem) == 0 { // all leaves constant: read one from the weights
		gr.leaves[0].c = nil
		mem = gr.mem()
	}
	par := parallelWorth(numel(gr.out))
	name := gr.root().OpType
	if len(gr.nodes) > 1 {
		name = fmt.Sprintf("%s_%d", name, len(gr.nodes))
	}
	g.step(name, !par, func(k *kfn) {
		ops := []operand{{k.ptr(gr.out), 0, contiguous(gr.dims)}}
		for _, l := range mem {
			ops = append(ops, operand{k.ptr(l.buf), 0, l.str})
		}
		k.ewLoop(gr.dims, ops, par, func(xs []value.Value) value.Value {
			vals := map[*ir.Value]value.Value{}
			for i, l := range mem {
				vals[l.v] = xs[i]
			}
			return gr.eval(k, vals, laneOf(xs))
		})
	})
	return nil
}

// laneOf returns the float type (scalar or vector) among loaded values,
// the type the group's folded constants take.
func laneOf(xs []value.Value) types.Type {
	for _, x := range xs {
		if isFloat(x.Type()) {
			return x.Type()
		}
	}
	return xs[0].Type()
}

// atRow prepares evaluating the group along row r of its output (the last
// dim; rows are the leading dims flattened) for a host kernel that has the
// hole's value in registers: the returned function computes vl lanes from
// column col (valid lanes, the rest masked off). The group must be
// rowFriendly.
func (gr *ewGroup) atRow(k *kfn, r value.Value) func(col value.Value, valid int, hole value.Value) value.Value {
	vl := k.g.vl
	mem := gr.mem()
	rank := len(gr.dims)
	ops := make([]operand, len(mem))
	for i, l := range mem {
		ops[i] = operand{k.ptr(l.buf), 0, l.str[:rank-1]}
	}
	bases := k.offsets(r, collapse(gr.dims[:rank-1], ops), ops)
	splats := map[*ewLeaf]value.Value{}
	for i, l := range mem {
		if l.str[rank-1] == 0 {
			splats[l] = k.vsplat(k.load(ops[i].p, bases[i]), vl)
		}
	}
	return func(col value.Value, valid int, hole value.Value) value.Value {
		vals := map[*ir.Value]value.Value{}
		for i, l := range mem {
			if s := splats[l]; s != nil {
				vals[l.v] = s
			} else {
				vals[l.v] = k.vload(ops[i].p, k.add(bases[i], col), vl, valid)
			}
		}
		if gr.hole != nil {
			vals[gr.hole] = hole
		}
		return gr.eval(k, vals, vecT(vl))
	}
}

// ---- Pow and Clip ----

// powConst is x^e for a constant e: exact cheap forms where they exist.
func (k *kfn) powConst(x value.Value, e float64) value.Value {
	t := x.Type()
	switch e {
	case 1:
		return x
	case 2:
		return k.fmul(x, x)
	case 3:
		return k.fmul(k.fmul(x, x), x)
	case 0.5:
		return k.sqrt(x)
	case -1:
		return k.fdiv(fconst(t, 1), x)
	case -0.5:
		return k.fdiv(fconst(t, 1), k.sqrt(x))
	}
	return k.pow(x, fconst(t, e))
}

// pow is x^y = exp(y·log|x|), negated for negative x and odd integer y,
// NaN for negative x and non-integer y; x = 0 gives 0, 1 or +Inf by the
// sign of y, y = 0 gives 1. An integer y is converted to float.
func (k *kfn) pow(x, y value.Value) value.Value {
	t := x.Type()
	if !isFloat(y.Type()) {
		y = k.b.NewSIToFP(y, t)
	}
	lnx := k.log(k.fabs(x))
	z := k.fmul(y, lnx)
	r := k.exp(z)
	r = k.sel(k.b.NewFCmp(enum.FPredOGT, z, fconst(t, 88.72)), fconst(t, math.Inf(1)), r)
	isInt := k.b.NewFCmp(enum.FPredOEQ, k.floor(y), y)
	half := k.fmul(y, fconst(t, 0.5))
	odd := k.b.NewAnd(isInt, k.b.NewFCmp(enum.FPredONE, k.floor(half), half))
	neg := k.sel(odd, k.b.NewFNeg(r), k.sel(isInt, r, fconst(t, math.NaN())))
	r = k.sel(k.b.NewFCmp(enum.FPredOLT, x, fconst(t, 0)), neg, r)
	atZero := k.sel(k.b.NewFCmp(enum.FPredOGT, y, fconst(t, 0)), fconst(t, 0), fconst(t, math.Inf(1)))
	r = k.sel(k.b.NewFCmp(enum.FPredOEQ, x, fconst(t, 0)), atZero, r)
	return k.sel(k.b.NewFCmp(enum.FPredOEQ, y, fconst(t, 0)), fconst(t, 1), r)
}

// log is Cephes' logf: x = m·2^e with m in [√½, √2), log x = e·ln 2 +
// log m, log m by a degree-9 polynomial in m-1. For x > 0 (0 gives a large
// negative number, not -Inf; callers handle it).
func (k *kfn) log(x value.Value) value.Value {
	t := x.Type()
	it := intTypeLike(t)
	bits := k.b.NewBitCast(x, it)
	var e value.Value = k.b.NewSIToFP(k.b.NewSub(k.b.NewAShr(bits, iconstLike(t, 23)), iconstLike(t, 126)), t)
	// m keeps x's sign and mantissa bits (mask 0x807fffff) under the
	// exponent of 0.5: m in [0.5, 1).
	mant := k.b.NewAnd(bits, iconstLike(t, -0x7f800001))
	var m value.Value = k.b.NewBitCast(k.b.NewOr(mant, iconstLike(t, 0x3f000000)), t)
	small := k.b.NewFCmp(enum.FPredOLT, m, fconst(t, 0.707106781186547524))
	e = k.sel(small, k.fsub(e, fconst(t, 1)), e)
	m = k.sel(small, k.fadd(m, m), m)
	m = k.fsub(m, fconst(t, 1))
	z := k.fmul(m, m)
	p := fconst(t, 7.0376836292e-2)
	for _, c := range []float64{-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1} {
		p = k.fma(p, m, fconst(t, c))
	}
	y := k.fmul(k.fmul(p, m), z)
	y = k.fma(e, fconst(t, -2.12194440e-4), y)
	y = k.fma(z, fconst(t, -0.5), y)
	return k.fma(e, fconst(t, 0.693359375), k.fadd(m, y))
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
