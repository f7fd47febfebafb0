package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/internal/quantize"
	"github.com/kiln-ml/kiln/ir"
)

var quantizeCmd = &cli.Command{
	Name:    "quantize",
	Args:    "MODEL",
	Summary: "calibrate a float model on sample data and write it as an INT8 QDQ model",
	Help: `Cleans the model up as cc build does (simplification, folding, BatchNormalization
folded into the Conv before it), compiles it into a native engine that also outputs
every float tensor, runs it on each calibration sample and writes a standard ONNX
QDQ model that cc build, ONNX Runtime and TensorRT read: int8 weights (per output
channel by default) and int32 biases behind DequantizeLinear, and uint8
QuantizeLinear -> DequantizeLinear pairs on the activations of Conv, Gemm, MatMul,
Add, Mul, Concat, the pools, Sigmoid and HardSwish (a following Relu or Clip, and a
Conv's residual Add, stay inside the pair). Graph outputs stay float. Where INT8
would be slower than FP32 (a set of quantized nodes whose quantize and dequantize
steps at its border cost more than its integer kernels save, such as one small Gemm
between float ops) the nodes stay float and the command says so; --quantize-all
quantizes them anyway.

Ranges calibration cannot set are not used: a tensor calibration saw at one value
(all-zero data) and what is computed from it alone, or one whose range quantizes
most of its nonzero values to 0 (an outlier far above the rest). The nodes that
would quantize it stay float, and a warning names the tensor, its range and what
to change. A calibration cache holding a min above its max, a range out of order
or a number that is not finite is refused. Last, the INT8 model runs on the
calibration data beside the float model: an output whose relative L2 error
averages above 0.5 over the runs is a warning, and with --strict an error that
writes nothing.

DATA (--calib) is a tensor file (.pb TensorProto or .npy) whose leading dim counts
samples (a [32,3,224,224] file is 32 runs of a [1,3,224,224] input), a folder of
such files, an ONNX test_data_set folder or a folder of them; repeat --calib
NAME=FILE for a model with several inputs. The calibration cache (--calib-cache)
keeps each tensor's min, max and |x| histogram: a later run on the same model
(any --method, any --keep-fp32) reads it instead of calibrating, and refuses a
cache made for another model.`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		out := fs.String("o", "", "output model, .onnx or .onnxtxt (default: MODEL.int8.onnx)")
		q := addQuantizeFlags(fs)
		limits := limitflags.Add(fs, limitflags.All...)
		return func(env *cli.Env, args []string) error {
			model := args[0]
			path := *out
			if path == "" {
				path = strings.TrimSuffix(model, filepath.Ext(model)) + ".int8" + extONNX
			}
			opts, err := q.options(fs, limits.Limits())
			if err != nil {
				return err
			}
			if err := checkExt(path); err != nil {
				return err
			}
			outputs := append(modelOutputs(path), q.outputs()...)
			if err := cli.CheckOutputs(append(modelFiles(model, nil), q.inputs()...), outputs); err != nil {
				return err
			}
			m, inputs, err := readModelSources(model, opts.Build.Limits)
			if err != nil {
				return err
			}
			if err := cli.CheckOutputs(append(inputs, q.inputs()...), outputs); err != nil {
				return err
			}
			src, err := os.ReadFile(model)
			if err != nil {
				return cli.FileError(model, err)
			}
			res, err := runQuantize(env, m, src, opts)
			if err != nil {
				return cli.FileError(model, err)
			}
			for _, w := range res.Warnings {
				env.Warnf("%s", w)
			}
			if err := writeModel(path, res.Model); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "wrote %s: %s\n", path, quantizeSummary(res, opts))
			return nil
		}
	},
}

// quantizeFlags are the flags cc quantize and cc build --precision int8
// share.
type quantizeFlags struct {
	calib      *stringList
	method     *string
	perChannel *bool
	perTensor  *bool
	keep       *string
	all        *bool
	cache      *string
	strict     *bool
}

