package kernel

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Fusion is inlining (Halide's compute_inline): a load of a buffer that a
// map kernel computes becomes that kernel's value at the load's index, so
// a chain of maps (an elementwise DAG with its broadcasts, transposes and
// slices) is one expression and one loop nest; the inner buffers never
// reach memory.

// Inlinable reports whether k's value can replace loads of its output: a
// plain map storing at each point of its output's space.
func Inlinable(k *Kernel) bool {
	return k.Store == nil && k.When == nil && k.Combine == None && !k.Serial &&
		k.Reduce == nil && k.Scan == nil && k.TopK == nil
}

// Inline returns e with every load of a buffer in defs replaced by the
// defining kernel's value there (recursively). Conditional loads (LoadOr)
// of such buffers are left as they are: the value could read outside its
// own inputs where the condition is false.
//
// The result is a DAG: structurally equal subexpressions are one node, so
// a value two branches read (x in x + |x|, a residual) is inlined once
// and computed once per point. Inlining it per use would double the
// expression at every such join: 2^n for n of them in a row.
func Inline(e *Expr, defs map[*Buffer]*Kernel) *Expr {
	memo := map[*Expr]*Expr{}
	nodes := interner{}
	inlined := map[*Expr]*Expr{} // an interned load of a def → its value
	var in func(e *Expr) *Expr
	in = func(e *Expr) *Expr {
		if r, ok := memo[e]; ok {
			return r
		}
		args := make([]*Expr, len(e.Args))
		changed := false
		for i, a := range e.Args {
			args[i] = in(a)
			changed = changed || args[i] != a
		}
		r := e
		if changed {
			r = rebuild(e, args)
		}
		r = nodes.intern(r)
		if k := defs[r.Buf]; k != nil && r.Op == OpLoad {
			v, ok := inlined[r]
			if !ok {
				v = in(Subst(k.Value, args))
				if d := r.Buf.DType; d == ir.Float16 || d == ir.BFloat16 {
					v = nodes.intern(CastTo(v, d)) // the store it replaces would have rounded
				}
				inlined[r] = v
			}
			r = v
		}
		memo[e] = r
		return r
	}
	return in(e)
}

// interner maps expressions to one node per structure. Its nodes' operands
// are interned first, so a node's key names them by pointer.
type interner map[exprKey]*Expr

type exprKey struct {
	op         Op
	typ, round ir.DType
	buf        *Buffer
	i          int64
	f          uint64
	name, args string // args: the operands' addresses
}

func (in interner) intern(e *Expr) *Expr {
	var args strings.Builder
	for _, a := range e.Args {
		fmt.Fprintf(&args, "%p,", a)
	}
	k := exprKey{op: e.Op, typ: e.Type, round: e.Round, buf: e.Buf, i: e.Int, f: math.Float64bits(e.Float), name: e.Name, args: args.String()}
	if r, ok := in[k]; ok {
		return r
	}
	in[k] = e
	return e
}

// Subst returns e with Var(i) replaced by idx[i].
func Subst(e *Expr, idx []*Expr) *Expr {
	memo := map[*Expr]*Expr{}
	var sub func(e *Expr) *Expr
	sub = func(e *Expr) *Expr {
		if r, ok := memo[e]; ok {
			return r
		}
		var r *Expr
		if e.Op == OpVar {
			r = idx[e.Int]
		} else {
			args := make([]*Expr, len(e.Args))
			changed := false
			for i, a := range e.Args {
				args[i] = sub(a)
				changed = changed || args[i] != a
			}
			r = e
			if changed {
				r = rebuild(e, args)
			}
		}
		memo[e] = r
		return r
	}
	return sub(e)
}

// Replace returns e with every load of buffer b replaced by v (a value a
// host kernel supplies, such as a Hole).
func Replace(e *Expr, b *Buffer, v *Expr) *Expr {
	return Inline(e, map[*Buffer]*Kernel{b: {Out: b, Value: v}})
}

// rebuild makes e's operation over new operands, folding constants as the
// constructors do.
func rebuild(e *Expr, args []*Expr) *Expr {
	switch {
	case e.Op == OpSelect:
		return Select(args[0], args[1], args[2])
	case e.Op == OpCast:
		if e.Round != ir.Undefined {
			return CastTo(args[0], e.Round)
		}
		return CastTo(args[0], e.Type)
	case e.Op == OpIsNaN:
		return IsNaN(args[0])
	case e.Op >= OpNeg && e.Op <= OpRound:
		return unary(e.Op, args[0])
	case e.Op >= OpAdd && e.Op <= OpGe:
		return binary(e.Op, args[0], args[1])
	}
	c := *e
	c.Args = args
	return &c
}
