package dimexpr

import (
	"regexp"
	"strconv"
	"strings"
)

// identRE is the names the parser reads unquoted: identifier characters,
// dots, and hyphens between words ("seq-len"; a hyphen before a digit or a
// space is subtraction: "N-1" and "N - 1" are both N minus 1).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*(-[A-Za-z_][A-Za-z0-9_.]*)*$`)

func quoteName(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

func (a *atom) print() string {
	switch a.kind {
	case symAtom:
		if identRE.MatchString(a.name) {
			return a.name
		}
		return quoteName(a.name)
	case floorAtom:
		num := inner(a.num)
		if len(a.num.terms) > 1 {
			num = "(" + num + ")"
		}
		return num + "//" + strconv.FormatInt(a.den, 10)
	}
	args := make([]string, len(a.args))
	for i, x := range a.args {
		args[i] = inner(x)
	}
	name := "min("
	if a.kind == maxAtom {
		name = "max("
	}
	return name + strings.Join(args, ", ") + ")"
}

// inner prints x inside a larger expression: a lone symbol that is not an
// identifier is quoted even where, alone, it would print as it is (a
// dim_param "1/10" in "1/10"//10 would otherwise read back as 1/10//10).
func inner(x *Expr) string {
	if a, ok := loneAtom(x); ok && a.kind == symAtom && !identRE.MatchString(a.name) {
		return quoteName(a.name)
	}
	return x.str
}

// printTerm prints |coef|*mono; bare says the term stands alone without a
// sign before it, so a lone floor division needs no parentheses.
func printTerm(coef uint64, mono []factor, bare bool) string {
	if len(mono) == 0 {
		return strconv.FormatUint(coef, 10)
	}
	var parts []string
	if coef != 1 {
		parts = append(parts, strconv.FormatUint(coef, 10))
	}
	alone := coef == 1 && len(mono) == 1 && mono[0].pow == 1 && bare
	for _, f := range mono {
		s := f.a.key
		if f.a.kind == floorAtom && !alone {
			s = "(" + s + ")"
		}
		if f.pow > 1 {
			s += "**" + strconv.Itoa(f.pow)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "*")
}

func magnitude(c int64) uint64 {
	if c < 0 {
		return uint64(-c) // also right for MinInt64
	}
	return uint64(c)
}

func (e *Expr) print() string {
	if len(e.terms) == 0 {
		return "0"
	}
	// A lone symbol whose name the parser would not read back as that
	// symbol alone is quoted; one it would (an identifier, or text that is
	// not an expression such as "batch size") prints as it is, so ONNX
	// dim_params keep their spelling.
	if a, ok := loneAtom(e); ok && a.kind == symAtom {
		if identRE.MatchString(a.name) {
			return a.name
		}
		if _, err := parseStrict(a.name); err != nil && a.name != "" {
			return a.name
		}
		return quoteName(a.name)
	}
	var b strings.Builder
	for i, t := range e.terms {
		switch {
		case i == 0 && t.coef < 0:
			b.WriteString("-")
			b.WriteString(printTerm(magnitude(t.coef), t.mono, false))
		case i == 0:
			b.WriteString(printTerm(magnitude(t.coef), t.mono, true))
		case t.coef < 0:
			b.WriteString(" - ")
			b.WriteString(printTerm(magnitude(t.coef), t.mono, true))
		default:
			b.WriteString(" + ")
			b.WriteString(printTerm(magnitude(t.coef), t.mono, true))
		}
	}
	return b.String()
}
