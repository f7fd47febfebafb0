package ops

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kiln-ml/kiln/ir"
)

// The elementwise ops with signatures of their own: Identity, Cast, Clip
// and Dropout.

var miscOps = []*Schema{
	{Name: "Identity", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: SameAsInput, Run: runIdentity, Containers: true},

	// Cast-19 added the float8 types and saturate (for them), 21 int4 and
	// uint4, 23 float4e2m1, 24 float8e8m0 with round_mode (the rounding
	// into it), 25 int2 and uint2: the later types share the 19 and 24 rows.
	{Name: "Cast", Since: 6, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "to", Kind: ir.AttrInt, Required: true}},
		Types: allTypes, Infer: inferCast, Run: runCast},
	{Name: "Cast", Since: 19, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "to", Kind: ir.AttrInt, Required: true}, defInt("saturate", 1)},
		Types: castTypes, Infer: inferCast, Run: runCast},
	{Name: "Cast", Since: 24, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "to", Kind: ir.AttrInt, Required: true}, defString("round_mode", "up"), defInt("saturate", 1)},
		Types: castTypes, Infer: inferCast, Run: runCast},

	// CastLike casts to its second input's element type (the values of
	// that input are not read); its versions follow Cast's.
	{Name: "CastLike", Since: 15, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: allTypes, Infer: inferCastLike, Run: runCastLike},
	{Name: "CastLike", Since: 19, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("saturate", 1)}, Types: castTypes, Infer: inferCastLike, Run: runCastLike},
	{Name: "CastLike", Since: 24, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defString("round_mode", "up"), defInt("saturate", 1)}, Types: castTypes, Infer: inferCastLike, Run: runCastLike},

	// Clip's bounds were attributes until opset 11, then optional inputs;
	// opset 12 added the integer types.
	{Name: "Clip", Elementwise: true, Since: 6, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defFloat("min", -math.MaxFloat32), defFloat("max", math.MaxFloat32)},
		Types: floatTypes, Infer: SameAsInput, Run: runClip},
	{Name: "Clip", Elementwise: true, Since: 11, MinInputs: 1, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Types: numericTypes, Infer: inferClip, Run: runClip},

	// Dropout-10 made the mask bool (it had the data's type); Dropout-12
	// made ratio an input and added training_mode and seed.
	{Name: "Dropout", Since: 7, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: []AttrDef{defFloat("ratio", 0.5)}, Types: floatTypes, Infer: inferDropout, Run: runDropout},
	{Name: "Dropout", Since: 10, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: []AttrDef{defFloat("ratio", 0.5)}, Types: floatTypes, Infer: inferDropout, Run: runDropout},
	{Name: "Dropout", Since: 12, MinInputs: 1, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 2,
		Attrs: []AttrDef{{Name: "seed", Kind: ir.AttrInt}}, Types: floatTypes, Infer: inferDropout, Run: runDropout},
}

func init() { register(miscOps) }

// castTypes are the element types Cast-19 and later convert between.
var castTypes = concatTypes(allTypes, smallTypes)

// runIdentity returns its input: tensors are values no kernel modifies.
func runIdentity(c *KernelContext) error {
	c.Set(0, c.In(0))
	return nil
}

func inferCast(c *InferContext) error {
	to := ir.DType(c.Int("to"))
	if !to.Valid() || to == ir.Undefined {
		return c.Errorf("attribute to is %d, not an element type", c.Int("to"))
	}
	if c.declares("round_mode") {
		if _, err := ir.ParseRoundMode(c.String("round_mode")); err != nil {
			return c.Errorf("%v", err)
		}
	}
	c.Set(0, ir.TensorType(to, c.In(0).Shape.Clone()))
	return nil
}

func inferCastLike(c *InferContext) error {
	if c.declares("round_mode") {
		if _, err := ir.ParseRoundMode(c.String("round_mode")); err != nil {
			return c.Errorf("%v", err)
		}
	}
	c.Set(0, ir.TensorType(c.In(1).Elem, c.In(0).Shape.Clone()))
	return nil
}

// runCast converts through float64 when either side is a floating type
// (rounding to nearest, truncating toward zero into integers, NaN to 0;
// the 8- and 4-bit floats as saturate and round_mode say), else through
// int64 (wrapping to narrower types, as C casts do).
func runCast(c *KernelContext) error { return castTo(c, ir.DType(c.Int("to"))) }

func runCastLike(c *KernelContext) error { return castTo(c, c.In(1).DType) }

