package quantize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Method is how an activation's range follows from what calibration saw.
type Method struct {
	// Name is "minmax", "entropy" or "percentile".
	Name string
	// Percentile is the percentile method's P (99.99 by default).
	Percentile float64
}

// DefaultPercentile is --method percentile's P, TensorRT's default.
const DefaultPercentile = 99.99

// Methods lists the method names for help and errors.
const Methods = "minmax, entropy, percentile or percentile=P"

// ParseMethod reads a --method value: minmax, entropy, percentile or
// percentile=P with 0 < P <= 100.
func ParseMethod(s string) (Method, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	switch {
	case (name == "minmax" || name == "entropy") && !hasArg:
		return Method{Name: name}, nil
	case name == "percentile" && !hasArg:
		return Method{Name: name, Percentile: DefaultPercentile}, nil
	case name == "percentile":
		p, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(p > 0 && p <= 100) {
			return Method{}, fmt.Errorf("percentile=%s: want a percentage P with 0 < P <= 100", arg)
		}
		return Method{Name: name, Percentile: p}, nil
	}
	return Method{}, fmt.Errorf("unknown calibration method %q (want %s)", s, Methods)
}

func (m Method) String() string {
	if m.Name == "percentile" {
		return "percentile=" + strconv.FormatFloat(m.Percentile, 'g', -1, 64)
	}
	return m.Name
}

// Stats is what calibration records of one tensor over all samples.
type Stats struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// NonFinite counts NaN and ±Inf elements, left out of the rest.
	NonFinite int64 `json:"non_finite,omitempty"`
	// Zeros counts the elements that were exactly 0 (a ReLU's), which no
	// scale loses; caches written before it was recorded read as none.
	Zeros int64     `json:"zeros,omitempty"`
	Hist  Histogram `json:"histogram"`
	seen  bool
}

// Add records one sample's values of the tensor.
func (s *Stats) Add(xs []float32) {
	lo, hi, amax := math.Inf(1), math.Inf(-1), 0.0
	for _, x := range xs {
		v := float64(x)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			s.NonFinite++
			continue
		}
		if v == 0 {
			s.Zeros++
		}
		lo, hi = min(lo, v), max(hi, v)
		amax = max(amax, math.Abs(v))
	}
	if lo > hi { // nothing finite
		return
	}
	if !s.seen {
		s.Min, s.Max, s.seen = lo, hi, true
	} else {
		s.Min, s.Max = min(s.Min, lo), max(s.Max, hi)
	}
	s.Hist.add(xs, amax)
}

// entropyFloor is the percentile of |x| the entropy method's threshold
// never goes below. TensorRT's search assumes values spread from 0: on a
// tensor far from it (an average pool's output, all in [0.34, 1.46]) the
// candidate that puts everything in its last bin has KL 0 and would clip
// nearly every value. On ReLU and convolution outputs the threshold clips
// a few millionths of the values, far from this floor.
const entropyFloor = 99

// Range is the float range the tensor's quantization covers under method
// m: minmax's is the observed one; entropy's and percentile's a symmetric
// threshold on |x| clamped to the observed min and max (as ONNX Runtime
// clamps).
func (s *Stats) Range(m Method) (lo, hi float64) {
	var t float64
	switch m.Name {
	case "entropy":
		t = max(s.Hist.EntropyThreshold(), s.Hist.PercentileThreshold(entropyFloor))
	case "percentile":
		t = s.Hist.PercentileThreshold(m.Percentile)
	default:
		return s.Min, s.Max
	}
	lo, hi = max(s.Min, -t), min(s.Max, t)
	if lo > hi { // a threshold below every |x| (a tiny P): the observed value nearest 0
		if s.Min > 0 {
			return s.Min, s.Min
		}
		return s.Max, s.Max
	}
	return lo, hi
}
