package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/compare"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// randomRuns is how many runs of random inputs compare makes without --data.
const randomRuns = 16

var compareCmd = &cli.Command{
	Name:    "compare",
	Args:    "A.kiln B.kiln",
	Summary: "compare two engines of one model (FP32 and INT8, say): agreement, accuracy, latency, per-layer SQNR",
	Help: `Runs both engines on the same inputs and reports how far B's outputs are from A's and how
fast each runs. The engines must take the same inputs and give the same outputs (names,
dtypes, shapes); a difference is named.

--data gives the inputs, in the forms cc quantize's --calib takes: a tensor file (.pb or
.npy) whose leading dim counts samples (split into the engine's batch), a folder of such
files, an ONNX test_data_set folder or a folder of them, or NAME=FILE for each input
(repeat --data). Without it, 16 runs of random N(0,1) inputs (seeded). --labels (integer
.pb or .npy, one per sample) adds each engine's top-1 accuracy.

Agreement is over every sample and every output element: top-1 agreement (the first
output's last axis holds the class scores), cosine similarity, SQNR in dB
(10·log10(Σa²/Σ(a−b)²), +Inf when B equals A) and the max abs error. Latency (median,
p90, p99) comes from --duration seconds of runs after --warmup, the engines taking turns
run by run so that a drift in the machine's speed hits both; the speed-up is A's median
over B's.

--per-layer compares the engines' debug outputs (both built with cc build --mark-outputs
all): each of B's quantized tensors (every tensor if B has none) against A's tensor of the
same source value, dequantized, worst SQNR first, and the cc quantize --keep-fp32 flag
that would keep the nodes of the three worst in float (not layout ops such as MaxPool,
whose tensors carry their input's error). A quantized tensor holds the value its
QuantizeLinear quantized, so it matches A's tensor of that value's name.

--json prints one object: a and b (each latency_ms {median, p90, p99}, and accuracy with
--labels), speedup, agreement {top1, cosine, sqnr_db, max_abs_err} and with --per-layer
layers [{name, sqnr_db}]; a non-finite number is the string "+Inf", "-Inf" or "NaN", and
top1 is null when the first output holds no class scores. --html FILE writes a
self-contained page with the summary and charts (latency distributions, per-layer SQNR).`,
	MinArgs: 2,
	MaxArgs: 2,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		var data dataFlag
		fs.Var(&data, "data", "`FILE|DIR|NAME=FILE`: the inputs (see above); repeat NAME=FILE for several inputs")
		labels := fs.String("labels", "", "`FILE`: integer class labels, one per sample of --data (.pb or .npy)")
		perLayer := fs.Bool("per-layer", false, "compare the engines' debug outputs tensor by tensor (cc build --mark-outputs all)")
		asJSON := fs.Bool("json", false, "print one JSON object")
		html := fs.String("html", "", "write a self-contained HTML report with charts to `FILE`")
		threads := cli.NonNegativeInt(fs, "threads", 0, threadsUsage)
		warmup := cli.NonNegativeFloat(fs, "warmup", 0.5, "`seconds` of untimed runs before timing")
		duration := cli.PositiveFloat(fs, "duration", 3, "`seconds` of timed runs, both engines together")
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena, limitflags.File)
		return func(env *cli.Env, args []string) error {
			if *labels != "" && len(data) == 0 {
				return cli.Usagef("--labels needs --data: the labels are those of its samples")
			}
			if *html != "" {
				inputs := []cli.File{{Path: args[0], Role: "engine A"}, {Path: args[1], Role: "engine B"}}
				for _, path := range data.files() {
					inputs = append(inputs, cli.File{Path: path, Role: "--data"})
				}
				if *labels != "" {
					inputs = append(inputs, cli.File{Path: *labels, Role: "--labels"})
				}
				if err := cli.CheckOutputs(inputs, []cli.File{{Path: *html, Role: "--html"}}); err != nil {
					return err
				}
			}
			var sides [2]compare.Engine
			for i, path := range args {
				e, err := loadEngine(path, *requireSigned)
				if err != nil {
					return err
				}
				sides[i] = compare.Engine{Path: path, Engine: e}
			}
			if err := compare.Compatible(sides[0], sides[1]); err != nil {
				return err
			}
			lim := limits.Limits()
			in, err := runInputs(sides[0])
			if err != nil {
				return err
			}
			var runs compare.Data
			source := "random N(0,1) inputs (seeded)"
			if len(data) > 0 {
				set, err := dataset.Read(data.specs(), in, lim)
				if err != nil {
					return err
				}
				runs, source = set, set.Source
			} else if runs, err = randomData(in); err != nil {
				return err
			}
			opts := compare.Options{Threads: env.ClampThreads("--threads", *threads), Warmup: seconds(*warmup),
				Duration: seconds(*duration), PerLayer: *perLayer, Limits: lim}
			if *labels != "" {
				if opts.Labels, err = dataset.ReadLabels(*labels, lim); err != nil {
					return err
				}
			}
			r, err := compare.Run(sides[0], sides[1], runs, opts)
			if err != nil {
				return err
			}
			if *html != "" {
				var page bytes.Buffer
				if err := r.WriteHTML(&page, source); err != nil {
					return err
				}
				if err := atomicfile.WriteFile(*html, page.Bytes(), 0o644); err != nil {
					return cli.FileError(*html, err)
				}
			}
			if *asJSON {
				return r.WriteJSON(env.Stdout, *perLayer)
			}
			r.WriteText(env.Stdout, source)
			if *html != "" {
				fmt.Fprintf(env.Stdout, "\nwrote %s\n", *html)
			}
			return nil
		}
	},
}

