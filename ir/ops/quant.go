package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Linear quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear and the integer and quantized matmuls and
// convolutions. Scales apply in float32, as the ONNX spec, its reference
// implementation and ONNX Runtime do, so that rounding (half to even) and
// saturation give the same integers; the integer accumulations are exact.
// QuantizeLinear and DequantizeLinear also take the 8- and 4-bit float
// types and the packed integers (ir's smallfloat.go): a float result is
// the float value x / scale + zero point, rounded as Cast rounds into the
// type (saturate as the node says); the other quantized kernels take
// 8-bit integers only.

var (
	quantizeTypes10   = []ir.DType{ir.Float32, ir.Int32}
	quantizeTypes19   = []ir.DType{ir.Float32, ir.Int32, ir.Float16, ir.BFloat16}
	dequantizeTypes10 = []ir.DType{ir.Int8, ir.Uint8, ir.Int32}
	// DequantizeLinear-19 added the float8 types, 21 the 16-bit integers
	// and int4 and uint4, 23 float4e2m1, 24 float8e8m0, 25 int2 and uint2
	// (the last two versions share the 23 row).
	dequantizeTypes19 = concatTypes(dequantizeTypes10, float8Types)
	dequantizeTypes21 = concatTypes(dequantizeTypes19, []ir.DType{ir.Int16, ir.Uint16, ir.Int4, ir.Uint4})
	dequantizeTypes23 = concatTypes(dequantizeTypes21, []ir.DType{ir.Float4E2M1, ir.Float8E8M0, ir.Int2, ir.Uint2})
	int8Types         = []ir.DType{ir.Int8, ir.Uint8}
)

func quantRow(name string, since int64, minIn, maxIn, outs int, types []ir.DType, attrs []AttrDef, infer func(*InferContext) error, run func(*KernelContext) error) *Schema {
	return &Schema{Name: name, Since: since, MinInputs: minIn, MaxInputs: maxIn, MinOutputs: outs, MaxOutputs: outs,
		Attrs: attrs, Types: types, Infer: infer, Run: run}
}

var quantOps = []*Schema{
	// QuantizeLinear: v13 added per-axis scales, v19 saturate (for the
	// float8 outputs) and float16/bfloat16 inputs, v21 blocked scales,
	// output_dtype and 16-bit outputs, v23 precision.
	quantRow("QuantizeLinear", 10, 2, 3, 1, quantizeTypes10, nil, inferQuantize, runQuantize),
	quantRow("QuantizeLinear", 13, 2, 3, 1, quantizeTypes10, []AttrDef{defInt("axis", 1)}, inferQuantize, runQuantize),
	quantRow("QuantizeLinear", 19, 2, 3, 1, quantizeTypes19, []AttrDef{defInt("axis", 1), defInt("saturate", 1)}, inferQuantize, runQuantize),
	quantRow("QuantizeLinear", 21, 2, 3, 1, quantizeTypes19, []AttrDef{defInt("axis", 1), defInt("block_size", 0),
		defInt("output_dtype", 0), defInt("saturate", 1)}, inferQuantize, runQuantize),
	quantRow("QuantizeLinear", 23, 2, 3, 1, quantizeTypes19, []AttrDef{defInt("axis", 1), defInt("block_size", 0),
		defInt("output_dtype", 0), defInt("precision", 0), defInt("saturate", 1)}, inferQuantize, runQuantize),
	// DequantizeLinear: v13 added per-axis scales, v19 outputs the scale's
	// type, v21 blocked scales and 16-bit inputs, v23 output_dtype.
	quantRow("DequantizeLinear", 10, 2, 3, 1, dequantizeTypes10, nil, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 13, 2, 3, 1, dequantizeTypes10, []AttrDef{defInt("axis", 1)}, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 19, 2, 3, 1, dequantizeTypes19, []AttrDef{defInt("axis", 1)}, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 21, 2, 3, 1, dequantizeTypes21, []AttrDef{defInt("axis", 1), defInt("block_size", 0)}, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 23, 2, 3, 1, dequantizeTypes23, []AttrDef{defInt("axis", 1), defInt("block_size", 0),
		defInt("output_dtype", 0)}, inferDequantize, runDequantize),
	quantRow("DynamicQuantizeLinear", 11, 1, 1, 3, []ir.DType{ir.Float32}, nil, inferDynamicQuantize, runDynamicQuantize),
	quantRow("MatMulInteger", 10, 2, 4, 1, int8Types, nil, inferMatMulInteger, runMatMulInteger),
	// QLinearMatMul-21 added float16/bfloat16 scales and float8 operands
	// (declared, not computed).
	quantRow("QLinearMatMul", 10, 8, 8, 1, int8Types, nil, inferQLinearMatMul, runQLinearMatMul),
	quantRow("QLinearMatMul", 21, 8, 8, 1, int8Types, nil, inferQLinearMatMul, runQLinearMatMul),
	quantRow("ConvInteger", 10, 2, 4, 1, int8Types, convAttrs(), inferConvInteger, runConvInteger),
	quantRow("QLinearConv", 10, 8, 9, 1, int8Types, convAttrs(), inferQLinearConv, runQLinearConv),
}

