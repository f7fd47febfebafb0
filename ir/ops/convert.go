package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// The reference kernels compute in float64 (floating types) or int64
// (integer types and bool) and convert at the edges: clear code, one
// kernel per op instead of one per dtype, and float64 accumulation.

// Float64s returns the elements of any numeric tensor as float64.
func Float64s(t *ir.Tensor) []float64 {
	n := int(t.Len())
	out := make([]float64, n)
	switch t.DType {
	case ir.Float32:
		for i, v := range ir.Data[float32](t) {
			out[i] = float64(v)
		}
	case ir.Float64:
		copy(out, ir.Data[float64](t))
	default:
		for i := range out {
			out[i] = t.Float64At(i)
		}
	}
	return out
}

// optFloat64s converts an optional input.
func optFloat64s(t *ir.Tensor) []float64 {
	if t == nil {
		return nil
	}
	return Float64s(t)
}

// Int64s returns the elements of an integer or bool tensor as int64
// (uint64 values above MaxInt64 wrap).
func Int64s(t *ir.Tensor) []int64 {
	n := int(t.Len())
	out := make([]int64, n)
	if t.DType == ir.Int64 {
		copy(out, ir.Data[int64](t))
		return out
	}
	if t.DType.IsFloat() || t.DType.IsSmallFloat() {
		for i := range out {
			out[i] = int64(t.Float64At(i))
		}
		return out
	}
	for i := range out {
		out[i] = t.Int64At(i)
	}
	return out
}

// FromFloat64s makes a tensor of dtype from float64 values, rounding to the
// nearest representable value for floating types (saturating the 8- and
// 4-bit ones, rounding up into float8e8m0: Cast's defaults) and truncating
// toward zero (then wrapping) for integer types. NaN becomes 0 in integer
// types.
func FromFloat64s(dtype ir.DType, dims []int64, v []float64) *ir.Tensor {
	return fromFloat64sCast(dtype, dims, v, true, ir.RoundUp)
}

// fromFloat64sCast is FromFloat64s with Cast's options for the 8- and 4-bit
// float types: saturate, and the rounding into float8e8m0.
func fromFloat64sCast(dtype ir.DType, dims []int64, v []float64, saturate bool, mode ir.RoundMode) *ir.Tensor {
	t := ir.NewTensor(dtype, dims...)
	switch dtype {
	case ir.Float32:
		d := ir.Data[float32](t)
		for i, x := range v {
			d[i] = float32(x)
		}
	case ir.Float64:
		copy(ir.Data[float64](t), v)
	case ir.Float16:
		d := ir.Data[uint16](t)
		for i, x := range v {
			d[i] = ir.Float32ToHalf(float32(x))
		}
	case ir.BFloat16:
		d := ir.Data[uint16](t)
		for i, x := range v {
			d[i] = ir.Float32ToBFloat16(float32(x))
		}
	case ir.Bool:
		d := ir.Data[uint8](t)
		for i, x := range v {
			if x != 0 {
				d[i] = 1
			}
		}
	case ir.Float8E8M0:
		for i, x := range v {
			t.SetCode(i, ir.EncodeFloat8E8M0(x, saturate, mode))
		}
	default:
		if dtype.IsSmallFloat() {
			for i, x := range v {
				t.SetCode(i, ir.EncodeSmallFloat(dtype, x, saturate))
			}
			break
		}
		ints := make([]int64, len(v))
		for i, x := range v {
			ints[i] = floatToInt(x, dtype)
		}
		fillInts(t, ints)
	}
	return t
}

func floatToInt(x float64, dtype ir.DType) int64 {
	if math.IsNaN(x) {
		return 0
	}
	if dtype == ir.Uint64 && x >= math.MaxInt64 {
		if x >= math.MaxUint64 {
			return -1
		}
		return int64(uint64(x))
	}
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	if x <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(x)
}

// FromInt64s makes a tensor of dtype from int64 values, wrapping to the
// type's width (two's complement), as C and ONNX Runtime do.
func FromInt64s(dtype ir.DType, dims []int64, v []int64) *ir.Tensor {
	t := ir.NewTensor(dtype, dims...)
	if dtype.IsFloat() || dtype.IsSmallFloat() {
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = float64(x)
		}
		return FromFloat64s(dtype, dims, f)
	}
	fillInts(t, v)
	return t
}

func fillInts(t *ir.Tensor, v []int64) {
	switch t.DType {
	case ir.Int8:
		narrow[int8](t, v)
	case ir.Uint8:
		narrow[uint8](t, v)
	case ir.Bool:
		d := ir.Data[uint8](t)
		for i, x := range v {
			if x != 0 {
				d[i] = 1
			}
		}
	case ir.Int16:
		narrow[int16](t, v)
	case ir.Uint16:
		narrow[uint16](t, v)
	case ir.Int32:
		narrow[int32](t, v)
	case ir.Uint32:
		narrow[uint32](t, v)
	case ir.Int64:
		copy(ir.Data[int64](t), v)
	case ir.Uint64:
		narrow[uint64](t, v)
	case ir.Int4, ir.Uint4, ir.Int2, ir.Uint2:
		for i, x := range v {
			t.SetCode(i, uint8(x)) // the low bits: two's complement wrapping
		}
	default:
		panic(fmt.Sprintf("ops: fillInts on %s", t.DType))
	}
}

// narrow stores int64 values into an integer tensor, wrapping to its width.
func narrow[T int8 | uint8 | int16 | uint16 | int32 | uint32 | uint64](t *ir.Tensor, v []int64) {
	d := ir.Data[T](t)
	for i, x := range v {
		d[i] = T(x)
	}
}

// Bools returns a bool tensor's elements.
func Bools(t *ir.Tensor) []bool {
	d := ir.Data[uint8](t)
	out := make([]bool, len(d))
	for i, x := range d {
		out[i] = x != 0
	}
	return out
}

// FromBools makes a bool tensor.
func FromBools(dims []int64, v []bool) *ir.Tensor {
	t := ir.NewTensor(ir.Bool, dims...)
	d := ir.Data[uint8](t)
	for i, x := range v {
		if x {
			d[i] = 1
		}
	}
	return t
}
