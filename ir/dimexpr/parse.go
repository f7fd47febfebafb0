package dimexpr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Parse reads a dimension: the canonical form String prints, and the
// Python/SymPy spelling exporters write in dim_params ("s0*2",
// "past_sequence_length + 1", "((s0 - 1)//2) + 1", "floor(s0/2)",
// "Max(1, s0)"). The syntax: integers, names (identifier characters, dots,
// and hyphens between words: "seq-len"), names in double quotes with
// backslash escapes, + - * ** // %, / where it divides exactly or under
// floor or ceiling,
// parentheses, and the functions min, max (also Min, Max), floor,
// ceiling (also ceil), FloorDiv, CeilDiv and Mod.
//
// Any other text is one opaque symbol named by the whole string: Parse of
// "batch size" or "N:0" is Sym of it. Only the empty string is an error.
func Parse(s string) (*Expr, error) {
	if s == "" {
		return nil, errors.New("empty dimension expression")
	}
	if v, ok := cache.Load(s); ok {
		return v.(*Expr), nil
	}
	e, err := parseStrict(s)
	if err != nil {
		e = Sym(s)
	}
	if cacheSize.Add(1) <= maxCache {
		cache.Store(s, e)
	}
	return e, nil
}

// The parsed forms of the dim strings a process has seen: inference
// parses the same few strings over and over. Bounded, since a server may
// see arbitrary models.
var (
	cache     sync.Map
	cacheSize atomic.Int64
)

const maxCache = 1 << 14

// parseStrict parses s as an expression, failing on anything else.
func parseStrict(s string) (*Expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	v, err := p.sum()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.pos].text)
	}
	return v.integer()
}

type tokKind int

const (
	tokNum tokKind = iota
	tokName
	tokQuoted
	tokOp
)

type token struct {
	kind tokKind
	text string
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '.' }

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			toks = append(toks, token{tokNum, s[i:j]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			for j+1 < len(s) && s[j] == '-' && isIdentStart(s[j+1]) {
				j++
				for j < len(s) && isIdentChar(s[j]) {
					j++
				}
			}
			toks = append(toks, token{tokName, s[i:j]})
			i = j
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, errors.New("unterminated quoted name")
			}
			toks = append(toks, token{tokQuoted, b.String()})
			i = j + 1
		default:
			op := string(c)
			if (c == '*' || c == '/') && i+1 < len(s) && s[i+1] == c {
				op += op
			}
			if !strings.Contains("+-*/%(),", string(c)) {
				return nil, fmt.Errorf("unexpected %q", c)
			}
			toks = append(toks, token{tokOp, op})
			i += len(op)
		}
	}
	return toks, nil
}

// pval is a parsed value: num/den, where den is nil for an integer and
// a true division (allowed only under floor and ceiling) sets it.
type pval struct{ num, den *Expr }

func (v pval) integer() (*Expr, error) {
	if v.num == nil {
		return nil, errors.New("the expression overflows")
	}
	if v.den == nil {
		return v.num, nil
	}
	if q := v.num.ExactDiv(v.den); q != nil {
		return q, nil
	}
	return nil, fmt.Errorf("%s/%s is not an integer", v.num, v.den)
}

func (v pval) denom() *Expr {
	if v.den == nil {
		return Const(1)
	}
	return v.den
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) peek(op string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == tokOp && p.toks[p.pos].text == op
}

func (p *parser) expect(op string) error {
	if !p.peek(op) {
		return fmt.Errorf("expected %q", op)
	}
	p.pos++
	return nil
}

func (p *parser) sum() (pval, error) {
	v, err := p.product()
	if err != nil {
		return v, err
	}
	for p.peek("+") || p.peek("-") {
		neg := p.peek("-")
		p.pos++
		w, err := p.product()
		if err != nil {
			return v, err
		}
		if neg {
			w.num = w.num.Neg()
		}
		// a/b + c/d = (a*d + c*b)/(b*d)
		v = pval{v.num.Mul(w.denom()).Add(w.num.Mul(v.denom())), mulDen(v.den, w.den)}
	}
	return v, nil
}

func mulDen(a, b *Expr) *Expr {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return a.Mul(b)
}

func (p *parser) product() (pval, error) {
	v, err := p.unary()
	if err != nil {
		return v, err
	}
	for p.peek("*") || p.peek("//") || p.peek("/") || p.peek("%") {
		op := p.toks[p.pos].text
		p.pos++
		w, err := p.unary()
		if err != nil {
			return v, err
		}
		switch op {
		case "*":
			v = pval{v.num.Mul(w.num), mulDen(v.den, w.den)}
		case "/":
			v = pval{v.num.Mul(w.denom()), v.denom().Mul(w.num)}
		case "//":
			q, err := floorOf(pval{v.num.Mul(w.denom()), v.denom().Mul(w.num)})
			if err != nil {
				return v, err
			}
			v = pval{q, nil}
		case "%":
			a, err1 := v.integer()
			b, err2 := w.integer()
			if err := errors.Join(err1, err2); err != nil {
				return v, err
			}
			m, err := a.Mod(b)
			if err != nil {
				return v, err
			}
			v = pval{m, nil}
		}
	}
	return v, nil
}

