package dimexpr

import "fmt"

// FloorDiv and floorMod are Python's // and % on int64 (the divisor is
// positive where they are used); codegen uses FloorDiv for window offsets.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - FloorDiv(a, b)*b }

func gcd(a, b int64) int64 {
	a, b = abs(a), abs(b)
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// FloorDiv returns floor(e / o). A constant divisor may be any nonzero
// value; a symbolic one must divide e exactly (N*S*64 by N*S gives 64),
// since floor division by an expression of unknown sign has no canonical
// form. Errors: division by zero, or a symbolic divisor that does not
// divide. Nil operands give nil.
func (e *Expr) FloorDiv(o *Expr) (*Expr, error) {
	if e == nil || o == nil {
		return nil, nil
	}
	if c, ok := o.Value(); ok {
		return e.floorDivConst(c)
	}
	if q := exactDiv(e, o); q != nil {
		return q, nil
	}
	return nil, fmt.Errorf("%s does not divide %s", o, e)
}

// CeilDiv returns ceil(e / o), under FloorDiv's rules.
func (e *Expr) CeilDiv(o *Expr) (*Expr, error) {
	if e == nil || o == nil {
		return nil, nil
	}
	if c, ok := o.Value(); ok {
		switch {
		case c == 0:
			return nil, fmt.Errorf("division of %s by zero", e)
		case c > 0:
			return e.AddConst(c - 1).floorDivConst(c)
		}
		q, err := e.floorDivConst(-c)
		return q.Neg(), err
	}
	return e.FloorDiv(o)
}

// Mod returns e mod c (Python's %, in [0, c) for c > 0).
func (e *Expr) Mod(o *Expr) (*Expr, error) {
	q, err := e.FloorDiv(o)
	if err != nil || q == nil {
		return nil, err
	}
	return e.Sub(q.Mul(o)), nil
}

// floorDivConst is floor(e / c) for a constant c, canonicalized:
//   - the multiples of c leave the division: floor((c*q + r)/c) = q + floor(r/c),
//     with every coefficient of r in [0, c);
//   - a common factor g of c and r's non-constant coefficients cancels:
//     floor((g*s + k)/(g*c')) = floor((s + floor(k/g))/c');
//   - a floor division inside merges: floor((floor(n/d) + t)/c) = floor((n + d*t)/(d*c)).
func (e *Expr) floorDivConst(c int64) (*Expr, error) {
	switch {
	case e == nil:
		return nil, nil
	case c == 0:
		return nil, fmt.Errorf("division of %s by zero", e)
	case c < 0:
		if c == -c { // MinInt64
			return nil, nil
		}
		return e.Neg().floorDivConst(-c)
	case c == 1:
		return e, nil
	}
	var q, r []term
	for _, t := range e.terms {
		if qc := FloorDiv(t.coef, c); qc != 0 {
			q = append(q, term{qc, t.mono})
		}
		if rc := floorMod(t.coef, c); rc != 0 {
			r = append(r, term{rc, t.mono})
		}
	}
	qe := build(q)
	if len(r) == 0 || len(r[0].mono) == 0 { // r is a constant in [0, c)
		return qe, nil
	}
	// Cancel the common factor.
	g := c
	for _, t := range r {
		if len(t.mono) > 0 {
			g = gcd(g, t.coef)
		}
	}
	if g > 1 {
		var s []term
		for _, t := range r {
			if len(t.mono) > 0 {
				s = append(s, term{t.coef / g, t.mono})
			} else if k := t.coef / g; k != 0 {
				s = append(s, term{k, nil})
			}
		}
		r, c = s, c/g
	}
	// Merge an inner floor division with coefficient 1.
	for i, t := range r {
		if t.coef != 1 || len(t.mono) != 1 || t.mono[0].pow != 1 || t.mono[0].a.kind != floorAtom {
			continue
		}
		inner := t.mono[0].a
		rest := build(append(append([]term{}, r[:i]...), r[i+1:]...))
		d, ok := mulOK(inner.den, c)
		if !ok {
			return nil, nil
		}
		merged, err := inner.num.Add(rest.scale(inner.den)).floorDivConst(d)
		if err != nil || merged == nil {
			return nil, err
		}
		return qe.Add(merged), nil
	}
	a := &atom{kind: floorAtom, num: build(r), den: c}
	a.key = a.print()
	return qe.Add(atomExpr(a)), nil
}

// exactDiv divides p by q when q divides p as polynomials over the atoms
// (multivariate division with one divisor leaves no remainder exactly
// when it divides), else nil.
func exactDiv(p, q *Expr) *Expr {
	if len(q.terms) == 0 {
		return nil
	}
	lq := q.terms[0]
	rem, quot := p, Const(0)
	for range 4 * maxTerms {
		if rem == nil || quot == nil {
			return nil
		}
		if len(rem.terms) == 0 {
			return quot
		}
		lt := rem.terms[0]
		m, ok := divMono(lt.mono, lq.mono)
		if !ok || lt.coef%lq.coef != 0 {
			return nil
		}
		t := build([]term{{lt.coef / lq.coef, m}})
		quot = quot.Add(t)
		rem = rem.Sub(t.Mul(q))
	}
	return nil
}

// divMono returns a/b when b divides a.
func divMono(a, b []factor) ([]factor, bool) {
	var out []factor
	j := 0
	for _, f := range a {
		if j < len(b) && cmpAtom(f.a, b[j].a) == 0 {
			if f.pow < b[j].pow {
				return nil, false
			}
			if f.pow > b[j].pow {
				out = append(out, factor{f.a, f.pow - b[j].pow})
			}
			j++
			continue
		}
		out = append(out, f)
	}
	return out, j == len(b)
}

// ExactDiv returns e / o when o divides e exactly (constants dividing
// every coefficient, or polynomial division without remainder), else nil.
func (e *Expr) ExactDiv(o *Expr) *Expr {
	if e == nil || o == nil {
		return nil
	}
	if c, ok := o.Value(); ok {
		if c == 0 {
			return nil
		}
		for _, t := range e.terms {
			if t.coef%c != 0 {
				return nil
			}
		}
		q, _ := e.floorDivConst(c)
		return q
	}
	return exactDiv(e, o)
}
