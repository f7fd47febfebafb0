package quantize

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// histogramOf returns a histogram over [0, rng] with the given counts
// (the rest zero).
func histogramOf(rng float64, counts map[int]int64) *Histogram {
	h := &Histogram{Range: rng, Counts: make([]int64, Bins)}
	for j, c := range counts {
		h.Counts[j] = c
	}
	return h
}

// The histogram grows by powers of two, merging bins without splitting a
// count: the result is the histogram made at the final range directly.
func TestHistogramGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var all []float32
	for _, amax := range []float32{1, 0.5, 3.5, 3, 40} { // range 1, then 4, then 64
		xs := make([]float32, 1000)
		for i := range xs {
			xs[i] = (2*rng.Float32() - 1) * amax
		}
		xs[0] = amax
		all = append(all, xs...)
		h.add(xs, float64(amax))
	}
	assert.Equal(t, 64.0, h.Range)
	direct := make([]int64, Bins)
	for _, x := range all {
		direct[min(int(math.Abs(float64(x))*Bins/64), Bins-1)]++
	}
	// 1, the first range's closed end, was counted in its last bin, which
	// merged into the bin below 1.
	direct[32]--
	direct[31]++
	assert.Equal(t, direct, h.Counts)
}

// Zeros counted before any nonzero value land in bin 0 of whatever range
// comes later; NaN and ±Inf are left out of the histogram and the range.
func TestStatsZerosAndNonFinite(t *testing.T) {
	var s Stats
	s.Add([]float32{0, 0, 0})
	assert.Equal(t, int64(3), s.Hist.Counts[0])
	s.Add([]float32{float32(math.NaN()), float32(math.Inf(1)), -2, 1})
	assert.Equal(t, int64(2), s.NonFinite)
	assert.Equal(t, int64(3), s.Zeros, "exact zeros, which no scale loses")
	assert.Equal(t, -2.0, s.Min)
	assert.Equal(t, 1.0, s.Max)
	assert.Equal(t, 2.0, s.Hist.Range)
	assert.Equal(t, int64(3), s.Hist.Counts[0])
	assert.Equal(t, int64(1), s.Hist.Counts[Bins/2])
	assert.Equal(t, int64(1), s.Hist.Counts[Bins-1])
}

// KL thresholds computed by hand from TensorRT's definition.
func TestEntropyThreshold(t *testing.T) {
	w := 4.0 / Bins // bin width over a range of 4

	// Even counts in bins 0..99: every candidate's Q is P, KL 0 for all,
	// and the tie goes to the last candidate, the whole range.
	even := map[int]int64{}
	for j := range 100 {
		even[j] = 50
	}
	assert.Equal(t, 4.0, histogramOf(4, even).EntropyThreshold())

	// Counts j+1 in bins 0..127 (bin 0 counted as bin 1: 2). At 128 bins
	// each level is one bin (KL 0); at 129 level 0 holds bins 0 and 1,
	// both 2 (KL 0); at 130 level 64 holds bins 65 and 66, 66 and 67 (KL
	// > 0), and every wider candidate merges unequal bins: the last
	// minimum is 129 bins.
	ramp := map[int]int64{}
	for j := range 128 {
		ramp[j] = int64(j + 1)
	}
	assert.InDelta(t, 129*w, histogramOf(4, ramp).EntropyThreshold(), 1e-12)

	// A flat bulk and one far outlier: every candidate from 129 to 2047
	// bins puts the tail in an empty bin (Q 0 there, KL infinite); 128
	// bins moves the outlier into bin 127 (KL > 0); 2048 bins keeps it in
	// a level of its own (KL 0): the whole range.
	outlier := map[int]int64{2047: 1}
	for j := range 128 {
		outlier[j] = 100
	}
	assert.Equal(t, 4.0, histogramOf(4, outlier).EntropyThreshold())

	// The same bulk with two unequal outliers in the last two bins (1 and
	// 3): 129..2047 bins leave tail counts in an empty bin (KL infinite),
	// except 2047, which adds 3 to bin 2046's 1 (KL 1.99e-4); 2048 bins
	// merge them into one level of 2 and 2 (KL (ln 1/2 + 3 ln 3/2)/12804
	// = 4.09e-5); 128 bins add 4 to bin 127's 100 (KL 6.2e-6): the
	// smallest, so both outliers are clipped.
	clip := map[int]int64{2046: 1, 2047: 3}
	for j := range 128 {
		clip[j] = 100
	}
	assert.InDelta(t, 128*w, histogramOf(4, clip).EntropyThreshold(), 1e-12)

	assert.Equal(t, 0.0, (&Histogram{}).EntropyThreshold(), "nothing observed")
}

