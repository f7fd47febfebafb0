package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// arithExp over its whole range, arithLog above 1 and arithFloor agree
// with package math (to a few ulps; floor exactly).
func TestArithAgreesWithMath(t *testing.T) {
	var a goArith
	for _, d := range []float64{-707.9, -3.25, 0, 1e-12, 0.5, 1, 2.302585092994046, 37.5, 300, 709.7} {
		want := math.Exp(d)
		assert.InDelta(t, want, fl(arithExp[uint64](a, bt(d))), 6e-16*want, "exp %g", d)
	}
	for _, x := range []float64{1, 1 + 0x1p-52, 1.5, 2, 10, 1234.5678, 1e300} {
		assert.InDelta(t, math.Log(x), fl(arithLog[uint64](a, bt(x))), 4e-16*math.Max(1, math.Log(x)), "ln %g", x)
	}
	assert.Equal(t, math.Inf(-1), fl(arithLog[uint64](a, bt(0))))
	assert.Equal(t, math.Inf(1), fl(arithLog[uint64](a, bt(math.Inf(1)))))
	for _, x := range []float64{-1, math.NaN(), math.Inf(-1)} {
		assert.True(t, math.IsNaN(fl(arithLog[uint64](a, bt(x)))), "ln %g", x)
	}
	for _, x := range []float64{0, -0.5, 0.5, -1, 1, 2.5, -2.5, 1e15 + 0.5, -1e15 - 0.5, 0x1p52 + 1, -0x1p53, math.Inf(1)} {
		assert.Equal(t, math.Floor(x), fl(arithFloor[uint64](a, bt(x))), "floor %g", x)
	}
	assert.True(t, math.IsNaN(fl(arithFloor[uint64](a, bt(math.NaN())))))
}

// MelWeightMatrix's edges, computed in Arith, are the bins that ONNX's
// formula gives with package math's log10 and pow, over random filter
// banks (an edge within 1e-9 of an integer is skipped: there the last
// bits decide, in any libm).
func TestMelEdgesMatchLibm(t *testing.T) {
	var a goArith
	r := rand.New(rand.NewPCG(17, 0))
	checked := 0
	for range 500 {
		mels := 1 + r.Int64N(128)
		dftLen := 16 + r.Int64N(4096)
		rate := 4000 + r.Int64N(44100)
		lowHz := r.Float64() * 300
		highHz := lowHz + r.Float64()*(float64(rate)/2-lowHz)
		low, step := MelScale[uint64](a, bt(float64(mels)), bt(lowHz), bt(highHz))
		toMel := func(hz float64) float64 { return 2595 * math.Log10(1+hz/700) }
		wantStep := (toMel(highHz) - toMel(lowHz)) / float64(mels+2)
		for k := range mels + 2 {
			hz := 700 * (math.Pow(10, (float64(k)*wantStep+toMel(lowHz))/2595) - 1)
			x := float64(dftLen+1) * hz / float64(rate)
			if math.Abs(x-math.Round(x)) < 1e-9 {
				continue
			}
			got := MelEdge[uint64](a, bt(float64(k)), low, step, bt(float64(dftLen)), bt(float64(rate)))
			assert.Equal(t, math.Floor(x), fl(got), "edge %d of %d mels, dft %d, rate %d, %g..%g Hz", k, mels, dftLen, rate, lowHz, highHz)
			checked++
		}
	}
	assert.Greater(t, checked, 10000)
}
