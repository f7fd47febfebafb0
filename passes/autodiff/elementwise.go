package autodiff

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Elementwise ops (ir/ops elementwise*.go and activation.go): each
// input's gradient is dy times the partial derivative at the same point,
// summed back over the axes broadcasting stretched (SumTo).

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
		"Where":    whereRule,
		"Identity": func(c *Ctx) ([]*ir.Value, error) { return []*ir.Value{c.DY[0]}, nil },
		"Cast": func(c *Ctx) ([]*ir.Value, error) {
			if !c.Y(0).Type.Elem.IsFloat() {
				return nil, c.Fail("a cast to %s is not differentiable", c.Y(0).Type.Elem)
			}
			return []*ir.Value{c.Cast(c.DY[0], c.X(0).Type.Elem)}, nil
		},
		"CastLike": func(c *Ctx) ([]*ir.Value, error) {
			if !c.Y(0).Type.Elem.IsFloat() {
				return nil, c.Fail("a cast to %s is not differentiable", c.Y(0).Type.Elem)
			}
			return []*ir.Value{c.Cast(c.DY[0], c.X(0).Type.Elem), nil}, nil // the like input gives only a type
		},
		"Dropout": dropoutRule,
		"Clip":    clipRule,

		"Neg":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(dy) }),
		"Abs":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Sign", []*ir.Value{x})) }),
		"Sqrt":       unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(c.Mul(dy, c.k(x, 0.5)), y) }),
		"Exp":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, y) }),
		"Log":        unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Div(dy, x) }),
		"Reciprocal": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(c.Mul(dy, c.Mul(y, y))) }),
		"Tanh":       unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Sub(c.k(x, 1), c.Mul(y, y))) }),
		"Sigmoid": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(dy, c.Mul(y, c.Sub(c.k(x, 1), y)))
		}),
		"Sin": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Cos", []*ir.Value{x})) }),
		"Cos": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Neg(c.Mul(dy, c.Op("Sin", []*ir.Value{x}))) }),
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

		// Relu tests its output (y > 0 exactly where x > 0), so the
		// input need not live on and a Conv can fuse the Relu.
		"Relu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Where(c.gt(y, 0), dy, c.k(x, 0))
		}),
		"LeakyRelu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Where(c.gt(x, 0), dy, c.Mul(dy, c.attrK(x, "alpha")))
		}),
		"ThresholdedRelu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Where(c.Op("Greater", []*ir.Value{x, c.attrK(x, "alpha")}), dy, c.k(x, 0))
		}),
		// Elu below 0: alpha·(e^x - 1), whose derivative is y + alpha.
		"Elu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Where(c.gt(x, 0), dy, c.Mul(dy, c.Add(y, c.attrK(x, "alpha"))))
		}),
		// Selu: gamma·x above 0, gamma·alpha·(e^x - 1) at or below.
		"Selu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			ga := c.k(x, float64(c.Float("gamma"))*float64(c.Float("alpha")))
			return c.Where(c.gt(x, 0), c.Mul(dy, c.attrK(x, "gamma")), c.Mul(dy, c.Add(y, ga)))
		}),
		// Celu: x above 0, alpha·(e^(x/alpha) - 1) below.
		"Celu": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			e := c.Op("Exp", []*ir.Value{c.Div(x, c.attrK(x, "alpha"))})
			return c.Where(c.gt(x, 0), dy, c.Mul(dy, e))
		}),
		"Softplus": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.Mul(dy, c.Op("Sigmoid", []*ir.Value{x})) }),
		"Softsign": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			d := c.Add(c.k(x, 1), c.Op("Abs", []*ir.Value{x}))
			return c.Div(dy, c.Mul(d, d))
		}),
		// HardSigmoid: alpha where 0 < alpha·x + beta < 1.
		"HardSigmoid": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			z := c.Add(c.Mul(x, c.attrK(x, "alpha")), c.attrK(x, "beta"))
			inside := c.Op("And", []*ir.Value{c.gt(z, 0), c.Op("Less", []*ir.Value{z, c.k(x, 1)})})
			return c.Where(inside, c.Mul(dy, c.attrK(x, "alpha")), c.k(x, 0))
		}),
		// HardSwish = x·HardSigmoid(x; 1/6, 1/2): 0 below -3, 1 above 3,
		// x/3 + 1/2 between.
		"HardSwish": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			mid := c.Add(c.Div(x, c.k(x, 3)), c.k(x, 0.5))
			d := c.Where(c.Op("Less", []*ir.Value{x, c.k(x, -3)}), c.k(x, 0),
				c.Where(c.gt(x, 3), c.k(x, 1), mid))
			return c.Mul(dy, d)
		}),
		// Mish = x·tanh(softplus(x)): tanh(sp) + x·(1 - tanh²(sp))·sigmoid(x).
		"Mish": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			t := c.Op("Tanh", []*ir.Value{c.Op("Softplus", []*ir.Value{x})})
			s := c.Op("Sigmoid", []*ir.Value{x})
			d := c.Add(t, c.Mul(x, c.Mul(c.Sub(c.k(x, 1), c.Mul(t, t)), s)))
			return c.Mul(dy, d)
		}),
		// Shrink passes x ± bias where |x| > lambd, else 0.
		"Shrink": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			l := c.attrK(x, "lambd")
			out := c.Op("Or", []*ir.Value{c.Op("Less", []*ir.Value{x, c.Neg(l)}), c.Op("Greater", []*ir.Value{x, l})})
			return c.Where(out, dy, c.k(x, 0))
		}),
		// PRelu: slope·x below 0.
		"PRelu": func(c *Ctx) ([]*ir.Value, error) {
			x, slope, dy := c.X(0), c.X(1), c.DY[0]
			neg := c.Op("Less", []*ir.Value{x, c.k(x, 0)})
			out := make([]*ir.Value, 2)
			if c.Need[0] {
				out[0] = c.Where(neg, c.Mul(dy, slope), dy)
			}
			if c.Need[1] {
				ds, err := c.SumTo(c.Where(neg, c.Mul(dy, x), c.k(x, 0)), c.Y(0).Type.Shape, slope)
				if err != nil {
					return nil, c.Fail("%v", err)
				}
				out[1] = ds
			}
			return out, nil
		},
	})
	notDifferentiable("", "a boolean result", "And", "Or", "Xor", "Not", "Equal", "Greater", "GreaterOrEqual",
		"Less", "LessOrEqual", "IsInf", "IsNaN")
	notDifferentiable("", "piecewise constant: its derivative is zero wherever it exists, so a loss through it cannot learn (detach the value instead)",
		"Sign", "Floor", "Ceil", "Round")
	notDifferentiable("", "an integer-valued remainder; differentiate Sub and Floor forms instead", "Mod")
}

