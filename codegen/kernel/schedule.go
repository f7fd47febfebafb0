package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Schedule says how a kernel's loops run on a CPU: which axis is in vector
// lanes and how many, and whether the engine's threads split the work.
// Loops run in the space's order, the lane axis innermost, reduction axes
// inside the point they reduce for.
type Schedule struct {
	// VL is the number of lanes (0: scalar code).
	VL int
	// Axis is the space axis in lanes, or with Reduction the reduction
	// axis (its partial results combine across lanes at the end); -1 when
	// scalar.
	Axis      int
	Reduction bool
	// Parallel splits the work across the engine's threads (else thread 0
	// runs it all).
	Parallel bool
	// JamBy > 1: a reduction's points along space axis Jam go JamBy at a
	// time through one loop nest, sharing the loads that do not vary
	// along Jam (a convolution's input, for JamBy output channels; a
	// matrix product's row of B, for JamBy rows), each with its
	// accumulator: the sums, and their order, are the same.
	Jam, JamBy int
}

// parallelWork is the work (points × reduced elements) from which a
// kernel's loops are split across threads: below it, meeting at the
// barrier costs more than the split saves.
const parallelWork = 1 << 15

// CPUSchedule picks a schedule for k on a CPU whose float32 vectors hold
// vl lanes.
func CPUSchedule(k *Kernel, vl int) Schedule {
	s := Schedule{Axis: -1}
	work := int64(math.MaxInt64)
	if pts, ok := k.Points().IntValue(); ok {
		work = pts
		if r := k.Reduce; r != nil {
			if n, ok := Product(r.Extents).IntValue(); ok {
				work = pts * max(n, 1)
			}
		}
		if t := k.TopK; t != nil {
			if n, ok := t.N.IntValue(); ok {
				work = pts * max(n, 1)
			}
		}
	}
	s.Parallel = !k.Serial && work >= parallelWork
	if k.Serial || k.TopK != nil || k.Combine != None {
		return s
	}
	inner := InnerAxis(k.Space, -1)
	if k.Scan != nil {
		inner = InnerAxis(k.Space, k.Scan.Axis)
	}
	wide := func(e *Expr) bool {
		n, ok := e.IntValue()
		return !ok || n >= 4
	}
	if r := k.Reduce; r != nil {
		last := len(r.Extents) - 1
		arg := r.Op == ArgMaxOp || r.Op == ArgMinOp
		switch {
		case inner >= 0 && wide(k.Space[inner]) && (arg || Contiguous(k, AxisRef{OpVar, int64(inner)})):
			s.VL, s.Axis = vl, inner
			if !arg {
				s.Jam, s.JamBy = jamAxis(k, AxisRef{OpVar, int64(inner)})
			}
		case !arg && last >= 0 && wide(r.Extents[last]) && Contiguous(k, AxisRef{OpRVar, int64(last)}):
			s.VL, s.Axis, s.Reduction = vl, last, true
			s.Jam, s.JamBy = jamAxis(k, AxisRef{OpRVar, int64(last)})
		}
		return s
	}
	if inner >= 0 && wide(k.Space[inner]) {
		s.VL, s.Axis = vl, inner
	}
	return s
}

// jamBy is how many points of a jammed axis share one reduction loop:
// with their vectors of lanes, accumulators that fit the registers.
const jamBy = 4

// jamAxis picks the space axis (not lanes', which may be a reduction's)
// of at least jamBy points (or a size known only at run time) along which
// some load varies and another, a vector along the lanes, does not:
// jamming it loads that vector once for jamBy points.
func jamAxis(k *Kernel, lanes AxisRef) (axis, by int) {
	for a := len(k.Space) - 1; a >= 0; a-- {
		n, ok := k.Space[a].IntValue()
		if lanes.Is(Var(a)) || ok && n < jamBy {
			continue
		}
		shared, varies := false, false
		Walk(k.Value, func(e *Expr) {
			if e.Op != OpLoad && e.Op != OpLoadOr {
				return
			}
			idx := e.Args
			if e.Op == OpLoadOr {
				idx = idx[2:]
			}
			off := Offset(e.Buf, idx)
			c, known := Coef(off, AxisRef{OpVar, int64(a)})
			l, lknown := Coef(off, lanes)
			switch {
			case known && c == 0 && lknown && l != 0:
				shared = true
			case !known || c != 0:
				varies = true
			}
		})
		if shared && varies {
			return a, jamBy
		}
	}
	return 0, 0
}

// InnerAxis is the last axis of space (other than skip) that is not of
// static extent 1, or -1.
func InnerAxis(space []*Expr, skip int) int {
	for i := len(space) - 1; i >= 0; i-- {
		if n, ok := space[i].IntValue(); (ok && n == 1) || i == skip {
			continue
		}
		return i
	}
	return -1
}

