package quantize

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Calibrated ranges that cannot be trusted. A tensor calibration saw at
// one value (all-zero data) has no range to learn, and neither has what is
// computed from it alone: real inputs would saturate whatever scale it
// got. A range that a few huge values set (one 1e30 among ordinary data)
// quantizes nearly every ordinary value to 0. Either gives a model that
// has nothing to do with the float one, so the nodes that would quantize
// such a tensor stay float (planAvoiding) and the command says why.

// maxLostShare is the share of a tensor's nonzero calibration values that
// may quantize to 0 before its range counts as blown. A well-set 8-bit
// range loses a few percent of them (a normal tensor's minmax range about
// 2%), heavy-tailed activations a third; a range that one outlying sample
// set loses all the others' (7 in 8, one sample of 8 far out).
const maxLostShare = 0.5

// rangeProblem is why a tensor's range is not trusted.
type rangeProblem struct {
	// source is the tensor whose calibration is at fault: the tensor
	// itself, or the constant tensor it is computed from.
	source *ir.Value
	// constant: calibration saw source at a single value.
	constant bool
	// why is what is wrong, remedy what to do about it ("": nothing
	// more than leaving it float).
	why, remedy string
}

// rangeProblems finds the observed tensors of g whose ranges (under
// method; graph outputs their observed ones) are not trusted.
func rangeProblems(g *ir.Graph, r *ranges, method Method, outputs map[*ir.Value]bool) map[*ir.Value]*rangeProblem {
	problems := map[*ir.Value]*rangeProblem{}
	judge := func(v *ir.Value) {
		if s := r.stats[v.Name]; s != nil && problems[v] == nil {
			if why, k := s.problem(r.rangeOf(v.Name, outputs[v], method), method, outputs[v]); k != rangeTrusted {
				problems[v] = &rangeProblem{source: v, constant: k == rangeConstant, why: why}
				if k == rangeBlown {
					problems[v].remedy = s.remedy(method, outputs[v])
				}
			}
		}
	}
	for _, v := range observed(g) {
		if v.Producer == nil {
			judge(v)
		}
	}
	for _, n := range g.Nodes {
		// Computed only from constant tensors (and initializers): as
		// constant in calibration as they are.
		var from *rangeProblem
		for _, in := range n.Inputs {
			if in == nil || in.Const != nil {
				continue
			}
			if p := problems[in]; p == nil || !p.constant {
				from = nil
				break
			} else if from == nil {
				from = p
			}
		}
		for _, v := range n.Outputs {
			if v == nil || v.Type.Elem != ir.Float32 {
				continue
			}
			if from != nil {
				problems[v] = &rangeProblem{source: from.source, constant: true}
				continue
			}
			judge(v)
		}
	}
	return problems
}

// problemKind sorts what can be wrong with a range.
type problemKind int

const (
	rangeTrusted  problemKind = iota
	rangeConstant             // calibration saw one value (or none)
	rangeEmpty                // the range holds only 0 (an edited cache's)
	rangeBlown                // most nonzero values quantize to 0
)

// problem says what is wrong with range rg of the tensor s describes
// (under method, or its observed range for a graph output).
func (s *Stats) problem(rg [2]float64, method Method, output bool) (string, problemKind) {
	if s.counted() == 0 {
		return "calibration saw no finite value of it", rangeConstant
	}
	if s.Min == s.Max {
		return fmt.Sprintf("every calibration value of it is %g", s.Min), rangeConstant
	}
	name := method.String()
	if output {
		name = "observed"
	}
	lo, hi := min(rg[0], 0), max(rg[1], 0)
	if !(hi > lo) {
		return fmt.Sprintf("its %s range [%.4g, %.4g] holds only 0", name, rg[0], rg[1]), rangeEmpty
	}
	lost := s.lostShare(activationParams(rg[0], rg[1]).scale)
	if lost <= maxLostShare {
		return "", rangeTrusted
	}
	return fmt.Sprintf("its %s range [%.4g, %.4g] quantizes %.1f%% of its nonzero calibration values to 0 (a few values far larger than the rest set it)", name, rg[0], rg[1], 100*lost), rangeBlown
}

