// Package dimexpr is the algebra of symbolic tensor dimensions: immutable
// integer expressions over named symbols (a model's dim_params, such as
// "batch" or "seq"), kept in a canonical form so that expressions that are
// equal by the rules below print equal.
//
// An expression is a polynomial with int64 coefficients over atoms. An atom
// is a symbol, a floor division of a polynomial by a positive constant that
// does not simplify, or a min or max of expressions. The canonical form
// (what String prints and Parse reads back) orders monomials by degree,
// then lexicographically, with the constant last: "N*S + 2*N - 1". Floor
// divisions are reduced as far as integer arithmetic allows:
// (2*N + 5)//2 is N + 2, ((N + 1)//2 + 1)//2 is (N + 3)//4, and a ceiling
// division is a floor one, (N + 3)//4 for CeilDiv(N, 4).
//
// Symbols stand for tensor dims that are at least 1 (an engine's profile
// starts at 1). Min and Max simplify under that assumption: min(N, 1) is 1
// and max(N - 1, 0) is N - 1. Nothing else assumes anything about the
// symbols; every other rewrite holds for all integers.
//
// Canonical forms are equal for expressions equal by the laws of
// polynomials, by the floor-division reductions above, and for mins and
// maxes whose arguments compare; expressions equal only by deeper number
// theory, such as N//2 + (N + 1)//2 and N, may print differently. Equal
// strings always mean equal values.
//
// A nil *Expr is an unknown value: every operation with one gives nil, as
// does arithmetic whose coefficients would overflow int64 or whose result
// would grow past a few dozen terms. Inference treats nil as "unknown dim".
package dimexpr

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Expr is an immutable symbolic integer expression in canonical form.
type Expr struct {
	terms []term // in canonical order, no zero coefficients, constant last
	str   string // the canonical printed form
}

type term struct {
	coef int64
	mono []factor // sorted by atom order; empty for the constant term
}

type factor struct {
	a   *atom
	pow int
}

type atomKind int

const (
	symAtom atomKind = iota
	floorAtom
	minAtom
	maxAtom
)

type atom struct {
	kind atomKind
	name string  // symAtom
	num  *Expr   // floorAtom: num // den, den >= 2
	den  int64   //
	args []*Expr // minAtom, maxAtom: two or more, sorted by String, distinct
	key  string  // canonical form, for ordering and equality
}

// maxTerms bounds the size of an expression; larger results are unknown
// (nil) rather than slow.
const maxTerms = 48

// Const returns the constant expression v.
func Const(v int64) *Expr {
	if v == 0 {
		return build(nil)
	}
	return build([]term{{coef: v}})
}

// Sym returns the expression made of one symbol. Any string is a valid
// name, including ones that are not identifiers ("batch size").
func Sym(name string) *Expr {
	a := &atom{kind: symAtom, name: name}
	a.key = a.print()
	return build([]term{{coef: 1, mono: []factor{{a, 1}}}})
}

func atomExpr(a *atom) *Expr {
	return build([]term{{coef: 1, mono: []factor{{a, 1}}}})
}

// build wraps sorted, normalized terms.
func build(ts []term) *Expr {
	e := &Expr{terms: ts}
	e.str = e.print()
	return e
}

// Value returns the value of a constant expression.
func (e *Expr) Value() (int64, bool) {
	if e == nil {
		return 0, false
	}
	switch len(e.terms) {
	case 0:
		return 0, true
	case 1:
		if len(e.terms[0].mono) == 0 {
			return e.terms[0].coef, true
		}
	}
	return 0, false
}

// IsConst reports whether e is a known constant.
func (e *Expr) IsConst() bool {
	_, ok := e.Value()
	return ok
}

// Symbol returns the name when e is exactly one symbol.
func (e *Expr) Symbol() (string, bool) {
	if e == nil || len(e.terms) != 1 {
		return "", false
	}
	t := e.terms[0]
	if t.coef != 1 || len(t.mono) != 1 || t.mono[0].pow != 1 || t.mono[0].a.kind != symAtom {
		return "", false
	}
	return t.mono[0].a.name, true
}

// Equal reports whether two expressions have the same canonical form.
// Nil (unknown) equals nothing, not even nil.
func (e *Expr) Equal(o *Expr) bool {
	return e != nil && o != nil && e.str == o.str
}

