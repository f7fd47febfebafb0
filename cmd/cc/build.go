package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
)

var buildCmd = &cli.Command{
	Name:    "build",
	Args:    "MODEL",
	Summary: "compile a model into an engine file (x86-64, AArch64 or CUDA code via LLVM)",
	Help: `Runs the O2 pass pipeline (see cc passes), lowers the graph to LLVM IR, compiles it
with llc (LLVM 14) for --target (this machine by default; aarch64-linux-gnu engines link
with ld.lld and run with an arm64 infer: make build-arm64; cuda engines hold PTX and, with
ptxas (make deps-cuda), a cubin per --gpu, and run with an infer built with -tags cuda;
cuda-sim engines run the CUDA kernels on this CPU) and writes one engine file that
bin/infer runs. --emit stops at an
earlier level: ir (the optimized graph as .onnxtxt), kernels (the lowered program: each
step with its kernels, micro-kernels and fused epilogues, a CPU step its lowering), llvm (.ll),
obj (.o) or engine.

Every file the build writes (the output, --dump-after files, the timing cache) is
written atomically, so a failed or interrupted build leaves an existing file as it
was, and none may be one of the build's inputs (the model, its external data):
such a build is refused before it starts.`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		out := fs.String("o", "", "output file (default: MODEL with the emitted kind's extension; MODEL.opt.onnxtxt for --emit ir of a .onnxtxt MODEL)")
		emit := fs.String("emit", "engine", "what to write: ir, kernels, llvm, obj (CPU targets), ptx (--target cuda) or engine")
		cpuName := fs.String("cpu", "native", "target CPU for llc -mcpu (native, x86-64-v3 for AVX2, x86-64-v4 for AVX-512, icelake-server for AVX-512 VNNI, sapphirerapids for VNNI and AMX tiles; for aarch64-linux-gnu: generic (the default there), cortex-a76, neoverse-n1, apple-m1, ...)")
		target := fs.String("target", "", "target `TRIPLE`: x86_64-linux-gnu or aarch64-linux-gnu (default: this machine's), cuda (NVIDIA GPUs: PTX and a cubin per --gpu), or cuda-sim (the CUDA kernels on this CPU, for testing)")
		gpuList := fs.String("gpu", "sm_80", "`ARCHS` for --target cuda: the GPU architectures to build cubins for (sm_80,sm_90); the PTX targets the lowest")
		opt := cli.OneOfInt(fs, "O", 2, "optimization `level`, 0 or 2: 2 runs every pass, 0 only the required ones", 0, 2)
		disable := fs.String("disable", "", "comma-separated passes to skip")
		dumpAfter := fs.String("dump-after", "", "comma-separated passes (or all) after which to write the graph as text, and lowering stages, after which the lowered state is written as kernels-NN-STAGE.txt (CPU: slots, fold, support, inline, groups, conv-algorithms, memory, lower, entry; CUDA: slots, fold, support, inline, memory)")
		dumpDir := fs.String("dump-dir", "kiln-dump", "folder for --dump-after files")
		timePasses := fs.Bool("time-passes", false, "print a per-pass timing table")
		verify := fs.Bool("verify", false, "check the graph after every pass")
		winograd := fs.String("winograd", "auto", "Winograd F(4x4,3x3) or F(2x2,3x3) for 3x3 convolutions: auto (per layer shape, the fastest where it beats direct here within rel L2 1e-5; the first that fits when --cpu is not native), on (every 3x3 stride-1 convolution that fits; INT8 ones too, as integer F(2x2,3x3), except with AMX tiles: faster, less accurate, see docs/cli.md) or off")
		timingCache := fs.String("timing-cache", defaultTimingCache(), "file keeping --winograd=auto's measurements, so rebuilds reuse them and are byte-identical (none: measure afresh)")
		limits := limitflags.Add(fs, limitflags.All...)
		sign := fs.String("sign", "", "sign the engine with this ed25519 private `KEY` file (from cc keygen); infer --require-signed checks the signature")
		pin := cli.Shapes(fs, "shape", "`NAME=DIMS` (e.g. input=4x3x224x224): compile input NAME for these dims only; repeat for several inputs")
		minShape := cli.Shapes(fs, "min", "`NAME=DIMS`: the smallest shape of input NAME the engine accepts (its dynamic dims' minima; default 1)")
		optShape := cli.Shapes(fs, "opt", "`NAME=DIMS`: the shape of input NAME to tune for (default: the minima)")
		values := cli.Values(fs, "value", "`NAME=V,V,...`: compile input NAME as this constant; inputs whose values set shapes (a TopK's K, a Reshape's shape, ...) need one, and the engine then takes only this value for them")
		markOutputs := fs.String("mark-outputs", "", "`all|NAME,...`: also store these tensors of the optimized graph (all: every float or 8-bit one) as debug outputs, for infer compare --per-layer; infer run, check and bench leave them out")
		maxShape := cli.Shapes(fs, "max", fmt.Sprintf("`NAME=DIMS`: the largest shape of input NAME the engine accepts; memory is planned for it (default: %d for each dynamic dim)", cpu.DefaultMaxDim))
		overridable := fs.Bool("overridable-initializers", false, "keep inputs that have initializer defaults (IR version 4 on; Caffe2-era models list every weight so) as engine inputs, each taking its initializer when a run does not give it; by default they compile as constants, which fold, and feeding one is refused")
		precision := fs.String("precision", "fp32", "fp32, or int8: quantize the model first, as cc quantize does (--calib and the flags below), and compile its QDQ form")
		quant := addQuantizeFlags(fs)
		train := addTrainFlags(fs)
		return func(env *cli.Env, args []string) error {
			ext := map[string]string{"ir": ".onnxtxt", "kernels": ".kernels.txt", "llvm": ".ll", "obj": ".o", "ptx": ".ptx", "engine": ".kiln"}[*emit]
			if ext == "" {
				return cli.Usagef("--emit must be ir, kernels, llvm, obj, ptx or engine, not %q", *emit)
			}
			key, err := signingKey(*sign, *emit)
			if err != nil {
				return err
			}
			model := args[0]
			path := *out
			if path == "" {
				path = strings.TrimSuffix(model, filepath.Ext(model)) + ext
				if path == model {
					path = strings.TrimSuffix(model, ext) + ".opt" + ext
				}
			}
			var gpus []string
			if build.IsCUDA(*target) {
				if flagSet(fs, "cpu") {
					return cli.Usagef("--cpu applies to the CPU targets; --target %s takes --gpu", *target)
				}
				if gpus, err = cuda.ParseGPUs(*gpuList); err != nil {
					return cli.Usagef("%v", err)
				}
				*cpuName = ""
			} else if flagSet(fs, "gpu") {
				return cli.Usagef("--gpu applies to --target cuda")
			} else if *target != "" {
				triple, err := cpu.NormalizeTriple(*target)
				if err != nil {
					return cli.Usagef("--target: %v", err)
				}
				if triple != cpu.HostTriple() && !flagSet(fs, "cpu") {
					*cpuName = cpu.DefaultCPU(triple) // native names this machine
				}
			}
			if err := build.CheckEmit(*target, *emit); err != nil {
				return cli.Usagef("%v", err)
			}
			opts := build.Options{CPU: *cpuName, Target: *target, GPUs: gpus, OptLevel: *opt, Disabled: split(*disable),
				DumpAfter: split(*dumpAfter), DumpDir: *dumpDir, Verify: *verify, Winograd: *winograd, TimingCache: *timingCache,
				Limits: limits.Limits(), Shapes: build.Shapes{Pin: pin, Min: minShape, Opt: optShape, Max: maxShape, Values: values},
				OverridableInitializers: *overridable}
			if opts.MarkOutputs = split(*markOutputs); len(opts.MarkOutputs) > 0 && *emit == "ir" {
				return cli.Usagef("--mark-outputs applies to compiled code (--emit llvm, obj or engine), not --emit ir")
			}
			if opts.TimingCache == "none" {
				opts.TimingCache = ""
			}
			qopts, err := quant.forBuild(fs, *precision, &opts)
			if err != nil {
				return err
			}

			// Nothing the build writes may be one of its inputs.
			outputs := []cli.File{{Path: path, Role: "the output"}}
			if *emit == "ir" {
				outputs = append(outputs, cli.File{Path: path + ".bin", Role: "the output's external data"})
			}
			if opts.TimingCache != "" {
				outputs = append(outputs, cli.File{Path: opts.TimingCache, Role: "the timing cache"})
			}
			outputs = append(outputs, quant.outputs()...)
			if err := cli.CheckOutputs(append([]cli.File{{Path: model, Role: "the model"}}, keyFiles(*sign)...), outputs); err != nil {
				return err
			}
			m, external, err := build.ReadModelWithin(model, opts.Limits)
			if err != nil {
				return err
			}
			inputs := modelFiles(model, external)
			if err := cli.CheckOutputs(inputs, outputs); err != nil {
				return err
			}
			opts.Dump = func(dump string, m *ir.Model) error {
				err := cli.CheckOutputs(inputs, append([]cli.File{{Path: dump, Role: "a --dump-after file"},
					{Path: dump + ".bin", Role: "a --dump-after file's external data"}}, outputs...))
				if err != nil {
					return err
				}
				return text.WriteFile(dump, m)
			}
			opts.DumpText = func(dump, text string) error {
				if err := cli.CheckOutputs(inputs, append([]cli.File{{Path: dump, Role: "a --dump-after file"}}, outputs...)); err != nil {
					return err
				}
				return atomicfile.WriteFile(dump, []byte(text), 0o644)
			}
			if err := train.apply(fs, m, &opts); err != nil {
				return cli.FileError(model, err)
			}
			if qopts != nil {
				if err := quantizeForBuild(env, model, m, *qopts, append(inputs, quant.inputs()...), outputs); err != nil {
					return err
				}
			}

			if *emit == "ir" {
				pc, warnings, err := build.Optimize(m, opts)
				if err != nil {
					return cli.FileError(model, err)
				}
				for _, w := range warnings {
					env.Warnf("%s", w)
				}
				if *timePasses {
					printPassReport(env.Stdout, pc.Timings, pc.Memory)
				}
				return writeModel(path, m)
			}
			src, err := os.ReadFile(model)
			if err != nil {
				return cli.FileError(model, err)
			}
			res, err := build.BuildModel(m, src, opts)
			if err != nil {
				return cli.FileError(model, err)
			}
			for _, w := range res.Warnings {
				env.Warnf("%s", w)
			}
			if *timePasses {
				printPassReport(env.Stdout, res.Timings, res.Memory)
			}
			var data []byte
			switch {
			case *emit == "kernels" && res.GPU != nil:
				data = []byte(res.GPU.Program.String())
			case *emit == "kernels":
				data = []byte(res.Code.Program.String())
			case *emit == "llvm" && res.GPU != nil:
				data = []byte(res.GPU.LLVMIR)
			case *emit == "ptx":
				data = []byte(res.GPU.Module.PTX)
			case *emit == "llvm":
				data = []byte(res.Code.LLVMIR)
			case *emit == "obj":
				data = res.Code.Object
			default:
				if data, err = signed(res.Engine, key); err != nil {
					return err
				}
			}
			if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
				return cli.FileError(path, err)
			}
			if g := res.GPU; g != nil {
				what := fmt.Sprintf("%d kernels", len(g.Kernels))
				if m := g.Module; m != nil {
					what += fmt.Sprintf(", PTX for %s", m.PTXArch)
					if archs := m.Archs(); len(archs) > 0 {
						what += ", cubins for " + strings.Join(archs, ", ")
					}
				}
				fmt.Fprintf(env.Stdout, "wrote %s (%s bytes); %s; arena %s bytes, weights %s bytes\n", path,
					commas(int64(len(data))), what, commas(g.ArenaBytes), commas(int64(len(g.Weights))))
				return nil
			}
			fmt.Fprintf(env.Stdout, "wrote %s (%s bytes); arena %s bytes (tensors total %s), weights %s bytes\n", path,
				commas(int64(len(data))), commas(res.Code.ArenaBytes), commas(res.Code.TensorBytes), commas(int64(len(res.Code.Weights))))
			return nil
		}
	},
}

var passesCmd = &cli.Command{
	Name:    "passes",
	Summary: "list the optimization pipeline in order",
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		return func(env *cli.Env, args []string) error {
			fmt.Fprintln(env.Stdout, "O2 pipeline (required passes also run at -O0):")
			width := 0
			for _, p := range passes.O2 {
				width = max(width, len(p.Name))
			}
			for i, p := range passes.O2 {
				req := ""
				if p.Required {
					req = " (required)"
				}
				fmt.Fprintf(env.Stdout, "%2d  %-*s %s%s\n", i, width, p.Name, p.Doc, req)
			}
			return nil
		}
	},
}

// printPassReport is --time-passes: the timing table, then the memplan
// pass's arena. The engine's arena, printed after the build, differs:
// codegen re-plans with its fused nodes and kernels' scratch.
func printPassReport(w io.Writer, ts []passes.Timing, mem *passes.MemoryPlan) {
	passes.PrintTimings(w, ts)
	if mem != nil {
		fmt.Fprintf(w, "memplan: %s\n", mem.Summary())
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// defaultTimingCache is the per-user cache file (empty when the system
// has no cache folder).
func defaultTimingCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kiln", "timing-cache.json")
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
