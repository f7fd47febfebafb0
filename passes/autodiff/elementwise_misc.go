package autodiff

import "github.com/kiln-ml/kiln/ir"

// The elementwise ops with signatures of their own (ir/ops
// elementwise_misc.go): Identity, Cast and CastLike pass dy through (cast
// back), Clip and Dropout mask it.

func init() {
	define("", map[string]Rule{
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
	})
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