// Contiguous reports whether every load of k's value reads along axis a
// contiguously (or not at all), so that lanes along a are plain vector
// loads.
func Contiguous(k *Kernel, a AxisRef) bool {
	ok := true
	Walk(k.Value, func(e *Expr) {
		if e.Op == OpLoad || e.Op == OpLoadOr {
			idx := e.Args
			if e.Op == OpLoadOr {
				idx = idx[2:]
			}
			if c, known := Coef(Offset(e.Buf, idx), a); !known || c > 1 || c < 0 {
				ok = false
			}
		}
	})
	return ok
}

// Walk calls fn on every node of e's DAG once.
func Walk(e *Expr, fn func(*Expr)) {
	seen := map[*Expr]bool{}
	var rec func(*Expr)
	rec = func(e *Expr) {
		if e == nil || seen[e] {
			return
		}
		seen[e] = true
		for _, a := range e.Args {
			rec(a)
		}
		fn(e)
	}
	rec(e)
}

// AxisRef names an iteration axis: OpVar or OpRVar with its index.
type AxisRef struct {
	Op Op
	I  int64
}

// Is reports whether e is the axis.
func (a AxisRef) Is(e *Expr) bool { return e.Op == a.Op && e.Int == a.I }

// NoAxis is no axis: a scalar point.
var NoAxis = AxisRef{Op: OpConst, I: -1}

// Offset is the linear element offset of idx in b (row-major).
func Offset(b *Buffer, idx []*Expr) *Expr {
	off := C(0)
	stride := C(1)
	for i := len(idx) - 1; i >= 0; i-- {
		off = Add(off, Mul(idx[i], stride))
		stride = Mul(stride, b.Dims[i])
	}
	return off
}

// Coef returns how much e grows per step of axis a when that is a
// compile-time constant (e is affine in a).
func Coef(e *Expr, a AxisRef) (int64, bool) {
	switch {
	case a.Is(e):
		return 1, true
	case !DependsOn(e, a):
		return 0, true
	}
	switch e.Op {
	case OpAdd, OpSub:
		x, ok1 := Coef(e.Args[0], a)
		y, ok2 := Coef(e.Args[1], a)
		if e.Op == OpSub {
			y = -y
		}
		return x + y, ok1 && ok2
	case OpMul:
		if c, ok := e.Args[0].IntValue(); ok {
			x, ok := Coef(e.Args[1], a)
			return c * x, ok
		}
		if c, ok := e.Args[1].IntValue(); ok {
			x, ok := Coef(e.Args[0], a)
			return c * x, ok
		}
	}
	return 0, false
}

func DependsOn(e *Expr, a AxisRef) bool {
	// A reduction's result (Acc, in Post) may vary along any axis: it was
	// reduced in lanes when the space axis is in them.
	if a.Is(e) || e.Op == OpAcc {
		return true
	}
	for _, x := range e.Args {
		if DependsOn(x, a) {
			return true
		}
	}
	return false
}

// Identity is the value a reduction starts from, of compute type t.
func Identity(op ReduceOp, t ir.DType) *Expr {
	switch op {
	case SumOp:
		return Const(t, 0)
	case ProdOp:
		return Const(t, 1)
	case MaxOp:
		switch {
		case t.IsFloat():
			return Const(t, math.Inf(-1))
		case t == ir.Bool:
			return Bool(false)
		case t.IsUnsigned():
			return IntConst(t, 0)
		}
		return IntConst(t, minInt(t))
	case MinOp:
		switch {
		case t.IsFloat():
			return Const(t, math.Inf(1))
		case t == ir.Bool:
			return Bool(true)
		case t.IsUnsigned():
			return IntConst(t, -1) // all ones
		}
		return IntConst(t, -minInt(t)-1)
	}
	return Const(t, 0)
}

func minInt(t ir.DType) int64 {
	switch t {
	case ir.Int8:
		return math.MinInt8
	case ir.Int16:
		return math.MinInt16
	case ir.Int32:
		return math.MinInt32
	}
	return math.MinInt64
}

// GPUSchedule is the schedule of k on a GPU.
func GPUSchedule(k *Kernel) Schedule {
	return Schedule{Axis: -1, Parallel: !k.Serial}
}

// GPURows is the number of rows k's threads share (static shapes only):
// the threads worth launching.
func GPURows(k *Kernel) (int64, bool) {
	skip := -1
	switch {
	case k.TopK != nil:
		skip = k.TopK.Axis
	case k.Scan != nil:
		skip = k.Scan.Axis
	}
	rows := int64(1)
	for i, e := range k.Space {
		n, ok := e.IntValue()
		if !ok {
			return 0, false
		}
		if i != skip {
			rows *= n
		}
	}
	return rows, true
}
