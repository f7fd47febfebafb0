package autodiff

import "github.com/kiln-ml/kiln/ir"

// The opset 24 additions of ir/ops misc24.go: Swish's rule; TensorScatter,
// CumProd and BitCast have none.

func init() {
	define("", map[string]Rule{
		// Swish = x·s with s = sigmoid(alpha·x): s + alpha·x·s·(1 - s).
		"Swish": unary(func(c *Ctx, x, y, dy *ir.Value) *ir.Value {
			ax := c.Mul(x, c.attrK(x, "alpha"))
			s := c.Op("Sigmoid", []*ir.Value{ax})
			return c.Mul(dy, c.Add(s, c.Mul(ax, c.Mul(s, c.Sub(c.k(x, 1), s)))))
		}),
	})
	notDifferentiable("", "it reinterprets bits: no derivative exists", "BitCast")
	notDifferentiable("", "not implemented: dy of each running product is a reverse CumSum of dy·y divided by x, which needs care where x is 0", "CumProd")
	notDifferentiable("", "not implemented: the update's gradient gathers dy at the written positions and the cache's masks them out", "TensorScatter")
}
