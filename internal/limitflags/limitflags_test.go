package limitflags

import (
	"flag"
	"io"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"17179869184", 16 << 30}, {"16G", 16 << 30}, {"16GiB", 16 << 30}, {"16gb", 16 << 30},
		{"512K", 512 << 10}, {"3 MiB", 3 << 20}, {"2T", 2 << 40}, {"1", 1},
	} {
		if got, err := ParseBytes(c.in); err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "G", "1.5G", "16X", "9000000000T", "NaN"} {
		if got, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Add(fs, All...)
	if f.Limits() != ir.DefaultLimits() {
		t.Errorf("defaults: %+v", f.Limits())
	}
	if got := fs.Lookup("max-tensor-bytes").DefValue; got != "16G" {
		t.Errorf("--max-tensor-bytes shows its default as %q", got)
	}
	if err := fs.Parse([]string{"--max-tensor-bytes", "64G", "--max-arena-bytes=1T", "--max-file-bytes", "8G", "--max-nesting", "200", "--max-loop-iterations", "1000"}); err != nil {
		t.Fatal(err)
	}
	want := ir.Limits{MaxTensorBytes: 64 << 30, MaxArenaBytes: 1 << 40, MaxFileBytes: 8 << 30, MaxNesting: 200, MaxLoopIterations: 1000}
	if f.Limits() != want {
		t.Errorf("got %+v, want %+v", f.Limits(), want)
	}
	for _, bad := range [][]string{{"--max-nesting", "0"}, {"--max-loop-iterations", "-3"}, {"--max-tensor-bytes", "-1"}, {"--max-file-bytes", "lots"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		Add(fs, All...)
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
