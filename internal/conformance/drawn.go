package conformance

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Outputs drawn at random (computed from a random op's output, Schema.Random)
// cannot match test data drawn by another generator (ONNX's by numpy), so
// they are judged by their law instead (compareDrawn).

// minDrawnForMean is the fewest elements whose mean compareDrawn tests:
// below it a sample's variance says too little.
const minDrawnForMean = 30

// drawnSigmas is how many standard errors the means may differ by: a
// correct backend fails with probability about 2e-9.
const drawnSigmas = 6

// drawnOutputs finds the graph outputs that depend on a random draw: for
// each, the random node's draw when the output is its own, else nil.
func drawnOutputs(m *ir.Model) map[*ir.Value]*ops.RandomSpec {
	opsets := ops.OpsetsOf(m)
	drawn := map[*ir.Value]*ir.Node{}
	var walk func(g *ir.Graph)
	walk = func(g *ir.Graph) {
		for _, n := range g.Nodes {
			s, err := opsets.Schema(n)
			random := err == nil && s.Random
			from := random
			for _, v := range n.Inputs {
				_, d := drawn[v]
				from = from || v != nil && d
			}
			for _, sg := range n.Subgraphs() {
				walk(sg) // a body reads enclosing values by pointer
				for _, o := range sg.Outputs {
					_, d := drawn[o]
					from = from || d
				}
			}
			if !from {
				continue
			}
			for _, o := range n.Outputs {
				if o == nil {
					continue
				}
				if random {
					drawn[o] = n
				} else {
					drawn[o] = nil
				}
			}
		}
	}
	walk(m.Graph)
	out := map[*ir.Value]*ops.RandomSpec{}
	for _, v := range m.Graph.Outputs {
		if n, ok := drawn[v]; ok {
			out[v] = nil
			if n != nil {
				out[v], _ = ops.RandomSpecOf(n, opsets) // nil (judged as computed) where it fails
			}
		}
	}
	return out
}

// compareDrawn judges an output drawn at random against test data drawn
// from the same law: the same dtype and shape; every value in the law's
// support (the random node's, ops.RandomSpec.Support, when the output is
// its own; otherwise no NaN the data lacks and, where the data holds
// integers, integers within the data's range); and, with enough elements,
// the mean within drawnSigmas standard errors of the data's.
func compareDrawn(want, got *ir.Tensor, spec *ops.RandomSpec) (string, bool) {
	if !want.IsTensor() || !got.IsTensor() {
		return "a drawn " + got.Type().String() + " is compared only as tensors", false
	}
	if want.DType != got.DType {
		return fmt.Sprintf("dtype %s, want %s", got.DType, want.DType), false
	}
	if !slices.Equal(want.Dims, got.Dims) {
		return fmt.Sprintf("shape %v, want %v", got.Dims, want.Dims), false
	}
	w, g := ops.Float64s(want), ops.Float64s(got)
	lo, hi, integral := math.Inf(-1), math.Inf(1), false
	if spec != nil {
		if spec.Out == ir.Undefined {
			spec.Out = want.DType
		}
		lo, hi, integral = spec.Support()
	} else if len(w) > 0 && !slices.ContainsFunc(w, math.IsNaN) {
		lo, hi = slices.Min(w), slices.Max(w)
		integral = !slices.ContainsFunc(w, func(v float64) bool { return v != math.Trunc(v) })
		if !integral {
			lo, hi = math.Inf(-1), math.Inf(1) // a continuous law: any number but NaN
		}
	}
	support := fmt.Sprintf("[%g, %g]", lo, hi)
	if integral {
		support = "integers in " + support
	}
	for i, v := range g {
		if !(v >= lo && v <= hi) || integral && v != math.Trunc(v) {
			if spec == nil && math.IsNaN(v) && slices.ContainsFunc(w, math.IsNaN) {
				continue
			}
			return fmt.Sprintf("element %d is %v, outside the draw's support (%s)", i, v, support), false
		}
	}
	desc := fmt.Sprintf("drawn: %d values in %s", len(g), support)
	if len(g) < minDrawnForMean {
		return desc + ", too few for a test of the mean", true
	}
	mw, vw := meanVariance(w)
	mg, vg := meanVariance(g)
	se := math.Sqrt((vw + vg) / float64(len(g)))
	desc += fmt.Sprintf(", mean %.4g (data %.4g, standard error %.2g)", mg, mw, se)
	if math.IsNaN(mw) || math.IsNaN(mg) { // NaNs the support admits
		return desc, math.IsNaN(mw) == math.IsNaN(mg)
	}
	return desc, math.Abs(mg-mw) <= drawnSigmas*se
}

// meanVariance is the sample mean and variance.
func meanVariance(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v)-1)
}
