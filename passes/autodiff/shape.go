package autodiff

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The shape ops (ir/ops shape.go): the gradient moves dy back to where
// each element came from. The helpers below serve index.go's rules too.

func init() {
	reshape := func(c *Ctx) ([]*ir.Value, error) { return []*ir.Value{c.ReshapeTo(c.DY[0], c.X(0))}, nil }
	define("", map[string]Rule{
		"Reshape": reshape, "Flatten": reshape, "Squeeze": reshape, "Unsqueeze": reshape,
		"Transpose": func(c *Ctx) ([]*ir.Value, error) {
			rank := c.X(0).Type.Shape.Rank()
			perm := c.KernelContext.Ints("perm")
			if perm == nil {
				for a := rank - 1; a >= 0; a-- {
					perm = append(perm, int64(a))
				}
			}
			inv := make([]int64, len(perm))
			for i, p := range perm {
				inv[p] = int64(i)
			}
			return []*ir.Value{c.Transpose(c.DY[0], inv...)}, nil
		},
		"Expand": func(c *Ctx) ([]*ir.Value, error) {
			d, err := c.SumTo(c.DY[0], c.Y(0).Type.Shape, c.X(0))
			if err != nil {
				return nil, c.Fail("%v", err)
			}
			return []*ir.Value{d}, nil
		},
		"Concat": concatRule,
		"Split":  splitRule,
		"Tile":   tileRule,
		// DepthToSpace in DCR mode and SpaceToDepth undo each other.
		"DepthToSpace": func(c *Ctx) ([]*ir.Value, error) {
			if c.String("mode") == "CRD" {
				return nil, c.Fail("the gradient of DepthToSpace in CRD mode is not implemented (DCR is)")
			}
			return []*ir.Value{c.Op("SpaceToDepth", []*ir.Value{c.DY[0]}, ir.AttrI("blocksize", c.Int("blocksize")))}, nil
		},
		"SpaceToDepth": func(c *Ctx) ([]*ir.Value, error) {
			return []*ir.Value{c.Op("DepthToSpace", []*ir.Value{c.DY[0]}, ir.AttrI("blocksize", c.Int("blocksize")))}, nil
		},
	})
	notDifferentiable("", valueIndependent, "Shape", "Size", "Constant", "ConstantOfShape", "EyeLike", "Range")
}

// sliceAxis is x[start:end] along axis (Slice in the opset's form).
func (c *Ctx) sliceAxis(x *ir.Value, axis, start, end int64) *ir.Value {
	if c.Builder.Opset() >= 10 {
		return c.Op("Slice", []*ir.Value{x, c.Int64s(start), c.Int64s(end), c.Int64s(axis)})
	}
	return c.Op("Slice", []*ir.Value{x}, ir.AttrIs("starts", start), ir.AttrIs("ends", end), ir.AttrIs("axes", axis))
}

// padZeros pads x with zeros (Pad in the opset's form).
func (c *Ctx) padZeros(x *ir.Value, begin, end []int64) *ir.Value {
	pads := append(slices.Clone(begin), end...)
	if c.Builder.Opset() >= 11 {
		return c.Op("Pad", []*ir.Value{x, c.Int64s(pads...)})
	}
	return c.Op("Pad", []*ir.Value{x}, ir.AttrIs("pads", pads...))
}

// staticDims is v's static shape, or an error naming the node.
func (c *Ctx) staticDims(v *ir.Value) ([]int64, error) {
	dims, ok := v.Type.Shape.Ints()
	if !ok {
		return nil, c.Fail("the gradient needs %q's static shape, which is %s", v.Name, v.Type.Shape)
	}
	return dims, nil
}

func concatRule(c *Ctx) ([]*ir.Value, error) {
	rank := c.Y(0).Type.Shape.Rank()
	axis := c.Int("axis")
	if axis < 0 {
		axis += int64(rank)
	}
	out := make([]*ir.Value, len(c.Node.Inputs))
	at := int64(0)
	for i, x := range c.Node.Inputs {
		d := x.Type.Shape.Dims[axis]
		if !d.IsStatic() {
			return nil, c.Fail("input %d's axis %d is not static", i, axis)
		}
		if c.Need[i] {
			out[i] = c.sliceAxis(c.DY[0], axis, at, at+d.Value)
		}
		at += d.Value
	}
	return out, nil
}

func splitRule(c *Ctx) ([]*ir.Value, error) {
	rank := c.X(0).Type.Shape.Rank()
	axis := c.Int("axis")
	if axis < 0 {
		axis += int64(rank)
	}
	parts := make([]*ir.Value, len(c.Node.Outputs))
	for i, y := range c.Node.Outputs {
		parts[i] = c.DY[i]
		if parts[i] == nil {
			parts[i] = c.ZerosLike(y)
		}
	}
	return []*ir.Value{c.Op("Concat", parts, ir.AttrI("axis", axis))}, nil
}

// tileRule sums dy's copies: [r0·d0, ...] viewed as [r0, d0, r1, d1, ...]
// summed over the r axes.
func tileRule(c *Ctx) ([]*ir.Value, error) {
	dims, err := c.staticDims(c.X(0))
	if err != nil {
		return nil, err
	}
	reps := c.Value(c.X(1))
	if reps == nil {
		return nil, c.Fail("repeats must be a constant to differentiate Tile")
	}
	var split, axes []int64
	for a, d := range dims {
		split = append(split, reps.Int64At(a), d)
		axes = append(axes, int64(2*a))
	}
	v := c.Op("Reshape", []*ir.Value{c.DY[0], c.Int64s(split...)})
	return []*ir.Value{c.ReshapeTo(c.ReduceSum(v, axes, false), c.X(0))}, nil
}