// dataFlag collects --data values: one path, or NAME=FILE per input.
type dataFlag []string

func (d *dataFlag) String() string { return strings.Join(*d, ",") }

func (d *dataFlag) Set(s string) error {
	if s == "" {
		return fmt.Errorf("want FILE, DIR or NAME=FILE")
	}
	*d = append(*d, s)
	return nil
}

func (d dataFlag) specs() []string { return d }

// files are the files or folders --data names: each value, or what
// follows NAME= where no file has the whole value as its name.
func (d dataFlag) files() []string {
	var files []string
	for _, spec := range d {
		if _, err := os.Stat(spec); err != nil {
			if _, file, ok := strings.Cut(spec, "="); ok {
				spec = file
			}
		}
		files = append(files, spec)
	}
	return files
}

// runInputs are the engine's inputs at the shape one run takes (a dynamic
// input at the shape the engine was tuned at).
func runInputs(e compare.Engine) ([]dataset.Input, error) {
	var in []dataset.Input
	for _, b := range e.Engine.Inputs() {
		d, err := ir.ParseDType(b.DType)
		if err != nil {
			return nil, err
		}
		dims, err := b.DimsAt(e.Engine.Meta.Symbols, engine.OptValues(e.Engine.Meta.Symbols))
		if err != nil {
			return nil, err
		}
		in = append(in, dataset.Input{Name: b.Name, DType: d, Dims: dims})
	}
	return in, nil
}

// randomRunData is compare's data without --data: seeded random runs.
type randomRunData struct {
	runs  []map[string]*ir.Tensor
	first string // the input whose leading dim counts a run's samples
}

func randomData(inputs []dataset.Input) (*randomRunData, error) {
	r := &randomRunData{runs: make([]map[string]*ir.Tensor, randomRuns), first: inputs[0].Name}
	for i := range r.runs {
		r.runs[i] = map[string]*ir.Tensor{}
		for k, in := range inputs {
			t, err := randomTensor(in.DType.String(), in.Dims, int64(1+i*len(inputs)+k))
			if err != nil {
				return nil, err
			}
			r.runs[i][in.Name] = t
		}
	}
	return r, nil
}

func (r *randomRunData) Runs() int                       { return len(r.runs) }
func (r *randomRunData) Run(i int) map[string]*ir.Tensor { return r.runs[i] }
func (r *randomRunData) RunSource(i int) string          { return fmt.Sprintf("random inputs, run %d", i) }

// SamplesIn counts a run's samples by its first input's leading dim.
func (r *randomRunData) SamplesIn(i int) int {
	if t := r.runs[i][r.first]; len(t.Dims) > 0 {
		return int(t.Dims[0])
	}
	return 1
}