func init() { register(quantOps) }

// intRange is the range an integer quantized type saturates to.
func intRange(d ir.DType) (lo, hi float64, ok bool) {
	if d.IsPackedInt() {
		l, h := ir.PackedIntRange(d)
		return float64(l), float64(h), true
	}
	switch d {
	case ir.Uint8:
		return 0, math.MaxUint8, true
	case ir.Int8:
		return math.MinInt8, math.MaxInt8, true
	case ir.Uint16:
		return 0, math.MaxUint16, true
	case ir.Int16:
		return math.MinInt16, math.MaxInt16, true
	}
	return 0, 0, false
}

// requantize rounds v half to even, adds the zero point and saturates: the
// last step of every op that produces quantized values.
func requantize(v, zeroPoint, lo, hi float64) float64 {
	return min(hi, max(lo, math.RoundToEven(v)+zeroPoint))
}

// quantizedType is QuantizeLinear's output type: the zero point's, else
// output_dtype's (v21+), else uint8.
func quantizedType(a attrs, zeroPoint ir.DType, hasZeroPoint bool) (ir.DType, error) {
	var attr ir.DType
	if a.declares("output_dtype") {
		attr = ir.DType(a.Int("output_dtype"))
	}
	switch {
	case hasZeroPoint && attr != ir.Undefined && zeroPoint != ir.Undefined && attr != zeroPoint:
		return 0, fmt.Errorf("output_dtype %s differs from the zero point's %s", attr, zeroPoint)
	case hasZeroPoint:
		return zeroPoint, nil
	case attr != ir.Undefined:
		return attr, nil
	}
	return ir.Uint8, nil
}

// QuantizedType is QuantizeLinear's output type, given the zero point's
// type (has: the node has one).
func (c *KernelContext) QuantizedType(zeroPoint ir.DType, has bool) (ir.DType, error) {
	return quantizedType(c.attrs, zeroPoint, has)
}

// QuantPrecision is the float type QuantizeLinear's division x / scale
// rounds to: the scale's type, or v23's precision attribute when set.
func (c *KernelContext) QuantPrecision(scale ir.DType) ir.DType {
	if c.attrs.declares("precision") && c.Int("precision") != 0 {
		return ir.DType(c.Int("precision"))
	}
	return scale
}

func inferQuantize(c *InferContext) error {
	out, err := quantizedType(c.attrs, c.In(2).Elem, c.HasInput(2))
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkQuantParams(c); err != nil {
		return err
	}
	c.Set(0, ir.TensorType(out, c.In(0).Shape.Clone()))
	return nil
}

// dequantizedType is DequantizeLinear's output type: float32 before v19,
// then the scale's, or output_dtype's (v23+) when set.
func dequantizedType(a attrs, opset int64, scale ir.DType) ir.DType {
	if a.declares("output_dtype") && a.Int("output_dtype") != 0 {
		return ir.DType(a.Int("output_dtype"))
	}
	if opset < 19 {
		return ir.Float32
	}
	return scale
}

// DequantizedType is DequantizeLinear's output type for a scale of type
// scale.
func (c *KernelContext) DequantizedType(scale ir.DType) ir.DType {
	return dequantizedType(c.attrs, c.Opset, scale)
}

