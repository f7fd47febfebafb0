// Command bench compares kiln with ONNX Runtime on the zoo models: `make
// bench` runs it. For every float32 model in --zoo it builds an engine with
// bin/cc, checks it against the model's test data with bin/infer check,
// times it with bin/infer bench --json at each thread count, and times ONNX
// Runtime (--ort: the Node.js script in ../shared/tools/ort) in the same
// run, since the machines are too noisy for timings taken apart to compare.
// It prints a Markdown table: model, precision, threads, kiln and ORT median
// ms, their ratio, kiln INT8's speed-up over kiln FP32, and GFLOP/s where
// the model's FLOP count is known.
//
// --extra names a second folder in the zoo's layout, the generated models
// of internal/benchmodels (make bench writes them to out/benchmodels):
// architecture families the zoo lacks, benchmarked the same way.
//
// INT8 rows quantize each model with bin/cc quantize (calibrated on the
// model's meta.json calib_set, else on random N(0,1) samples, which is
// what the zoo's random-weight models are fed), build that QDQ model, and
// time ONNX Runtime on the same QDQ file; the check column then gives the
// agreement with kiln's FP32 engine (and the test accuracy of both where
// the model has a test set).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// gflop is the work of one inference, for the models whose count is
// known (multiply-adds counted as 2 FLOPs).
var gflop = map[string]float64{"resnet18": 3.64}

type options struct {
	zoo, bin, ort, work string
	models              []string
	precisions          []string
	threads             []int
	duration            float64
	rounds              int

	// extra is a second zoo (--extra); inExtra marks the models found
	// there and not in zoo.
	extra   string
	inExtra map[string]bool
}

// row is one model in one precision at one thread count.
type row struct {
	Model     string
	Precision string
	Threads   int
	Kiln      float64 // median ms; 0 when it did not run
	ORT       float64
	FP32      float64 // kiln's FP32 median at the same thread count (INT8 rows)
	Check     string  // PASS, FAIL, an agreement summary or why it did not run
	GFLOP     float64
}

func main() {
	var o options
	var models, threads string
	flag.StringVar(&o.zoo, "zoo", "../shared/zoo", "the model zoo")
	flag.StringVar(&o.extra, "extra", "", "a second folder in the zoo's layout (internal/benchmodels' generated models), benchmarked after --zoo's; a name in both is --zoo's")
	flag.StringVar(&o.bin, "bin", "bin", "folder holding cc and infer")
	flag.StringVar(&o.ort, "ort", "../shared/tools/ort/ort_bench.js", "ONNX Runtime's benchmark script (run with node); empty: no ORT columns")
	flag.StringVar(&o.work, "work", "", "folder for the engines (default: a temporary one)")
	flag.StringVar(&models, "models", "", "comma-separated models (default: every float32 model in --zoo)")
	flag.StringVar(&threads, "threads", "1,2", "comma-separated thread counts")
	precisions := flag.String("precision", "fp32,int8", "comma-separated precisions: fp32, int8")
	flag.Float64Var(&o.duration, "duration", 3, "timed seconds per model, thread count and runtime")
	flag.IntVar(&o.rounds, "rounds", 3, "turns kiln and ONNX Runtime take, splitting --duration")
	flag.Parse()
	if o.rounds < 1 {
		fatalf("--rounds must be at least 1")
	}
	for _, s := range strings.Split(threads, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("--threads: %q is not a thread count", s)
		}
		o.threads = append(o.threads, n)
	}
	for _, p := range strings.Split(*precisions, ",") {
		if p = strings.TrimSpace(p); p != "fp32" && p != "int8" {
			fatalf("--precision: %q is not fp32 or int8", p)
		}
		o.precisions = append(o.precisions, strings.TrimSpace(p))
	}
	var err error
	if o.models, o.inExtra, err = listModels(o.zoo, o.extra, models); err != nil {
		fatalf("%v", err)
	}
	if o.work == "" {
		dir, err := os.MkdirTemp("", "kiln-bench-*")
		if err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(dir)
		o.work = dir
	} else if err := os.MkdirAll(o.work, 0o755); err != nil {
		fatalf("%v", err)
	}
	fmt.Printf("%s, %d CPUs; %gs per measurement\n\n", cpuName(), runtime.NumCPU(), o.duration)
	var rows []row
	for _, m := range o.models {
		var fp32 []row
		for _, p := range o.precisions {
			rs := benchModel(o, m, p)
			if p == "fp32" {
				fp32 = rs
			}
			for i := range rs {
				if p == "int8" && i < len(fp32) {
					rs[i].FP32 = fp32[i].Kiln
				}
			}
			rows = append(rows, rs...)
		}
	}
	writeTable(os.Stdout, rows)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

