// Package limitflags adds the flags that raise (or lower) ir.Limits to a
// command: --max-tensor-bytes, --max-arena-bytes, --max-file-bytes,
// --max-nesting and --max-loop-iterations. Byte counts take a binary suffix: 64G is 64 GiB.
package limitflags

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Limit names one of ir.Limits' fields, as its flag.
type Limit string

// The limits a command can take flags for.
const (
	Tensor  Limit = "max-tensor-bytes"
	Arena   Limit = "max-arena-bytes"
	File    Limit = "max-file-bytes"
	Nesting Limit = "max-nesting"
	Loop    Limit = "max-loop-iterations"
)

// All is every limit, for commands that read models and build engines.
var All = []Limit{Tensor, Arena, File, Nesting, Loop}

// Flags holds the values of the flags Add defined.
type Flags struct {
	lim ir.Limits
}

// Add defines a flag for each limit named on fs, defaulting to
// ir.DefaultLimits, and returns where their values land.
func Add(fs *flag.FlagSet, limits ...Limit) *Flags {
	f := &Flags{lim: ir.DefaultLimits()}
	for _, l := range limits {
		switch l {
		case Tensor:
			fs.Var((*byteCount)(&f.lim.MaxTensorBytes), string(l), "the largest tensor (input, output, weight or intermediate) accepted, in `bytes`; a K, M, G or T suffix is binary (see docs/limits.md)")
		case Arena:
			fs.Var((*byteCount)(&f.lim.MaxArenaBytes), string(l), "the largest activation arena an engine may need, in `bytes` (K, M, G, T suffixes)")
		case File:
			fs.Var((*byteCount)(&f.lim.MaxFileBytes), string(l), "the largest model or tensor file read, in `bytes` (K, M, G, T suffixes), checked before reading")
		case Nesting:
			fs.Var((*levels)(&f.lim.MaxNesting), string(l), "how deeply graphs (If/Loop bodies) and types (seq(...)) may nest in a model, in `levels`")
		case Loop:
			fs.Var((*iterations)(&f.lim.MaxLoopIterations), string(l), "the most `iterations` one Loop node may run in the reference executor")
		default:
			panic(fmt.Sprintf("limitflags: unknown limit %q", l))
		}
	}
	return f
}

// Limits returns the limits the flags set (the defaults where not given).
func (f *Flags) Limits() ir.Limits { return f.lim }

// byteCount is a positive byte count with an optional binary suffix.
type byteCount int64

var suffixes = []struct {
	name  string
	shift uint
}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}}

func (b *byteCount) String() string {
	if b == nil || *b == 0 {
		return "0"
	}
	for _, s := range suffixes {
		if unit := int64(1) << s.shift; int64(*b)%unit == 0 {
			return strconv.FormatInt(int64(*b)/unit, 10) + s.name
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

// Set parses "17179869184", "16G", "16GiB" or "16GB" (all binary).
func (b *byteCount) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = byteCount(n)
	return nil
}

// ParseBytes reads a positive byte count: digits, optionally followed by
// K, M, G or T (binary: 1K is 1024), which may be spelled KiB or KB.
func ParseBytes(s string) (int64, error) {
	num, shift := splitSuffix(strings.TrimSpace(s))
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a byte count (digits, with an optional K, M, G or T suffix)", s)
	case n <= 0:
		return 0, fmt.Errorf("%q: a limit must be positive", s)
	case n > math.MaxInt64>>shift:
		return 0, fmt.Errorf("%q is more than 2^63 bytes", s)
	}
	return n << shift, nil
}

// splitSuffix splits a unit suffix off s: the digits and the unit's shift.
func splitSuffix(s string) (string, uint) {
	upper := strings.ToUpper(s)
	for _, sfx := range suffixes {
		for _, spelling := range []string{sfx.name + "IB", sfx.name + "B", sfx.name} {
			if strings.HasSuffix(upper, spelling) {
				return strings.TrimSpace(s[:len(s)-len(spelling)]), sfx.shift
			}
		}
	}
	return s, 0
}

// levels is a positive nesting depth.
type levels int

func (l *levels) String() string {
	if l == nil {
		return "0"
	}
	return strconv.Itoa(int(*l))
}

func (l *levels) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return fmt.Errorf("%q: want a positive number of levels", s)
	}
	*l = levels(n)
	return nil
}

// iterations is a positive iteration count.
type iterations int64

func (n *iterations) String() string {
	if n == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*n), 10)
}

func (n *iterations) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q: want a positive number of iterations", s)
	}
	*n = iterations(v)
	return nil
}
