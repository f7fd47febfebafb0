package autodiff

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// The arithmetic and math ops (ir/ops elementwise_math.go): each input's
// gradient is dy times the partial derivative at the same point, summed
// back over the axes broadcasting stretched (SumTo).

func init() {
	define("", map[string]Rule{
		"Add": binary(func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value) { return dy, dy }),
		"Sub": binary(func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value) { return dy, c.Neg(dy) }),
		"Mul": binary(func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value) {
			return c.Mul(dy, b), c.Mul(dy, a)
		}),
		"Div": binary(func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value) {
			return c.Div(dy, b), c.Neg(c.Div(c.Mul(dy, y), b))
		}),
		// d(a^b)/da = b·a^(b-1); d/db = a^b·ln a (defined for a > 0).
		"Pow": binary(func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value) {
			var da, db *ir.Value
			if c.Need[0] {
				bm1 := c.Sub(b, c.Scalar(b.Type.Elem, 1))
				da = c.Mul(dy, c.Mul(c.cast(b, a), c.Op("Pow", []*ir.Value{a, bm1})))
			}
			if c.Need[1] {
				db = c.Mul(dy, c.Mul(y, c.Op("Log", []*ir.Value{a})))
			}
			return da, db
		}),
		"Max": choose, "Min": choose,
		"Sum": variadic(1), "Mean": variadic(0),
		"Neg":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(dy) }),
		"Abs":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Sign", []*ir.Value{x})) }),
		"Sqrt":       unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(c.Mul(dy, c.k(x, 0.5)), y) }),
		"Exp":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, y) }),
		"Log":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(dy, x) }),
		"Reciprocal": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(c.Mul(dy, c.Mul(y, y))) }),
		"Tanh":       unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Sub(c.k(x, 1), c.Mul(y, y))) }),
		"Sin":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Cos", []*ir.Value{x})) }),
		"Cos":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(c.Mul(dy, c.Op("Sin", []*ir.Value{x}))) }),
		"Tan": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(dy, c.Add(c.k(x, 1), c.Mul(y, y)))
		}),
		"Asin": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(dy, c.sqrt1m(x)) }),
		"Acos": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(c.Div(dy, c.sqrt1m(x))) }),
		"Atan": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Div(dy, c.Add(c.k(x, 1), c.Mul(x, x)))
		}),
		"Sinh": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Cosh", []*ir.Value{x})) }),
		"Cosh": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Sinh", []*ir.Value{x})) }),
		"Asinh": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Div(dy, c.Op("Sqrt", []*ir.Value{c.Add(c.Mul(x, x), c.k(x, 1))}))
		}),
		"Acosh": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Div(dy, c.Op("Sqrt", []*ir.Value{c.Sub(c.Mul(x, x), c.k(x, 1))}))
		}),
		"Atanh": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(dy, c.Sub(c.k(x, 1), c.Mul(x, x))) }),
		"Erf": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			g := c.Op("Exp", []*ir.Value{c.Neg(c.Mul(x, x))})
			return c.Mul(dy, c.Mul(g, c.k(x, 2/math.Sqrt(math.Pi))))
		}),
	})
	notDifferentiable("", booleanResult, "IsInf", "IsNaN")
	notDifferentiable("", "piecewise constant: its derivative is zero wherever it exists, so a loss through it cannot learn (detach the value instead)",
		"Sign", "Floor", "Ceil", "Round")
	notDifferentiable("", "an integer-valued remainder; differentiate Sub and Floor forms instead", "Mod")
}

// choose is Max's and Min's rule: the gradient goes to every input equal
// to the result (each of several tied inputs gets all of it).
func choose(c *Ctx) ([]*ir.Value, error) {
	y, dy := c.Y(0), c.DY[0]
	out := make([]*ir.Value, len(c.Node.Inputs))
	for i, x := range c.Node.Inputs {
		if !c.Need[i] {
			continue
		}
		d := c.Where(c.Op("Equal", []*ir.Value{x, y}), dy, c.k(x, 0))
		s, err := c.SumTo(d, y.Type.Shape, x)
		if err != nil {
			return nil, c.Fail("%v", err)
		}
		out[i] = s
	}
	return out, nil
}

// variadic is Sum's (scale 1) and Mean's (scale 0: 1/n) rule.
func variadic(scale float64) Rule {
	return func(c *Ctx) ([]*ir.Value, error) {
		y, dy := c.Y(0), c.DY[0]
		if scale == 0 {
			dy = c.Mul(dy, c.k(y, 1/float64(len(c.Node.Inputs))))
		}
		out := make([]*ir.Value, len(c.Node.Inputs))
		for i, x := range c.Node.Inputs {
			if !c.Need[i] {
				continue
			}
			s, err := c.SumTo(dy, y.Type.Shape, x)
			if err != nil {
				return nil, c.Fail("%v", err)
			}
			out[i] = s
		}
		return out, nil
	}
}