// float32Models lists the zoo's model folders whose meta.json says the
// input is float32 (a folder without meta.json counts).
func float32Models(zoo string) ([]string, error) {
	entries, err := os.ReadDir(zoo)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		dir := filepath.Join(zoo, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
			continue
		}
		var meta struct {
			Input struct{ DType string } `json:"input"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "meta.json")); err == nil {
			if json.Unmarshal(b, &meta) == nil && meta.Input.DType != "" && meta.Input.DType != "float32" {
				continue
			}
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// listModels returns the models to run (the comma-separated names, else
// every float32 model of zoo, then of extra) and which of them are extra's.
func listModels(zoo, extra, names string) ([]string, map[string]bool, error) {
	has := func(dir, m string) bool {
		_, err := os.Stat(filepath.Join(dir, m, "model.onnx"))
		return err == nil
	}
	inExtra := map[string]bool{}
	if names != "" {
		models := strings.Split(names, ",")
		for _, m := range models {
			if extra != "" && !has(zoo, m) && has(extra, m) {
				inExtra[m] = true
			}
		}
		return models, inExtra, nil
	}
	models, err := float32Models(zoo)
	if err != nil || extra == "" {
		return models, inExtra, err
	}
	more, err := float32Models(extra)
	if err != nil {
		return nil, nil, fmt.Errorf("--extra: %v", err)
	}
	for _, m := range more {
		if !slices.Contains(models, m) {
			models = append(models, m)
			inExtra[m] = true
		}
	}
	return models, inExtra, nil
}

// zooOf is the folder holding model: --extra for its models, else --zoo.
func (o options) zooOf(model string) string {
	if o.inExtra[model] {
		return o.extra
	}
	return o.zoo
}

func benchModel(o options, model, precision string) []row {
	dir := filepath.Join(o.zooOf(model), model)
	engine := filepath.Join(o.work, model+".kiln")
	rows := make([]row, len(o.threads))
	for i, t := range o.threads {
		rows[i] = row{Model: model, Precision: precision, Threads: t, GFLOP: gflop[model]}
	}
	setCheck := func(s string) {
		for i := range rows {
			rows[i].Check = s
		}
	}
	fmt.Fprintf(os.Stderr, "== %s %s\n", model, precision)
	ortZoo := o.zooOf(model)
	if precision == "int8" {
		var err error
		if ortZoo, err = quantized(o, model); err != nil {
			setCheck(err.Error())
		} else {
			setCheck(agreement(o, model))
		}
		engine = filepath.Join(o.work, model+".int8.kiln")
	} else if _, err := run(filepath.Join(o.bin, "cc"), "build", filepath.Join(dir, "model.onnx"), "-o", engine); err != nil {
		setCheck("build failed: " + firstLine(err.Error()))
	} else if _, err := run(filepath.Join(o.bin, "infer"), "check", engine, "--test-data", filepath.Join(dir, "test_data_set_0")); err != nil {
		setCheck("FAIL")
	} else {
		setCheck("PASS")
	}
	// kiln and ONNX Runtime take turns, a slice of the time each per
	// round, so a drift in the machine's speed (a shared host) hits both;
	// each figure is the median of the rounds' medians.
	_, err := os.Stat(engine)
	built := err == nil
	slice := o.duration / float64(o.rounds)
	kiln := make([][]float64, len(rows))
	ort := make([][]float64, len(rows))
	for round := 0; round < o.rounds; round++ {
		for i, t := range o.threads {
			if !built {
				break
			}
			out, err := run(filepath.Join(o.bin, "infer"), "bench", engine, "--json", "--threads", strconv.Itoa(t),
				"--duration", fmt.Sprint(slice))
			var r struct {
				Latency struct{ Median float64 } `json:"latency_ms"`
			}
			if err == nil && json.Unmarshal(out, &r) == nil {
				kiln[i] = append(kiln[i], r.Latency.Median)
			}
		}
		if o.ort == "" {
			continue
		}
		var ts []string
		for _, t := range o.threads {
			ts = append(ts, strconv.Itoa(t))
		}
		out, err := run("node", o.ort, "--zoo", ortZoo, "--model", model, "--threads", strings.Join(ts, ","),
			"--budget", fmt.Sprint(slice))
		var r struct {
			Configs []struct {
				Threads int     `json:"threads"`
				Median  float64 `json:"median_ms"`
			} `json:"configs"`
		}
		if err != nil || json.Unmarshal(out, &r) != nil {
			if err != nil {
				fmt.Fprintf(os.Stderr, "ONNX Runtime: %s\n", firstLine(err.Error()))
			}
			continue
		}
		for _, c := range r.Configs {
			for i := range rows {
				if rows[i].Threads == c.Threads {
					ort[i] = append(ort[i], c.Median)
				}
			}
		}
	}
	for i := range rows {
		rows[i].Kiln, rows[i].ORT = median(kiln[i]), median(ort[i])
	}
	return rows
}

// median returns the median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// run runs a command and returns its stdout; the error carries its stderr.
func run(name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), args[0], err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.Bytes(), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writeTable prints the rows as a Markdown table.
func writeTable(w io.Writer, rows []row) {
	ms := func(v float64) string {
		switch {
		case v == 0:
			return "—"
		case v < 0.1:
			return fmt.Sprintf("%.4f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	fmt.Fprintln(w, "| model | precision | threads | kiln ms | ORT ms | kiln / ORT | INT8 speed-up | kiln GFLOP/s | check |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		ratio, speedup, gflops := "—", "", ""
		if r.Kiln > 0 && r.ORT > 0 {
			ratio = fmt.Sprintf("%.2f×", r.Kiln/r.ORT)
		}
		if r.Kiln > 0 && r.FP32 > 0 {
			speedup = fmt.Sprintf("%.2f×", r.FP32/r.Kiln)
		}
		if r.GFLOP > 0 && r.Kiln > 0 {
			gflops = fmt.Sprintf("%.0f", r.GFLOP/(r.Kiln/1000))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", r.Model, r.Precision, r.Threads, ms(r.Kiln), ms(r.ORT), ratio, speedup, gflops, r.Check)
	}
}

// cpuName is the first "model name" in /proc/cpuinfo and its vector
// extensions.
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	name, flags := runtime.GOARCH, map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "model name" && name == runtime.GOARCH:
			name = strings.TrimSpace(v)
		case k == "flags" && len(flags) == 0:
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
		}
	}
	var have []string
	for _, f := range []string{"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile"} {
		if flags[f] {
			have = append(have, f)
		}
	}
	if len(have) > 0 {
		name += " (" + strings.Join(have, ", ") + ")"
	}
	return name
}
