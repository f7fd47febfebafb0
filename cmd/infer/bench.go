package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

var benchCmd = &cli.Command{
	Name:    "bench",
	Args:    "ENGINE",
	Summary: "measure an engine's latency and throughput (a trtexec-style summary)",
	Help: `Runs --warmup seconds untimed, then --iterations timed runs (or as many as fit in
--duration seconds; give one of the two), on random inputs unless --input gives them (seeded:
N(0,1) in every float dtype, never a denormal; 0 to 9 for integers; 0 or 1 for bool). An engine
of static shapes writes every run after the first into the first run's output buffers, as an
application reusing its buffers would (trtexec's bindings); a dynamic one allocates them per
run. --json prints one object:
engine, threads, iterations, throughput_qps, load_ms, first_run_ms, peak_rss_bytes and
latency_ms {min, mean, median, p90, p95, p99, max}.

--per-layer then runs as many inferences again (at most 10,000) through the engine's
profiling entry point and prints each kernel step's median time (ms, and % of their sum) in
execution order; a step's time is its slowest thread's, up to the barrier after it. With --json they are
"layers": [{name, ms, percent}].`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		var inputs inputList
		fs.Var(&inputs, "input", "NAME=FILE: an input tensor (.pb or .npy); repeat for several inputs")
		threads := cli.NonNegativeInt(fs, "threads", 0, threadsUsage)
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena)
		warmup := cli.NonNegativeFloat(fs, "warmup", 0.5, "`seconds` of untimed runs first")
		iterations := cli.PositiveInt(fs, "iterations", 0, "`N` timed runs (default: as many as fit in --duration)")
		duration := cli.PositiveFloat(fs, "duration", 3, "`seconds` of timed runs when --iterations is not given")
		asJSON := fs.Bool("json", false, "print one JSON object")
		perLayer := fs.Bool("per-layer", false, "also profile each kernel step")
		shapes := cli.Shapes(fs, "shape", "`NAME=DIMS`: the shape of random data for a dynamic input not given by --input (default: the shape the engine was tuned at)")
		return func(env *cli.Env, args []string) error {
			if cli.WasSet(fs, "iterations") && cli.WasSet(fs, "duration") {
				return cli.Usagef("--iterations and --duration both given: one decides how long to run")
			}
			start := time.Now()
			if g, err := gpuEngine(args[0], *requireSigned); err != nil || g != nil {
				if err != nil {
					return err
				}
				defer g.Close()
				n := 0
				if cli.WasSet(fs, "iterations") {
					n = *iterations
				}
				return benchGPU(env, g, args[0], ms(time.Since(start)), seconds(*warmup), seconds(*duration), n, *asJSON)
			}
			eng, err := loadEngine(args[0], *requireSigned)
			if err != nil {
				return err
			}
			loadMS := ms(time.Since(start))
			feeds, err := loadInputs(eng, inputs, shapes, 1)
			if err != nil {
				return err
			}
			ctx, err := eng.NewContext(runtime.Options{Threads: env.ClampThreads("--threads", *threads), Limits: limits.Limits()})
			if err != nil {
				return err
			}
			start = time.Now()
			outs, err := ctx.Run(feeds)
			if err != nil {
				return err
			}
			firstMS := ms(time.Since(start))
			// Later runs write into the first run's outputs where the
			// shapes are static, as an application reusing its buffers
			// (and trtexec) would: the timings are the engine's, not
			// the allocation of fresh output memory.
			run := func() error {
				_, err := ctx.Run(feeds)
				return err
			}
			if len(eng.Meta.Symbols) == 0 {
				run = func() error {
					_, err := ctx.RunInto(feeds, outs)
					return err
				}
			}
			for end := time.Now().Add(seconds(*warmup)); time.Now().Before(end); {
				if err := run(); err != nil {
					return err
				}
			}
			var lat []float64
			begin := time.Now()
			stop := begin.Add(seconds(*duration))
			for i := 0; ; i++ {
				if *iterations > 0 && i >= *iterations || *iterations <= 0 && i > 0 && time.Now().After(stop) {
					break
				}
				t := time.Now()
				if err := run(); err != nil {
					return err
				}
				lat = append(lat, ms(time.Since(t)))
			}
			r := summarize(lat, time.Since(begin))
			r.Engine, r.Threads, r.LoadMS, r.FirstRunMS, r.PeakRSS = args[0], ctx.Threads(), loadMS, firstMS, peakRSS()
			lt := eng.LoadTimes()
			r.LoadPhases = &loadPhases{Check: ms(lt.Check), Weights: ms(lt.Weights), Code: ms(lt.Code), Derive: ms(lt.Derive), Mapped: lt.WeightsMapped}
			if *perLayer {
				if r.Layers, err = profile(eng, ctx, feeds, len(lat)); err != nil {
					return err
				}
			}
			if *asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			r.print(env)
			return nil
		}
	},
}

