// Package quantize is `cc quantize`: it calibrates a float32 model on
// sample data and writes it in ONNX's QDQ form (int8-contract.md §1):
// int8 weights per output channel, int32 biases, and uint8
// QuantizeLinear → DequantizeLinear pairs on the activations the integer
// kernels read and write.
//
// A model at an opset before 13 (QuantizeLinear's per-channel axis) is
// first raised to 13, each node whose op changed rewritten to its new form
// (upgrade.go). The model is then cleaned up by the O2 pipeline's own passes
// (simplification, folding, BatchNormalization folded into the Conv before
// it), so that weights are quantized as the kernels will use them and each
// Conv/Gemm/MatMul sits directly between its pairs. Calibration compiles
// the clean float model with every float tensor as an extra output
// (internal/build) and runs the native engine on each sample: the
// reference executor would take seconds a sample on a ResNet.
//
// Ranges calibration cannot set (degenerate.go) are not quantized: the
// nodes that would quantize them stay float, with a warning. Last, the
// quantized model runs on the calibration data beside the float one
// (agreement.go): an output that agrees badly is a warning, or with
// Strict an error.
package quantize

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/version"
	"github.com/kiln-ml/kiln/passes"
)

// Options are cc quantize's settings.
type Options struct {
	Method Method
	// PerTensor gives each weight one scale instead of one per output
	// channel.
	PerTensor bool
	// KeepFP32 names nodes to leave float.
	KeepFP32 []string
	// QuantizeAll quantizes also where the guard (guard.go) would keep
	// FP32 because INT8 would be slower.
	QuantizeAll bool
	// Data is the calibration data, in internal/dataset's forms (one path,
	// or NAME=PATH per input). It may be empty when CacheFile holds the
	// model's calibration.
	Data []string
	// CacheFile is the calibration cache ("": none): read when it exists
	// and was made for this model, written after calibrating otherwise.
	CacheFile string
	// Build gives the calibration engine's llc and every limit (LLC,
	// Limits); it is compiled for this machine.
	Build build.Options
	// Threads is the calibration engine's thread count (0: all cores).
	Threads int
	// Progress, when set, is called with done -1 while the calibration
	// engine compiles, then 0 and after each of the total runs.
	Progress func(done, total int)
	// Strict fails when the quantized model agrees badly with the float
	// one on the calibration data (MaxRelL2), instead of warning; it needs
	// Data.
	Strict bool
	// reference calibrates on the reference executor instead of a native
	// engine (tests on machines without LLVM).
	reference bool
}

// Result is a quantized model and what making it did.
type Result struct {
	Model *ir.Model
	// Nodes is the clean float model's node count; Units the quantized
	// nodes per op type; Tensors the activations given a pair.
	Nodes   int
	Units   map[string]int
	Tensors int
	// Samples and Runs are the calibration data's (those the cache was
	// made with when FromCache).
	Samples, Runs int
	FromCache     bool
	CacheWritten  bool
	// Calibration is the time spent compiling the calibration engine and
	// running it.
	Calibration time.Duration
	Warnings    []string
	// Agreement is each float output's agreement with the float model's
	// on the calibration data (none without Data).
	Agreement []Agreement
	// KeptFloat describes each set of quantizable nodes left float
	// because INT8 would be slower there (guard.go).
	KeptFloat []string
	// UpgradedFrom is the ONNX opset the model imported when cc quantize
	// raised it to 13 (upgrade.go), else 0.
	UpgradedFrom int64
}

