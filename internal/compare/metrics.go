// Package compare is infer compare's logic: it runs two engines of one
// model (FP32 and INT8, say) on the same inputs and measures how far apart
// their outputs are, how fast each runs, and, per tensor, where a
// quantized engine loses its precision.
package compare

import (
	"math"
	"slices"
)

// Agreement accumulates how well outputs b agree with reference outputs a
// over any number of samples.
type Agreement struct {
	aa, bb, ab, dd float64 // Σa², Σb², Σab, Σ(a−b)²
	maxAbs         float64
	elements       int64
	top1Same       int
	top1Rows       int
}

// Add takes a batch of corresponding elements of a and b.
func (g *Agreement) Add(a, b []float64) {
	for i, x := range a {
		y := b[i]
		d := x - y
		g.aa += x * x
		g.bb += y * y
		g.ab += x * y
		g.dd += d * d
		// A NaN anywhere makes the maximum NaN (and it stays so: nothing
		// compares greater): a NaN is never an agreement.
		if ad := math.Abs(d); ad > g.maxAbs || math.IsNaN(ad) {
			g.maxAbs = ad
		}
	}
	g.elements += int64(len(a))
}

// AddTop1 takes rows of class scores (classes per row) and counts the rows
// whose highest-scoring class is the same in a and b.
func (g *Agreement) AddTop1(a, b []float64, classes int) {
	for r := 0; r+classes <= len(a); r += classes {
		if Argmax(a[r:r+classes]) == Argmax(b[r:r+classes]) {
			g.top1Same++
		}
		g.top1Rows++
	}
}

// Elements is the number of elements compared.
func (g *Agreement) Elements() int64 { return g.elements }

// Cosine is the cosine similarity of a and b as vectors: 1 when both are
// zero, 0 when only one is.
func (g *Agreement) Cosine() float64 {
	switch {
	case g.aa == 0 && g.bb == 0:
		return 1
	case g.aa == 0 || g.bb == 0:
		return 0
	}
	return g.ab / math.Sqrt(g.aa*g.bb)
}

// SQNR is the signal-to-quantization-noise ratio in dB,
// 10·log10(Σa²/Σ(a−b)²): +Inf when a and b are equal, -Inf when a is zero
// and b is not.
func (g *Agreement) SQNR() float64 { return sqnr(g.aa, g.dd) }

func sqnr(signal, noise float64) float64 {
	switch {
	case noise == 0 && !math.IsNaN(signal):
		return math.Inf(1)
	case signal == 0 && noise > 0:
		return math.Inf(-1)
	}
	return 10 * math.Log10(signal/noise)
}

// MaxAbsErr is the largest |a−b| (NaN when an element of either is NaN).
func (g *Agreement) MaxAbsErr() float64 { return g.maxAbs }

// Top1 is the fraction of rows whose top class agrees; ok is false when no
// rows were compared.
func (g *Agreement) Top1() (frac float64, ok bool) {
	if g.top1Rows == 0 {
		return 0, false
	}
	return float64(g.top1Same) / float64(g.top1Rows), true
}

// Argmax is the index of the largest value, the first one on ties; NaN
// counts as smaller than every number (as NumPy's nanargmax), so a row of
// NaN gives 0.
func Argmax(row []float64) int {
	best := 0
	for i, v := range row {
		if v > row[best] || math.IsNaN(row[best]) && !math.IsNaN(v) {
			best = i
		}
	}
	return best
}

// Latency is a distribution's summary in milliseconds.
type Latency struct {
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
}

// Summarize returns the median (the mean of the middle two for an even
// count) and the 90th and 99th percentiles (nearest rank) of ms.
func Summarize(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	n := len(s)
	rank := func(p float64) float64 { return s[max(0, int(math.Ceil(p*float64(n)))-1)] }
	median := s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return Latency{Median: median, P90: rank(0.90), P99: rank(0.99)}
}
