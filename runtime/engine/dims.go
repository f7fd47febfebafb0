package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Dynamic shapes. An engine's symbols are the dims its inputs leave to run
// time, each with the range it was compiled for; a binding's Dims name,
// for each dim, the symbol (or expression over symbols) it is, and its
// Shape holds the dims at the symbols' maxima (what the code's buffers are
// sized for). The runtime finds each symbol's value in the inputs' shapes
// and passes the values to the code in the io slot after the outputs.

// Symbol is a dynamic dim and the sizes the engine accepts for it: Min to
// Max; Opt is the size the build measured its choices at.
//
// A Data symbol is a dim the data decides (how many elements NonZero
// finds): no input gives it; the run computes it, 0 to Max, and writes it
// to the dims table, and the outputs' shapes over it are known after the
// run.
type Symbol struct {
	Name string `json:"name"`
	Min  int64  `json:"min"`
	Opt  int64  `json:"opt"`
	Max  int64  `json:"max"`
	Data bool   `json:"data,omitempty"`
}

// Dynamic reports whether the binding has symbolic dims.
func (b Binding) Dynamic() bool {
	for _, d := range b.Dims {
		if d != "" {
			return true
		}
	}
	return false
}

// ShapeString prints the binding's shape with its symbols: float[N,3,224,224].
func (b Binding) ShapeString() string {
	parts := make([]string, len(b.Shape))
	for i, n := range b.Shape {
		parts[i] = strconv.FormatInt(n, 10)
		if i < len(b.Dims) && b.Dims[i] != "" {
			parts[i] = b.Dims[i]
		}
	}
	s := b.DType + "[" + strings.Join(parts, ",") + "]"
	for i := len(b.Kinds) - 1; i >= 0; i-- {
		s = map[int]string{2: "seq", 4: "optional"}[b.Kinds[i]] + "(" + s + ")"
	}
	return s
}

// Resolve finds each symbol's value in the inputs' shapes (shapes[i] is
// the shape given for ins[i]) and checks every input dim: static dims must
// match, symbols must agree wherever they appear and lie in their range,
// and dims that are expressions must equal their value. It returns the
// values in syms' order, a Data symbol's at its maximum.
func Resolve(syms []Symbol, ins []Binding, shapes [][]int64) ([]int64, error) {
	if len(syms) == 0 { // a static engine: every dim as compiled (the common, per-run path)
		for i, b := range ins {
			if !slices.Equal(shapes[i], b.Shape) {
				return nil, fmt.Errorf("input %q: got shape %v, the engine takes %s", b.Name, shapes[i], b.ShapeString())
			}
		}
		return nil, nil
	}
	env := map[string]int64{}
	where := map[string]string{}
	for i, b := range ins {
		got := shapes[i]
		if len(got) != len(b.Shape) {
			return nil, fmt.Errorf("input %q: got rank %d %v, the engine takes %s", b.Name, len(got), got, b.ShapeString())
		}
		for d, n := range got {
			name := ""
			if d < len(b.Dims) {
				name = b.Dims[d]
			}
			switch {
			case name == "":
				if n != b.Shape[d] {
					return nil, fmt.Errorf("input %q: got shape %v, the engine takes %s (dim %d differs)", b.Name, got, b.ShapeString(), d)
				}
			case isSymbol(name):
				if v, ok := env[name]; ok && v != n {
					return nil, fmt.Errorf("input %q: dim %d (%s) is %d where %s gave %s = %d", b.Name, d, name, n, where[name], name, v)
				}
				env[name], where[name] = n, fmt.Sprintf("input %q dim %d", b.Name, d)
			}
		}
	}
	vals := make([]int64, len(syms))
	for i, s := range syms {
		v, ok := env[s.Name]
		if s.Data {
			if ok {
				return nil, fmt.Errorf("%s: dim %s is one the engine computes from the data, which no input may give", where[s.Name], s.Name)
			}
			vals[i] = s.Max // the run writes its value; memory is for the most
			continue
		}
		if !ok {
			return nil, fmt.Errorf("no input shape gives the dynamic dim %s", s.Name)
		}
		if v < s.Min || v > s.Max {
			return nil, fmt.Errorf("%s: dim %s is %d, the engine takes %d to %d (rebuild with cc build --min/--max to change the range)", where[s.Name], s.Name, v, s.Min, s.Max)
		}
		vals[i] = v
	}
	// Dims that are expressions over the symbols must agree with them.
	for i, b := range ins {
		want, err := b.DimsAt(syms, vals)
		if err != nil {
			return nil, err
		}
		for d, n := range shapes[i] {
			if n != want[d] {
				return nil, fmt.Errorf("input %q: dim %d (%s) is %d, want %d", b.Name, d, b.Dims[d], n, want[d])
			}
		}
	}
	return vals, nil
}

// DimsAt returns the binding's shape for the symbols' values (the
// binding's own Shape, not a copy, when it is static).
func (b Binding) DimsAt(syms []Symbol, vals []int64) ([]int64, error) {
	if !b.Dynamic() {
		return b.Shape, nil
	}
	out := append([]int64{}, b.Shape...)
	env := make(map[string]int64, len(syms))
	for i, s := range syms {
		env[s.Name] = vals[i]
	}
	for d, name := range b.Dims {
		if name == "" {
			continue
		}
		v, err := evalDim(name, env)
		if err != nil {
			return nil, fmt.Errorf("binding %q dim %d: %v", b.Name, d, err)
		}
		out[d] = v
	}
	return out, nil
}

// MaxValues are the symbols' maxima, in order.
func MaxValues(syms []Symbol) []int64 {
	out := make([]int64, len(syms))
	for i, s := range syms {
		out[i] = s.Max
	}
	return out
}

// OptValues are the sizes the engine was tuned at, in order.
func OptValues(syms []Symbol) []int64 {
	out := make([]int64, len(syms))
	for i, s := range syms {
		out[i] = s.Opt
	}
	return out
}

// isSymbol reports whether a dim's name is one symbol (not an
// expression over symbols).
func isSymbol(name string) bool {
	e, err := dimexpr.Parse(name)
	if err != nil {
		return false
	}
	_, ok := e.Symbol()
	return ok
}

// evalDim evaluates a dim's name, a dimexpr expression.
func evalDim(name string, env map[string]int64) (int64, error) {
	e, err := dimexpr.Parse(name)
	if err != nil {
		return 0, err
	}
	return e.Eval(env)
}