func addQuantizeFlags(fs *flag.FlagSet) *quantizeFlags {
	q := &quantizeFlags{calib: &stringList{}}
	fs.Var(q.calib, "calib", "calibration `DATA`: a tensor file (.pb, .npy) of samples, a folder of them, an ONNX test_data_set folder or a folder of them; NAME=FILE per input (repeat the flag) for several inputs")
	q.method = fs.String("method", "entropy", "`METHOD` giving activation ranges from calibration: minmax, entropy or percentile[=P] (P 99.99 when left out)")
	q.perChannel = fs.Bool("per-channel", true, "one weight scale per output channel")
	q.perTensor = fs.Bool("per-tensor", false, "one weight scale per weight tensor")
	q.keep = fs.String("keep-fp32", "", "comma-separated `NODES` (by name) to leave in float32")
	q.all = fs.Bool("quantize-all", false, "quantize every node that can be, also where INT8 would be slower than FP32 (by default such nodes stay float, and the command names them)")
	q.cache = fs.String("calib-cache", "", "calibration cache `FILE` (JSON): read when it exists and was made for this model (no runs, no --calib needed), written after calibrating otherwise")
	q.strict = fs.Bool("strict", false, fmt.Sprintf("fail, writing nothing, when on the calibration data an output of the INT8 model differs from the float model's by a mean relative L2 above %g (by default a warning); needs --calib", quantize.MaxRelL2))
	return q
}

// options checks the flags and returns quantize.Options.
func (q *quantizeFlags) options(fs *flag.FlagSet, lim ir.Limits) (quantize.Options, error) {
	method, err := quantize.ParseMethod(*q.method)
	if err != nil {
		return quantize.Options{}, cli.Usagef("--method: %v", err)
	}
	if *q.perTensor && cli.WasSet(fs, "per-channel") && *q.perChannel {
		return quantize.Options{}, cli.Usagef("--per-channel and --per-tensor exclude each other")
	}
	if len(*q.calib) == 0 && *q.cache == "" {
		return quantize.Options{}, cli.Usagef("--calib DATA is required (or --calib-cache FILE holding this model's calibration)")
	}
	if len(*q.calib) == 0 && *q.strict {
		return quantize.Options{}, cli.Usagef("--strict checks the INT8 model on the calibration data: it needs --calib DATA, also with --calib-cache")
	}
	opts := quantize.Options{Method: method, PerTensor: *q.perTensor || !*q.perChannel, KeepFP32: split(*q.keep),
		QuantizeAll: *q.all, Data: *q.calib, CacheFile: *q.cache, Strict: *q.strict}
	opts.Build.Limits = lim
	return opts, nil
}

// forBuild checks cc build's --precision and the quantize flags: for int8
// it records them in opts and returns the quantization's options (nil for
// fp32, where the quantize flags have no use).
func (q *quantizeFlags) forBuild(fs *flag.FlagSet, precision string, opts *build.Options) (*quantize.Options, error) {
	names := []string{"calib", "method", "per-channel", "per-tensor", "keep-fp32", "quantize-all", "calib-cache", "strict"}
	switch precision {
	case "fp32":
		for _, name := range names {
			if cli.WasSet(fs, name) {
				return nil, cli.Usagef("--%s quantizes: it needs --precision int8", name)
			}
		}
		return nil, nil
	case "int8":
	default:
		return nil, cli.Usagef("--precision must be fp32 or int8, not %q", precision)
	}
	qopts, err := q.options(fs, opts.Limits)
	if err != nil {
		return nil, err
	}
	qopts.Build.LLC = opts.LLC
	opts.Precision = "int8"
	opts.Quantize = []string{"--method=" + qopts.Method.String()}
	if qopts.PerTensor {
		opts.Quantize = append(opts.Quantize, "--per-tensor")
	}
	if len(qopts.KeepFP32) > 0 {
		opts.Quantize = append(opts.Quantize, "--keep-fp32="+strings.Join(qopts.KeepFP32, ","))
	}
	if qopts.QuantizeAll {
		opts.Quantize = append(opts.Quantize, "--quantize-all")
	}
	return &qopts, nil
}

