// Package cpu compiles a kiln model with static shapes into native x86-64
// code: a memory plan (one arena, liveness-based reuse; weights in a
// 64-byte aligned blob, pre-packed where a kernel wants another layout),
// LLVM IR built with github.com/llir/llvm (one function per kernel step,
// each splitting its work by thread id, and the entry point kiln_run calling
// them in order with a spin barrier between them), `opt`/`llc` from LLVM
// 14, and a link into a self-contained ELF shared object (no libc).
//
// runtime/cpu loads and runs the result.
package cpu

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/internal/cleanup"
	"github.com/kiln-ml/kiln/ir"
)

// Options selects the target.
type Options struct {
	// CPU is the target CPU: "native" (default: this machine's features),
	// one of cpuabi.X86CPUs ("x86-64-v3": AVX2, "x86-64-v4": AVX-512, ...)
	// or, for AArch64, of arm64CPUs. The code uses its features and no
	// others, and records them.
	CPU string
	// Triple is the target (NormalizeTriple's spellings); default this
	// machine's. CPU then names a CPU of that architecture (arm64CPUs for
	// AArch64; "native" only for this machine's own).
	Triple string
	// LLC is the path of llc; default "llc" on PATH (opt is looked up next
	// to it and used when present).
	LLC string
	// Winograd is WinogradAuto (default: measured per layer shape, see
	// tune.go), WinogradOn or WinogradOff.
	Winograd string
	// TimingCache holds and receives the measurements; nil: a fresh one.
	TimingCache *TimingCache
	// Runner runs WinogradAuto's measurements on this machine (runtime/cpu's
	// TimeRuns); nil: none are made, and layers not in TimingCache take
	// the size rule (TimingCache.Notice says so).
	Runner Runner
	// Profile gives the range of symbolic input dims by name (dynamic.go);
	// a symbol it does not name takes 1 to DefaultMaxDim, tuned at 1.
	Profile map[string]DimRange
	// Limits bound every value's size and the arena; zero fields take
	// ir.DefaultLimits.
	Limits ir.Limits
	// Dump, when set, receives a listing of the compilation's state after
	// each of Stages: the nodes in order with how each is lowered (its
	// fused pieces, algorithm, scratch) and where what it reads and
	// writes lives, and then the steps.
	Dump func(stage, text string)
	// schedule, in tests, replaces the schedule CPUSchedule picks for a
	// kernel-layer kernel (every schedule must give the same results).
	schedule func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule
	// winoForce, in a measurement's own build, names the Winograd variant
	// every eligible layer takes (any other name: none).
	winoForce string
}

// IO describes one engine input or output.
type IO struct {
	Name  string
	DType ir.DType
	// Dims are the shape at the symbols' maxima; DimNames, when the shape
	// is symbolic, name each dim's expression ("" where static).
	Dims     []int64
	DimNames []string
	// Index is the slot in kiln_run's io array.
	Index int
	// Host: a host step reads or writes the value, which the runtime
	// keeps; the code never touches the slot (lower.Slot).
	Host bool
	// Kinds are a host value's sequence and optional layers (DType is
	// then its tensors'; cpuabi.Slot).
	Kinds []int
}

// Result is a compiled engine.
type Result struct {
	SharedObject []byte
	LLVMIR       string
	Object       []byte
	// Weights is the engine's weights section: the constant blob kiln_run
	// reads (64-byte aligned offsets) up to the Derived ranges, which
	// follow it and which the engine's kiln_derive computes at load
	// (runtime/cpu's Live).
	Weights []byte
	Derived []cpuabi.Derived
	// ArenaBytes is the size of the scratch arena kiln_run needs;
	// TensorBytes is the sum of all intermediate tensors (and scratch), for
	// comparison.
	ArenaBytes  int64
	TensorBytes int64
	Inputs      []IO
	Outputs     []IO
	// Features are the CPU features the code requires (e.g. "avx512f").
	Features []string
	// Kernels lists the generated step functions in execution order.
	Kernels []string
	// Parts is the number of native calls a run takes (see runPartMACs).
	Parts int
	// MaxThreads is the most threads worth running the engine on (0: no
	// limit); tiny models run on one.
	MaxThreads int
	// Symbols are the engine's symbolic dims and their ranges, in the
	// order of the dims table (the io slot after the outputs).
	Symbols []Symbol
	// Program is the lowered program the code was written from (cc build
	// --emit kernels).
	Program *lower.Program
}

