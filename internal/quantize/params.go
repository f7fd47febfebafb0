package quantize

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Quantization arithmetic. Scales are float32 and values divide by them in
// float32 and round half to even, as ONNX's QuantizeLinear does, so what is
// stored here is what a QuantizeLinear node would compute.

// minScale keeps scales normal float32 numbers: a tensor whose range is
// all but zero gets steps of this size rather than a denormal or zero scale.
const minScale = 0x1p-100

// actParams are an activation's uint8 scale and zero point.
type actParams struct {
	scale float32
	zp    uint8
}

// activationParams covers [lo, hi] with uint8 levels, widened to hold 0.0
// and with the zero point rounded to an integer, so that 0.0 (padding, a
// ReLU's output) is exactly representable.
func activationParams(lo, hi float64) actParams {
	lo, hi = min(lo, 0), max(hi, 0)
	scale := float32((hi - lo) / 255)
	switch {
	case !(hi > lo): // an all-zero tensor: any scale holds it exactly, and 1 saturates no less likely value
		scale = 1
	case !(scale >= minScale): // tiny
		scale = minScale
	}
	zp := math.RoundToEven(-lo / float64(scale))
	return actParams{scale: scale, zp: uint8(min(255, max(0, zp)))}
}

// quantizeF32 is QuantizeLinear of one value to [lo, hi].
func quantizeF32(x, scale float32, lo, hi float64) float64 {
	return min(hi, max(lo, math.RoundToEven(float64(x/scale))))
}

// weightParams quantizes a float32 weight symmetrically to int8 in
// [-127, 127] (zero point 0), per slice along axis (axis < 0: the whole
// tensor): scale = max|w| / 127, 1 for an all-zero slice.
func weightParams(w *ir.Tensor, axis int) (q *ir.Tensor, scales []float32) {
	data := ir.Data[float32](w)
	channels, inner := 1, len(data)
	if axis >= 0 {
		channels = int(w.Dims[axis])
		inner = int(ir.Product(w.Dims[axis+1:]))
	}
	outer := len(data) / max(1, channels*inner)
	scales = make([]float32, channels)
	amax := make([]float64, channels)
	for o := range outer {
		for c := range channels {
			for _, x := range data[(o*channels+c)*inner : (o*channels+c+1)*inner] {
				amax[c] = max(amax[c], math.Abs(float64(x)))
			}
		}
	}
	for c, a := range amax {
		scales[c] = float32(a / 127)
		if !(scales[c] >= minScale) {
			scales[c] = 1
		}
	}
	q = ir.NewTensor(ir.Int8, w.Dims...)
	qd := ir.Data[int8](q)
	for o := range outer {
		for c := range channels {
			base := (o*channels + c) * inner
			for i := base; i < base+inner; i++ {
				qd[i] = int8(quantizeF32(data[i], scales[c], -127, 127))
			}
		}
	}
	return q, scales
}

// biasParams quantizes a float32 bias to int32 with scale sx·sw[c], the
// scale of the products the integer kernel accumulates it with (sw of one
// element: per tensor). It reports whether any value saturated.
func biasParams(b *ir.Tensor, sx float32, sw []float32) (q *ir.Tensor, scales []float32, clipped bool) {
	data := ir.Data[float32](b)
	scales = make([]float32, len(sw))
	for c, s := range sw {
		scales[c] = sx * s
		if !(scales[c] >= minScale) {
			scales[c] = minScale
		}
	}
	q = ir.NewTensor(ir.Int32, b.Dims...)
	qd := ir.Data[int32](q)
	for i, x := range data {
		s := scales[0]
		if len(scales) > 1 {
			s = scales[i]
		}
		v := math.RoundToEven(float64(x) / float64(s))
		if v > math.MaxInt32 || v < math.MinInt32 {
			clipped = true
		}
		qd[i] = int32(min(math.MaxInt32, max(math.MinInt32, v)))
	}
	return q, scales, clipped
}
