package autodiff

import "github.com/kiln-ml/kiln/ir"

// What the elementwise rules share (as ir/ops elementwise.go holds what the
// family's rows share): constants of an input's type, and the builders of
// one-input and broadcasting two-input rules. The rules are in
// elementwise_math.go, elementwise_logic.go, elementwise_misc.go and
// activation.go.

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
