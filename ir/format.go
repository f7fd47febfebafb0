package ir

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// listShown is how many entries of a list a message shows.
const listShown = 8

// FormatList prints v as %v does, for a message: a list longer than 8
// entries shows its first 8, "…" and its length, so an error about a
// 10^7-entry attribute stays one short line.
func FormatList[T any](v []T) string {
	if len(v) <= listShown {
		return fmt.Sprint(v)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v[:listShown] {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, x)
	}
	fmt.Fprintf(&b, " …] (%d entries)", len(v))
	return b.String()
}

// nameShown is how many bytes of a name QuoteName shows.
const nameShown = 64

// QuoteName quotes a name for a message or a listing as %q does (control
// characters and invalid UTF-8 escaped, never written raw to a terminal),
// shortening one over 64 bytes to its start, "…" and its length.
func QuoteName(s string) string {
	if len(s) <= nameShown {
		return fmt.Sprintf("%q", s)
	}
	cut := nameShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}
