package llvm

import (
	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// EmitCPU emits k's loop nest under schedule s at f's current block.
func EmitCPU(f *Fn, k *kernel.Kernel, s kernel.Schedule) {
	space := make([]value.Value, len(k.Space))
	p := NewPoint(f, make([]value.Value, len(k.Space)))
	for i, e := range k.Space {
		space[i] = p.Eval(e)
	}
	switch {
	case k.TopK != nil:
		emitRows(f, p, k, space, -1, k.TopK.Axis, s.Parallel, 1, func(q *Point, _ value.Value) { emitTopK(q, k) })
	case k.Scan != nil:
		lane := -1
		if s.VL > 0 {
			lane = s.Axis
		}
		emitRows(f, p, k, space, lane, k.Scan.Axis, s.Parallel, 1, func(q *Point, _ value.Value) {
			if lane < 0 {
				emitScan(q, k, space[k.Scan.Axis])
				return
			}
			laneLoop(f, q, lane, s.VL, I64(0), space[lane], func(r *Point) { emitScan(r, k, space[k.Scan.Axis]) })
		})
	default:
		lane := -1
		if s.VL > 0 && !s.Reduction {
			lane = s.Axis
		}
		vl := 0
		if lane >= 0 {
			vl = s.VL
		}
		rows := space
		jam := s.JamBy > 1 && !f.gpu && k.Reduce != nil && s.VL > 0
		by, even := int64(s.JamBy), false
		if jam {
			n, ok := intConst(space[s.Jam])
			even = ok && n%by == 0
			// Axis Jam's points go JamBy at a time through one reduction
			// loop: a row stands for JamBy of them. Past the axis' end
			// (an extent JamBy does not divide) a row's points repeat its
			// last, writing what that one writes.
			rows = append([]value.Value(nil), space...)
			rows[s.Jam] = f.Div(f.Add(space[s.Jam], I64(by-1)), I64(by))
		}
		emitLanes(f, p, k, rows, lane, vl, s.Parallel, func(q *Point) {
			// A reduction's value is evaluated inside its loops only.
			switch {
			case jam:
				base := f.Mul(q.Vars[s.Jam], I64(by))
				qs := make([]*Point, s.JamBy)
				for r := range qs {
					qs[r] = q.Scope()
					qs[r].Vars[s.Jam] = f.Add(base, I64(int64(r)))
					if !even {
						qs[r].Vars[s.Jam] = f.Min(qs[r].Vars[s.Jam], f.Sub(space[s.Jam], I64(1)))
					}
				}
				for r, v := range emitReduceAll(qs, k, s) {
					emitStore(qs[r], k, v)
				}
			case k.Reduce != nil:
				emitStore(q, k, emitReduce(q, k, s))
			default:
				emitStore(q, k, q.Eval(k.Value))
			}
		})
	}
}

// emitLanes runs body at every point of the space: the lane axis (if any)
// innermost in vectors of vl (a masked vector for the rest), the other
// axes as rows split across threads when parallel. With too few rows to
// keep the threads busy (a 1-D tensor, a batch of one), threads also split
// the rows into pieces of whole vectors.
func emitLanes(f *Fn, p *Point, k *kernel.Kernel, space []value.Value, lane, vl int, parallel bool, body func(q *Point)) {
	inner := lane
	if inner < 0 && !f.gpu && k.Reduce == nil {
		// A scalar inner loop per row, for LLVM to vectorize. Each
		// point of a reduction is a loop of its own, so there every
		// axis is a row: threads then split a global pool's channels,
		// not its batch of 1.
		inner = kernel.InnerAxis(k.Space, -1)
	}
	rows, blocked := space, gatherRows(f, k, space, lane, vl)
	if blocked >= 0 {
		rows = append([]value.Value(nil), space...)
		rows[blocked] = f.Div(f.Add(space[blocked], I64(gatherBlock-1)), I64(gatherBlock))
	}
	piece := int64(0)
	if parallel && !f.gpu && inner >= 0 {
		piece = rowPiece(rows, inner, vl)
	}
	pieces := int64(1)
	if piece > 0 {
		n, _ := intConst(space[inner])
		pieces = (n + piece - 1) / piece
	}
	emitRows(f, p, k, rows, inner, -1, parallel, pieces, func(q *Point, i value.Value) {
		if inner < 0 {
			body(q)
			return
		}
		lo, hi := value.Value(I64(0)), space[inner]
		if pieces > 1 {
			lo = f.Mul(i, I64(piece))
			hi = f.Min(f.Add(lo, I64(piece)), hi)
		}
		if blocked < 0 {
			laneLoop(f, q, inner, vl, lo, hi, body)
			return
		}
		r0 := f.Mul(q.Vars[blocked], I64(gatherBlock))
		r1 := f.Min(f.Add(r0, I64(gatherBlock)), space[blocked])
		laneLoop(f, q, inner, vl, lo, hi, func(v *Point) {
			f.Loop(r0, r1, func(r value.Value) {
				w := v.Scope()
				w.Vars[blocked] = r
				body(w)
			})
		})
	})
}

// gatherBlock is the rows of a block that gatherRows walks together: the
// floats of a cache line.
const gatherBlock = 16

// gatherRows returns the axis whose rows go in blocks of gatherBlock, each
// vector of lanes for every row of the block before the next vector, or
// -1. Lanes along an axis the loads read strided gather one float per
// cache line; when another axis reads contiguously (a transpose), its
// next rows read the other floats of those lines, so the block keeps them
// in L1 instead of walking a whole row first (ConvNeXt's NHWC → NCHW
// Transposes of 28×28×96: 0.055 → 0.017 ms at 1 thread).
func gatherRows(f *Fn, k *kernel.Kernel, space []value.Value, lane, vl int) int {
	if f.gpu || vl == 0 || lane < 0 || k.Reduce != nil || kernel.Contiguous(k, kernel.AxisRef{Op: kernel.OpVar, I: int64(lane)}) {
		return -1
	}
	for r := len(space) - 1; r >= 0; r-- {
		n, ok := intConst(space[r])
		if r != lane && (!ok || n >= 2*gatherBlock) && kernel.Contiguous(k, kernel.AxisRef{Op: kernel.OpVar, I: int64(r)}) {
			return r
		}
	}
	return -1
}

// piecesPerSplit is how many pieces of work the threads split at least: a
// few per thread, so that uneven pieces still balance.
const piecesPerSplit = 64

// minPiece is the fewest elements of a row worth a piece of their own.
const minPiece = 1024

// rowPiece returns the length (whole vectors of vl) of the pieces rows
// along axis inner are cut into so that the threads have piecesPerSplit
// pieces to split, or 0 when the rows alone are enough (or their number is
// not known when compiling).
func rowPiece(space []value.Value, inner, vl int) int64 {
	rows := int64(1)
	for i, e := range space {
		if i == inner {
			continue
		}
		n, ok := intConst(e)
		if !ok {
			return 0
		}
		rows *= n
	}
	n, ok := intConst(space[inner])
	if !ok || rows == 0 || rows >= piecesPerSplit {
		return 0
	}
	per := min((piecesPerSplit+rows-1)/rows, n/minPiece)
	if per <= 1 {
		return 0
	}
	step := int64(max(vl, 1))
	piece := ((n+per-1)/per + step - 1) / step * step
	if piece >= n {
		return 0
	}
	return piece
}

// laneLoop runs body along axis inner of row q from lo to hi: in vectors
// of vl (a masked vector for the rest), or one point at a time when vl is
// 0.
func laneLoop(f *Fn, q *Point, inner, vl int, lo, hi value.Value, body func(q *Point)) {
	if vl == 0 {
		f.Loop(lo, hi, func(i value.Value) {
			r := q.Scope()
			r.Vars[inner] = i
			body(r)
		})
		return
	}
	n := f.Sub(hi, lo)
	full := f.Add(lo, f.Mul(f.Div(n, I64(int64(vl))), I64(int64(vl))))
	f.LoopStep(lo, full, int64(vl), func(i value.Value) {
		r := q.Scope()
		r.Vars[inner] = i
		body(r.Vector(inner, false, vl, nil))
	})
	tail := f.Sub(hi, full)
	if t, ok := intConst(tail); ok && t == 0 {
		return
	}
	f.If(f.Lt(I64(0), tail), func() {
		r := q.Scope()
		r.Vars[inner] = full
		body(r.Vector(inner, false, vl, f.LaneMask(tail, vl)))
	})
}

// emitRows runs body once per row and piece: every combination of the
// space axes other than inner and skip (which the body loops over itself)
// and of the pieces (0 to pieces-1) each row is cut into, split across
// threads when parallel. Axes of extent 1 are coordinate 0.
func emitRows(f *Fn, p *Point, k *kernel.Kernel, space []value.Value, inner, skip int, parallel bool, pieces int64, body func(q *Point, piece value.Value)) {
	var axes []int
	for i := range space {
		if i == inner || i == skip {
			continue
		}
		if n, ok := intConst(space[i]); ok && n == 1 {
			p.Vars[i] = I64(0)
			continue
		}
		axes = append(axes, i)
	}
	if !parallel {
		var nest func(d int, q *Point)
		nest = func(d int, q *Point) {
			if d == len(axes) && pieces == 1 {
				body(q, I64(0))
				return
			}
			if d == len(axes) {
				f.Loop(I64(0), I64(pieces), func(i value.Value) { body(q, i) })
				return
			}
			f.Loop(I64(0), space[axes[d]], func(i value.Value) {
				r := q.Scope()
				r.Vars[axes[d]] = i
				nest(d+1, r)
			})
		}
		nest(0, p)
		return
	}
	rows := value.Value(I64(pieces))
	for _, a := range axes {
		rows = f.Mul(rows, space[a])
	}
	loop := func(body func(o value.Value)) {
		lo, hi := f.Split(rows)
		f.Loop(lo, hi, body)
	}
	if f.gpu {
		loop = f.strided(rows)
	}
	loop(func(o value.Value) {
		q := p.Scope()
		rest, piece := o, value.Value(I64(0))
		if pieces > 1 {
			rest, piece = f.Div(o, I64(pieces)), f.Rem(o, I64(pieces))
		}
		for d := len(axes) - 1; d >= 0; d-- {
			if d == 0 {
				q.Vars[axes[d]] = rest
				break
			}
			q.Vars[axes[d]] = f.Rem(rest, space[axes[d]])
			rest = f.Div(rest, space[axes[d]])
		}
		body(q, piece)
	})
}

// emitStore writes a point's value to the kernel's output.
func emitStore(q *Point, k *kernel.Kernel, v value.Value) {
	f := q.F
	idx := k.Store
	if idx == nil {
		idx = kernel.Vars(len(k.Space))
	}
	if k.Combine != kernel.None {
		old := q.Eval(kernel.Load(k.Out, idx...))
		v = combine(f, k.Combine, k.Value.Type, old, widenTo(f, q, v, old))
	}
	if k.When == nil {
		q.Store(k.Out, idx, v, nil)
		return
	}
	when := q.Eval(k.When)
	if lanes(when) == 0 {
		f.If(when, func() { q.Store(k.Out, idx, v, nil) })
		return
	}
	mask := when
	if q.Mask != nil {
		mask = f.B.NewAnd(q.Mask, when)
	}
	q.Store(k.Out, idx, v, mask)
}

func widenTo(f *Fn, q *Point, v, like value.Value) value.Value {
	if n := lanes(like); n > 0 && lanes(v) == 0 {
		return f.Splat(v, n)
	}
	return v
}

// combine merges x into acc. Bools add as or and multiply as and (the
// reference computes them as 0/1 integers and stores x != 0).
func combine(f *Fn, op kernel.ReduceOp, t ir.DType, acc, x value.Value) value.Value {
	if t == ir.Bool {
		switch op {
		case kernel.SumOp, kernel.MaxOp:
			return f.B.NewOr(acc, x)
		case kernel.ProdOp, kernel.MinOp:
			return f.B.NewAnd(acc, x)
		}
	}
	switch op {
	case kernel.SumOp:
		return f.binaryOp(kernel.OpAdd, t, acc, x)
	case kernel.ProdOp:
		return f.binaryOp(kernel.OpMul, t, acc, x)
	case kernel.MaxOp:
		return f.binaryOp(kernel.OpMax, t, x, acc)
	case kernel.MinOp:
		return f.binaryOp(kernel.OpMin, t, x, acc)
	}
	return x
}

// emitReduce reduces the kernel's value over the reduction axes at point q
// and returns Post's value.
func emitReduce(q *Point, k *kernel.Kernel, s kernel.Schedule) value.Value {
	return emitReduceAll([]*Point{q}, k, s)[0]
}

// emitReduceAll reduces at each of the points qs (which differ in one
// space axis only, Schedule.Jam) in one nest of loops, an accumulator
// each: what their values read alike (a convolution's input, for points
// along its output channels) LLVM then loads once per iteration for all.
func emitReduceAll(qs []*Point, k *kernel.Kernel, s kernel.Schedule) []value.Value {
	q := qs[0]
	f := q.F
	r := k.Reduce
	t := k.Value.Type
	ext := make([]value.Value, len(r.Extents))
	for i, e := range r.Extents {
		ext[i] = q.Eval(e)
	}
	for _, p := range qs {
		p.RVars = make([]value.Value, len(r.Extents))
	}
	accs := make([]value.Value, len(qs))
	if r.Op == kernel.ArgMaxOp || r.Op == kernel.ArgMinOp {
		if len(qs) > 1 {
			panic("llvm: jammed points of an arg reduction")
		}
		accs[0] = emitArg(q, k, ext[0])
	} else {
		init := q.EvalVec(kernel.Identity(r.Op, t))
		hlane := -1
		if s.Reduction && s.VL > 0 {
			hlane = s.Axis
			init = f.Splat(q.Eval(kernel.Identity(r.Op, t)), s.VL)
		}
		scopes := func(ps []*Point, d int, i value.Value) []*Point {
			cs := make([]*Point, len(ps))
			for j, p := range ps {
				cs[j] = p.Scope()
				cs[j].RVars[d] = i
			}
			return cs
		}
		var nest func(d int, ps []*Point, acc []value.Value) []value.Value
		nest = func(d int, ps []*Point, acc []value.Value) []value.Value {
			if d == len(ext) {
				out := make([]value.Value, len(ps))
				for j, p := range ps {
					out[j] = combine(f, r.Op, t, acc[j], widenTo(f, p, p.Eval(k.Value), acc[j]))
				}
				return out
			}
			if d != hlane {
				return f.LoopAcc(I64(0), ext[d], 1, acc, func(i value.Value, a []value.Value) []value.Value {
					return nest(d+1, scopes(ps, d, i), a)
				})
			}
			vl := s.VL
			full := f.Mul(f.Div(ext[d], I64(int64(vl))), I64(int64(vl)))
			vectors := func(cs []*Point, mask value.Value) []*Point {
				for j, c := range cs {
					cs[j] = c.Vector(d, true, vl, mask)
				}
				return cs
			}
			// A copy: LoopAcc may hand back its init (no iterations),
			// which the tail below must not overwrite.
			sums := append([]value.Value(nil), f.LoopAcc(I64(0), full, int64(vl), acc, func(i value.Value, a []value.Value) []value.Value {
				return nest(d+1, vectors(scopes(ps, d, i), nil), a)
			})...)
			tail := f.Sub(ext[d], full)
			if n, ok := intConst(tail); ok && n == 0 {
				return sums
			}
			mask := f.LaneMask(tail, vl)
			for j, cv := range vectors(scopes(ps, d, full), mask) {
				x := widenTo(f, cv, cv.Eval(k.Value), sums[j])
				sums[j] = combine(f, r.Op, t, sums[j], f.B.NewSelect(mask, x, init))
			}
			return sums
		}
		inits := make([]value.Value, len(qs))
		for j := range inits {
			inits[j] = init
		}
		accs = nest(0, qs, inits)
		for j := range accs {
			if hlane < 0 {
				break
			}
			acc := accs[j]
			// Across the lanes as a tree (log2(VL) steps, not VL-1),
			// halving while the width is even.
			for w := s.VL / 2; w >= 1 && lanes(acc) == 2*w; w /= 2 {
				lo, hi := make([]constant.Constant, w), make([]constant.Constant, w)
				for i := range lo {
					lo[i], hi[i] = constant.NewInt(i32, int64(i)), constant.NewInt(i32, int64(w+i))
				}
				mt := types.NewVector(uint64(w), i32)
				undef := constant.NewUndef(acc.Type())
				acc = combine(f, r.Op, t, f.B.NewShuffleVector(acc, undef, constant.NewVector(mt, lo...)),
					f.B.NewShuffleVector(acc, undef, constant.NewVector(mt, hi...)))
			}
			h := f.ExtractLane(acc, 0)
			for i := 1; i < lanes(acc); i++ {
				h = combine(f, r.Op, t, h, f.ExtractLane(acc, i))
			}
			accs[j] = h
		}
	}
	if r.Post == nil {
		return accs
	}
	for j, p := range qs {
		post := p.Scope()
		post.Acc = accs[j]
		accs[j] = post.Eval(r.Post)
	}
	return accs
}

// emitArg finds the index of the best value along the single reduction
// axis (ArgMax/ArgMin, as the reference: the first of equals, or the
// last; a NaN wins and stays).
func emitArg(q *Point, k *kernel.Kernel, n value.Value) value.Value {
	f := q.F
	r := k.Reduce
	t := k.Value.Type
	first := q.Scope()
	first.RVars[0] = I64(0)
	best0 := first.EvalVec(k.Value)
	var idx0 value.Value = I64(0)
	if q.VL > 0 {
		idx0 = f.Splat(idx0, q.VL)
	}
	res := f.LoopAcc(I64(1), n, 1, []value.Value{best0, idx0}, func(i value.Value, a []value.Value) []value.Value {
		c := q.Scope()
		c.RVars[0] = i
		x := c.EvalVec(k.Value)
		var better value.Value
		gt := kernel.OpGt
		if r.Op == kernel.ArgMinOp {
			gt = kernel.OpLt
		}
		better = f.binaryOp(gt, t, x, a[0])
		if r.Last {
			better = f.B.NewOr(better, f.binaryOp(kernel.OpEq, t, x, a[0]))
		}
		if t.IsFloat() {
			better = f.B.NewOr(better, f.B.NewFCmp(enum.FPredUNO, x, x))
			better = f.B.NewAnd(better, f.B.NewFCmp(enum.FPredORD, a[0], a[0]))
		}
		ii := i
		if q.VL > 0 {
			ii = f.Splat(i, q.VL)
		}
		return []value.Value{f.B.NewSelect(better, x, a[0]), f.B.NewSelect(better, ii, a[1])}
	})
	return res[1]
}

// emitScan runs the scan along its axis at row q (vectorized along the lane
// axis when q has lanes).
func emitScan(q *Point, k *kernel.Kernel, n value.Value) {
	f := q.F
	sc := k.Scan
	t := k.Value.Type
	init := q.EvalVec(kernel.Identity(sc.Op, t))
	f.LoopAcc(I64(0), n, 1, []value.Value{init}, func(i value.Value, a []value.Value) []value.Value {
		c := q.Scope()
		j := i
		if sc.Reverse {
			j = f.Sub(f.Sub(n, I64(1)), i)
		}
		c.Vars[sc.Axis] = j
		x := widenTo(f, c, c.Eval(k.Value), a[0])
		next := combine(f, sc.Op, t, a[0], x)
		out := next
		if sc.Exclusive {
			out = a[0]
		}
		c.Store(k.Out, kernel.Vars(len(k.Space)), out, nil)
		return []value.Value{next}
	})
}

// emitTopK selects the K best candidates at row q: the r-th pick is the
// best candidate ranked after the (r-1)-th in the order (value, then
// index), so no scratch is needed and equal values keep their order.
func emitTopK(q *Point, k *kernel.Kernel) {
	f := q.F
	tk := k.TopK
	t := k.Value.Type
	kOut := q.Eval(k.Space[tk.Axis])
	n := q.Eval(tk.N)
	// before(a, i, b, j): candidate (a, i) ranks before (b, j).
	before := func(a, i, b, j value.Value) value.Value {
		gt, lt := kernel.OpGt, kernel.OpLt
		if !tk.Largest {
			gt, lt = kernel.OpLt, kernel.OpGt
		}
		ahead := f.binaryOp(gt, t, a, b)
		tie := f.binaryOp(kernel.OpEq, t, a, b)
		if t.IsFloat() {
			an, bn := f.B.NewFCmp(enum.FPredUNO, a, a), f.B.NewFCmp(enum.FPredUNO, b, b)
			// NaN ranks below every number: last when largest, first when not.
			if tk.Largest {
				ahead = f.B.NewOr(ahead, f.B.NewAnd(bn, f.B.NewXor(an, constant.True)))
			} else {
				ahead = f.B.NewOr(ahead, f.B.NewAnd(an, f.B.NewXor(bn, constant.True)))
			}
			tie = f.B.NewOr(tie, f.B.NewAnd(an, bn))
		}
		_ = lt
		return f.B.NewOr(ahead, f.B.NewAnd(tie, f.B.NewICmp(enum.IPredSLT, i, j)))
	}
	zero := q.Eval(kernel.Const(t, 0))
	f.LoopAcc(I64(0), kOut, 1, []value.Value{zero, I64(-1)}, func(r value.Value, prev []value.Value) []value.Value {
		// found, bestV, bestI over the candidates ranked after prev.
		res := f.LoopAcc(I64(0), n, 1, []value.Value{constant.False, zero, I64(0)}, func(j value.Value, a []value.Value) []value.Value {
			c := q.Scope()
			c.Vars[tk.Axis] = j
			x := c.Eval(k.Value)
			after := f.B.NewOr(f.B.NewICmp(enum.IPredSLT, prev[1], I64(0)), before(prev[0], prev[1], x, j))
			take := f.B.NewAnd(after, f.B.NewOr(f.B.NewXor(a[0], constant.True), before(x, j, a[1], a[2])))
			return []value.Value{f.B.NewOr(a[0], take), f.B.NewSelect(take, x, a[1]), f.B.NewSelect(take, j, a[2])}
		})
		c := q.Scope()
		c.Vars[tk.Axis] = r
		idx := kernel.Vars(len(k.Space))
		c.Store(k.Out, idx, res[1], nil)
		c.Store(tk.Indices, idx, res[2], nil)
		return []value.Value{res[1], res[2]}
	})
}