// quantizeForBuild is cc build --precision int8's first step: m, read
// from model, becomes its QDQ form.
func quantizeForBuild(env *cli.Env, model string, m *ir.Model, opts quantize.Options, inputs, outputs []cli.File) error {
	if err := cli.CheckOutputs(inputs, outputs); err != nil {
		return err
	}
	src, err := os.ReadFile(model)
	if err != nil {
		return cli.FileError(model, err)
	}
	res, err := runQuantize(env, m, src, opts)
	if err != nil {
		return cli.FileError(model, err)
	}
	for _, w := range res.Warnings {
		env.Warnf("%s", w)
	}
	fmt.Fprintf(env.Stdout, "quantized %s: %s\n", model, quantizeSummary(res, opts))
	return nil
}

// inputs are the calibration data's files, which nothing may overwrite.
func (q *quantizeFlags) inputs() []cli.File {
	var files []cli.File
	for _, spec := range *q.calib {
		path := spec
		if _, err := os.Stat(spec); err != nil {
			if _, p, ok := strings.Cut(spec, "="); ok {
				path = p
			}
		}
		files = append(files, cli.File{Path: path, Role: "calibration data"})
	}
	return files
}

// outputs is the calibration cache, which calibrating writes.
func (q *quantizeFlags) outputs() []cli.File {
	if *q.cache == "" {
		return nil
	}
	return []cli.File{{Path: *q.cache, Role: "the calibration cache"}}
}

// runQuantize quantizes with a progress bar on stderr while calibrating,
// when stderr is a terminal.
func runQuantize(env *cli.Env, m *ir.Model, src []byte, opts quantize.Options) (*quantize.Result, error) {
	f, ok := env.Stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return quantize.Quantize(m, src, opts)
	}
	p := mpb.New(mpb.WithOutput(f), mpb.WithWidth(40))
	var bar *mpb.Bar
	var compiling atomic.Bool // read by the bar's render goroutine
	opts.Progress = func(done, total int) {
		compiling.Store(done < 0)
		if bar == nil {
			stage := decor.Any(func(decor.Statistics) string {
				if compiling.Load() {
					return "compiling the calibration engine "
				}
				return "calibrating "
			})
			bar = p.AddBar(int64(total),
				mpb.PrependDecorators(stage, decor.CountersNoUnit("%d/%d runs")),
				mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
		}
		bar.SetCurrent(int64(max(0, done)))
	}
	res, err := quantize.Quantize(m, src, opts)
	if bar != nil && !bar.Completed() {
		bar.Abort(false)
	}
	p.Wait()
	return res, err
}

// quantizeSummary is the line cc quantize prints about what it did.
func quantizeSummary(res *quantize.Result, opts quantize.Options) string {
	units, n := []string{}, 0
	for _, op := range slices.Sorted(maps.Keys(res.Units)) {
		units = append(units, fmt.Sprintf("%s %d", op, res.Units[op]))
		n += res.Units[op]
	}
	weights := "per-channel"
	if opts.PerTensor {
		weights = "per-tensor"
	}
	s := fmt.Sprintf("%d of %d nodes quantized (%s), %d activation tensors, %s weights; ", n, res.Nodes, strings.Join(units, ", "), res.Tensors, weights)
	if n == 0 {
		s = fmt.Sprintf("none of %d nodes quantized; ", res.Nodes)
	}
	if res.FromCache {
		s += fmt.Sprintf("%s ranges from the calibration cache %s (%d samples)", opts.Method, opts.CacheFile, res.Samples)
	} else {
		s += fmt.Sprintf("%s ranges from %d samples in %d runs, calibrated in %s", opts.Method, res.Samples, res.Runs, res.Calibration.Round(time.Millisecond))
		if res.CacheWritten {
			s += ", cached in " + opts.CacheFile
		}
	}
	if w, ok := res.Worst(); ok {
		s += fmt.Sprintf("; on the calibration data its outputs differ from the float model's by relative L2 %.3g at most (output %q)", w.RelL2, w.Output)
	} else if len(opts.Data) == 0 {
		s += "; not checked against the float model (no --calib data)"
	}
	if res.UpgradedFrom != 0 {
		s += fmt.Sprintf("; its ONNX opset %d raised to %d for QuantizeLinear's per-channel axis", res.UpgradedFrom, res.Model.Opset(""))
	}
	for _, k := range res.KeptFloat {
		s += "\nkept in FP32, INT8 would be slower: " + k
	}
	return s
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