// loadPhases are runtime.LoadTimes in milliseconds: checking the file's
// structure, small sections and metadata; verifying and copying the
// weights; loading the code; computing the derived weights.
type loadPhases struct {
	Check   float64 `json:"check"`
	Weights float64 `json:"weights"`
	Code    float64 `json:"code"`
	Derive  float64 `json:"derive"`
	// Mapped: the weights are the file's pages, not a copy.
	Mapped bool `json:"weights_mapped"`
}

// report holds the bench summary; the JSON names are a stable interface.
type report struct {
	Engine     string  `json:"engine"`
	Threads    int     `json:"threads"`
	Iterations int     `json:"iterations"`
	Throughput float64 `json:"throughput_qps"`
	LoadMS     float64 `json:"load_ms"`
	// LoadPhases splits a CPU engine's load (runtime.LoadTimes).
	LoadPhases *loadPhases `json:"load_phases_ms,omitempty"`
	FirstRunMS float64     `json:"first_run_ms"`
	PeakRSS    int64       `json:"peak_rss_bytes"`
	Latency    struct {
		Min    float64 `json:"min"`
		Mean   float64 `json:"mean"`
		Median float64 `json:"median"`
		P90    float64 `json:"p90"`
		P95    float64 `json:"p95"`
		P99    float64 `json:"p99"`
		Max    float64 `json:"max"`
	} `json:"latency_ms"`
	Layers []layer `json:"layers,omitempty"`
}

// layer is one kernel step's mean time in a --per-layer profile.
type layer struct {
	Name    string  `json:"name"`
	MS      float64 `json:"ms"`
	Percent float64 `json:"percent"`
}

// maxProfiled bounds the profiled runs (the profile keeps every sample).
const maxProfiled = 10000

// profile runs n profiled inferences and returns each kernel's median time.
func profile(eng *runtime.Engine, ctx *runtime.Context, feeds map[string]*ir.Tensor, n int) ([]layer, error) {
	p, err := eng.NewProfile()
	if err != nil {
		return nil, err
	}
	for range min(n, maxProfiled) {
		if _, err := ctx.RunProfiled(feeds, p); err != nil {
			return nil, err
		}
	}
	median := p.Median()
	var total time.Duration
	for _, d := range median {
		total += d
	}
	layers := make([]layer, len(median))
	for i, d := range median {
		layers[i] = layer{Name: p.Kernels[i], MS: ms(d)}
		if total > 0 {
			layers[i].Percent = 100 * float64(d) / float64(total)
		}
	}
	return layers, nil
}

