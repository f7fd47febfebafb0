package quantize

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/compare"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
)

// The last check: the QDQ model runs on the calibration data next to the
// float model, and each float output of the two is compared run by run.
// Per run, so that one sample with huge outputs (an outlier in the data)
// cannot hide the others' disagreement.

// MaxRelL2 is the mean relative L2 error over the calibration runs,
// ‖int8 − float‖₂ / ‖float‖₂, above which an output agrees badly: its
// error is more than half its signal (SQNR 6 dB, cosine about 0.87), and
// it no longer follows the float model. Calibrated per channel, models
// measure 0.01 to 0.2 (the zoo's squeezenet1_1 0.01, mobilenet_v2 0.2); a
// range that lost the data gives about 1. Milder losses are for infer
// compare to show.
const MaxRelL2 = 0.5

// Agreement is how one float output of the QDQ model agrees with the
// float model's on the calibration data.
type Agreement struct {
	Output string
	// RelL2 and Cosine are the means over the runs of ‖q − f‖₂ / ‖f‖₂ and
	// of their cosine similarity; Runs counts the runs compared (those
	// whose float output is finite and not all zero).
	RelL2, Cosine float64
	Runs          int
}

// Bad reports whether the output agrees worse than MaxRelL2 allows (a NaN
// never agrees).
func (a Agreement) Bad() bool { return a.Runs > 0 && !(a.RelL2 <= MaxRelL2) }

// agreementOf runs the QDQ model q on every run of data, as calibration
// runs, and returns each float output's agreement with the float model's,
// in the graph's order. The float outputs are floatOutputs' (one map per
// run), or when that is nil the float model's (the bytes floatBuf) run
// again.
func agreementOf(floatBuf []byte, floatOutputs []map[string]*ir.Tensor, q *ir.Model, data *dataset.Set, opts Options) ([]Agreement, error) {
	fm, err := onnx.ReadWithin(floatBuf, "", opts.Build.Limits)
	if err != nil {
		return nil, err
	}
	var outputs []string
	for _, v := range fm.Graph.Outputs {
		if v.Type.Elem == ir.Float32 && v.Producer != nil { // an input passed through is never quantized
			outputs = append(outputs, v.Name)
		}
	}
	runFloat := func(r int) (map[string]*ir.Tensor, error) { return floatOutputs[r], nil }
	if floatOutputs == nil {
		run, done, err := calibrationRunner(fm, floatBuf, data, opts)
		if err != nil {
			return nil, fmt.Errorf("checking the quantized model: %w", err)
		}
		defer done()
		runFloat = func(r int) (map[string]*ir.Tensor, error) { return run(data.Run(r)) }
	}
	qBuf, err := onnx.Write(q)
	if err != nil {
		return nil, err
	}
	qm, err := onnx.ReadWithin(qBuf, "", opts.Build.Limits) // a copy: the build changes it
	if err != nil {
		return nil, err
	}
	runQ, done, err := calibrationRunner(qm, qBuf, data, opts)
	if err != nil {
		return nil, fmt.Errorf("checking the quantized model: %w", err)
	}
	defer done()

	agreements := make([]Agreement, len(outputs))
	for i, name := range outputs {
		agreements[i].Output = name
	}
	for r := range data.Runs() {
		want, err := runFloat(r)
		if err != nil {
			return nil, fmt.Errorf("checking the quantized model: %s: %w", data.RunSource(r), err)
		}
		got, err := runQ(data.Run(r))
		if err != nil {
			return nil, fmt.Errorf("checking the quantized model: %s: %w", data.RunSource(r), err)
		}
		for i, name := range outputs {
			f, q := want[name], got[name]
			if f == nil || q == nil || q.DType != ir.Float32 || f.Len() != q.Len() {
				return nil, fmt.Errorf("checking the quantized model: it gives no float32 %q of the float model's shape", name)
			}
			if rel, cos, ok := compareRun(f.Float32s(), q.Float32s()); ok {
				a := &agreements[i]
				a.RelL2 += rel
				a.Cosine += cos
				a.Runs++
			}
		}
	}
	for i := range agreements {
		if a := &agreements[i]; a.Runs > 0 {
			a.RelL2 /= float64(a.Runs)
			a.Cosine /= float64(a.Runs)
		}
	}
	return agreements, nil
}

// compareRun is q's relative L2 error and cosine similarity against f;
// ok is false when f is not finite or all zero (nothing to be relative to).
func compareRun(f, q []float32) (relL2, cosine float64, ok bool) {
	a, b := make([]float64, len(f)), make([]float64, len(q))
	for i, x := range f {
		if !isFinite(float64(x)) {
			return 0, 0, false
		}
		a[i], b[i] = float64(x), float64(q[i])
	}
	var g compare.Agreement
	g.Add(a, b)
	sqnr := g.SQNR()
	if math.IsInf(sqnr, -1) { // f all zero
		return 0, 0, false
	}
	return math.Pow(10, -sqnr/20), g.Cosine(), true
}

// Worst is the output agreement with the largest error (a NaN first); ok
// is false when none was measured.
func (r *Result) Worst() (w Agreement, ok bool) {
	for _, a := range r.Agreement {
		if a.Runs == 0 {
			continue
		}
		if !ok || math.IsNaN(a.RelL2) || a.RelL2 > w.RelL2 {
			w, ok = a, true
		}
		if math.IsNaN(w.RelL2) {
			break
		}
	}
	return w, ok
}

// disagreement is the warning (or, with Strict, the error) about a bad
// agreement a on data.
func disagreement(a Agreement, data string) string {
	return fmt.Sprintf("the INT8 model agrees badly with the float model on the calibration data (%s): output %q differs by relative L2 %.3g on average over %d runs (cosine %.3f), above %g; "+
		"infer compare's per-layer SQNR names the tensors that lose it (leave their nodes float with --keep-fp32), or calibrate on more representative data or with another --method",
		data, a.Output, a.RelL2, a.Runs, a.Cosine, MaxRelL2)
}