// Quantize quantizes m, read from the file whose bytes are src (their hash
// keys the calibration cache). It changes m.
func Quantize(m *ir.Model, src []byte, opts Options) (*Result, error) {
	upgradedFrom, err := checkModel(m, opts.PerTensor)
	if err != nil {
		return nil, err
	}
	if opts.Strict && len(opts.Data) == 0 {
		return nil, fmt.Errorf("strict: checking the quantized model needs calibration data (--calib), also with a calibration cache")
	}
	// Weights that are also graph inputs (Caffe2-era models) are the
	// constants cc build compiles them as by default; as inputs none would
	// quantize. The QDQ model has them as plain initializers.
	build.FoldDefaults(m.Graph)
	if err := runPasses(m, opts.Build.Limits, "infer", "simplify", "fold", "conv-bn", "dce", "infer-final"); err != nil {
		return nil, err
	}
	if err := checkKeep(m.Graph, opts.KeepFP32); err != nil {
		return nil, err
	}
	res := &Result{Model: m, Nodes: len(m.Graph.Nodes), Units: map[string]int{}, UpgradedFrom: upgradedFrom}
	data, err := readData(m, opts)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	ranges, err := rangesOf(m, hex.EncodeToString(sum[:]), data, opts, res)
	if err != nil {
		return nil, err
	}
	var floatBuf []byte // the float model, to check the quantized one against
	if data != nil {
		if floatBuf, err = onnx.Write(m); err != nil {
			return nil, err
		}
	}
	// Graph outputs keep their whole observed range whatever the method:
	// they are what callers read, and clipping a classifier's largest
	// logits would merge its top classes.
	outputs := map[*ir.Value]bool{}
	for _, v := range m.Graph.Outputs {
		outputs[v] = true
	}
	problems := rangeProblems(m.Graph, ranges, opts.Method, outputs)
	p, keptFor, err := planAvoiding(m, opts, problems)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, problemWarnings(m.Graph, problems, keptFor, dataName(opts, res))...)
	params := map[*ir.Value]actParams{}
	for _, v := range p.acts {
		root := p.root(v)
		if ranges.stats[root.Name] == nil {
			return nil, fmt.Errorf("calibration cache %s has no statistics for tensor %q: delete it to calibrate again", opts.CacheFile, root.Name)
		}
		r := ranges.rangeOf(root.Name, outputs[root], opts.Method)
		params[root] = activationParams(r[0], r[1])
	}
	warnings, err := p.rewrite(params)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, warnings...)
	if err := runPasses(m, opts.Build.Limits, "dce", "infer-final"); err != nil {
		return nil, fmt.Errorf("the quantized model: %w", err)
	}
	for _, n := range p.units {
		res.Units[n.OpType]++
	}
	res.Tensors = len(p.acts)
	res.KeptFloat = p.keptFloat
	if data != nil {
		if err := check(res, floatBuf, ranges.floatOutputs, data, opts); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// check measures res.Model against the float model on data (agreement.go)
// and warns, or with Strict fails, when an output agrees badly.
func check(res *Result, floatBuf []byte, floatOutputs []map[string]*ir.Tensor, data *dataset.Set, opts Options) error {
	var err error
	if res.Agreement, err = agreementOf(floatBuf, floatOutputs, res.Model, data, opts); err != nil {
		return err
	}
	if w, ok := res.Worst(); ok && w.Bad() {
		msg := disagreement(w, data.Source)
		if opts.Strict {
			return fmt.Errorf("%s (--strict: nothing written)", msg)
		}
		res.Warnings = append(res.Warnings, msg)
	}
	return nil
}

// dataName names the calibration data for messages.
func dataName(opts Options, res *Result) string {
	if res.FromCache {
		return "in the calibration cache " + opts.CacheFile
	}
	return strings.Join(opts.Data, ", ")
}

// checkModel refuses models the QDQ form cannot express, and raises the
// opset of those whose opset predates it (upgrade.go): QuantizeLinear
// exists from 10, its per-channel axis from 13. It returns the opset the
// model imported before ("" domain), or 0 when it kept it.
func checkModel(m *ir.Model, perTensor bool) (int64, error) {
	for _, n := range m.Graph.Nodes {
		if n.Domain == "" && (n.OpType == "QuantizeLinear" || n.OpType == "DequantizeLinear" || n.OpType == "QLinearConv" || n.OpType == "QLinearMatMul") {
			return 0, fmt.Errorf("the model is quantized already (%s): cc build compiles it as it is", n)
		}
	}
	opset := m.Opset("")
	if opset >= qdqOpset || perTensor && opset >= 10 {
		return 0, nil
	}
	if opset == 0 {
		return 0, fmt.Errorf("the model imports no ONNX opset (default domain)")
	}
	if err := upgradeOpset(m, perTensor); err != nil {
		return 0, err
	}
	return opset, nil
}

// qdqOpset is the default-domain opset a per-channel QDQ model needs:
// QuantizeLinear and DequantizeLinear take an axis from 13.
const qdqOpset = 13

// upgradeOpset raises m's opset to qdqOpset through the version converter,
// whose refusals say why quantizing needs it and what else the user can do.
// perTensor: QuantizeLinear itself (opset 10), not its axis, is missing.
func upgradeOpset(m *ir.Model, perTensor bool) error {
	r := version.Reason{
		Why:  fmt.Sprintf("per-channel weight scales need opset %d", qdqOpset),
		Hint: fmt.Sprintf("re-export the model at opset %d, or cc convert --opset %d", qdqOpset, qdqOpset),
	}
	if perTensor {
		r.Why = fmt.Sprintf("QuantizeLinear needs opset 10 (cc quantize raises it to %d)", qdqOpset)
	}
	if m.Opset("") >= 10 {
		r.Hint += fmt.Sprintf(", or quantize --per-tensor, which keeps opset %d", m.Opset(""))
	}
	return version.Convert(m, qdqOpset, r)
}

// runPasses runs the named passes of the O2 pipeline, verifying after each.
func runPasses(m *ir.Model, lim ir.Limits, names ...string) error {
	var pipeline []passes.Pass
	for _, name := range names {
		p, ok := passes.Lookup(passes.O2, name)
		if !ok {
			return fmt.Errorf("the O2 pipeline has no pass %q", name)
		}
		pipeline = append(pipeline, p)
	}
	return passes.Run(&passes.Context{OptLevel: 2, Verify: true, Limits: lim}, pipeline, m)
}

// ranges are calibration's statistics by tensor name, and the ranges a
// cache made with the method asked for recorded (nil otherwise).
type ranges struct {
	stats  map[string]*Stats
	cached map[string][2]float64
	// floatOutputs are the graph's outputs on each calibration run (nil
	// from a cache, or when calibrate did not keep them).
	floatOutputs []map[string]*ir.Tensor
}

// rangeOf is the range the tensor named name quantizes to under method:
// the observed one for a graph output, else the cache's or the method's.
func (r *ranges) rangeOf(name string, output bool, method Method) [2]float64 {
	s := r.stats[name]
	if output {
		return [2]float64{s.Min, s.Max}
	}
	if rg, ok := r.cached[name]; ok {
		return rg
	}
	lo, hi := s.Range(method)
	return [2]float64{lo, hi}
}

// readData reads the calibration data (nil when there is none).
func readData(m *ir.Model, opts Options) (*dataset.Set, error) {
	if len(opts.Data) == 0 {
		return nil, nil
	}
	inputs, err := runInputs(m)
	if err != nil {
		return nil, err
	}
	return dataset.Read(opts.Data, inputs, opts.Build.Limits)
}

// rangesOf returns the observed tensors' statistics: from the cache when
// it holds this model's, else by calibrating on data (and then writing the
// cache).
func rangesOf(m *ir.Model, sum string, data *dataset.Set, opts Options, res *Result) (*ranges, error) {
	if opts.CacheFile != "" {
		c, err := readCache(opts.CacheFile, sum, opts.Build.Limits)
		if err != nil {
			return nil, err
		}
		if c != nil {
			res.FromCache, res.Samples, res.Runs = true, c.Samples, c.Runs
			r := &ranges{stats: map[string]*Stats{}}
			for name, t := range c.Tensors {
				r.stats[name] = &t.Stats
			}
			if c.Method == opts.Method.Name && (c.Method != "percentile" || c.Percentile == opts.Method.Percentile) {
				r.cached = map[string][2]float64{}
				for name, t := range c.Tensors {
					r.cached[name] = t.Range
				}
			}
			return r, nil
		}
	}
	if data == nil {
		if opts.CacheFile != "" {
			return nil, fmt.Errorf("no calibration data (--calib), and the calibration cache %s does not exist yet", opts.CacheFile)
		}
		return nil, fmt.Errorf("no calibration data (--calib)")
	}
	start := time.Now()
	stats, floatOutputs, err := calibrate(m, observed(m.Graph), data, opts)
	if err != nil {
		return nil, err
	}
	res.Calibration = time.Since(start)
	res.Samples, res.Runs = data.Samples, data.Runs()
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		if n := stats[name].NonFinite; n > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("tensor %q held %d NaN or infinite values in calibration; its range leaves them out", name, n))
		}
	}
	r := &ranges{stats: stats, floatOutputs: floatOutputs}
	if opts.CacheFile != "" {
		c := newCache(sum, opts.Method, data, stats)
		if err := writeCache(opts.CacheFile, c); err != nil {
			return nil, fmt.Errorf("writing the calibration cache: %w", err)
		}
		res.CacheWritten = true
		r.cached = map[string][2]float64{} // computed for every tensor already
		for name, t := range c.Tensors {
			r.cached[name] = t.Range
		}
	}
	return r, nil
}