func floorOf(v pval) (*Expr, error) {
	if v.den == nil {
		return v.num, nil
	}
	q, err := v.num.FloorDiv(v.den)
	if err == nil && q == nil {
		err = errors.New("the expression overflows")
	}
	return q, err
}

func ceilOf(v pval) (*Expr, error) {
	if v.den == nil {
		return v.num, nil
	}
	q, err := v.num.CeilDiv(v.den)
	if err == nil && q == nil {
		err = errors.New("the expression overflows")
	}
	return q, err
}

func (p *parser) unary() (pval, error) {
	switch {
	case p.peek("+"):
		p.pos++
		return p.unary()
	case p.peek("-"):
		p.pos++
		// -9223372036854775808 is an int64 although its magnitude is not.
		if p.pos < len(p.toks) && p.toks[p.pos].kind == tokNum && p.toks[p.pos].text == "9223372036854775808" &&
			!(p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "**") {
			p.pos++
			return pval{Const(-1 << 63), nil}, nil
		}
		v, err := p.unary()
		v.num = v.num.Neg()
		return v, err
	}
	return p.power()
}

func (p *parser) power() (pval, error) {
	v, err := p.primary()
	if err != nil || !p.peek("**") {
		return v, err
	}
	p.pos++
	w, err := p.unary()
	if err != nil {
		return v, err
	}
	ex, err := w.integer()
	if err != nil {
		return v, err
	}
	n, ok := ex.Value()
	if !ok || n < 0 || n > 64 {
		return v, fmt.Errorf("exponent %s is not a small non-negative integer", ex)
	}
	out := pval{Const(1), nil}
	for range n {
		out = pval{out.num.Mul(v.num), mulDen(out.den, v.den)}
	}
	return out, nil
}

func (p *parser) primary() (pval, error) {
	if p.pos == len(p.toks) {
		return pval{}, errors.New("unexpected end")
	}
	t := p.toks[p.pos]
	p.pos++
	switch t.kind {
	case tokNum:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return pval{}, fmt.Errorf("number %s is out of range", t.text)
		}
		return pval{Const(n), nil}, nil
	case tokQuoted:
		return pval{Sym(t.text), nil}, nil
	case tokName:
		if p.peek("(") {
			return p.call(t.text)
		}
		return pval{Sym(t.text), nil}, nil
	}
	if t.text != "(" {
		return pval{}, fmt.Errorf("unexpected %q", t.text)
	}
	v, err := p.sum()
	if err != nil {
		return v, err
	}
	return v, p.expect(")")
}

func (p *parser) call(name string) (pval, error) {
	p.pos++ // (
	var args []pval
	for !p.peek(")") {
		if len(args) > 0 {
			if err := p.expect(","); err != nil {
				return pval{}, err
			}
		}
		v, err := p.sum()
		if err != nil {
			return pval{}, err
		}
		args = append(args, v)
	}
	p.pos++ // )
	ints := func(want int) ([]*Expr, error) {
		if want >= 0 && len(args) != want || len(args) == 0 {
			return nil, fmt.Errorf("%s takes %d arguments, got %d", name, want, len(args))
		}
		out := make([]*Expr, len(args))
		for i, a := range args {
			var err error
			if out[i], err = a.integer(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	var (
		out *Expr
		err error
	)
	switch name {
	case "min", "Min", "max", "Max":
		var xs []*Expr
		if xs, err = ints(-1); err == nil {
			if name[1:] == "in" {
				out = Min(xs...)
			} else {
				out = Max(xs...)
			}
		}
	case "floor", "ceiling", "ceil":
		if len(args) != 1 {
			return pval{}, fmt.Errorf("%s takes 1 argument, got %d", name, len(args))
		}
		if name == "floor" {
			out, err = floorOf(args[0])
		} else {
			out, err = ceilOf(args[0])
		}
	case "FloorDiv", "CeilDiv", "Mod":
		var xs []*Expr
		if xs, err = ints(2); err == nil {
			switch name {
			case "FloorDiv":
				out, err = xs[0].FloorDiv(xs[1])
			case "CeilDiv":
				out, err = xs[0].CeilDiv(xs[1])
			default:
				out, err = xs[0].Mod(xs[1])
			}
		}
	default:
		return pval{}, fmt.Errorf("unknown function %s", name)
	}
	if err == nil && out == nil {
		err = errors.New("the expression overflows")
	}
	return pval{out, nil}, err
}