// k is a scalar constant of x's element type.
func (c *Ctx) k(x *ir.Value, v float64) *ir.Value { return c.Scalar(x.Type.Elem, v) }

// attrK is a float attribute (or its default) as a constant of x's type.
func (c *Ctx) attrK(x *ir.Value, name string) *ir.Value { return c.k(x, float64(c.Float(name))) }

// gt is x > v.
func (c *Ctx) gt(x *ir.Value, v float64) *ir.Value {
	return c.Op("Greater", []*ir.Value{x, c.k(x, v)})
}

// sqrt1m is √(1 - x²).
func (c *Ctx) sqrt1m(x *ir.Value) *ir.Value {
	return c.Op("Sqrt", []*ir.Value{c.Sub(c.k(x, 1), c.Mul(x, x))})
}

// cast converts v to like's element type where they differ.
func (c *Ctx) cast(v, like *ir.Value) *ir.Value {
	if v.Type.Elem == like.Type.Elem {
		return v
	}
	return c.Cast(v, like.Type.Elem)
}

// unary builds the rule of a one-input op from its gradient.
func unary(f func(c *Ctx, x, y, dy *ir.Value) *ir.Value) Rule {
	return func(c *Ctx) ([]*ir.Value, error) {
		return []*ir.Value{f(c, c.X(0), c.Y(0), c.DY[0])}, nil
	}
}

