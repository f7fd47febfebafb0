package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The training family (ir/ops train.go): the losses' gradients are
// (softmax - onehot(target)) for SoftmaxCrossEntropyLoss and -onehot for
// NegativeLogLikelihoodLoss, each times the target's weight and dloss
// (divided by the weights' sum for the mean).

func init() {
	define("", map[string]Rule{
		"NegativeLogLikelihoodLoss": lossRule,
		"SoftmaxCrossEntropyLoss":   lossRule,
	})
	notDifferentiable(ops.TrainingDomain, "an update step: it consumes gradients, it is not part of a loss", "Adagrad", "Adam", "Momentum")
	notDifferentiable(ops.TrainingDomain, "second-order gradients are not implemented: expand the inner Gradient first", ops.Gradient)
}

// lossCoefficient returns the target's one-hot [N, C, d...] and each
// element's coefficient [N, 1, d...]: its weight (0 where ignored) times
// dloss, over the weights' sum for the mean.
func (c *Ctx) lossCoefficient() (onehot, coeff *ir.Value, err error) {
	x, t, dy := c.X(0), c.X(1), c.DY[0]
	spec, err := c.LossSpec()
	if err != nil {
		return nil, nil, c.Fail("%v", err)
	}
	classes, err := c.channels(x, 1)
	if err != nil {
		return nil, nil, err
	}
	d := x.Type.Elem
	tsafe := t
	var valid *ir.Value
	if spec.HasIgnore {
		ii := c.Const("ignore_index", ops.FromFloat64s(t.Type.Elem, nil, []float64{float64(spec.Ignore)}))
		valid = c.Op("Not", []*ir.Value{c.Op("Equal", []*ir.Value{t, ii})})
		tsafe = c.Where(valid, t, c.Const("zero_index", ops.FromFloat64s(t.Type.Elem, nil, []float64{0})))
	}
	var w *ir.Value // per element [N, d...], nil: all ones
	if c.X(2) != nil {
		w = c.Op("Gather", []*ir.Value{c.X(2), tsafe}, ir.AttrI("axis", 0))
	}
	if valid != nil {
		if w == nil {
			w = c.Cast(valid, d)
		} else {
			w = c.Where(valid, w, c.k(x, 0))
		}
	}
	g := dy
	if spec.Reduction == "mean" {
		if w != nil {
			g = c.Div(g, c.ReduceSum(w, nil, false))
		} else if n := t.Type.Shape.NumElements(); n > 0 {
			g = c.Mul(g, c.k(x, 1/float64(n)))
		} else {
			g = c.Div(g, c.Cast(c.Op("Size", []*ir.Value{t}), d))
		}
	}
	if w != nil {
		coeff = c.Mul(w, g)
	} else {
		coeff = c.ExpandTo(g, t)
	}
	values := c.Const("onehot_values", ops.FromFloat64s(d, []int64{2}, []float64{0, 1}))
	onehot = c.Op("OneHot", []*ir.Value{tsafe, c.Int64s(classes), values}, ir.AttrI("axis", 1))
	return onehot, c.Unsqueeze(coeff, 1), nil
}

func lossRule(c *Ctx) ([]*ir.Value, error) {
	x := c.X(0)
	out := make([]*ir.Value, len(c.Node.Inputs))
	if len(c.Need) > 2 && c.Need[2] {
		return nil, c.Fail("the class weights are not differentiated: feed them as a constant")
	}
	var d *ir.Value
	if c.DY[0] != nil {
		onehot, coeff, err := c.lossCoefficient()
		if err != nil {
			return nil, err
		}
		if c.Node.OpType == "NegativeLogLikelihoodLoss" {
			d = c.Neg(c.Mul(onehot, coeff))
		} else {
			d = c.Mul(c.Sub(c.Op("Exp", []*ir.Value{c.logProb()}), onehot), coeff)
		}
	}
	if c.Node.OpType == "SoftmaxCrossEntropyLoss" && len(c.DY) > 1 && c.DY[1] != nil {
		// Through log_prob = log softmax(x) along axis 1.
		dl := c.DY[1]
		g := c.Sub(dl, c.Mul(c.Op("Exp", []*ir.Value{c.logProb()}), c.ReduceSum(dl, []int64{1}, true)))
		if d == nil {
			d = g
		} else {
			d = c.Add(d, g)
		}
	}
	if d != nil && !d.Type.Shape.Equal(x.Type.Shape) {
		d = c.ReshapeTo(d, x)
	}
	out[0] = d
	return out, nil
}

// logProb is the SoftmaxCrossEntropyLoss node's log_prob output, added to
// the node when it has none: the gradient reuses the forward's softmax.
func (c *Ctx) logProb() *ir.Value {
	if lp := c.Node.Output(1); lp != nil {
		return lp
	}
	x := c.X(0)
	lp := &ir.Value{Name: c.Name(c.Y(0).Name + "_log_prob"), Producer: c.Node, Type: x.Type.Clone()}
	c.Node.Outputs = append(c.Node.Outputs[:1], lp)
	return lp
}
