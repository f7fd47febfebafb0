package quantize

import (
	"fmt"
	"math"
)

// Bins is the resolution of the |x| histograms the entropy and percentile
// methods read (TensorRT's and ONNX Runtime's 2048).
const Bins = 2048

// levels is the number of quantized levels the entropy method merges the
// histogram into: 2^(bits-1) for 8 bits, TensorRT's choice for |x|.
const levels = 128

// Histogram counts |x| in Bins equal bins over [0, Range]. A value above
// Range grows it by a power of two, merging 2^k neighbouring bins into one,
// so no count is ever split between bins (ONNX Runtime and TensorRT grow
// the bin count instead; a fixed count keeps the entropy search at
// 128..2048 bins as TensorRT defines it).
type Histogram struct {
	Range  float64 `json:"range"`
	Counts []int64 `json:"counts"`
}

// add counts the finite values of xs; amax is their largest |x|.
func (h *Histogram) add(xs []float32, amax float64) {
	if h.Counts == nil {
		h.Counts = make([]int64, Bins)
	}
	if amax > h.Range {
		h.grow(amax)
	}
	if h.Range == 0 {
		// Only zeros so far: bin 0 holds them whatever Range becomes.
		for _, x := range xs {
			if x == 0 {
				h.Counts[0]++
			}
		}
		return
	}
	perUnit := Bins / h.Range
	for _, x := range xs {
		a := math.Abs(float64(x))
		if a > h.Range || math.IsNaN(a) { // non-finite: left out, as from min/max
			continue
		}
		h.Counts[min(int(a*perUnit), Bins-1)]++
	}
}

// grow makes Range at least amax: the first nonzero value sets it, later
// ones double it until it holds them, merging pairs of bins each time.
func (h *Histogram) grow(amax float64) {
	if h.Range == 0 {
		h.Range = amax
		return
	}
	factor := 1
	for h.Range*float64(factor) < amax && factor < Bins {
		factor *= 2
	}
	for j := range Bins {
		var sum int64
		if j*factor < Bins {
			for _, c := range h.Counts[j*factor : (j+1)*factor] {
				sum += c
			}
		}
		h.Counts[j] = sum
	}
	h.Range *= float64(factor)
	for h.Range < amax { // beyond Bins doublings everything is in bin 0 already
		h.Range *= 2
	}
}

// width is one bin's width.
func (h *Histogram) width() float64 { return h.Range / Bins }

// check rejects a histogram that cannot come from add (a hand-edited or
// damaged cache).
func (h *Histogram) check() error {
	if len(h.Counts) != Bins {
		return fmt.Errorf("histogram has %d bins, not %d", len(h.Counts), Bins)
	}
	if !(h.Range >= 0) || math.IsInf(h.Range, 0) {
		return fmt.Errorf("histogram range %v", h.Range)
	}
	for _, c := range h.Counts {
		if c < 0 {
			return fmt.Errorf("histogram has a negative count")
		}
	}
	return nil
}

// EntropyThreshold is TensorRT's KL-divergence calibration (GTC'17 s7310,
// as NVIDIA's pytorch_quantization implements it): for each candidate of
// i = 128..2048 bins, P is the first i bins with the tail's counts added to
// the last of them, Q the same bins merged into 128 levels and spread back
// evenly over each level's non-empty bins; the threshold is the right edge
// of the candidate with the smallest KL(P‖Q), the last one on a tie. Bin 0
// counts as bin 1 did, as there: the exact zeros a ReLU makes would
// otherwise outweigh everything else.
func (h *Histogram) EntropyThreshold() float64 {
	if h.Range == 0 || len(h.Counts) != Bins {
		return 0
	}
	bins := make([]float64, Bins)
	for j, c := range h.Counts {
		bins[j] = float64(c)
	}
	bins[0] = bins[1]
	var total float64
	for _, c := range bins {
		total += c
	}
	if total == 0 {
		return h.Range
	}
	// tail[i] is the sum of bins[i:].
	tail := make([]float64, Bins+1)
	for j := Bins - 1; j >= 0; j-- {
		tail[j] = tail[j+1] + bins[j]
	}
	q := make([]float64, Bins)
	best, bestKL := Bins, math.Inf(1)
	for i := levels; i <= Bins; i++ {
		// Level k holds bins j with floor(levels*j/i) == k.
		for k := range levels {
			start, end := ceilDiv(k*i, levels), ceilDiv((k+1)*i, levels)
			sum, nonzero := 0.0, 0
			for _, c := range bins[start:end] {
				if c != 0 {
					sum += c
					nonzero++
				}
			}
			for j := start; j < end; j++ {
				q[j] = 0
				if bins[j] != 0 {
					q[j] = sum / float64(nonzero)
				}
			}
		}
		// P sums to total; Q to total less the tail.
		sumQ := total - tail[i]
		kl := 0.0
		for j := range i {
			p := bins[j]
			if j == i-1 {
				p += tail[i]
			}
			if p == 0 {
				continue
			}
			if q[j] == 0 {
				kl = math.Inf(1)
				break
			}
			pn, qn := p/total, q[j]/sumQ
			kl += pn * math.Log(pn/qn)
		}
		if kl <= bestKL {
			best, bestKL = i, kl
		}
	}
	return float64(best) * h.width()
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// PercentileThreshold is the |x| below which pct percent of the counted
// values lie, interpolated linearly inside the bin where the cumulative
// count reaches it.
func (h *Histogram) PercentileThreshold(pct float64) float64 {
	var total int64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 || h.Range == 0 {
		return 0
	}
	want := pct / 100 * float64(total)
	var cum float64
	for j, c := range h.Counts {
		if c > 0 && cum+float64(c) >= want {
			frac := max(0, want-cum) / float64(c)
			return (float64(j) + frac) * h.width()
		}
		cum += float64(c)
	}
	return h.Range
}
