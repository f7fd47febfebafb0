package ops

import (
	"fmt"
	"math"
)

// Gelu (opset 20): x * Phi(x), with Phi the standard normal CDF, or with
// approximate="tanh" its tanh approximation.

var geluOps = unaryRows(unaryOp{name: "Gelu", since: 20, types: floatTypes,
	attrs: []AttrDef{defString("approximate", "none")}, f: gelu})

func init() {
	// The unary row maps elements; an unknown approximate is refused first.
	for _, s := range geluOps {
		run := s.Run
		s.Infer = func(c *InferContext) error {
			if _, err := geluFunc(c.String("approximate")); err != nil {
				return c.Errorf("%v", err)
			}
			return SameAsInput(c)
		}
		s.Run = func(c *KernelContext) error {
			if _, err := geluFunc(c.String("approximate")); err != nil {
				return c.Errorf("%v", err)
			}
			return run(c)
		}
	}
	register(geluOps)
}

// gelu is the unary row's map; Infer and Run have checked approximate.
func gelu(a attrs) func(float64) float64 {
	f, err := geluFunc(a.String("approximate"))
	if err != nil {
		return func(float64) float64 { return math.NaN() }
	}
	return f
}

func geluFunc(approximate string) (func(float64) float64, error) {
	switch approximate {
	case "none":
		return geluExact, nil
	case "tanh":
		return geluTanh, nil
	}
	return nil, fmt.Errorf("approximate must be \"none\" or \"tanh\", is %q", approximate)
}

func geluExact(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}