// binary builds the rule of a broadcasting two-input op: f gives the
// gradients at the output's shape, which SumTo reduces to each input's.
func binary(f func(c *Ctx, a, b, y, dy *ir.Value) (*ir.Value, *ir.Value)) Rule {
	return func(c *Ctx) ([]*ir.Value, error) {
		da, db := f(c, c.X(0), c.X(1), c.Y(0), c.DY[0])
		out := []*ir.Value{da, db}
		for i, d := range out {
			if !c.Need[i] || d == nil {
				out[i] = nil
				continue
			}
			s, err := c.SumTo(d, c.Y(0).Type.Shape, c.X(i))
			if err != nil {
				return nil, c.Fail("%v", err)
			}
			out[i] = s
		}
		return out, nil
	}
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

func whereRule(c *Ctx) ([]*ir.Value, error) {
	cond, y, dy := c.X(0), c.Y(0), c.DY[0]
	out := make([]*ir.Value, 3)
	for i := 1; i <= 2; i++ {
		if !c.Need[i] {
			continue
		}
		zero := c.k(y, 0)
		d := c.Where(cond, dy, zero)
		if i == 2 {
			d = c.Where(cond, zero, dy)
		}
		s, err := c.SumTo(d, y.Type.Shape, c.X(i))
		if err != nil {
			return nil, c.Fail("%v", err)
		}
		out[i] = s
	}
	return out, nil
}

// clipRule passes dy where min ≤ x ≤ max. The bounds are not
// differentiated: they are hyperparameters.
func clipRule(c *Ctx) ([]*ir.Value, error) {
	x, dy := c.X(0), c.DY[0]
	var lo, hi *ir.Value
	if c.Opset < 11 {
		if a := c.Node.Attr("min"); a != nil {
			lo = c.k(x, float64(a.F))
		}
		if a := c.Node.Attr("max"); a != nil {
			hi = c.k(x, float64(a.F))
		}
	} else {
		lo, hi = c.X(1), c.X(2)
		if len(c.Need) > 1 && c.Need[1] || len(c.Need) > 2 && c.Need[2] {
			return nil, c.Fail("Clip's bounds are not differentiated: feed them as constants")
		}
	}
	keep := (*ir.Value)(nil)
	and := func(cond *ir.Value) {
		if keep == nil {
			keep = cond
		} else {
			keep = c.Op("And", []*ir.Value{keep, cond})
		}
	}
	// Not(x < lo) rather than GreaterOrEqual, which opsets before 12 lack.
	if lo != nil {
		and(c.Op("Not", []*ir.Value{c.Op("Less", []*ir.Value{x, lo})}))
	}
	if hi != nil {
		and(c.Op("Not", []*ir.Value{c.Op("Greater", []*ir.Value{x, hi})}))
	}
	if keep == nil {
		return []*ir.Value{dy}, nil
	}
	return []*ir.Value{c.Where(keep, dy, c.k(x, 0))}, nil
}

// dropoutRule: in inference mode Dropout is the identity; in training
// mode the gradient is masked and scaled as the output was, which needs
// the node's mask output.
func dropoutRule(c *Ctx) ([]*ir.Value, error) {
	x, dy := c.X(0), c.DY[0]
	training := false
	if c.Opset >= 12 {
		if t := c.X(2); t != nil {
			v := c.Value(t)
			if v == nil {
				return nil, c.Fail("training_mode must be a constant to differentiate Dropout")
			}
			training = v.Int64At(0) != 0
		}
	} else if c.Opset < 7 {
		training = c.Node.Attr("is_test") == nil || c.Int("is_test") == 0
	}
	if !training {
		return []*ir.Value{dy}, nil
	}
	mask := c.Y(1)
	if mask == nil {
		return nil, c.Fail("a training-mode Dropout is differentiated through its mask output, which the node does not produce")
	}
	ratio := 0.5
	if c.Opset >= 12 {
		if r := c.X(1); r != nil {
			v := c.Value(r)
			if v == nil {
				return nil, c.Fail("ratio must be a constant to differentiate Dropout")
			}
			ratio = v.Float64At(0)
		}
	} else if a := c.Node.Attr("ratio"); a != nil {
		ratio = float64(a.F)
	}
	scale := c.k(x, 1/(1-ratio))
	return []*ir.Value{c.Mul(c.Mul(dy, c.Cast(mask, x.Type.Elem)), scale)}, nil
}
