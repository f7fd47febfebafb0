package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// number is a float in JSON that may be non-finite: JSON has no Inf or
// NaN, so those are the strings "+Inf", "-Inf" and "NaN" (an SQNR of two
// equal engines is +Inf).
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

type jsonSide struct {
	Latency  Latency `json:"latency_ms"`
	Accuracy *number `json:"accuracy,omitempty"`
}

type jsonLayer struct {
	Name string `json:"name"`
	SQNR number `json:"sqnr_db"`
}

// jsonReport is infer compare --json: its keys are a stable interface.
type jsonReport struct {
	A         jsonSide `json:"a"`
	B         jsonSide `json:"b"`
	Speedup   number   `json:"speedup"`
	Agreement struct {
		Top1      *number `json:"top1"` // null: the first output holds no class scores
		Cosine    number  `json:"cosine"`
		SQNR      number  `json:"sqnr_db"`
		MaxAbsErr number  `json:"max_abs_err"`
	} `json:"agreement"`
	Layers *[]jsonLayer `json:"layers,omitempty"`
}

// WriteJSON writes the report as one JSON object: a and b (each
// latency_ms {median, p90, p99}, and accuracy with labels), speedup,
// agreement {top1, cosine, sqnr_db, max_abs_err}, and with perLayer
// layers [{name, sqnr_db}], worst first.
func (r *Report) WriteJSON(w io.Writer, perLayer bool) error {
	var j jsonReport
	side := func(s Side) jsonSide {
		out := jsonSide{Latency: s.Latency}
		if !math.IsNaN(s.Accuracy) {
			acc := number(s.Accuracy)
			out.Accuracy = &acc
		}
		return out
	}
	j.A, j.B, j.Speedup = side(r.A), side(r.B), number(r.Speedup)
	if top1, ok := r.Agreement.Top1(); ok {
		n := number(top1)
		j.Agreement.Top1 = &n
	}
	j.Agreement.Cosine = number(r.Agreement.Cosine())
	j.Agreement.SQNR = number(r.Agreement.SQNR())
	j.Agreement.MaxAbsErr = number(r.Agreement.MaxAbsErr())
	if perLayer {
		layers := []jsonLayer{}
		for _, l := range r.Layers {
			layers = append(layers, jsonLayer{Name: l.Name, SQNR: number(l.SQNR)})
		}
		j.Layers = &layers
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}

// FormatDB prints an SQNR: two decimals, or +Inf, -Inf, NaN.
func FormatDB(db float64) string {
	switch {
	case math.IsNaN(db):
		return "NaN"
	case math.IsInf(db, 1):
		return "+Inf"
	case math.IsInf(db, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(db, 'f', 2, 64)
}

// WriteText writes the report for a person; data says what the engines
// ran on.
func (r *Report) WriteText(w io.Writer, data string) {
	fmt.Fprintf(w, "A  %s (%s)\n", r.A.Path, r.A.Precision)
	fmt.Fprintf(w, "B  %s (%s)\n", r.B.Path, r.B.Precision)
	fmt.Fprintf(w, "data  %s: %s in %s, %s\n\n", data, plural(r.Samples, "sample"), plural(r.Runs, "run"), plural(r.Threads, "thread"))

	labels := !math.IsNaN(r.A.Accuracy)
	fmt.Fprintf(w, "%-4s %12s %12s %12s %9s", "", "median ms", "p90 ms", "p99 ms", "runs")
	if labels {
		fmt.Fprintf(w, " %9s", "accuracy")
	}
	fmt.Fprintln(w)
	for _, s := range []struct {
		name string
		side Side
	}{{"A", r.A}, {"B", r.B}} {
		l := s.side.Latency
		fmt.Fprintf(w, "%-4s %12.4f %12.4f %12.4f %9d", s.name, l.Median, l.P90, l.P99, len(s.side.LatenciesMS))
		if labels {
			fmt.Fprintf(w, " %9.4f", s.side.Accuracy)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "speed-up  %.2fx (A's median over B's; runs alternate between A and B)\n", r.Speedup)
	if note := r.debugNote(); note != "" {
		fmt.Fprintf(w, "          (%s)\n", note)
	}

	g := &r.Agreement
	fmt.Fprintf(w, "\nagreement of B with A over %s (%s output elements):\n", plural(r.Samples, "sample"), commas(g.Elements()))
	if top1, ok := g.Top1(); ok {
		fmt.Fprintf(w, "  top-1 agreement  %.4f (%d of %d)\n", top1, g.top1Same, g.top1Rows)
	} else {
		fmt.Fprintf(w, "  top-1 agreement  n/a (the first output holds no class scores)\n")
	}
	fmt.Fprintf(w, "  cosine           %.6f\n", g.Cosine())
	fmt.Fprintf(w, "  SQNR             %s dB\n", FormatDB(g.SQNR()))
	fmt.Fprintf(w, "  max abs error    %.6g\n", g.MaxAbsErr())
	if !r.PerLayer {
		return
	}

	what := "B's tensors (B has no quantized ones)"
	if r.Quantized {
		what = "B's quantized tensors"
	}
	fmt.Fprintf(w, "\nper-layer SQNR of %s against A, worst first:\n", what)
	width := len("tensor")
	for _, l := range r.Layers {
		width = max(width, len(l.Name))
	}
	fmt.Fprintf(w, "  %9s  %-*s  %s\n", "SQNR dB", width, "tensor", "node")
	for _, l := range r.Layers {
		fmt.Fprintf(w, "  %9s  %-*s  %s\n", FormatDB(l.SQNR), width, l.Name, l.Node)
	}
	if len(r.Unmatched) > 0 {
		fmt.Fprintf(w, "not compared (%d of B's tensors, no counterpart in A): %s\n", len(r.Unmatched), strings.Join(r.Unmatched, ", "))
	}
	if len(r.KeepFP32) > 0 {
		fmt.Fprintf(w, "to keep the worst in float: cc quantize --keep-fp32 %s\n", strings.Join(r.KeepFP32, ","))
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return commas(int64(n)) + " " + what + "s"
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// debugNote says which engines' latencies include storing debug outputs
// ("" when neither has any).
func (r *Report) debugNote() string {
	a, b := r.DebugOutputs[0], r.DebugOutputs[1]
	switch {
	case a > 0 && b > 0:
		return fmt.Sprintf("the latencies include storing debug outputs: A's %d, B's %d", a, b)
	case a > 0:
		return fmt.Sprintf("A's latency includes storing its %s", plural(a, "debug output"))
	case b > 0:
		return fmt.Sprintf("B's latency includes storing its %s", plural(b, "debug output"))
	}
	return ""
}
