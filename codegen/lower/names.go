package lower

import "strings"

// SymbolName makes s (a node or op name) part of a symbol: letters,
// digits and underscores, at most 40 bytes, so that generated function
// names stay valid and short in every assembler.
func SymbolName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() > 40 {
		return b.String()[:40]
	}
	return b.String()
}
