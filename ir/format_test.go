package ir

import (
	"strings"
	"testing"
)

func TestFormatListBounded(t *testing.T) {
	if got := FormatList([]int64{1, 2, 3}); got != "[1 2 3]" {
		t.Errorf("short list: %q, want %%v's [1 2 3]", got)
	}
	long := make([]int64, 1_000_000)
	for i := range long {
		long[i] = int64(i)
	}
	got := FormatList(long)
	if want := "[0 1 2 3 4 5 6 7 …] (1000000 entries)"; got != want {
		t.Errorf("long list: %q, want %q", got, want)
	}
}

func TestQuoteName(t *testing.T) {
	cases := map[string]string{
		"x":                           `"x"`,
		"a\nb":                        `"a\nb"`,
		"\x1b[31mred":                 `"\x1b[31mred"`,
		"\xff\xfe":                    `"\xff\xfe"`,
		"é" + strings.Repeat("a", 70): `"é` + strings.Repeat("a", 62) + `"… (72 bytes)`,
	}
	for name, want := range cases {
		if got := QuoteName(name); got != want {
			t.Errorf("QuoteName(%q) = %s, want %s", name, got, want)
		}
	}
}
