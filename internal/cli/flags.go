package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
)

// Checked numeric flags. A value outside the flag's range — NaN, ±Inf, a
// negative count, zero where zero means nothing — is refused when the
// flags are parsed, as a usage error naming the flag and the value:
//
//	cc build: invalid value "7" for flag -O: ...
//
// The help shows a flag's argument by the name in backquotes in its usage
// ("`N` tests at once"); without one it shows "value".

// PositiveFloat declares a float64 flag that must be finite and above 0.
func PositiveFloat(fs *flag.FlagSet, name string, value float64, usage string) *float64 {
	p := new(float64)
	fs.Var(newFloat(p, value, false), name, usage)
	return p
}

// NonNegativeFloat declares a float64 flag that must be finite and at
// least 0.
func NonNegativeFloat(fs *flag.FlagSet, name string, value float64, usage string) *float64 {
	p := new(float64)
	NonNegativeFloatVar(fs, p, name, value, usage)
	return p
}

// NonNegativeFloatVar is NonNegativeFloat storing into p.
func NonNegativeFloatVar(fs *flag.FlagSet, p *float64, name string, value float64, usage string) {
	fs.Var(newFloat(p, value, true), name, usage)
}

// PositiveInt declares an int flag that must be at least 1. Its default
// may be 0, standing for "not given".
func PositiveInt(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	fs.Var(newInt(p, value, 1), name, usage)
	return p
}

// PositiveIntVar is PositiveInt storing into p.
func PositiveIntVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	fs.Var(newInt(p, value, 1), name, usage)
}

// NonNegativeInt declares an int flag that must be at least 0.
func NonNegativeInt(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	NonNegativeIntVar(fs, p, name, value, usage)
	return p
}

// NonNegativeIntVar is NonNegativeInt storing into p.
func NonNegativeIntVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	fs.Var(newInt(p, value, 0), name, usage)
}

// OneOfInt declares an int flag whose value must be one of allowed.
func OneOfInt(fs *flag.FlagSet, name string, value int, usage string, allowed ...int) *int {
	p := new(int)
	*p = value // before Var, which records the default
	fs.Var(&intValue{p: p, allowed: allowed}, name, usage)
	return p
}

type floatValue struct {
	p      *float64
	zeroOK bool
}

func newFloat(p *float64, value float64, zeroOK bool) *floatValue {
	*p = value
	return &floatValue{p: p, zeroOK: zeroOK}
}

func (f *floatValue) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f *floatValue) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return errors.New("not a number")
	}
	want := "a finite number above 0"
	if f.zeroOK {
		want = "a finite number, 0 or more"
	}
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v == 0 && !f.zeroOK {
		return fmt.Errorf("want %s", want)
	}
	*f.p = v
	return nil
}

type intValue struct {
	p       *int
	min     int
	allowed []int // when set, the only values taken
}

func newInt(p *int, value, min int) *intValue {
	*p = value
	return &intValue{p: p, min: min}
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errors.New("out of range")
	case err != nil:
		return errors.New("not an integer")
	}
	if v.allowed != nil {
		for _, a := range v.allowed {
			if int(n) == a {
				*v.p = a
				return nil
			}
		}
		var names []string
		for _, a := range v.allowed {
			names = append(names, strconv.Itoa(a))
		}
		return fmt.Errorf("want %s", strings.Join(names, " or "))
	}
	if int(n) < v.min {
		return fmt.Errorf("want an integer, %d or more", v.min)
	}
	*v.p = int(n)
	return nil
}

// MaxThreads is the most threads a --threads (or --jobs) flag takes: four
// per core, the cap runtime.MaxThreads applies too (cli does not link the
// runtime). More only adds switching; tens of thousands exhaust the
// system's threads.
func MaxThreads() int { return 4 * runtime.NumCPU() }

// ClampThreads caps a --threads-like flag's value n at MaxThreads, saying
// so in one line on stderr.
func (env *Env) ClampThreads(flagName string, n int) int {
	if limit := MaxThreads(); n > limit {
		env.Warnf("%s %d is more than 4 per core (%d cores here): using %d", flagName, n, runtime.NumCPU(), limit)
		return limit
	}
	return n
}

// Warnf prints a warning on stderr: "tool: warning: ...".
func (env *Env) Warnf(format string, args ...any) {
	name := env.tool
	if name == "" {
		name = "kiln"
	}
	fmt.Fprintf(env.Stderr, "%s: warning: %s\n", name, fmt.Sprintf(format, args...))
}

// WasSet reports whether the flag name was given on the command line.
func WasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
