package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
)

// Normalizations (ir/ops norm.go).

func init() {
	define("", map[string]Rule{
		// y = softmax(x): dx = y·(dy - Σ dy·y) over the line.
		"Softmax": func(c *Ctx) ([]*ir.Value, error) {
			axes, err := c.softmaxAxes()
			if err != nil {
				return nil, err
			}
			y, dy := c.Y(0), c.DY[0]
			return []*ir.Value{c.Mul(y, c.Sub(dy, c.ReduceSum(c.Mul(dy, y), axes, true)))}, nil
		},
		// y = log softmax(x): dx = dy - e^y·Σ dy over the line.
		"LogSoftmax": func(c *Ctx) ([]*ir.Value, error) {
			axes, err := c.softmaxAxes()
			if err != nil {
				return nil, err
			}
			y, dy := c.Y(0), c.DY[0]
			return []*ir.Value{c.Sub(dy, c.Mul(c.Op("Exp", []*ir.Value{y}), c.ReduceSum(dy, axes, true)))}, nil
		},
		"BatchNormalization": batchNormRule,
		"LayerNormalization": layerNormRule,
	})
	notDifferentiable("", "piecewise constant (a one-hot of the maximum)", "Hardmax")
	notDifferentiable("", "not implemented: its gradient is BatchNormalization's training-mode one per sample and channel", "InstanceNormalization")
	notDifferentiable("", "not implemented: its gradient needs the window sums of squares' derivative", "LRN")
}

// softmaxAxes lists the axes of a Softmax-like node's line.
func (c *Ctx) softmaxAxes() ([]int64, error) {
	r := c.X(0).Type.Shape.Rank()
	if r < 0 {
		return nil, c.Fail("the input's rank must be known")
	}
	lo, hi, err := c.SoftmaxSpan(r)
	if err != nil {
		return nil, err
	}
	var axes []int64
	for a := lo; a < hi; a++ {
		axes = append(axes, int64(a))
	}
	return axes, nil
}

// normalize returns x̂ = (x - mean)·istd and istd over axes (kept as 1s).
func (c *Ctx) normalize(x *ir.Value, axes []int64, eps float64) (xhat, istd *ir.Value) {
	mean := c.Reduce("ReduceMean", x, axes, true)
	d := c.Sub(x, mean)
	variance := c.Reduce("ReduceMean", c.Mul(d, d), axes, true)
	istd = c.Op("Reciprocal", []*ir.Value{c.Op("Sqrt", []*ir.Value{c.Add(variance, c.k(x, eps))})})
	return c.Mul(d, istd), istd
}

// normInputGrad is the gradient through x̂ = (x - mean)·istd given g =
// dL/dx̂: istd·(g - mean(g) - x̂·mean(g·x̂)) over axes.
func (c *Ctx) normInputGrad(g, xhat, istd *ir.Value, axes []int64) *ir.Value {
	mg := c.Reduce("ReduceMean", g, axes, true)
	mgx := c.Reduce("ReduceMean", c.Mul(g, xhat), axes, true)
	return c.Mul(istd, c.Sub(c.Sub(g, mg), c.Mul(xhat, mgx)))
}

// channelShape reshapes a [C] parameter to [C, 1, ...] against a rank-r
// input, so it broadcasts along axis 1.
func (c *Ctx) channelShape(p *ir.Value, r int) *ir.Value {
	var axes []int64
	for a := 1; a < r-1; a++ {
		axes = append(axes, int64(a))
	}
	if len(axes) == 0 {
		return p
	}
	return c.Unsqueeze(p, axes...)
}

// batchNormRule differentiates x, scale and B. In inference mode the
// statistics are the running ones (constants); in training mode
// (opset 14's training_mode) they are the batch's, and the gradient goes
// through them. The running statistics are not learned: their gradients
// are left out, as are the running outputs'.
func batchNormRule(c *Ctx) ([]*ir.Value, error) {
	x, dy := c.X(0), c.DY[0]
	r := x.Type.Shape.Rank()
	if r < 2 {
		return nil, c.Fail("the input's rank must be known, at least 2")
	}
	spec, err := c.BatchNormSpec(r)
	if err != nil {
		return nil, err
	}
	if !spec.Spatial {
		return nil, c.Fail("the gradient of a non-spatial BatchNormalization is not implemented")
	}
	if dy == nil {
		return nil, c.Fail("the running statistics' outputs are not differentiated")
	}
	axes := allBut(r, 1)
	out := make([]*ir.Value, len(c.Node.Inputs))
	scale := c.channelShape(c.X(1), r)
	var xhat, istd *ir.Value
	if spec.Training {
		xhat, istd = c.normalize(x, axes, spec.Epsilon)
		if c.Need[0] {
			out[0] = c.normInputGrad(c.Mul(dy, scale), xhat, istd, axes)
		}
	} else {
		mean, variance := c.channelShape(c.X(3), r), c.channelShape(c.X(4), r)
		istd = c.Op("Reciprocal", []*ir.Value{c.Op("Sqrt", []*ir.Value{c.Add(variance, c.k(x, spec.Epsilon))})})
		if c.Need[0] {
			out[0] = c.Mul(dy, c.Mul(scale, istd))
		}
		if c.Need[1] {
			xhat = c.Mul(c.Sub(x, mean), istd)
		}
	}
	if c.Need[1] {
		out[1] = c.ReduceSum(c.Mul(dy, xhat), axes, false)
	}
	if c.Need[2] {
		out[2] = c.ReduceSum(dy, axes, false)
	}
	return out, nil
}

// layerNormRule: over the axes from axis on, with scale and B of those
// axes' shape (broadcast).
func layerNormRule(c *Ctx) ([]*ir.Value, error) {
	x, dy := c.X(0), c.DY[0]
	r := x.Type.Shape.Rank()
	if r < 1 {
		return nil, c.Fail("the input's rank must be known")
	}
	if dy == nil || len(c.DY) > 1 && c.DY[1] != nil || len(c.DY) > 2 && c.DY[2] != nil {
		return nil, c.Fail("the Mean and InvStdDev outputs are not differentiated")
	}
	spec, err := c.LayerNormSpec(r)
	if err != nil {
		return nil, err
	}
	var axes []int64
	for a := spec.Axis; a < r; a++ {
		axes = append(axes, int64(a))
	}
	xhat, istd := c.normalize(x, axes, spec.Epsilon)
	out := make([]*ir.Value, len(c.Node.Inputs))
	if c.Need[0] {
		out[0] = c.normInputGrad(c.Mul(dy, c.X(1)), xhat, istd, axes)
	}
	for i, d := range map[int]*ir.Value{1: c.maybe(c.Need[1], func() *ir.Value { return c.Mul(dy, xhat) }), 2: dy} {
		if i < len(c.Need) && c.Need[i] {
			s, err := c.SumTo(d, x.Type.Shape, c.X(i))
			if err != nil {
				return nil, c.Fail("%v", err)
			}
			out[i] = s
		}
	}
	return out, nil
}

// maybe builds f's value when cond holds.
func (c *Ctx) maybe(cond bool, f func() *ir.Value) *ir.Value {
	if cond {
		return f()
	}
	return nil
}