// castOptions are Cast's saturate (default on) and round_mode (default up)
// where the node's version has them.
func castOptions(c *KernelContext) (saturate bool, mode ir.RoundMode, err error) {
	saturate = !c.declares("saturate") || c.Int("saturate") != 0
	if c.declares("round_mode") {
		mode, err = ir.ParseRoundMode(c.String("round_mode"))
	}
	return saturate, mode, err
}

// CastOptions are the node's saturate and round_mode as Cast reads them
// (QuantizeLinear's saturate too; round_mode is up where undeclared), for
// backends that round into the 8- and 4-bit float types themselves.
func (c *KernelContext) CastOptions() (saturate bool, mode ir.RoundMode, err error) {
	return castOptions(c)
}

// castTo converts input 0 to element type to.
func castTo(c *KernelContext, to ir.DType) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if !c.schema.SupportsType(to) {
		return c.Unsupported(to)
	}
	saturate, mode, err := castOptions(c)
	if err != nil {
		return c.Errorf("%v", err)
	}
	var out *ir.Tensor
	switch {
	case x.DType == to:
		out = x
	case x.DType == ir.String:
		out, err = parseStrings(x, to, saturate, mode)
	case to == ir.String:
		out = formatStrings(x)
	case x.DType.IsFloat() || to.IsFloat() || x.DType.IsSmallFloat() || to.IsSmallFloat():
		out = fromFloat64sCast(to, x.Dims, Float64s(x), saturate, mode)
	default:
		out = FromInt64s(to, x.Dims, Int64s(x))
	}
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, out)
	return nil
}

// parseStrings reads numbers written in decimal (integers) or as Go and
// numpy write floats, including "inf", "-INF" and "NaN".
func parseStrings(x *ir.Tensor, to ir.DType, saturate bool, mode ir.RoundMode) (*ir.Tensor, error) {
	if to.IsInt() || to.IsPackedInt() {
		v := make([]int64, len(x.Strings))
		for k, s := range x.Strings {
			var err error
			if to == ir.Uint64 {
				var u uint64
				u, err = strconv.ParseUint(s, 10, 64)
				v[k] = int64(u)
			} else {
				v[k], err = strconv.ParseInt(s, 10, 64)
			}
			if err != nil {
				return nil, err
			}
		}
		return FromInt64s(to, x.Dims, v), nil
	}
	v := make([]float64, len(x.Strings))
	for k, s := range x.Strings {
		var err error
		if v[k], err = strconv.ParseFloat(s, 64); err != nil {
			return nil, err
		}
	}
	return fromFloat64sCast(to, x.Dims, v, saturate, mode), nil
}

// formatStrings writes floats in the shortest form that reads back to the
// same value of their own precision, integers in decimal, bools as 1 and 0.
func formatStrings(x *ir.Tensor) *ir.Tensor {
	out := ir.NewTensor(ir.String, x.Dims...)
	switch {
	case x.DType.IsFloat() || x.DType.IsSmallFloat():
		bits := 32
		if x.DType == ir.Float64 {
			bits = 64
		}
		for k, e := range Float64s(x) {
			out.Strings[k] = strconv.FormatFloat(e, 'g', -1, bits)
		}
	case x.DType == ir.Uint64:
		for k, e := range Int64s(x) {
			out.Strings[k] = strconv.FormatUint(uint64(e), 10)
		}
	default:
		for k, e := range Int64s(x) {
			out.Strings[k] = strconv.FormatInt(e, 10)
		}
	}
	return out
}

func inferClip(c *InferContext) error {
	for i := 1; i < 3; i++ {
		if !c.HasInput(i) {
			continue
		}
		b, x := c.In(i), c.In(0)
		if b.Elem != ir.Undefined && x.Elem != ir.Undefined && b.Elem != x.Elem {
			return c.Errorf("bound %d is %s, want %s like the input", i, b.Elem, x.Elem)
		}
		if n := b.Shape.NumElements(); n >= 0 && n != 1 {
			return c.Errorf("bound %d has shape %s, want a scalar", i, b.Shape)
		}
	}
	return SameAsInput(c)
}