func inferDequantize(c *InferContext) error {
	if c.HasInput(2) && c.In(2).Elem != ir.Undefined && c.In(0).Elem != ir.Undefined && c.In(2).Elem != c.In(0).Elem {
		return c.Errorf("zero point is %s, the input %s", c.In(2).Elem, c.In(0).Elem)
	}
	if err := checkQuantParams(c); err != nil {
		return err
	}
	c.Set(0, ir.TensorType(dequantizedType(c.attrs, c.Opset, c.In(1).Elem), c.In(0).Shape.Clone()))
	return nil
}

// checkQuantParams checks the scale and zero point of (De)QuantizeLinear
// against the input where their shapes are static.
func checkQuantParams(c *InferContext) error {
	x, s := c.In(0).Shape, c.In(1).Shape
	if c.HasInput(2) && s.Ranked && c.In(2).Shape.Ranked && !s.Equal(c.In(2).Shape) && !oneElement(s, c.In(2).Shape) {
		return c.Errorf("scale is %s but the zero point %s", s, c.In(2).Shape)
	}
	xd, ok1 := x.Ints()
	sd, ok2 := s.Ints()
	if ok1 && ok2 {
		if _, err := quantIndex(c.attrs, xd, sd); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return nil
}

// oneElement reports whether both shapes are static with one element: a
// per-tensor scale and zero point, which ONNX's reference (and its node
// tests) pair as a scalar and a [1] as well as two scalars.
func oneElement(a, b ir.Shape) bool {
	ad, ok1 := a.Ints()
	bd, ok2 := b.Ints()
	return ok1 && ok2 && ir.Product(ad) == 1 && ir.Product(bd) == 1
}

// QuantLayout is how QuantizeLinear's and DequantizeLinear's scale and
// zero point apply to x: per tensor (Axis -1), per axis (one per element of
// x's Axis, Block 0), or in blocks of Block elements along Axis (v21).
type QuantLayout struct {
	Axis  int
	Block int64
}

// QuantLayout resolves the layout of a scale of dims sd over x of dims xd
// (-1 where unknown) from the node's axis and block_size, checking the
// scale's shape where the dims are known.
func (c *KernelContext) QuantLayout(xd, sd []int64) (QuantLayout, error) {
	return quantLayout(c.attrs, xd, sd)
}

func quantLayout(a attrs, xd, sd []int64) (QuantLayout, error) {
	var axis, block int64 = 1, 0
	if a.declares("axis") {
		axis = a.Int("axis")
	}
	if a.declares("block_size") {
		block = a.Int("block_size")
	}
	if block < 0 {
		return QuantLayout{}, fmt.Errorf("block_size %d", block)
	}
	if block == 0 && len(sd) <= 1 && ir.Product(sd) == 1 {
		return QuantLayout{Axis: -1}, nil
	}
	ax, err := NormAxis(axis, len(xd))
	if err != nil {
		return QuantLayout{}, err
	}
	if block == 0 {
		if len(sd) != 1 || xd[ax] >= 0 && sd[0] != xd[ax] {
			return QuantLayout{}, fmt.Errorf("scale has shape %v, want a scalar or [%d] for axis %d of %v", ir.FormatList(sd), xd[ax], ax, ir.FormatList(xd))
		}
		return QuantLayout{Axis: ax}, nil
	}
	want := slices.Clone(xd)
	if xd[ax] >= 0 {
		want[ax] = (xd[ax] + block - 1) / block
	}
	ok := len(sd) == len(want)
	for i := 0; ok && i < len(sd); i++ {
		ok = want[i] < 0 || sd[i] == want[i]
	}
	if !ok {
		return QuantLayout{}, fmt.Errorf("scale has shape %v, want %v for blocks of %d along axis %d of %v", ir.FormatList(sd), ir.FormatList(want), block, ax, ir.FormatList(xd))
	}
	return QuantLayout{Axis: ax, Block: block}, nil
}

// quantIndex maps each element of x (dims xd) to its scale and zero point
// (dims sd), laid out as quantLayout resolves.
func quantIndex(a attrs, xd, sd []int64) ([]int, error) {
	l, err := quantLayout(a, xd, sd)
	if err != nil {
		return nil, err
	}
	if l.Axis < 0 {
		return make([]int, ir.Product(xd)), nil
	}
	if l.Block == 0 {
		pd := make([]int64, len(xd))
		for i := range pd {
			pd[i] = 1
		}
		pd[l.Axis] = xd[l.Axis]
		return BroadcastIndex(pd, xd), nil
	}
	idx := make([]int, ir.Product(xd))
	st, coord := Strides(sd), make([]int64, len(xd))
	for k := range idx {
		var flat int64
		for j, c := range coord {
			if j == l.Axis {
				c /= l.Block
			}
			flat += c * st[j]
		}
		idx[k] = int(flat)
		for j := len(coord) - 1; j >= 0; j-- {
			if coord[j]++; coord[j] < xd[j] {
				break
			}
			coord[j] = 0
		}
	}
	return idx, nil
}

// roundTo rounds a float32 to a narrower float type, for computations the
// spec performs in float16 or bfloat16.
func roundTo(d ir.DType, v float32) float32 {
	switch d {
	case ir.Float16:
		return ir.HalfToFloat32(ir.Float32ToHalf(v))
	case ir.BFloat16:
		return ir.BFloat16ToFloat32(ir.Float32ToBFloat16(v))
	}
	return v
}

// zeroPoints returns an optional zero point's values, or a single 0.
func zeroPoints(t *ir.Tensor) []float64 {
	if t == nil {
		return []float64{0}
	}
	return Float64s(t)
}

func runQuantize(c *KernelContext) error {
	x, scale, zp := c.In(0), c.In(1), c.In(2)
	var zpType ir.DType
	if zp != nil {
		zpType = zp.DType
	}
	out, err := c.QuantizedType(zpType, zp != nil)
	if err != nil {
		return c.Errorf("%v", err)
	}
	lo, hi, isInt := intRange(out)
	if !isInt && !out.IsSmallFloat() {
		return c.Unsupported(out)
	}
	idx, err := quantIndex(c.attrs, x.Dims, scale.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if zp != nil && !slices.Equal(zp.Dims, scale.Dims) && !oneElement(scale.Shape(), zp.Shape()) {
		return c.Errorf("scale has shape %v but the zero point %v", ir.FormatList(scale.Dims), ir.FormatList(zp.Dims))
	}
	// The division runs in float32, rounded to float16/bfloat16 when that
	// is the precision.
	precision := c.QuantPrecision(scale.DType)
	xv, sv, zv := Float64s(x), Float64s(scale), zeroPoints(zp)
	y := make([]float64, len(xv))
	for i, v := range xv {
		q := roundTo(precision, float32(v)/float32(sv[idx[i]]))
		z := 0.0
		if zp != nil {
			z = zv[idx[i]]
		}
		if !isInt {
			y[i] = float64(q + float32(z)) // in float32 as the spec's formula; rounded into out below, as Cast does
			continue
		}
		y[i] = requantize(float64(q), z, lo, hi)
	}
	saturate := !c.declares("saturate") || c.Int("saturate") != 0
	c.Set(0, fromFloat64sCast(out, x.Dims, y, saturate, ir.RoundUp))
	return nil
}

func runDequantize(c *KernelContext) error {
	x, scale, zp := c.In(0), c.In(1), c.In(2)
	out := c.DequantizedType(scale.DType)
	if !out.IsFloat() {
		return c.Unsupported(out)
	}
	idx, err := quantIndex(c.attrs, x.Dims, scale.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if zp != nil && !slices.Equal(zp.Dims, scale.Dims) && !oneElement(scale.Shape(), zp.Shape()) {
		return c.Errorf("scale has shape %v but the zero point %v", ir.FormatList(scale.Dims), ir.FormatList(zp.Dims))
	}
	xv, sv, zv := Float64s(x), Float64s(scale), zeroPoints(zp)
	y := make([]float64, len(xv))
	for i, v := range xv {
		d := float32(v)
		if zp != nil {
			d -= float32(zv[idx[i]])
		}
		y[i] = float64(d * float32(sv[idx[i]]))
	}
	c.Set(0, FromFloat64s(out, x.Dims, y))
	return nil
}

func inferDynamicQuantize(c *InferContext) error {
	c.Set(0, ir.TensorType(ir.Uint8, c.In(0).Shape.Clone()))
	c.Set(1, ir.TensorType(ir.Float32, ir.S()))
	c.Set(2, ir.TensorType(ir.Uint8, ir.S()))
	return nil
}

// runDynamicQuantize quantizes to uint8 over the range of x widened to
// include 0, in float32 like the spec's formula. An all-zero input has no
// range; it gets scale 0 and zero point 0 and quantizes to zeros.
func runDynamicQuantize(c *KernelContext) error {
	x := ir.Data[float32](c.In(0))
	var lo, hi float32
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	scale := (hi - lo) / 255
	var zp float64
	y := make([]float64, len(x))
	if scale != 0 {
		zp = requantize(float64(-lo/scale), 0, 0, 255)
		for i, v := range x {
			y[i] = requantize(float64(v/scale), zp, 0, 255)
		}
	}
	c.Set(0, FromFloat64s(ir.Uint8, c.In(0).Dims, y))
	c.Set(1, ir.Scalar(ir.Float32, scale))
	c.Set(2, ir.Scalar(ir.Uint8, uint8(zp)))
	return nil
}

// quantParam says how a scale or zero point input of a quantized matmul
// or convolution applies: a 1-D parameter runs along axis (from the end
// when negative) of the tensor it belongs to, as ONNX specifies: a
// matmul's rows for a's and y's, its columns for b's, a convolution's
// output channels for w's.
type quantParam struct {
	name string
	axis int
}

var quantParams = map[string]map[int]quantParam{
	"MatMulInteger": {2: {"a_zero_point", -2}, 3: {"b_zero_point", -1}},
	"QLinearMatMul": {1: {"a_scale", -2}, 2: {"a_zero_point", -2}, 4: {"b_scale", -1}, 5: {"b_zero_point", -1},
		6: {"y_scale", -2}, 7: {"y_zero_point", -2}},
	"ConvInteger": {2: {"x_zero_point", -1}, 3: {"w_zero_point", 0}},
	"QLinearConv": {1: {"x_scale", -1}, 2: {"x_zero_point", -1}, 4: {"w_scale", 1}, 5: {"w_zero_point", 0},
		6: {"y_scale", -1}, 7: {"y_zero_point", -1}},
}

// QuantParamDims lays out input i of a quantized matmul or convolution, a
// scale or zero point of dims pd, against the tensor it applies to, of dims
// xd (-1 where unknown): zero points apply to their operand (MatMulInteger's
// a and b, a convolution's x and w), scales and y's zero point to the
// output. It returns the dims the parameter broadcasts with (numpy): none
// for a single element (per tensor), a 1-D parameter spread along its axis
// (quantParams), else its own, which must broadcast to xd.
func (c *KernelContext) QuantParamDims(i int, pd, xd []int64) ([]int64, error) {
	p, ok := quantParams[c.Node.OpType][i]
	if !ok {
		return nil, fmt.Errorf("input %d of %s is not a quantization parameter", i, c.Node.OpType)
	}
	if ir.Product(pd) == 1 {
		return nil, nil
	}
	lay := pd
	if len(pd) == 1 {
		a := p.axis
		if a < 0 {
			a += len(xd)
		}
		if a < 0 || a >= len(xd) {
			return nil, fmt.Errorf("%s of shape %v does not apply to shape %v", p.name, ir.FormatList(pd), ir.FormatList(xd))
		}
		lay = make([]int64, len(xd))
		for k := range lay {
			lay[k] = 1
		}
		lay[a] = pd[0]
	}
	ok = len(lay) <= len(xd)
	for k := 0; ok && k < len(lay); k++ {
		d := xd[len(xd)-len(lay)+k]
		ok = lay[k] == 1 || d < 0 || lay[k] == d
	}
	if !ok {
		return nil, fmt.Errorf("%s of shape %v does not apply to shape %v", p.name, ir.FormatList(pd), ir.FormatList(xd))
	}
	return lay, nil
}

// paramIndex maps each element of a tensor of dims xd to its entry in
// input i, a scale or zero point laid out by QuantParamDims.
func paramIndex(c *KernelContext, i int, xd []int64) ([]int, error) {
	lay, err := c.QuantParamDims(i, c.In(i).Dims, xd)
	if err != nil {
		return nil, err
	}
	return BroadcastIndex(lay, xd), nil
}

// centered returns input x minus its zero point, input zp (absent: 0), as
// float64.
func centered(c *KernelContext, x, zp int) ([]float64, error) {
	v := Float64s(c.In(x))
	if c.In(zp) == nil {
		return v, nil
	}
	idx, err := paramIndex(c, zp, c.In(x).Dims)
	if err != nil {
		return nil, err
	}
	z := Float64s(c.In(zp))
	for i := range v {
		v[i] -= z[idx[i]]
	}
	return v, nil
}

func inferMatMulInteger(c *InferContext) error {
	shape, err := matmulShape(c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.Int32, shape))
	return nil
}

// integerMatmul returns (a - a_zero_point)·(b - b_zero_point), exactly, and
// the output dims, for the inputs a, b and their zero points at the given
// indices.
func integerMatmul(c *KernelContext, a, azp, b, bzp int) ([]int64, []float64, error) {
	shape, err := matmulShape(c.In(a).Shape(), c.In(b).Shape())
	if err != nil {
		return nil, nil, err
	}
	av, err := centered(c, a, azp)
	if err != nil {
		return nil, nil, err
	}
	bv, err := centered(c, b, bzp)
	if err != nil {
		return nil, nil, err
	}
	dims, _ := shape.Ints()
	return dims, matmul(av, c.In(a).Dims, bv, c.In(b).Dims), nil
}

func runMatMulInteger(c *KernelContext) error {
	dims, y, err := integerMatmul(c, 0, 2, 1, 3)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, FromFloat64s(ir.Int32, dims, y))
	return nil
}

func inferQLinearMatMul(c *InferContext) error {
	shape, err := matmulShape(c.In(0).Shape, c.In(3).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(c.In(7).Elem, shape))
	return nil
}

// rescale converts exact integer accumulations to the quantized output:
// acc·(s1·s2/s3) rounded half to even, plus the output zero point,
// saturated; s1, s2, s3 and zp are input indices. The multiplier is formed
// in float32, as ONNX Runtime does, and applied in float64.
func rescale(c *KernelContext, acc []float64, dims []int64, s1, s2, s3, zp int) error {
	out := c.In(zp).DType
	lo, hi, ok := intRange(out)
	if !ok {
		return c.Unsupported(out)
	}
	var idx [4][]int
	for k, p := range []int{s1, s2, s3, zp} {
		var err error
		if idx[k], err = paramIndex(c, p, dims); err != nil {
			return c.Errorf("%v", err)
		}
	}
	v1, v2, v3, z := Float64s(c.In(s1)), Float64s(c.In(s2)), Float64s(c.In(s3)), Float64s(c.In(zp))
	y := make([]float64, len(acc))
	for i, a := range acc {
		m := float32(v1[idx[0][i]]) * float32(v2[idx[1][i]]) / float32(v3[idx[2][i]])
		y[i] = requantize(a*float64(m), z[idx[3][i]], lo, hi)
	}
	c.Set(0, FromFloat64s(out, dims, y))
	return nil
}

func runQLinearMatMul(c *KernelContext) error {
	dims, acc, err := integerMatmul(c, 0, 2, 3, 5)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return rescale(c, acc, dims, 1, 4, 6, 7)
}

func inferConvInteger(c *InferContext) error {
	_, shape, err := convShape(c.attrs, c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.Int32, shape))
	return nil
}

