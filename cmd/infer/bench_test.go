package main

import (
	"math"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestRandomInputs: random inputs are N(0,1) in every float dtype, encoded
// in it and never denormal (0/1 bytes made float64, float16 and bfloat16
// inputs denormals, and a float64 benchmark 25× slower than on real data);
// integers are small indices, bools 0 or 1.
func TestRandomInputs(t *testing.T) {
	const n = 4096
	for _, c := range []struct {
		dtype     string
		minNormal float64
	}{{"float", 0x1p-126}, {"double", 0x1p-1022}, {"float16", 0x1p-14}, {"bfloat16", 0x1p-126}} {
		x, err := randomTensor(c.dtype, []int64{n}, 3)
		if err != nil {
			t.Fatalf("%s: %v", c.dtype, err)
		}
		sum, sumSq := 0.0, 0.0
		for i := range n {
			v := x.Float64At(i)
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) < c.minNormal {
				t.Fatalf("%s: element %d is %g: not a finite normal number", c.dtype, i, v)
			}
			sum, sumSq = sum+v, sumSq+v*v
		}
		mean := sum / n
		std := math.Sqrt(sumSq/n - mean*mean)
		if math.Abs(mean) > 0.1 || math.Abs(std-1) > 0.1 {
			t.Errorf("%s: mean %.3f, std %.3f; want N(0,1)", c.dtype, mean, std)
		}
	}
	for _, dtype := range []string{"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool"} {
		x, err := randomTensor(dtype, []int64{n}, 4)
		if err != nil {
			t.Fatalf("%s: %v", dtype, err)
		}
		limit := int64(10)
		if dtype == "bool" {
			limit = 2
		}
		seen := map[int64]bool{}
		for i := range n {
			v := x.Int64At(i)
			if v < 0 || v >= limit {
				t.Fatalf("%s: element %d is %d, want 0..%d", dtype, i, v, limit-1)
			}
			seen[v] = true
		}
		if int64(len(seen)) != limit {
			t.Errorf("%s: %d distinct values in %d samples, want all of 0..%d", dtype, len(seen), n, limit-1)
		}
	}
	if _, err := randomTensor(ir.Complex64.String(), []int64{4}, 1); err == nil || !strings.Contains(err.Error(), "--input") {
		t.Errorf("complex64: %v, want an error pointing at --input", err)
	}
}