// remedy suggests the methods that clip the outliers s holds, or, when
// none can (the histogram holds every ordinary value in its first bins),
// removing them from the data.
func (s *Stats) remedy(method Method, output bool) string {
	var better []string
	for _, m := range []Method{{Name: "percentile", Percentile: DefaultPercentile}, {Name: "entropy"}} {
		if m.Name == method.Name || output {
			continue
		}
		lo, hi := s.Range(m)
		if lost := s.lostShare(activationParams(lo, hi).scale); lost <= maxLostShare {
			better = append(better, m.Name)
		}
	}
	if len(better) > 0 {
		return "--method " + strings.Join(better, " or ") + " clips such outliers"
	}
	return "no --method clips outliers this far out: remove the samples that hold them from the calibration data"
}

// counted is the number of finite values s counted.
func (s *Stats) counted() int64 {
	var n int64
	for _, c := range s.Hist.Counts {
		n += c
	}
	return n
}

// lostShare is the share of the nonzero values s counted that quantize to
// 0 at scale: those in histogram bins wholly below half a step (a lower
// bound, at the histogram's resolution).
func (s *Stats) lostShare(scale float32) float64 {
	h := &s.Hist
	var below int64
	for j, c := range h.Counts {
		if float64(j+1)*h.width() <= float64(scale)/2 {
			below += c
		}
	}
	nonzero := s.counted() - s.Zeros
	if nonzero <= 0 {
		return 0
	}
	return float64(max(0, below-s.Zeros)) / float64(nonzero)
}

// planAvoiding plans m's quantization leaving float every node that would
// quantize a tensor with a problem, planning again until none does (a node
// left float can make another node a unit of its own). It returns the
// nodes left float for each problem's source.
func planAvoiding(m *ir.Model, opts Options, problems map[*ir.Value]*rangeProblem) (*plan, map[*ir.Value][]*ir.Node, error) {
	keep := map[*ir.Node]bool{}
	keptFor := map[*ir.Value][]*ir.Node{}
	for {
		p, err := planOf(m, opts.KeepFP32, keep, opts.PerTensor, !opts.QuantizeAll)
		if err != nil {
			return nil, nil, err
		}
		grown := false
		for _, v := range p.acts {
			problem := problems[p.root(v)]
			if problem == nil {
				continue
			}
			for _, n := range p.units {
				if !keep[n] && (p.out[n] == v || slices.Contains(p.ins[n], v)) {
					keep[n], grown = true, true
					keptFor[problem.source] = append(keptFor[problem.source], n)
				}
			}
		}
		if !grown {
			return p, keptFor, nil
		}
	}
}

// problemWarnings describes each problem that left nodes float, and each
// graph input calibration saw constant (a fault in the data however little
// it reads), in graph order. data names the calibration data.
func problemWarnings(g *ir.Graph, problems map[*ir.Value]*rangeProblem, keptFor map[*ir.Value][]*ir.Node, data string) []string {
	var warnings []string
	for _, v := range observed(g) {
		problem := problems[v]
		kept := keptFor[v]
		if problem == nil || problem.source != v || len(kept) == 0 && !(problem.constant && v.Producer == nil) {
			continue
		}
		w := fmt.Sprintf("tensor %q (calibration data %s): %s", v.Name, data, problem.why)
		switch {
		case len(kept) == 0:
			w += "; no quantized node reads it"
		case problem.constant:
			w += fmt.Sprintf("; calibration learns no range from it or what is computed from it alone, so %s float", staysFloat(kept))
		default:
			w += fmt.Sprintf("; rather than quantize it, %s float", staysFloat(kept))
		}
		if problem.remedy != "" {
			w += "; " + problem.remedy
		}
		warnings = append(warnings, w)
	}
	return warnings
}

// staysFloat names up to four nodes, counts the rest and ends in the verb:
// `node "a" (Conv) stays`, `3 nodes (…) stay`.
func staysFloat(ns []*ir.Node) string {
	if len(ns) == 1 {
		return ns[0].String() + " stays"
	}
	var names []string
	for i, n := range ns {
		if i == 4 {
			names = append(names, fmt.Sprintf("%d more", len(ns)-i))
			break
		}
		names = append(names, n.String())
	}
	return fmt.Sprintf("%d nodes (%s) stay", len(ns), strings.Join(names, ", "))
}

// isFinite reports whether x is neither NaN nor ±Inf.
func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
