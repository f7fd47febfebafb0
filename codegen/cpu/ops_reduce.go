package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/value"
)

// softmaxGeom returns (outer, L, inner): the op normalizes over L elements
// at stride inner, for outer*inner lines.
func softmaxGeom(g *gen, n *ir.Node) (outer, L, inner int64) {
	d := dimsOf(n.Inputs[0])
	a := g.attrs(n)
	if g.opsets[""] < 13 {
		axis := normAxis(a.Int("axis"), len(d))
		return ir.Product(d[:axis]), ir.Product(d[axis:]), 1
	}
	axis := normAxis(a.Int("axis"), len(d))
	return ir.Product(d[:axis]), d[axis], ir.Product(d[axis+1:])
}

// lowerSoftmax normalizes lines of L elements. Contiguous lines (inner =
// 1, the usual last axis) run vectorized in three passes over the line,
// which stays in L1: max, exp and sum (exp stored for Softmax), scale (or
// x - max - log sum for LogSoftmax). Strided lines run scalar.
func (g *gen) lowerSoftmax(n *ir.Node) error {
	outer, L, inner := softmaxGeom(g, n)
	in, out := n.Inputs[0], n.Outputs[0]
	lines := outer * inner
	par := parallelWorth(numel(out)) || lines >= 64 && numel(out) >= 4096
	logSoftmax := n.OpType == "LogSoftmax"
	g.step(n.OpType, !par, func(k *kfn) {
		ip, op := k.ptr(in), k.ptr(out)
		var lo, hi value.Value = c64(0), c64(lines)
		if par {
			lo, hi = k.split(lines)
		}
		k.loop(lo, hi, func(p value.Value) {
			if inner == 1 {
				k.softmaxRow(ip, op, k.mul(p, c64(L)), L, logSoftmax)
				return
			}
			base := k.add(k.mul(k.div(p, c64(inner)), c64(L*inner)), k.rem(p, c64(inner)))
			at := func(i value.Value) value.Value { return k.add(base, k.mul(i, c64(inner))) }
			m := k.loopAcc(c64(0), c64(L), []value.Value{cf(math.Inf(-1))}, func(i value.Value, acc []value.Value) []value.Value {
				return []value.Value{k.fmax(k.load(ip, at(i)), acc[0])}
			})[0]
			s := k.loopAcc(c64(0), c64(L), []value.Value{cf(0)}, func(i value.Value, acc []value.Value) []value.Value {
				e := k.exp(k.fsub(k.load(ip, at(i)), m))
				if !logSoftmax {
					k.store(e, op, at(i))
				}
				return []value.Value{k.fadd(acc[0], e)}
			})[0]
			if logSoftmax {
				ls := k.fadd(m, k.log(s))
				k.loopN(0, L, func(i value.Value) { k.store(k.fsub(k.load(ip, at(i)), ls), op, at(i)) })
				return
			}
			r := k.fdiv(cf(1), s)
			k.loopN(0, L, func(i value.Value) { k.store(k.fmul(k.load(op, at(i)), r), op, at(i)) })
		})
	})
	return nil
}

// softmaxRow is the vectorized Softmax/LogSoftmax of L contiguous floats.
func (k *kfn) softmaxRow(ip, op, base value.Value, L int64, logSoftmax bool) {
	vl := k.g.vl
	vt := vecT(vl)
	ninf := fconst(vt, math.Inf(-1))
	valid := func(x value.Value, n int, fill value.Value) value.Value {
		if n < vl {
			return k.sel(maskConst(vl, n), x, fill)
		}
		return x
	}
	mv := k.colReduce(L, ninf, func(col value.Value, n int, acc value.Value) value.Value {
		return k.fmax(valid(k.vload(ip, k.add(base, col), vl, n), n, ninf), acc)
	})
	m := k.vsplat(k.hmax(mv), vl)
	sv := k.colReduce(L, fconst(vt, 0), func(col value.Value, n int, acc value.Value) value.Value {
		e := k.exp(k.fsub(k.vload(ip, k.add(base, col), vl, n), m))
		if !logSoftmax {
			k.vstore(e, op, k.add(base, col), vl, n)
		}
		return k.fadd(acc, valid(e, n, fconst(vt, 0)))
	})
	s := k.hsum(sv)
	if logSoftmax {
		ls := k.vsplat(k.fadd(k.b.NewExtractElement(m, c32(0)), k.log(s)), vl)
		k.colLoop(L, func(col value.Value, n int) {
			k.vstore(k.fsub(k.vload(ip, k.add(base, col), vl, n), ls), op, k.add(base, col), vl, n)
		})
		return
	}
	r := k.vsplat(k.fdiv(cf(1), s), vl)
	k.colLoop(L, func(col value.Value, n int) {
		k.vstore(k.fmul(k.vload(op, k.add(base, col), vl, n), r), op, k.add(base, col), vl, n)
	})
}

