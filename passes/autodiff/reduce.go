package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
)

// The reduce family (ir/ops reduce.go): dy comes back to the input's
// shape (its reduced axes restored as 1s, then broadcast) times each
// element's share in the result.

func init() {
	define("", map[string]Rule{
		"ReduceSum": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value { return c.ExpandTo(dy, x) }),
		"ReduceMean": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			nx, ny := x.Type.Shape.NumElements(), y.Type.Shape.NumElements()
			if nx >= 0 && ny > 0 {
				return c.ExpandTo(c.Mul(dy, c.k(x, float64(ny)/float64(nx))), x)
			}
			size := func(v *ir.Value) *ir.Value { return c.Cast(c.Op("Size", []*ir.Value{v}), x.Type.Elem) }
			return c.ExpandTo(c.Div(c.Mul(dy, size(y)), size(x)), x)
		}),
		"ReduceSumSquare": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(c.Mul(dy, c.k(x, 2)), x)
		}),
		"ReduceL1": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(dy, c.Op("Sign", []*ir.Value{x}))
		}),
		"ReduceL2": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(c.Div(dy, y), x)
		}),
		"ReduceMax": reduceRule(extremum), "ReduceMin": reduceRule(extremum),
		"ReduceLogSumExp": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(dy, c.Op("Exp", []*ir.Value{c.Sub(x, y)}))
		}),
		"ReduceLogSum": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Mul(c.Div(dy, c.Op("Exp", []*ir.Value{y})), c.ExpandTo(c.k(x, 1), x))
		}),
		// d(Πx)/dx_i = Πx / x_i (inputs without zeros).
		"ReduceProd": reduceRule(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			return c.Div(c.Mul(dy, y), x)
		}),
		"CumSum": func(c *Ctx) ([]*ir.Value, error) {
			spec, err := c.CumSumSpec(c.X(0).Type.Shape.Rank())
			if err != nil {
				return nil, err
			}
			attrs := []*ir.Attribute{ir.AttrI("reverse", boolInt(!spec.Reverse))}
			if spec.Exclusive {
				attrs = append(attrs, ir.AttrI("exclusive", 1))
			}
			return []*ir.Value{c.Op("CumSum", []*ir.Value{c.DY[0], c.X(1)}, attrs...)}, nil
		},
	})
	notDifferentiable("", "an integer result (an index)", "ArgMax", "ArgMin")
	notDifferentiable("", "not implemented: the values' gradient would scatter dy to the indices output (ScatterElements); differentiate a ReduceMax or a Gather by TopK's indices instead", "TopK")
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// extremum is ReduceMax's and ReduceMin's: dy goes to every element equal
// to the result.
func extremum(c *Ctx, x, y, dy *ir.Value) *ir.Value {
	return c.Where(c.Op("Equal", []*ir.Value{x, y}), dy, c.k(x, 0))
}

// reduceRule restores the reduced axes of dy and y (kept as 1s) and lets
// f give the input's gradient from them; f's result broadcasts to x.
func reduceRule(f func(c *Ctx, x, y, dy *ir.Value) *ir.Value) Rule {
	return func(c *Ctx) ([]*ir.Value, error) {
		x, y, dy := c.X(0), c.Y(0), c.DY[0]
		rank := x.Type.Shape.Rank()
		if rank < 0 {
			return nil, c.Fail("the input's rank is unknown")
		}
		spec, err := c.ReduceSpec(rank)
		if err != nil {
			return nil, err
		}
		if spec.Noop {
			return []*ir.Value{dy}, nil
		}
		if !spec.Keep {
			var axes []int64
			for a, r := range spec.Axes {
				if r {
					axes = append(axes, int64(a))
				}
			}
			if len(axes) > 0 {
				dy, y = c.Unsqueeze(dy, axes...), c.Unsqueeze(y, axes...)
			}
		}
		d := f(c, x, y, dy)
		if !d.Type.Shape.Equal(x.Type.Shape) {
			d = c.ExpandTo(d, x)
		}
		return []*ir.Value{d}, nil
	}
}