// withDefaults fills in the defaults of the Winograd mode and cache.
func (opts Options) withDefaults() (Options, error) {
	if opts.Triple == "" {
		opts.Triple = HostTriple()
	}
	triple, err := NormalizeTriple(opts.Triple)
	if err != nil {
		return opts, err
	}
	opts.Triple = triple
	if opts.CPU == "" {
		opts.CPU = DefaultCPU(triple)
	}
	if opts.Winograd == "" {
		opts.Winograd = WinogradAuto
	}
	if opts.Winograd != WinogradAuto && opts.Winograd != WinogradOn && opts.Winograd != WinogradOff {
		return opts, fmt.Errorf("winograd mode %q: want auto, on or off", opts.Winograd)
	}
	if opts.TimingCache == nil {
		opts.TimingCache = NewTimingCache()
	}
	return opts, nil
}

// ErrNoLLC is returned when llc cannot be found.
var ErrNoLLC = errors.New("llc (LLVM 14) not found: run `make deps`")

// Compile compiles m. m must have static shapes after shape inference.
func Compile(m *ir.Model, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	llc, err := findLLC(opts.LLC)
	if err != nil {
		return nil, err
	}
	feats, err := featuresFor(opts)
	if err != nil {
		return nil, err
	}
	g, err := newGen(m, feats, opts)
	if err != nil {
		return nil, err
	}
	restore, err := g.specialize()
	if err != nil {
		return nil, fmt.Errorf("codegen/cpu: %w", err)
	}
	defer restore()
	if err := g.build(); err != nil {
		return nil, err
	}
	// The plan checked the arena; the work-stealing counters come after it.
	if err := opts.Limits.CheckArena("the engine's arena", g.arenaBytes); err != nil {
		return nil, err
	}
	res := &Result{
		LLVMIR:      g.mod.String(),
		Weights:     g.prog.Weights.Bytes(),
		Derived:     g.derived,
		ArenaBytes:  g.arenaBytes,
		TensorBytes: g.tensorBytes,
		Inputs:      g.inputs,
		Outputs:     g.outputs,
		Features:    g.recordedFeatures(),
		Kernels:     g.kernelNames,
		Parts:       g.parts,
		MaxThreads:  maxThreads(unfused(m)),
		Symbols:     g.syms,
		Program:     g.prog,
	}
	obj, so, err := toolchain(llc, opts, res.Features, res.LLVMIR)
	if err != nil {
		return nil, err
	}
	res.Object, res.SharedObject = obj, so
	return res, nil
}

// Available reports (as an error saying what to install) whether this
// machine can compile engines: llc from LLVM 14 (as llc or llc-14) and a
// linker. Tests that build engines skip when it fails.
func Available() error {
	if _, err := findLLC(""); err != nil {
		return err
	}
	if llc, _ := findLLC(""); findLLD(llc) != "" {
		return nil
	}
	for _, linker := range []string{"gcc", "cc"} {
		if _, err := exec.LookPath(linker); err == nil {
			return nil
		}
	}
	return errors.New("no linker (ld.lld or gcc): run `make deps`")
}

func findLLC(path string) (string, error) {
	if path == "" {
		path = "llc"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		if p, err2 := exec.LookPath("llc-14"); err2 == nil && path == "llc" {
			return p, nil
		}
		return "", ErrNoLLC
	}
	return p, nil
}

