package dimexpr

import (
	"math"
	"slices"
	"strings"
)

// Min returns the smallest of the expressions. Constants fold, nested
// mins flatten, and an argument provably no smaller than another drops
// (under the assumption that symbols are at least 1): Min(N, 1) is 1,
// Min(N + 2, N) is N. Nil anywhere gives nil.
func Min(es ...*Expr) *Expr { return extremum(minAtom, es) }

// Max returns the largest of the expressions, as Min does the smallest.
func Max(es ...*Expr) *Expr { return extremum(maxAtom, es) }

func extremum(kind atomKind, es []*Expr) *Expr {
	if len(es) == 0 {
		return nil
	}
	for _, e := range es {
		if e == nil {
			return nil
		}
	}
	// Drop dominated arguments before flattening nested ones (so that
	// min(m, m + 1) sees m whole) and after.
	var args []*Expr
	for _, e := range undominated(kind, es) {
		if a, ok := loneAtom(e); ok && a.kind == kind {
			args = append(args, a.args...)
			continue
		}
		args = append(args, e)
	}
	kept := undominated(kind, args)
	if len(kept) == 1 {
		return kept[0]
	}
	slices.SortFunc(kept, func(a, b *Expr) int { return strings.Compare(a.str, b.str) })
	if len(kept) > maxTerms {
		return nil
	}
	a := &atom{kind: kind, args: kept}
	a.key = a.print()
	return atomExpr(a)
}

// undominated keeps the arguments that no other is provably at least as
// good as (no larger for a min, no smaller for a max), alone or together
// with the rest: max(a, b, max(a, b)//7) is max(a, b). Equal arguments
// count once; it drops one argument at a time, so what dominates stays.
func undominated(kind atomKind, args []*Expr) []*Expr {
	better := func(a, b *Expr) bool { // a can replace b
		if kind == minAtom {
			return b.GE(a)
		}
		return a.GE(b)
	}
	var work []*Expr
	for _, a := range args {
		if !slices.ContainsFunc(work, a.Equal) {
			work = append(work, a)
		}
	}
	slices.SortFunc(work, func(a, b *Expr) int { return strings.Compare(a.str, b.str) })
	for i := 0; i < len(work) && len(work) > 1; {
		a := work[i]
		others := append(append([]*Expr{}, work[:i]...), work[i+1:]...)
		drop := slices.ContainsFunc(others, func(b *Expr) bool { return better(b, a) })
		if !drop && len(others) > 1 {
			o := &atom{kind: kind, args: others}
			o.key = o.print()
			drop = better(atomExpr(o), a)
		}
		if drop {
			work = others
			continue
		}
		i++
	}
	return work
}

// loneAtom returns the atom when e is exactly one atom (coefficient 1,
// power 1).
func loneAtom(e *Expr) (*atom, bool) {
	if len(e.terms) != 1 {
		return nil, false
	}
	t := e.terms[0]
	if t.coef != 1 || len(t.mono) != 1 || t.mono[0].pow != 1 {
		return nil, false
	}
	return t.mono[0].a, true
}

// GE reports whether e >= o provably, for every assignment of at least 1
// to each symbol. False means "not proven", not "less".
func (e *Expr) GE(o *Expr) bool {
	d := e.Sub(o)
	return d != nil && nonneg(d, 3)
}

// NonNeg reports whether e >= 0 provably (symbols at least 1).
func (e *Expr) NonNeg() bool { return e != nil && nonneg(e, 3) }

// lowerBound returns a lower bound of an atom's value.
func lowerBound(a *atom) (int64, bool) {
	switch a.kind {
	case symAtom:
		return 1, true
	case floorAtom:
		lb, ok := lowerBoundExpr(a.num)
		if !ok {
			return 0, false
		}
		return FloorDiv(lb, a.den), true
	case minAtom:
		lb := int64(math.MaxInt64)
		for _, x := range a.args {
			v, ok := lowerBoundExpr(x)
			if !ok {
				return 0, false
			}
			lb = min(lb, v)
		}
		return lb, true
	default:
		lb, found := int64(math.MinInt64), false
		for _, x := range a.args {
			if v, ok := lowerBoundExpr(x); ok {
				lb, found = max(lb, v), true
			}
		}
		return lb, found
	}
}

// lowerBoundExpr bounds an expression from below when every non-constant
// term has a positive coefficient and atoms of non-negative bounds.
func lowerBoundExpr(e *Expr) (int64, bool) {
	total := int64(0)
	for _, t := range e.terms {
		v := t.coef
		if len(t.mono) > 0 {
			if t.coef < 0 {
				return 0, false
			}
			for _, f := range t.mono {
				lb, ok := lowerBound(f.a)
				if !ok || lb < 0 {
					return 0, false
				}
				for range f.pow {
					var ok bool
					if v, ok = mulOK(v, lb); !ok {
						return 0, false
					}
				}
			}
		}
		var ok bool
		if total, ok = addOK(total, v); !ok {
			return 0, false
		}
	}
	return total, true
}

// nonneg proves e >= 0: by a lower bound, or by replacing one atom with a
// bound that keeps the inequality (a min by one of its arguments where it
// is subtracted, a max where it is added, a floor division by its
// numerator over the divisor) and proving the result. depth limits the
// search.
func nonneg(e *Expr, depth int) bool {
	if lb, ok := lowerBoundExpr(e); ok && lb >= 0 {
		return true
	}
	if depth == 0 {
		return false
	}
	for i, t := range e.terms {
		if len(t.mono) != 1 || t.mono[0].pow != 1 {
			continue
		}
		a := t.mono[0].a
		rest := build(append(append([]term{}, e.terms[:i]...), e.terms[i+1:]...))
		switch {
		case a.kind == minAtom && t.coef < 0, a.kind == maxAtom && t.coef > 0:
			for _, x := range a.args {
				if r := rest.Add(x.scale(t.coef)); r != nil && nonneg(r, depth-1) {
					return true
				}
			}
		case a.kind == floorAtom && t.coef < 0:
			// c*floor(n/d) >= c*n/d for c < 0: prove d*rest + c*n >= 0.
			if r := rest.scale(a.den).Add(a.num.scale(t.coef)); r != nil && nonneg(r, depth-1) {
				return true
			}
		case a.kind == floorAtom && t.coef > 0:
			// floor(n/d) >= (n - d + 1)/d.
			if r := rest.scale(a.den).Add(a.num.AddConst(1 - a.den).scale(t.coef)); r != nil && nonneg(r, depth-1) {
				return true
			}
		}
	}
	return false
}