func summarize(lat []float64, total time.Duration) report {
	var r report
	r.Iterations = len(lat)
	sorted := append([]float64(nil), lat...)
	sort.Float64s(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	n := len(sorted)
	pct := func(p float64) float64 { return sorted[min(n-1, int(p*float64(n)))] }
	r.Latency.Min, r.Latency.Max = sorted[0], sorted[n-1]
	r.Latency.Mean = sum / float64(n)
	r.Latency.Median = sorted[n/2]
	if n%2 == 0 {
		r.Latency.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	r.Latency.P90, r.Latency.P95, r.Latency.P99 = pct(0.90), pct(0.95), pct(0.99)
	r.Throughput = float64(n) / total.Seconds()
	return r
}

func (r report) print(env *cli.Env) {
	w := env.Stdout
	fmt.Fprintf(w, "=== Performance summary: %s ===\n", r.Engine)
	fmt.Fprintf(w, "Threads: %d   Iterations: %d\n", r.Threads, r.Iterations)
	fmt.Fprintf(w, "Throughput: %.2f qps\n", r.Throughput)
	l := r.Latency
	fmt.Fprintf(w, "Latency: min = %.4f ms, max = %.4f ms, mean = %.4f ms, median = %.4f ms, percentile(90%%) = %.4f ms, percentile(95%%) = %.4f ms, percentile(99%%) = %.4f ms\n",
		l.Min, l.Max, l.Mean, l.Median, l.P90, l.P95, l.P99)
	fmt.Fprintf(w, "Engine load: %.2f ms   First run: %.3f ms   Peak RSS: %.1f MiB\n", r.LoadMS, r.FirstRunMS, float64(r.PeakRSS)/(1<<20))
	if p := r.LoadPhases; p != nil {
		how := "copied"
		if p.Mapped {
			how = "mapped"
		}
		fmt.Fprintf(w, "Load phases: check %.2f ms, weights %.2f ms (%s), code %.2f ms, derive %.2f ms\n", p.Check, p.Weights, how, p.Code, p.Derive)
	}
	if len(r.Layers) == 0 {
		return
	}
	width := len("kernel")
	for _, l := range r.Layers {
		width = max(width, len(l.Name))
	}
	fmt.Fprintf(w, "\n=== Per-kernel times (median of %d profiled runs) ===\n", min(r.Iterations, maxProfiled))
	fmt.Fprintf(w, "%-*s %10s %7s\n", width, "kernel", "ms", "%")
	total := 0.0
	for _, l := range r.Layers {
		fmt.Fprintf(w, "%-*s %10.4f %6.1f%%\n", width, l.Name, l.MS, l.Percent)
		total += l.MS
	}
	fmt.Fprintf(w, "%-*s %10.4f %6.1f%%\n", width, "total", total, 100.0)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// seconds converts a checked (finite, non-negative) flag to a Duration,
// saturating where it would overflow (about 292 years).
func seconds(s float64) time.Duration {
	if ns := s * float64(time.Second); ns < math.MaxInt64 {
		return time.Duration(ns)
	}
	return math.MaxInt64
}

// peakRSS reads the process's high-water resident set (VmHWM) on Linux.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// randomTensor makes seeded random inputs, the one generator infer run,
// bench and compare use: N(0,1) for every float dtype, encoded in it
// (values the dtype would round to zero or a denormal, which run many
// times slower on most CPUs, are drawn again); 0..9 for integers (valid as
// small indices); 0 or 1 for bool; "0".."9" for strings.
func randomTensor(dtype string, shape []int64, seed int64) (*ir.Tensor, error) {
	d, err := ir.ParseDType(dtype)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(seed))
	t := ir.NewTensor(d, shape...)
	switch d {
	case ir.Float32:
		fillNormal(rng, ir.Data[float32](t), func(x float64) float32 { return float32(x) }, func(v float32) float64 { return float64(v) }, 0x1p-126)
	case ir.Float64:
		fillNormal(rng, ir.Data[float64](t), func(x float64) float64 { return x }, func(v float64) float64 { return v }, 0x1p-1022)
	case ir.Float16:
		fillNormal(rng, ir.Data[uint16](t), func(x float64) uint16 { return ir.Float32ToHalf(float32(x)) },
			func(h uint16) float64 { return float64(ir.HalfToFloat32(h)) }, 0x1p-14)
	case ir.BFloat16:
		fillNormal(rng, ir.Data[uint16](t), func(x float64) uint16 { return ir.Float32ToBFloat16(float32(x)) },
			func(h uint16) float64 { return float64(ir.BFloat16ToFloat32(h)) }, 0x1p-126)
	case ir.Int8:
		fillSmall(rng, ir.Data[int8](t))
	case ir.Uint8:
		fillSmall(rng, ir.Data[uint8](t))
	case ir.Int16:
		fillSmall(rng, ir.Data[int16](t))
	case ir.Uint16:
		fillSmall(rng, ir.Data[uint16](t))
	case ir.Int32:
		fillSmall(rng, ir.Data[int32](t))
	case ir.Uint32:
		fillSmall(rng, ir.Data[uint32](t))
	case ir.Int64:
		fillSmall(rng, ir.Data[int64](t))
	case ir.Uint64:
		fillSmall(rng, ir.Data[uint64](t))
	case ir.Bool:
		for i := range t.Raw {
			t.Raw[i] = byte(rng.Intn(2))
		}
	case ir.String:
		t.Strings = make([]string, ir.Product(shape))
		for i := range t.Strings {
			t.Strings[i] = strconv.Itoa(rng.Intn(10))
		}
	default:
		return nil, fmt.Errorf("kiln makes no random %s data: give the input with --input NAME=FILE", d)
	}
	return t, nil
}

// fillNormal fills data with N(0,1) samples encoded by encode, drawing
// again any whose decoded magnitude is under minNormal, the dtype's
// smallest normal number.
func fillNormal[T any](rng *rand.Rand, data []T, encode func(float64) T, decode func(T) float64, minNormal float64) {
	for i := range data {
		for {
			v := encode(rng.NormFloat64())
			if math.Abs(decode(v)) >= minNormal {
				data[i] = v
				break
			}
		}
	}
}

// fillSmall fills data with integers in 0..9.
func fillSmall[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64](rng *rand.Rand, data []T) {
	for i := range data {
		data[i] = T(rng.Intn(10))
	}
}