// runClip serves both rows: the bounds come from attributes (always
// present through their defaults) or from optional inputs.
func runClip(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	bounds := [2]*ir.Tensor{c.In(1), c.In(2)}
	if c.declares("min") {
		bounds = [2]*ir.Tensor{ir.Scalar(ir.Float32, c.Float("min")), ir.Scalar(ir.Float32, c.Float("max"))}
	} else {
		for i, b := range bounds {
			if b != nil && b.DType != x.DType {
				return c.Errorf("bound %d is %s, want %s like the input", i+1, b.DType, x.DType)
			}
		}
	}
	flo, fhi := math.Inf(-1), math.Inf(1)
	ilo, ihi := int64(math.MinInt64), int64(math.MaxInt64)
	ulo, uhi := uint64(0), uint64(math.MaxUint64)
	for i, b := range bounds {
		if b == nil {
			continue
		}
		if b.Len() != 1 {
			return c.Errorf("bound %d has shape %v, want a scalar", i+1, ir.FormatList(b.Dims))
		}
		if i == 0 {
			flo, ilo, ulo = b.Float64At(0), b.Int64At(0), uint64(b.Int64At(0))
		} else {
			fhi, ihi, uhi = b.Float64At(0), b.Int64At(0), uint64(b.Int64At(0))
		}
	}
	// min(max(...)) gives max when min > max, as numpy.clip, and keeps NaN.
	c.Set(0, mapElems(x, x.DType,
		func(v float64) float64 { return min(max(v, flo), fhi) },
		func(v int64) int64 { return min(max(v, ilo), ihi) },
		func(v uint64) uint64 { return min(max(v, ulo), uhi) }))
	return nil
}

// hasMask reports whether the node asks for Dropout's mask output.
func hasMask(n *ir.Node) bool { return n.Output(1) != nil }

func inferDropout(c *InferContext) error {
	x := c.In(0)
	if c.HasInput(1) {
		if r := c.Const(1); r != nil {
			if _, err := dropoutRatio(r); err != nil {
				return c.Errorf("%v", err)
			}
		}
	}
	if e := c.In(2).Elem; c.HasInput(2) && e != ir.Undefined && e != ir.Bool {
		return c.Errorf("training_mode is %s, want bool", e)
	}
	c.Set(0, x.Clone())
	if hasMask(c.Node) {
		elem := ir.Bool
		if c.schema.Since < 10 {
			elem = x.Elem
		}
		c.Set(1, ir.TensorType(elem, x.Shape.Clone()))
	}
	return nil
}

// DropoutUniforms are the n uniform draws in [0, 1) a training-mode
// Dropout with this seed compares with its ratio (numpy's generator, as
// ONNX's reference draws them): element k is kept when u[k] >= ratio.
// Backends precompute them, so their masks agree with the reference.
func DropoutUniforms(seed int64, n int64) []float64 {
	rng := newNumpyRand(uint32(seed))
	u := make([]float64, n)
	for k := range u {
		u[k] = rng.float64()
	}
	return u
}

func dropoutRatio(r *ir.Tensor) (float64, error) {
	if r.Len() != 1 || !r.DType.IsFloat() {
		return 0, fmt.Errorf("ratio must be a float scalar, got %s%v", r.DType, ir.FormatList(r.Dims))
	}
	v := r.Float64At(0)
	if !(v >= 0 && v < 1) {
		return 0, fmt.Errorf("ratio %g is outside [0, 1)", v)
	}
	return v, nil
}

// runDropout is the identity except in training mode (opset 12 on), where
// it zeroes elements with probability ratio and scales the rest by
// 1/(1-ratio). The mask is drawn as numpy.random.uniform(0, 1, shape) >=
// ratio after numpy.random.seed(seed), which is how ONNX's reference
// implementation draws it, so the results match ONNX's test data; a node
// without seed uses 0, keeping the reference executor deterministic.
func runDropout(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	train := false
	ratio := 0.5
	if c.declares("ratio") {
		ratio = float64(c.Float("ratio"))
	} else {
		if r := c.In(1); r != nil {
			var err error
			if ratio, err = dropoutRatio(r); err != nil {
				return c.Errorf("%v", err)
			}
		}
		if t := c.In(2); t != nil {
			if t.DType != ir.Bool || t.Len() != 1 {
				return c.Errorf("training_mode must be a bool scalar, got %s%v", t.DType, ir.FormatList(t.Dims))
			}
			train = Bools(t)[0]
		}
	}
	keep := make([]bool, x.Len())
	y := x
	if train && ratio > 0 {
		u := DropoutUniforms(c.Int("seed"), x.Len())
		v := Float64s(x)
		for k := range v {
			keep[k] = u[k] >= ratio
			if keep[k] {
				v[k] /= 1 - ratio
			} else {
				v[k] = 0
			}
		}
		y = FromFloat64s(x.DType, x.Dims, v)
	} else {
		for k := range keep {
			keep[k] = true
		}
	}
	c.Set(0, y)
	if hasMask(c.Node) {
		mask := FromBools(x.Dims, keep)
		if c.schema.Since < 10 {
			mask = FromInt64s(x.DType, x.Dims, Int64s(mask))
		}
		c.Set(1, mask)
	}
	return nil
}
