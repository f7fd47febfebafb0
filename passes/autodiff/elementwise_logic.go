package autodiff

import "github.com/kiln-ml/kiln/ir"

// The comparisons, logic and Where (ir/ops elementwise_logic.go): only
// Where's two branches carry a gradient, each where it was chosen.

func init() {
	define("", map[string]Rule{
		"Where": whereRule,
	})
	notDifferentiable("", booleanResult, "And", "Or", "Xor", "Not", "Equal", "Greater", "GreaterOrEqual",
		"Less", "LessOrEqual")
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
