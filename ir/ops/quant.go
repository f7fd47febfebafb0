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
// The 8-bit float and 4-bit integer types are read and written by kiln but
// not computed with: those kernels return UnsupportedError.

var (
	quantizeTypes10   = []ir.DType{ir.Float32, ir.Int32}
	quantizeTypes19   = []ir.DType{ir.Float32, ir.Int32, ir.Float16, ir.BFloat16}
	dequantizeTypes10 = []ir.DType{ir.Int8, ir.Uint8, ir.Int32}
	dequantizeTypes21 = []ir.DType{ir.Int8, ir.Uint8, ir.Int32, ir.Int16, ir.Uint16}
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
	quantRow("DequantizeLinear", 19, 2, 3, 1, dequantizeTypes10, []AttrDef{defInt("axis", 1)}, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 21, 2, 3, 1, dequantizeTypes21, []AttrDef{defInt("axis", 1), defInt("block_size", 0)}, inferDequantize, runDequantize),
	quantRow("DequantizeLinear", 23, 2, 3, 1, dequantizeTypes21, []AttrDef{defInt("axis", 1), defInt("block_size", 0),
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
	if c.HasInput(2) && s.Ranked && c.In(2).Shape.Ranked && !s.Equal(c.In(2).Shape) {
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

// quantIndex maps each element of x (dims xd) to its scale and zero point
// (dims sd): per tensor (a scalar or one element), per axis (1-D along
// axis), or blocked (v21: x's rank, block_size elements per scale along
// axis).
func quantIndex(a attrs, xd, sd []int64) ([]int, error) {
	var axis, block int64 = 1, 0
	if a.declares("axis") {
		axis = a.Int("axis")
	}
	if a.declares("block_size") {
		block = a.Int("block_size")
	}
	if block < 0 {
		return nil, fmt.Errorf("block_size %d", block)
	}
	if block == 0 && len(sd) <= 1 && ir.Product(sd) == 1 {
		return make([]int, ir.Product(xd)), nil
	}
	ax, err := NormAxis(axis, len(xd))
	if err != nil {
		return nil, err
	}
	if block == 0 {
		if len(sd) != 1 || sd[0] != xd[ax] {
			return nil, fmt.Errorf("scale has shape %v, want a scalar or [%d] for axis %d of %v", sd, xd[ax], ax, xd)
		}
		pd := make([]int64, len(xd))
		for i := range pd {
			pd[i] = 1
		}
		pd[ax] = xd[ax]
		return BroadcastIndex(pd, xd), nil
	}
	want := slices.Clone(xd)
	want[ax] = (xd[ax] + block - 1) / block
	if !slices.Equal(sd, want) {
		return nil, fmt.Errorf("scale has shape %v, want %v for blocks of %d along axis %d of %v", sd, want, block, ax, xd)
	}
	idx := make([]int, ir.Product(xd))
	st, coord := Strides(sd), make([]int64, len(xd))
	for k := range idx {
		var flat int64
		for j, c := range coord {
			if j == ax {
				c /= block
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
	out, err := quantizedType(c.attrs, zpType, zp != nil)
	if err != nil {
		return c.Errorf("%v", err)
	}
	lo, hi, ok := intRange(out)
	if !ok {
		return c.Unsupported(out)
	}
	idx, err := quantIndex(c.attrs, x.Dims, scale.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if zp != nil && !slices.Equal(zp.Dims, scale.Dims) {
		return c.Errorf("scale has shape %v but the zero point %v", scale.Dims, zp.Dims)
	}
	// The division runs in the scale's precision (or v23's precision
	// attribute): float32, or rounded to float16/bfloat16.
	precision := scale.DType
	if c.attrs.declares("precision") && c.Int("precision") != 0 {
		precision = ir.DType(c.Int("precision"))
	}
	xv, sv, zv := Float64s(x), Float64s(scale), zeroPoints(zp)
	y := make([]float64, len(xv))
	for i, v := range xv {
		q := roundTo(precision, float32(v)/float32(sv[idx[i]]))
		z := 0.0
		if zp != nil {
			z = zv[idx[i]]
		}
		y[i] = requantize(float64(q), z, lo, hi)
	}
	c.Set(0, FromFloat64s(out, x.Dims, y))
	return nil
}

func runDequantize(c *KernelContext) error {
	x, scale, zp := c.In(0), c.In(1), c.In(2)
	out := dequantizedType(c.attrs, c.Opset, scale.DType)
	if !out.IsFloat() {
		return c.Unsupported(out)
	}
	idx, err := quantIndex(c.attrs, x.Dims, scale.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if zp != nil && !slices.Equal(zp.Dims, scale.Dims) {
		return c.Errorf("scale has shape %v but the zero point %v", scale.Dims, zp.Dims)
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

// paramIndex maps each element of a tensor of dims xd to its entry in a
// quantization parameter of dims pd, which must broadcast to xd.
func paramIndex(pd, xd []int64) ([]int, error) {
	if ir.Product(pd) == 1 {
		return make([]int, ir.Product(xd)), nil
	}
	if out, err := BroadcastDims(pd, xd); err != nil || len(pd) > len(xd) || !slices.Equal(out, xd) {
		return nil, fmt.Errorf("a quantization parameter of shape %v does not apply to shape %v", pd, xd)
	}
	return BroadcastIndex(pd, xd), nil
}

// perRow gives a 1-D per-row parameter of an [..., M, K] matmul operand
// dims that broadcast it along the rows ([M, 1]); per-column parameters
// ([N]) and full-rank ones already broadcast as they are.
func perRow(pd []int64) []int64 {
	if len(pd) == 1 {
		return []int64{pd[0], 1}
	}
	return pd
}

// centered returns x minus its zero point (absent: 0), as float64, with the
// zero point laid out by dims zpd (see paramIndex).
func centered(x, zp *ir.Tensor, zpd []int64) ([]float64, error) {
	v := Float64s(x)
	if zp == nil {
		return v, nil
	}
	idx, err := paramIndex(zpd, x.Dims)
	if err != nil {
		return nil, err
	}
	z := Float64s(zp)
	for i := range v {
		v[i] -= z[idx[i]]
	}
	return v, nil
}

// dimsOrNil returns an optional tensor's dims.
func dimsOrNil(t *ir.Tensor) []int64 {
	if t == nil {
		return nil
	}
	return t.Dims
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
// the output dims. Zero points are per tensor, per row of a, per column of
// b, or broadcast from a full-rank shape.
func integerMatmul(a, azp, b, bzp *ir.Tensor) ([]int64, []float64, error) {
	shape, err := matmulShape(a.Shape(), b.Shape())
	if err != nil {
		return nil, nil, err
	}
	av, err := centered(a, azp, perRow(dimsOrNil(azp)))
	if err != nil {
		return nil, nil, fmt.Errorf("a_zero_point: %w", err)
	}
	bv, err := centered(b, bzp, dimsOrNil(bzp))
	if err != nil {
		return nil, nil, fmt.Errorf("b_zero_point: %w", err)
	}
	dims, _ := shape.Ints()
	return dims, matmul(av, a.Dims, bv, b.Dims), nil
}

func runMatMulInteger(c *KernelContext) error {
	dims, y, err := integerMatmul(c.In(0), c.In(2), c.In(1), c.In(3))
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

// qparam is a scale or zero point with the dims that lay it out against
// the output (see paramIndex).
type qparam struct {
	t    *ir.Tensor
	dims []int64
}

// rescale converts exact integer accumulations to the quantized output:
// acc·(s1·s2/s3) rounded, plus the output zero point, saturated. The
// multiplier is formed in float32, as ONNX Runtime does.
func rescale(c *KernelContext, acc []float64, dims []int64, s1, s2, s3, zp qparam) error {
	lo, hi, ok := intRange(zp.t.DType)
	if !ok {
		return c.Unsupported(zp.t.DType)
	}
	var idx [4][]int
	for i, p := range []qparam{s1, s2, s3, zp} {
		var err error
		if idx[i], err = paramIndex(p.dims, dims); err != nil {
			return c.Errorf("%v", err)
		}
	}
	v1, v2, v3, z := Float64s(s1.t), Float64s(s2.t), Float64s(s3.t), Float64s(zp.t)
	y := make([]float64, len(acc))
	for i, a := range acc {
		m := float32(v1[idx[0][i]]) * float32(v2[idx[1][i]]) / float32(v3[idx[2][i]])
		y[i] = requantize(a*float64(m), z[idx[3][i]], lo, hi)
	}
	c.Set(0, FromFloat64s(zp.t.DType, dims, y))
	return nil
}

func runQLinearMatMul(c *KernelContext) error {
	a, as, azp, b, bs, bzp, ys, yzp := c.In(0), c.In(1), c.In(2), c.In(3), c.In(4), c.In(5), c.In(6), c.In(7)
	dims, acc, err := integerMatmul(a, azp, b, bzp)
	if err != nil {
		return c.Errorf("%v", err)
	}
	// a's scale is per row of the output, b's per column, y's per row.
	return rescale(c, acc, dims, qparam{as, perRow(as.Dims)}, qparam{bs, bs.Dims}, qparam{ys, perRow(ys.Dims)}, qparam{yzp, perRow(yzp.Dims)})
}

func inferConvInteger(c *InferContext) error {
	_, shape, err := convShape(c.attrs, c.In(0).Shape, c.In(1).Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.Int32, shape))
	return nil
}

// perChannel gives a 1-D per-output-channel parameter ([M]) of a
// convolution the dims that broadcast it over a rank-rank tensor whose
// axis 0 (weights) or 1 (output) is the channel.
func perChannel(pd []int64, rank, axis int) []int64 {
	if len(pd) != 1 {
		return pd
	}
	out := make([]int64, rank)
	for i := range out {
		out[i] = 1
	}
	out[axis] = pd[0]
	return out
}

// integerConv returns conv(x - x_zero_point, w - w_zero_point) + bias,
// exactly, and the output dims. w's zero point may be per output channel.
func integerConv(c *KernelContext, x, xzp, w, wzp, bias *ir.Tensor) ([]int64, []float64, error) {
	xv, err := centered(x, xzp, dimsOrNil(xzp))
	if err != nil {
		return nil, nil, fmt.Errorf("x_zero_point: %w", err)
	}
	wv, err := centered(w, wzp, perChannel(dimsOrNil(wzp), len(w.Dims), 0))
	if err != nil {
		return nil, nil, fmt.Errorf("w_zero_point: %w", err)
	}
	return convFloat64(c.attrs, x.Dims, xv, w.Dims, wv, optFloat64s(bias))
}

func runConvInteger(c *KernelContext) error {
	dims, y, err := integerConv(c, c.In(0), c.In(2), c.In(1), c.In(3), nil)
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
	x, xs, xzp, w, ws, wzp, ys, yzp := c.In(0), c.In(1), c.In(2), c.In(3), c.In(4), c.In(5), c.In(6), c.In(7)
	dims, acc, err := integerConv(c, x, xzp, w, wzp, c.In(8))
	if err != nil {
		return c.Errorf("%v", err)
	}
	return rescale(c, acc, dims, qparam{xs, xs.Dims}, qparam{ws, perChannel(ws.Dims, len(dims), 1)}, qparam{ys, ys.Dims}, qparam{yzp, yzp.Dims})
}