// integerConv returns conv(x - x_zero_point, w - w_zero_point) + bias,
// exactly, and the output dims, for the inputs x, w and their zero points
// at the given indices (bias: -1 for none).
func integerConv(c *KernelContext, x, xzp, w, wzp, bias int) ([]int64, []float64, error) {
	xv, err := centered(c, x, xzp)
	if err != nil {
		return nil, nil, err
	}
	wv, err := centered(c, w, wzp)
	if err != nil {
		return nil, nil, err
	}
	var b []float64
	if bias >= 0 {
		b = optFloat64s(c.In(bias))
	}
	return convFloat64(c.attrs, c.In(x).Dims, xv, c.In(w).Dims, wv, b)
}

func runConvInteger(c *KernelContext) error {
	dims, y, err := integerConv(c, 0, 2, 1, 3, -1)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, FromFloat64s(ir.Int32, dims, y))
	return nil
}

func inferQLinearConv(c *InferContext) error {
	_, shape, err := convShape(c.attrs, c.In(0).Shape, c.In(3).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if err := checkBias(c.In(8).Shape, shape); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(c.In(7).Elem, shape))
	return nil
}

func runQLinearConv(c *KernelContext) error {
	dims, acc, err := integerConv(c, 0, 2, 3, 5, 8)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return rescale(c, acc, dims, 1, 4, 6, 7)
}
