package opcase

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Compare compares an output with the oracle's: integers, bools and the
// codes of the 8-, 4- and 2-bit types exactly, floats within a tolerance of their precision (relative 1e-4
// for float32 and float64, 2e-3 for float16, 1.6e-2 for bfloat16), ±Inf
// exactly, NaN equal only to NaN.
func Compare(got, want *ir.Tensor) error {
	if got == nil {
		return fmt.Errorf("missing")
	}
	if want == nil {
		return fmt.Errorf("no value to compare with")
	}
	if got.DType != want.DType || !slices.Equal(got.Dims, want.Dims) {
		return fmt.Errorf("got %s%v, want %s%v", got.DType, got.Dims, want.DType, want.Dims)
	}
	rtol, atol := 1e-4, 1e-5
	switch want.DType {
	case ir.Float16:
		rtol, atol = 2e-3, 1e-3
	case ir.BFloat16:
		rtol, atol = 1.6e-2, 1e-2
	}
	for i := 0; i < int(want.Len()); i++ {
		if d := want.DType; d.IsSmallFloat() || d.IsPackedInt() {
			if got.Code(i) != want.Code(i) { // the codes, exactly: NaN's and -0's too
				return fmt.Errorf("element %d: got code %#x (%g), want %#x (%g)", i, got.Code(i), got.Float64At(i), want.Code(i), want.Float64At(i))
			}
			continue
		}
		if !want.DType.IsFloat() {
			if got.Int64At(i) != want.Int64At(i) {
				return fmt.Errorf("element %d: got %d, want %d", i, got.Int64At(i), want.Int64At(i))
			}
			continue
		}
		a, b := got.Float64At(i), want.Float64At(i)
		switch {
		case math.IsNaN(a) || math.IsNaN(b):
			if math.IsNaN(a) != math.IsNaN(b) {
				return fmt.Errorf("element %d: got %g, want %g", i, a, b)
			}
		case math.IsInf(b, 0):
			if a != b {
				return fmt.Errorf("element %d: got %g, want %g", i, a, b)
			}
		case math.Abs(a-b) > atol+rtol*math.Abs(b):
			return fmt.Errorf("element %d: got %g, want %g", i, a, b)
		}
	}
	return nil
}
