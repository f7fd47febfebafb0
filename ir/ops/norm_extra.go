package ops

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// More of the normalization family: RMSNormalization (opset 23),
// GroupNormalization (18, 21) and LpNormalization (1, 22).

var lpNormTypes1 = []ir.DType{ir.Float16, ir.Float32, ir.Float64}

var normExtraRows = []*Schema{
	{Name: "RMSNormalization", Since: 23, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("axis", -1), defFloat("epsilon", 1e-5), defInt("stash_type", int64(ir.Float32))},
		Types: floatTypes, Infer: inferRMSNorm, Run: runRMSNorm},
	// GroupNormalization-21 made scale and bias per channel (they were per
	// group in 18) and added stash_type.
	groupNormRow(18, defFloat("epsilon", 1e-5), AttrDef{Name: "num_groups", Kind: ir.AttrInt, Required: true}),
	groupNormRow(21, defFloat("epsilon", 1e-5), AttrDef{Name: "num_groups", Kind: ir.AttrInt, Required: true},
		defInt("stash_type", int64(ir.Float32))),
	lpNormRow(1, lpNormTypes1),
	lpNormRow(22, floatTypes),
}

func init() { register(normExtraRows) }

// RMSNormalization divides each group of the axes from axis on by its
// root mean square, sqrt(mean(x^2) + epsilon), then multiplies by scale,
// which broadcasts to those axes' shape.

func inferRMSNorm(c *InferContext) error {
	if _, err := stashType(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	x := c.In(0)
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		norm := ir.ShapeOf(x.Shape.Dims[axis:]...)
		if s := c.In(1); s.Shape.Ranked {
			if b, err := BroadcastShape(norm, s.Shape); err != nil || len(b.Dims) != len(norm.Dims) {
				return c.Errorf("scale of shape %s does not broadcast to the normalized shape %s", s.Shape, norm)
			}
		}
	}
	return SameAsInput(c)
}

func runRMSNorm(c *KernelContext) error {
	x, scale := c.In(0), c.In(1)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if _, err := stashType(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	normDims := x.Dims[axis:]
	if !scale.DType.IsFloat() {
		return c.Errorf("scale must be floating-point, is %s", scale.DType)
	}
	if !broadcastsTo(scale.Dims, normDims) {
		return c.Errorf("scale of shape %v does not broadcast to the normalized shape %v", ir.FormatList(scale.Dims), ir.FormatList(normDims))
	}
	sv := Float64s(scale)
	s := make([]float64, ir.Product(normDims))
	for k, j := range BroadcastIndex(scale.Dims, normDims) {
		s[k] = sv[j]
	}
	eps := float64(c.Float("epsilon"))
	v := Float64s(x)
	mapGroups(fromAxis(x.Dims, axis), v, func(xs []float64) {
		var sq float64
		for _, e := range xs {
			sq += e * e
		}
		inv := 1 / math.Sqrt(sq/float64(len(xs))+eps)
		for k := range xs {
			xs[k] *= inv * s[k]
		}
	})
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}

// GroupNormalization splits the channels (axis 1) into num_groups groups
// and normalizes each (sample, group) over its channels and spatial axes,
// then applies scale and bias: per group in opset 18, per channel from 21.

func groupNormRow(since int64, attrs ...AttrDef) *Schema {
	return &Schema{Name: "GroupNormalization", Since: since, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: attrs, Types: floatTypes, Infer: inferGroupNorm, Run: runGroupNorm}
}

// groupNormParams is the length scale and bias must have: the number of
// groups before opset 21, of channels from it.
func groupNormParams(a attrs, channels ir.Dim) ir.Dim {
	if a.declares("stash_type") {
		return channels
	}
	return ir.D(a.Int("num_groups"))
}

func inferGroupNorm(c *InferContext) error {
	groups := c.Int("num_groups")
	if groups <= 0 {
		return c.Errorf("num_groups must be positive, is %d", groups)
	}
	if c.declares("stash_type") {
		if _, err := stashType(c.attrs); err != nil {
			return c.Errorf("%v", err)
		}
	}
	x := c.In(0)
	if x.Shape.Ranked {
		if len(x.Shape.Dims) < 2 {
			return c.Errorf("input must be N x C x D1 x ..., is %s", x)
		}
		ch := x.Shape.Dims[1]
		if ch.IsStatic() && ch.Value%groups != 0 {
			return c.Errorf("%d channels do not split into %d groups", ch.Value, groups)
		}
		want := []ir.Dim{groupNormParams(c.attrs, ch)}
		for i := 1; i < 3; i++ {
			if err := checkParamShape(c.In(i), want); err != nil {
				return c.Errorf("input %d: %v", i, err)
			}
		}
	}
	return SameAsInput(c)
}

func runGroupNorm(c *KernelContext) error {
	x, scale, bias := c.In(0), c.In(1), c.In(2)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	groups := c.Int("num_groups")
	if len(x.Dims) < 2 || groups <= 0 || x.Dims[1]%groups != 0 {
		return c.Errorf("input of shape %v does not split into %d groups of channels", ir.FormatList(x.Dims), groups)
	}
	channels := x.Dims[1]
	params := groupNormParams(c.attrs, ir.D(channels)).Value
	if !scale.DType.IsFloat() || !bias.DType.IsFloat() {
		return c.Errorf("scale and bias must be floating-point, are %s and %s", scale.DType, bias.DType)
	}
	if scale.Len() != params || bias.Len() != params {
		return c.Errorf("scale %v and bias %v must have %d values", ir.FormatList(scale.Dims), ir.FormatList(bias.Dims), params)
	}
	perChannel := groupNormPerChannel(c.attrs)
	s, b := Float64s(scale), Float64s(bias)
	eps := float64(c.Float("epsilon"))
	inner := ir.Product(x.Dims[2:])
	groupLen := channels / groups * inner
	v := Float64s(x)
	for start := int64(0); start < int64(len(v)); start += groupLen {
		xs := v[start : start+groupLen]
		g := start / groupLen % groups
		normalize(xs, eps, 1, 0)
		for k := range xs {
			p := g
			if perChannel {
				p = g*(channels/groups) + int64(k)/inner
			}
			xs[k] = xs[k]*s[p] + b[p]
		}
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}

// LpNormalization divides each line along axis by its L1 or L2 norm.

func lpNormRow(since int64, types []ir.DType) *Schema {
	return &Schema{Name: "LpNormalization", Since: since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("axis", -1), defInt("p", 2)}, Types: types, Infer: inferLpNorm, Run: runLpNorm}
}

func inferLpNorm(c *InferContext) error {
	if p := c.Int("p"); p != 1 && p != 2 {
		return c.Errorf("p must be 1 or 2, is %d", p)
	}
	if x := c.In(0); x.Shape.Ranked {
		if _, err := NormAxis(c.Int("axis"), len(x.Shape.Dims)); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return SameAsInput(c)
}

func runLpNorm(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	p := c.Int("p")
	if p != 1 && p != 2 {
		return c.Errorf("p must be 1 or 2, is %d", p)
	}
	axis, err := NormAxis(c.Int("axis"), len(x.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	v := Float64s(x)
	mapGroups(alongAxis(x.Dims, axis), v, func(xs []float64) {
		var norm float64
		for _, e := range xs {
			if p == 1 {
				norm += math.Abs(e)
			} else {
				norm += e * e
			}
		}
		if p == 2 {
			norm = math.Sqrt(norm)
		}
		for k := range xs {
			xs[k] /= norm
		}
	})
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}
