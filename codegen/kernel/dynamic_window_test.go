package kernel

import (
	"fmt"
	"testing"

	"github.com/kiln-ml/kiln/internal/opcase"
)

// TestDynamicWindows runs every case of the window ops (and Resize) with
// the spatial dims of input 0 and output 0 known only at run time. A
// refusal must name its reason (SAME padding that varies with the size,
// MaxPool's Indices, sizes instead of scales, ...); enough cases of each
// op must run.
func TestDynamicWindows(t *testing.T) {
	for _, op := range []string{"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "Resize", "GlobalAveragePool", "GlobalMaxPool"} {
		lines := append(opcase.Cases()[op], mustRunDynamic[op]...)
		ran := 0
		for _, line := range lines {
			if !runSpatiallyDynamic(t, line) {
				ran++
			}
		}
		t.Logf("%s: %d of %d cases ran with dynamic spatial dims", op, ran, len(lines))
		if len(lines) > 0 && ran == 0 {
			t.Errorf("%s: no case ran with dynamic spatial dims", op)
		}
	}
}

// mustRunDynamic are cases that must run with dynamic spatial dims: SAME
// padding with strides, which pads by the size's remainder (sizes of
// each remainder), and Resizes: those whose taps repeat (integer scales or
// their inverses, coordinates that depend only on the position) and those
// whose taps are computed at run time (other scales, sizes, every
// coordinate mode, exclude_outside, a crop region, antialias at a
// constant scale, Resize-18's axes).
var mustRunDynamic = map[string][]string{
	"Conv": {
		`Conv-22(auto_pad="SAME_UPPER", strides=[2 2]) T[1,2,7,6], T[3,2,3,3], T[3]`,
		`Conv-22(auto_pad="SAME_LOWER", strides=[2 3]) T[1,2,6,8], T[3,2,2,4]`,
		`Conv-22(auto_pad="SAME_LOWER", strides=[3 2], dilations=[2 1]) T[2,2,7,5], T[3,2,3,2]`,
		// Strided along the width, read through its phases (stridePhases):
		// pads wider than the stride, dilated taps.
		`Conv-22(strides=[1 3], pads=[0 4 0 4], dilations=[1 2]) T[1,2,5,11], T[3,2,2,3], T[3]`,
		`Conv-22(strides=[2 2], pads=[1 1 1 1]) T[2,3,8,9], T[4,3,3,3], T[4]`,
	},
	"MaxPool": {
		`MaxPool-22(kernel_shape=[3 3], auto_pad="SAME_LOWER", strides=[2 2]) T[1,2,7,8]`,
		`MaxPool-22(kernel_shape=[2 3], auto_pad="SAME_UPPER", strides=[3 2]) T[1,2,8,5]`,
	},
	"Resize": {
		`Resize-13(mode="linear") T[1,2,4,5], _, float[4]=[1 1 2 2]`,
		`Resize-13(mode="linear") T[1,1,8,6], _, float[4]=[1 1 0.5 0.5]`,
		`Resize-13(mode="cubic") T[1,1,5,4], _, float[4]=[1 1 2 3]`,
		`Resize-13(mode="nearest") T[1,2,3,4], _, float[4]=[1 1 2 3]`,
		`Resize-13(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor") T[1,2,6,4], _, float[4]=[1 1 0.5 2]`,
		`Resize-13(mode="linear", coordinate_transformation_mode="pytorch_half_pixel") T[1,1,3,4], _, float[4]=[1 1 3 2]`,
		`Resize-13(mode="linear") T[1,2,5,7], _, float[4]=[1 1 1.5 0.6]`,
		`Resize-13(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5) T[1,1,6,5], _, _, int64[4]=[1 1 9 4]`,
		`Resize-13(mode="nearest", nearest_mode="round_prefer_ceil") T[1,2,7,5], _, float[4]=[1 1 0.6 1.7]`,
		`Resize-11(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="ceil") T[1,1,4,6], float[0]=[], float[0]=[], int64[4]=[1 1 7 3]`,
		`Resize-13(mode="linear", coordinate_transformation_mode="align_corners") T[2,3,5], _, _, int64[3]=[2 3 1]`,
		`Resize-13(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=9.0) T[1,1,5,4], float[8]=[0 0 0.3 -0.2 1 1 0.9 1.3], _, int64[4]=[1 1 4 6]`,
		`Resize-19(mode="cubic", coordinate_transformation_mode="half_pixel_symmetric") T[1,2,5,4], _, float[4]=[1 1 1.7 0.8]`,
		`Resize-18(mode="linear", antialias=1) T[1,1,9,8], _, float[4]=[1 1 0.4 0.7]`,
		`Resize-18(mode="nearest", axes=[3 2], nearest_mode="floor") T[1,2,4,6], _, _, int64[2]=[4 9]`,
	},
}

// TestDynamicMustRun: the cases of mustRunDynamic run (TestDynamicWindows
// only counts them).
func TestDynamicMustRun(t *testing.T) {
	for _, lines := range mustRunDynamic {
		for _, line := range lines {
			if runSpatiallyDynamic(t, line) {
				t.Errorf("%s: refused with dynamic spatial dims", line)
			}
		}
	}
}

// runSpatiallyDynamic runs case line with the spatial dims (axes 2 on)
// of input 0 and output 0 known only at run time, reporting a refusal.
func runSpatiallyDynamic(t *testing.T, line string) (refused bool) {
	t.Helper()
	c, err := opcase.Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	out := len(c.Ins) // the output's value index
	return runDynamic(t, line, func(value, axis int, _ int64) string {
		if axis >= 2 && (value == 0 || value == out) {
			return fmt.Sprintf("v%d_%d", value, axis)
		}
		return ""
	})
}
