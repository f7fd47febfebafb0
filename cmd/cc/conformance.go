package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/internal/crossrun"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/version"
	"github.com/kiln-ml/kiln/passes/autodiff"
)

var testCmd = &cli.Command{
	Name:    "test",
	Args:    "PATH...",
	Summary: "run ONNX backend tests (model.onnx + test_data_set_*) on an executor",
	Help: `Each PATH is a test folder (model.onnx and test_data_set_*/input_N.pb,
output_N.pb) or a folder of test folders. Tests run in parallel; results print
in order of the tests' paths, one line each:

  PASS name
  FAIL name: detail            (the output and its worst element)
  UNSUPPORTED name: detail     (the op, opset or dtype kiln lacks)

then the line "N passed, N failed, N skipped" (skipped = UNSUPPORTED).
--backend cpu compiles each test (pinning its inputs to the test data's
shapes) with cc build's -O2 pipeline for this machine's CPU and runs the
engine through the runtime on --threads threads; ops the CPU backend lacks
are UNSUPPORTED. --backend aarch64 compiles the same way for
aarch64-linux-gnu (--cpu, default generic) and runs each engine with an
arm64 infer (--infer, default linux_arm64/infer beside cc: make build-arm64)
under qemu-aarch64-static (make deps), natively on an arm64 machine.
--backend cuda-sim compiles each test for CUDA and runs its GPU kernels on
this CPU (cc build --target cuda-sim): the block and thread indices become
loops, so every CUDA kernel is checked against the reference without a GPU.
Outputs are judged as ONNX's runner does (|got-want| <= atol + rtol*|want|
per element), or by relative L2 error with --rel-l2. The exit status is 1
when any test fails.

--json prints {"summary": {"passed", "failed", "skipped"},
"tests": [{"name", "status", "detail"}]} instead.`,
	MinArgs: 1,
	MaxArgs: -1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		var o testOptions
		fs.StringVar(&o.backend, "backend", "reference", "the `NAME` of the executor to test: "+strings.Join(conformance.BackendNames(), ", "))
		cli.PositiveIntVar(fs, &o.threads, "threads", 1, "`N` threads per inference (cpu backend)")
		fs.BoolVar(&o.json, "json", false, "print one JSON object")
		cli.NonNegativeFloatVar(fs, &o.tol.Rtol, "rtol", conformance.DefaultTolerance.Rtol, "relative tolerance `R` per element")
		cli.NonNegativeFloatVar(fs, &o.tol.Atol, "atol", conformance.DefaultTolerance.Atol, "absolute tolerance `A` per element")
		cli.NonNegativeFloatVar(fs, &o.tol.RelL2, "rel-l2", 0, "judge float outputs by relative L2 error ≤ `E` instead of per element")
		fs.BoolVar(&o.verbose, "verbose", false, "print each test's error measures and time")
		fs.DurationVar(&o.timeout, "timeout", 120*time.Second, "fail a test that runs longer than `D`")
		cli.NonNegativeIntVar(fs, &o.jobs, "jobs", 0, "run `N` tests at once (0: GOMAXPROCS)")
		fs.StringVar(&o.cpu, "cpu", "", "`CPU` to compile for (cpu backend: native; aarch64: generic, or cortex-a76, neoverse-n1, ...)")
		cli.NonNegativeIntVar(fs, &o.opset, "opset", 0, "convert each test's model to ONNX opset `N` first (as cc convert --opset does); 0 keeps it")
		fs.StringVar(&o.infer, "infer", "", "the arm64 infer `PATH` the aarch64 backend runs engines with (default: linux_arm64/infer beside cc)")
		limits := limitflags.Add(fs, limitflags.All...)
		return func(env *cli.Env, args []string) error {
			o.limits = limits.Limits()
			o.threads = env.ClampThreads("--threads", o.threads)
			o.jobs = env.ClampThreads("--jobs", o.jobs)
			return runTests(env, args, o)
		}
	},
}

type testOptions struct {
	backend string
	threads int
	json    bool
	tol     conformance.Tolerance
	verbose bool
	timeout time.Duration
	jobs    int
	limits  ir.Limits
	cpu     string
	infer   string
	opset   int
}

func init() {
	conformance.Register("cpu", conformance.CPU{Build: buildWithin(ir.Limits{})})
	// Gradient nodes state facts about their graph: autodiff expands them
	// before the reference executor runs it.
	conformance.Register("reference", conformance.Reference{Rewrite: autodiff.ExpandGradients})
	conformance.Register(aarch64Backend, conformance.CPU{})
	conformance.Register(build.TargetCUDASim, conformance.CPU{})
}

// aarch64Backend runs engines built for AArch64 (under qemu on x86-64).
const aarch64Backend = "aarch64"

// buildWithin is the cpu backend's compiler under limits.
func buildWithin(lim ir.Limits) func(m *ir.Model, src []byte) ([]byte, error) {
	return buildFor(lim, "", "native")
}

// buildFor compiles for a target triple ("": this machine) and CPU.
func buildFor(lim ir.Limits, target, cpuName string) func(m *ir.Model, src []byte) ([]byte, error) {
	return func(m *ir.Model, src []byte) ([]byte, error) {
		out, err := build.BuildModel(m, src, build.Options{CPU: cpuName, Target: target, OptLevel: 2, Limits: lim})
		if err != nil {
			return nil, err
		}
		return out.Engine, nil
	}
}

type testSummary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

type testReport struct {
	Summary testSummary          `json:"summary"`
	Tests   []conformance.Result `json:"tests"`
}