// The percentile of |x| for values at known quantiles.
func TestPercentileThreshold(t *testing.T) {
	// Uniform on [0, 1): the P-th percentile is P/100, to a bin.
	var u Stats
	xs := make([]float32, 100000)
	for i := range xs {
		xs[i] = float32(i) / float32(len(xs))
	}
	u.Add(xs)
	for _, p := range []float64{50, 99, 99.99} {
		assert.InDelta(t, p/100, u.Hist.PercentileThreshold(p), u.Hist.width(), "P%v", p)
	}
	// N(0, 1) at its quantiles: |x| < 3.8906 holds 99.99% (Φ⁻¹(0.99995)).
	var n Stats
	xs = make([]float32, 1_000_000)
	for i := range xs {
		p := (float64(i) + 0.5) / float64(len(xs))
		xs[i] = float32(math.Sqrt2 * math.Erfinv(2*p-1))
	}
	n.Add(xs)
	assert.InDelta(t, 3.8906, n.Hist.PercentileThreshold(99.99), n.Hist.width())
	assert.InDelta(t, 2.5758, n.Hist.PercentileThreshold(99), n.Hist.width())

	lo, hi := n.Range(Method{Name: "percentile", Percentile: 99.99})
	assert.InDelta(t, -3.8906, lo, n.Hist.width())
	assert.InDelta(t, 3.8906, hi, n.Hist.width())
	lo, hi = n.Range(Method{Name: "minmax"})
	assert.Equal(t, n.Min, lo)
	assert.Equal(t, n.Max, hi)
}

// A method's symmetric threshold is clamped to the observed min and max.
func TestRangeClampsToObserved(t *testing.T) {
	var s Stats
	xs := make([]float32, 10000)
	for i := range xs {
		xs[i] = float32(i) / 1000 // 0 .. 9.999, all positive
	}
	s.Add(xs)
	lo, hi := s.Range(Method{Name: "percentile", Percentile: 99})
	assert.Equal(t, 0.0, lo, "clamped to the minimum, not -threshold")
	assert.InDelta(t, 9.9, hi, 0.01)

	// A threshold below every |x| gives the value nearest 0, never a range
	// out of order (which a cache holding it would be refused for).
	for _, sign := range []float32{1, -1} {
		var far Stats
		for i := range xs {
			xs[i] = sign * (5 + float32(i)/1000)
		}
		far.Add(xs)
		lo, hi = far.Range(Method{Name: "percentile", Percentile: 0.001})
		assert.Equal(t, lo, hi)
		assert.Equal(t, 5.0, math.Abs(lo))
	}
}

// Entropy's threshold never falls below the 99th percentile: on values
// far from zero TensorRT's search would clip all but the smallest.
func TestEntropyFloor(t *testing.T) {
	var s Stats
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float32, 50000)
	for i := range xs {
		xs[i] = 0.34 + 1.12*rng.Float32()
	}
	s.Add(xs)
	assert.Less(t, s.Hist.EntropyThreshold(), 0.4, "the bare KL search clips nearly everything")
	_, hi := s.Range(Method{Name: "entropy"})
	assert.GreaterOrEqual(t, hi, s.Hist.PercentileThreshold(99))
	assert.Greater(t, hi, 1.4)
}

func TestParseMethod(t *testing.T) {
	for in, want := range map[string]Method{
		"minmax":            {Name: "minmax"},
		"entropy":           {Name: "entropy"},
		"percentile":        {Name: "percentile", Percentile: 99.99},
		"percentile=99.999": {Name: "percentile", Percentile: 99.999},
		"percentile=100":    {Name: "percentile", Percentile: 100},
	} {
		got, err := ParseMethod(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	assert.Equal(t, "percentile=99.9", Method{Name: "percentile", Percentile: 99.9}.String())
	for _, bad := range []string{"", "max", "entropy=3", "percentile=0", "percentile=101", "percentile=NaN", "percentile=x"} {
		_, err := ParseMethod(bad)
		assert.Error(t, err, bad)
	}
}

// 0.0 is exactly representable; the range's ends land on (or next to) the
// ends of uint8.
func TestActivationParams(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		lo, hi := -10*rng.Float64(), 10*rng.Float64()
		p := activationParams(lo, hi)
		assert.Equal(t, 0.0, float64(float32(int(p.zp)-int(p.zp))*p.scale))
		assert.Equal(t, float64(p.zp), quantizeF32(0, p.scale, -float64(p.zp), 255-float64(p.zp))+float64(p.zp))
		qlo := quantizeF32(float32(lo), p.scale, -1e9, 1e9) + float64(p.zp)
		qhi := quantizeF32(float32(hi), p.scale, -1e9, 1e9) + float64(p.zp)
		assert.InDelta(t, 0, qlo, 1, "lo %v -> %v", lo, qlo)
		assert.InDelta(t, 255, qhi, 1, "hi %v -> %v", hi, qhi)
	}
	p := activationParams(2, 5) // all positive: widened to [0, 5]
	assert.Equal(t, uint8(0), p.zp)
	assert.InDelta(t, 5.0/255, p.scale, 1e-9)
	p = activationParams(-3, -1) // all negative: widened to [-3, 0]
	assert.Equal(t, uint8(255), p.zp)
	p = activationParams(0, 0) // all zero: scale 1 (not a tiny one every real value saturates), zp 0
	assert.Equal(t, uint8(0), p.zp)
	assert.Equal(t, float32(1), p.scale)
}