// Symbols returns the names of the symbols e mentions, sorted.
func (e *Expr) Symbols() []string {
	if e == nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(*Expr)
	walk = func(x *Expr) {
		for _, t := range x.terms {
			for _, f := range t.mono {
				switch f.a.kind {
				case symAtom:
					seen[f.a.name] = true
				case floorAtom:
					walk(f.a.num)
				default:
					for _, a := range f.a.args {
						walk(a)
					}
				}
			}
		}
	}
	walk(e)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// --- ordering -------------------------------------------------------------------

// cmpAtom orders atoms: symbols first (by name), then floor divisions,
// mins and maxes, each by canonical form.
func cmpAtom(a, b *atom) int {
	if a == b {
		return 0
	}
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	if a.kind == symAtom {
		return strings.Compare(a.name, b.name)
	}
	return strings.Compare(a.key, b.key)
}

func degree(m []factor) int {
	d := 0
	for _, f := range m {
		d += f.pow
	}
	return d
}

// cmpMono is graded lexicographic order, highest first: a negative result
// means a comes before b. It is a monomial order (compatible with
// multiplication), which exact division relies on.
func cmpMono(a, b []factor) int {
	if da, db := degree(a), degree(b); da != db {
		return db - da
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := cmpAtom(a[i].a, b[i].a); c != 0 {
			return c // the smaller atom has the larger exponent there
		}
		if a[i].pow != b[i].pow {
			return b[i].pow - a[i].pow
		}
	}
	return len(b) - len(a)
}

// --- arithmetic -----------------------------------------------------------------

func addOK(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

func mulOK(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(abs(a)), uint64(abs(b)))
	if hi != 0 || lo > math.MaxInt64 || a == math.MinInt64 || b == math.MinInt64 {
		return 0, false
	}
	p := int64(lo)
	if (a < 0) != (b < 0) {
		p = -p
	}
	return p, true
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// sum merges term lists (each sorted), adding coefficients of equal
// monomials; nil on overflow or when the result is too large.
func sum(lists ...[]term) *Expr {
	var all []term
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortStableFunc(all, func(a, b term) int { return cmpMono(a.mono, b.mono) })
	out := all[:0:0]
	for _, t := range all {
		if n := len(out); n > 0 && cmpMono(out[n-1].mono, t.mono) == 0 {
			c, ok := addOK(out[n-1].coef, t.coef)
			if !ok {
				return nil
			}
			out[n-1].coef = c
			continue
		}
		out = append(out, t)
	}
	kept := out[:0]
	for _, t := range out {
		if t.coef != 0 {
			kept = append(kept, t)
		}
	}
	if len(kept) > maxTerms {
		return nil
	}
	return build(kept)
}

// Add returns e + o.
func (e *Expr) Add(o *Expr) *Expr {
	if e == nil || o == nil {
		return nil
	}
	return sum(e.terms, o.terms)
}

// Sub returns e - o.
func (e *Expr) Sub(o *Expr) *Expr { return e.Add(o.Neg()) }

// Neg returns -e.
func (e *Expr) Neg() *Expr { return e.scale(-1) }

// scale multiplies every coefficient by k.
func (e *Expr) scale(k int64) *Expr {
	if e == nil {
		return nil
	}
	if k == 0 {
		return Const(0)
	}
	ts := make([]term, len(e.terms))
	for i, t := range e.terms {
		c, ok := mulOK(t.coef, k)
		if !ok {
			return nil
		}
		ts[i] = term{c, t.mono}
	}
	return build(ts)
}

// mulMono multiplies two monomials (sorted factor lists).
func mulMono(a, b []factor) []factor {
	out := make([]factor, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && cmpAtom(a[i].a, b[j].a) < 0:
			out = append(out, a[i])
			i++
		case i == len(a) || cmpAtom(a[i].a, b[j].a) > 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, factor{a[i].a, a[i].pow + b[j].pow})
			i++
			j++
		}
	}
	return out
}

// Mul returns e * o.
func (e *Expr) Mul(o *Expr) *Expr {
	if e == nil || o == nil {
		return nil
	}
	if len(e.terms)*len(o.terms) > 4*maxTerms {
		return nil
	}
	var ts []term
	for _, a := range e.terms {
		for _, b := range o.terms {
			c, ok := mulOK(a.coef, b.coef)
			if !ok {
				return nil
			}
			ts = append(ts, term{c, mulMono(a.mono, b.mono)})
		}
	}
	return sum(ts)
}

// AddConst returns e + v.
func (e *Expr) AddConst(v int64) *Expr { return e.Add(Const(v)) }

// MulConst returns e * v.
func (e *Expr) MulConst(v int64) *Expr { return e.scale(v) }

// String returns the canonical form, which Parse reads back to an equal
// expression; "?" for nil.
func (e *Expr) String() string {
	if e == nil {
		return "?"
	}
	return e.str
}

// GoString makes %#v print the canonical form.
func (e *Expr) GoString() string { return fmt.Sprintf("dimexpr(%q)", e.String()) }