// reduceAxes returns the normalized reduced axes and keepdims.
func reduceAxes(g *gen, n *ir.Node) ([]int, error) {
	d := dimsOf(n.Inputs[0])
	a := g.attrs(n)
	var axes []int64
	if n.Input(1) != nil {
		t := g.constOf(n.Input(1))
		if t == nil {
			return nil, fmt.Errorf("axes must be constant")
		}
		for i := 0; i < int(t.Len()); i++ {
			axes = append(axes, t.Int64At(i))
		}
	} else if n.Attr("axes") != nil {
		axes = a.Ints("axes")
	}
	red := make([]int, 0, len(d))
	if len(axes) == 0 {
		if n.Attr("noop_with_empty_axes") != nil && a.Int("noop_with_empty_axes") != 0 {
			return nil, fmt.Errorf("noop_with_empty_axes not supported")
		}
		for i := range d {
			red = append(red, i)
		}
		return red, nil
	}
	for _, x := range axes {
		red = append(red, normAxis(x, len(d)))
	}
	return red, nil
}

func (g *gen) lowerReduce(n *ir.Node) error {
	red, err := reduceAxes(g, n)
	if err != nil {
		return err
	}
	in, out := n.Inputs[0], n.Outputs[0]
	d := dimsOf(in)
	is := contiguous(d)
	isRed := make([]bool, len(d))
	for _, a := range red {
		isRed[a] = true
	}
	var kept, reduced []int64
	var keptS, redS []int64
	count := int64(1)
	for i := range d {
		if isRed[i] {
			reduced, redS = append(reduced, d[i]), append(redS, is[i])
			count *= d[i]
		} else {
			kept, keptS = append(kept, d[i]), append(keptS, is[i])
		}
	}
	// Collapse contiguous reduced dims.
	rd := collapse(reduced, []operand{{str: redS}})
	kd := collapse(kept, []operand{{str: keptS}})
	nOut := numel(out)
	par := parallelWorth(numel(in)) && nOut > 1
	op := n.OpType
	g.step(op, !par, func(k *kfn) {
		ip, opp := k.ptr(in), k.ptr(out)
		var lo, hi value.Value = c64(0), c64(nOut)
		if par {
			lo, hi = k.split(nOut)
		}
		k.loop(lo, hi, func(o value.Value) {
			base := k.offsets(o, kd, []operand{{str: keptS}})[0]
			init := cf(0)
			switch op {
			case "ReduceMax":
				init = cf(math.Inf(-1))
			case "ReduceMin":
				init = cf(math.Inf(1))
			}
			var nest func(level int, off value.Value, acc value.Value) value.Value
			nest = func(level int, off value.Value, acc value.Value) value.Value {
				if level == len(rd) {
					x := k.load(ip, off)
					switch op {
					case "ReduceMax":
						return k.fmax(x, acc)
					case "ReduceMin":
						return k.fmin(x, acc)
					case "ReduceSumSquare":
						return k.fma(x, x, acc)
					}
					return k.fadd(acc, x)
				}
				return k.loopAcc(c64(0), c64(rd[level].n), []value.Value{acc}, func(i value.Value, a []value.Value) []value.Value {
					return []value.Value{nest(level+1, k.add(off, k.mul(i, c64(rd[level].s[0]))), a[0])}
				})[0]
			}
			r := nest(0, base, init)
			if op == "ReduceMean" {
				r = k.fmul(r, cf(1/float64(count)))
			}
			k.store(r, opp, o)
		})
	})
	return nil
}

func init() {
	red := func() *opInfo {
		return &opInfo{types: floatOnly, lower: (*gen).lowerReduce, check: func(g *gen, n *ir.Node) error { _, err := reduceAxes(g, n); return err }}
	}
	register(map[string]*opInfo{
		"Softmax":         {types: floatOnly, lower: (*gen).lowerSoftmax},
		"LogSoftmax":      {types: floatOnly, lower: (*gen).lowerSoftmax},
		"ReduceMean":      red(),
		"ReduceSum":       red(),
		"ReduceMax":       red(),
		"ReduceMin":       red(),
		"ReduceSumSquare": red(),
	})
}