func runTests(env *cli.Env, paths []string, o testOptions) error {
	backend, err := conformance.LookupBackend(o.backend)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	switch b := backend.(type) {
	case conformance.CPU:
		b.Threads, b.Limits, b.Build = o.threads, o.limits, buildFor(o.limits, "", cmp.Or(o.cpu, "native"))
		switch o.backend {
		case aarch64Backend:
			if b, err = crossBackend(b, o); err != nil {
				return err
			}
		case build.TargetCUDASim:
			b.Build = buildFor(o.limits, build.TargetCUDASim, "")
		}
		backend = b
	case conformance.Reference:
		b.Limits = o.limits
		backend = b
	}
	if o.opset > 0 {
		backend = convertedBackend{backend, int64(o.opset)}
	}
	if o.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	if o.jobs <= 0 {
		o.jobs = runtime.GOMAXPROCS(0)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return cli.FileError(p, err)
		}
	}
	dirs, err := conformance.Discover(paths)
	if err != nil {
		return err
	}

	type outcome struct {
		res  conformance.Result
		took time.Duration
	}
	outcomes := make([]outcome, len(dirs))
	done := make([]chan struct{}, len(dirs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	next := make(chan int)
	go func() {
		for i := range dirs {
			next <- i
		}
		close(next)
	}()
	for range min(o.jobs, len(dirs)) {
		go func() {
			for i := range next {
				start := time.Now()
				outcomes[i].res = runOne(dirs[i], backend, o)
				outcomes[i].took = time.Since(start)
				close(done[i])
			}
		}()
	}

	report := testReport{Tests: make([]conformance.Result, 0, len(dirs))}
	for i := range dirs {
		<-done[i]
		r := outcomes[i].res
		report.Tests = append(report.Tests, r)
		switch r.Status {
		case conformance.Pass:
			report.Summary.Passed++
		case conformance.Unsupported:
			report.Summary.Skipped++
		default:
			report.Summary.Failed++
		}
		if !o.json {
			printResult(env.Stdout, r, outcomes[i].took, o.verbose)
		}
	}
	if o.json {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		s := report.Summary
		fmt.Fprintf(env.Stdout, "%d passed, %d failed, %d skipped\n", s.Passed, s.Failed, s.Skipped)
	}
	if report.Summary.Failed > 0 {
		return cli.Exit(cli.ExitFailure)
	}
	return nil
}

// runOne runs one test folder, failing it when it outlives the timeout. A
// timed-out test's goroutine is left to finish on its own: the executor
// has no way to stop mid-kernel, and the process ends after the report.
func runOne(dir string, b conformance.Backend, o testOptions) conformance.Result {
	ch := make(chan conformance.Result, 1)
	go func() { ch <- conformance.RunTest(dir, b, o.tol) }()
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r
	case <-timer.C:
		return conformance.Result{Name: filepath.Base(dir), Status: conformance.Fail, Detail: fmt.Sprintf("timed out after %s", o.timeout)}
	}
}

func printResult(w io.Writer, r conformance.Result, took time.Duration, verbose bool) {
	detail := strings.TrimSpace(r.Detail)
	if !verbose {
		if r.Status == conformance.Pass {
			fmt.Fprintf(w, "%s %s\n", r.Status, r.Name)
			return
		}
		detail, _, _ = strings.Cut(detail, "\n")
		fmt.Fprintf(w, "%s %s: %s\n", r.Status, r.Name, detail)
		return
	}
	first, rest, _ := strings.Cut(detail, "\n")
	fmt.Fprintf(w, "%s %s: %s (%.2fs)\n", r.Status, r.Name, first, took.Seconds())
	if rest != "" {
		for _, line := range strings.Split(rest, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// crossBackend makes b build for AArch64 and run engines with an arm64
// infer, under qemu on another architecture.
func crossBackend(b conformance.CPU, o testOptions) (conformance.CPU, error) {
	qemu, err := crossrun.Emulator()
	if err != nil {
		return b, err
	}
	infer := o.infer
	if infer == "" {
		exe, err := os.Executable()
		if err != nil {
			return b, err
		}
		infer = filepath.Join(filepath.Dir(exe), "linux_arm64", "infer")
	}
	if _, err := os.Stat(infer); err != nil {
		return b, fmt.Errorf("the aarch64 backend runs engines with an arm64 infer, and %s is absent: build it with `make build-arm64` or name one with --infer", infer)
	}
	r := &crossrun.Runner{Qemu: qemu, Infer: infer}
	b.Build = buildFor(o.limits, cpu.TripleARM64, cmp.Or(o.cpu, cpu.DefaultCPU(cpu.TripleARM64)))
	b.Exec = func(eng []byte, feeds map[string]*ir.Tensor, threads int) (map[string]*ir.Tensor, error) {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		defer cancel()
		return r.Run(ctx, eng, feeds, threads)
	}
	return b, nil
}

// convertedBackend converts each test's model to opset `to` before its
// backend prepares it: cc test --opset N checks the version converter
// against the tests' data.
type convertedBackend struct {
	conformance.Backend
	to int64
}

// ReadLimits are the wrapped backend's.
func (c convertedBackend) ReadLimits() ir.Limits {
	if l, ok := c.Backend.(interface{ ReadLimits() ir.Limits }); ok {
		return l.ReadLimits()
	}
	return ir.Limits{}
}

func (c convertedBackend) Prepare(m *ir.Model) (conformance.Runner, error) {
	if m.Opset("") != c.to {
		if err := version.Convert(m, c.to, version.Reason{}); err != nil {
			return nil, err
		}
	}
	return c.Backend.Prepare(m)
}
