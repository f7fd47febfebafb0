package engine

import (
	"errors"
	"fmt"
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// ErrBadMetadata is a metadata section that is well formed JSON but not a
// description of an engine that could run.
var ErrBadMetadata = errors.New("invalid engine metadata")

// Validate checks the metadata on its own: names, dtypes and shapes are
// well formed, every io slot is bound exactly once, there is at least one
// output, and sizes are not negative. It cannot tell whether the metadata
// matches the code; the loader compares it with the code's own record.
func (m *Metadata) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadMetadata, fmt.Sprintf(format, args...))
	}
	if !printable(m.KilnVersion, maxVersionLen) {
		return bad("the kiln version is not a short printable ASCII string")
	}
	if m.Precision != "fp32" && m.Precision != "int8" {
		return bad("precision %s: want fp32 or int8", quote(m.Precision))
	}
	if !validTriple(m.Target.Triple) {
		return bad("target triple %s is not a triple", quote(m.Target.Triple))
	}
	for _, f := range m.Target.Features {
		if !printable(f, 32) {
			return bad("a CPU feature name is not printable ASCII")
		}
	}
	if len(m.Outputs) == 0 {
		return bad("the engine has no outputs")
	}
	slots := len(m.Inputs) + len(m.Outputs)
	bound := make([]string, slots)
	names := map[string]bool{}
	for i, b := range append(append([]Binding{}, m.Inputs...), m.Outputs...) {
		kind := "input"
		if i >= len(m.Inputs) {
			kind = "output"
		}
		if !validName(b.Name) {
			return bad("%s %d has name %s (want a non-empty name without control characters)", kind, i, quote(b.Name))
		}
		what := fmt.Sprintf("%s %q", kind, b.Name)
		if names[b.Name] {
			return bad("%s is bound twice", what)
		}
		names[b.Name] = true
		if !printable(b.DType, 32) {
			return bad("%s has dtype %s", what, quote(b.DType))
		}
		if _, err := Elements(b.Shape); err != nil {
			return bad("%s: %v", what, err)
		}
		if b.Index < 0 || b.Index >= slots {
			return bad("%s has io index %d, out of range: the engine binds %d slots (0 to %d)", what, b.Index, slots, slots-1)
		}
		if prev := bound[b.Index]; prev != "" {
			return bad("%s and %s both have io index %d", prev, what, b.Index)
		}
		bound[b.Index] = what
		if err := b.checkDebug(i < len(m.Inputs)); err != nil {
			return bad("%s: %v", what, err)
		}
		if err := b.checkDefault(i < len(m.Inputs)); err != nil {
			return bad("%s: %v", what, err)
		}
	}
	for _, name := range m.Folded {
		if !validName(name) || names[name] {
			return bad("folded input %s is malformed or also bound", quote(name))
		}
		names[name] = true
	}
	for _, p := range m.Pinned {
		if !validName(p.Name) || names[p.Name] {
			return bad("pinned input %s is malformed or also bound", quote(p.Name))
		}
		names[p.Name] = true
		if !printable(p.DType, 32) {
			return bad("pinned input %q has dtype %s", p.Name, quote(p.DType))
		}
		if _, err := Elements(p.Shape); err != nil {
			return bad("pinned input %q: %v", p.Name, err)
		}
	}
	syms := map[string]bool{}
	for _, sy := range m.Symbols {
		if !validName(sy.Name) || !isSymbol(sy.Name) || syms[sy.Name] {
			return bad("symbol %s is malformed or repeated", quote(sy.Name))
		}
		syms[sy.Name] = true
		lo := int64(1)
		if sy.Data {
			lo = 0 // a count of found elements may be none
		}
		if sy.Min < lo || sy.Min > sy.Opt || sy.Opt > sy.Max {
			return bad("symbol %q has the range %d..%d (opt %d): want %d <= min <= opt <= max", sy.Name, sy.Min, sy.Max, sy.Opt, lo)
		}
	}
	maxima := MaxValues(m.Symbols)
	for _, b := range append(append([]Binding{}, m.Inputs...), m.Outputs...) {
		if len(b.Dims) == 0 {
			continue
		}
		if len(b.Dims) != len(b.Shape) {
			return bad("binding %q has %d dim names for %d dims", b.Name, len(b.Dims), len(b.Shape))
		}
		at, err := b.DimsAt(m.Symbols, maxima)
		if err != nil {
			return bad("%v", err)
		}
		for d := range at {
			if at[d] != b.Shape[d] {
				return bad("binding %q dim %d (%s) is %d at the symbols' maxima, but its shape says %d", b.Name, d, b.Dims[d], at[d], b.Shape[d])
			}
		}
	}
	if m.ArenaBytes < 0 {
		return bad("arena_bytes is negative (%d)", m.ArenaBytes)
	}
	if m.TensorBytes < 0 {
		return bad("tensor_bytes is negative (%d)", m.TensorBytes)
	}
	if m.MaxThreads < 0 {
		return bad("max_threads is negative (%d)", m.MaxThreads)
	}
	return nil
}

// Elements returns a shape's element count, refusing negative dims and a
// count that overflows int64.
func Elements(shape []int64) (int64, error) {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dim", shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<63-1 {
			return 0, fmt.Errorf("shape %v has more than 2^63 elements", shape)
		}
		n = lo
	}
	return int64(n), nil
}

// MaxNameLen is the longest name, in bytes, an engine binds.
const MaxNameLen = 4096

// CheckName says why s cannot name an engine's input, output, pinned
// input, symbol or debug value, or returns nil: a name is 1 to MaxNameLen
// bytes of UTF-8 without control characters, so it prints safely in a
// message and JSON keeps it as it is (it would turn invalid UTF-8 into
// U+FFFD, two distinct names into one). The loader refuses an engine with
// any other (Validate), and cc build a model that would make one.
func CheckName(s string) error {
	const rule = "names are 1 to 4096 bytes of UTF-8 without control characters"
	switch {
	case s == "":
		return fmt.Errorf("the name is empty (%s)", rule)
	case len(s) > MaxNameLen:
		return fmt.Errorf("the name is %d bytes long (%s)", len(s), rule)
	case !utf8.ValidString(s):
		return fmt.Errorf("the name is not valid UTF-8 (%s)", rule)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("the name holds the control character %U (%s)", r, rule)
		}
	}
	return nil
}

// validName accepts a binding name that prints safely in a message.
func validName(s string) bool { return CheckName(s) == nil }

// quote quotes s for a message if it prints safely, else describes it.
func quote(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) <= 64 && validName(s) {
		return fmt.Sprintf("%q", s)
	}
	return "(unprintable or overlong)"
}

// checkDefault checks a binding's default value: only inputs have one,
// and its shape is static (the runtime checks its size against the
// dtype's).
func (b Binding) checkDefault(input bool) error {
	switch {
	case b.Default == nil:
		return nil
	case !input:
		return fmt.Errorf("an output cannot have a default value")
	case b.Dynamic():
		return fmt.Errorf("an input with a default value has dynamic dims")
	}
	return nil
}