// recordedFeatures are the features the engine needs: the target's, less
// AMX's when no kernel uses the tiles (so that an engine built on an AMX
// machine without them runs where AMX is missing or not allowed).
func (g *gen) recordedFeatures() []string {
	if g.usedAMX {
		return append([]string{}, g.feats...)
	}
	var out []string
	for _, f := range g.feats {
		if !slices.Contains(amxFeatures, f) {
			out = append(out, f)
		}
	}
	return out
}

func hasFeature(feats []string, f string) bool {
	for _, x := range feats {
		if x == f {
			return true
		}
	}
	return false
}

// toolchain runs opt (when present) and llc, then links a shared object;
// both may use the features feats and no others (llcTarget).
func toolchain(llc string, opts Options, feats []string, llvmIR string) (obj, so []byte, err error) {
	dir, remove, err := cleanup.MkdirTemp("", "kiln-cc-*") // removed on SIGINT/SIGTERM too
	if err != nil {
		return nil, nil, err
	}
	defer remove()
	src := filepath.Join(dir, "engine.ll")
	if err := os.WriteFile(src, []byte(llvmIR), 0o644); err != nil {
		return nil, nil, err
	}
	target := llcTarget(opts, feats)
	if opt := siblingTool(llc, "opt"); opt != "" {
		optimized := filepath.Join(dir, "engine.opt.bc")
		cmd := exec.Command(opt, slices.Concat([]string{"-O3"}, target, []string{"-disable-loop-idiom-all", "-o", optimized, src})...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("codegen/cpu: opt failed: %v\n%s", err, firstLines(out, 30))
		}
		src = optimized
	}
	objPath := filepath.Join(dir, "engine.o")
	cmd := exec.Command(llc, slices.Concat([]string{"-O3"}, target, []string{"-filetype=obj", "-relocation-model=pic", "-o", objPath, src})...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("codegen/cpu: llc failed: %v\n%s", err, firstLines(out, 30))
	}
	soPath := filepath.Join(dir, "engine.so")
	link, err := linkCommand(llc, opts.Triple, objPath, soPath)
	if err != nil {
		return nil, nil, err
	}
	if out, err := link.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("codegen/cpu: linking failed: %v\n%s", err, firstLines(out, 30))
	}
	if obj, err = os.ReadFile(objPath); err != nil {
		return nil, nil, err
	}
	if so, err = os.ReadFile(soPath); err != nil {
		return nil, nil, err
	}
	if err := checkSelfContained(so); err != nil {
		return nil, nil, err
	}
	return obj, so, nil
}

// SharedObject compiles LLVM IR text for triple and cpuName, using the
// features feats and no others, into a self-contained shared object: the
// toolchain of CPU engines, which the CUDA simulator's host code shares.
func SharedObject(llc, triple, cpuName string, feats []string, llvmIR string) ([]byte, error) {
	_, so, err := toolchain(llc, Options{Triple: triple, CPU: cpuName}, feats, llvmIR)
	return so, err
}

func siblingTool(llc, name string) string {
	dir := filepath.Dir(llc)
	suffix := strings.TrimPrefix(filepath.Base(llc), "llc")
	for _, cand := range []string{filepath.Join(dir, name+suffix), filepath.Join(dir, name)} {
		if st, err := os.Stat(cand); err == nil && !st.IsDir() {
			return cand
		}
	}
	if p, err := exec.LookPath(name + suffix); err == nil {
		return p
	}
	return ""
}

// checkSelfContained refuses a shared object that needs symbols from
// elsewhere (libm, memcpy): engines must load into any process.
func checkSelfContained(so []byte) error {
	f, err := elf.NewFile(bytes.NewReader(so))
	if err != nil {
		return fmt.Errorf("codegen/cpu: linked object is not ELF: %w", err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil
	}
	var undef []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && s.Name != "" && elf.ST_BIND(s.Info) != elf.STB_WEAK {
			undef = append(undef, s.Name)
		}
	}
	if len(undef) > 0 {
		sort.Strings(undef)
		return fmt.Errorf("codegen/cpu: engine needs external symbols %s (internal error: kernels must not call libraries)", strings.Join(undef, ", "))
	}
	return nil
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
