package autodiff

import "github.com/kiln-ml/kiln/ir"

// The activations (ir/ops activation.go): dy times the derivative at the
// same point, most of them piecewise.

func init() {
	define("", map[string]Rule{
		"Sigmoid": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(dy, c.Mul(y, c.Sub(c.k(x, 1), y)))
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
}
