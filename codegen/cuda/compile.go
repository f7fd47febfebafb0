// Package cuda compiles a kiln model with static shapes for NVIDIA GPUs:
// every node's kernel-layer definition (codegen/kernel) under the GPU
// schedule (kernel.GPUSchedule: a thread per output point, the grid
// striding over the space), one kernel per loop nest, as LLVM IR for
// nvptx64-nvidia-cuda, compiled by LLVM 14's llc to PTX and, where ptxas
// is present, assembled to a cubin per --gpu architecture. The engine's
// code section is a cudacode.Module: the PTX, the cubins, and the
// launches in order over one device arena that holds the inputs and
// outputs too.
//
// With Options.Sim the same kernels are compiled for this machine's CPU
// instead (cuda-sim): each launch becomes a loop over its blocks and
// their threads, which run the very body the GPU entry calls, so every
// CUDA kernel is tested against the reference executor where there is no
// GPU (as POCL and MCUDA run GPU kernels on CPUs). A cuda-sim engine is an
// ordinary CPU engine (cpuabi's ABI) that runs on one thread.
package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/internal/cleanup"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	ll "github.com/llir/llvm/ir"
)

// Options select the GPUs.
type Options struct {
	// GPUs are the architectures to build cubins for (sm_80, sm_90, ...;
	// default sm_80). The PTX targets the lowest (at most sm_86, the
	// newest LLVM 14 knows; the driver's JIT and ptxas take it further).
	GPUs []string
	// Sim compiles cuda-sim: the kernels for this machine's CPU.
	Sim bool
	// LLC is llc's path (default: llc or llc-14 on PATH); PTXAS ptxas's
	// (default: on PATH, in Debian's /usr/lib/nvidia-cuda-toolkit/bin or
	// where make deps-cuda unpacks it).
	LLC, PTXAS string
	// Limits bound every value's size and the arena.
	Limits ir.Limits
	// Dump, when set, receives the lowered program after each of the
	// driver's stages (lower.Stages).
	Dump func(stage string, p *lower.Program)
}

// IO is an engine input or output.
type IO struct {
	Name  string
	DType ir.DType
	Dims  []int64
	// Index is the binding's slot; Offset its place in the device arena
	// (GPU builds); Bytes its size.
	Index         int
	Bytes, Offset int64
}

// Result is a compiled model.
type Result struct {
	// Program is the lowered program the code runs (cc build --emit
	// kernels prints it).
	Program *lower.Program
	LLVMIR  string
	// Module and Code are a GPU build's code section (Code is Module
	// marshalled); SharedObject a cuda-sim build's.
	Module       *cudacode.Module
	Code         []byte
	SharedObject []byte
	Weights      []byte
	ArenaBytes   int64
	TensorBytes  int64 // the arena without reuse
	Inputs       []IO
	Outputs      []IO
	Kernels      []string
	// Warnings are problems that did not stop the build (no ptxas).
	Warnings []string
}

// UnsupportedErrors lists what the CUDA backend cannot compile in a
// model; errors.As finds each *ops.UnsupportedError.
type UnsupportedErrors = ops.UnsupportedErrors

// Target is this backend as the passes see it: the kernel layer's
// elementwise ops fuse (every fusion group runs as one step, its maps
// inlined: codegen/lower), no quantized group forms (the GPU has no
// integer kernels: QDQ models compute in float), and the tiled GEMM takes
// every convolution as it is laid out (no algorithm to choose).
type Target struct{}

var _ passes.Target = Target{}

// Fusible reports whether n's kernel-layer definition is elementwise.
func (Target) Fusible(n *ir.Node, _ ops.Opsets) bool { return kernel.Fusible(n) }

// QuantizedKernel declines every quantized group.
func (Target) QuantizedKernel(ops.GroupKind, []*ir.Node, []ops.Role) bool { return false }

// ParseGPUs reads --gpu's list (sm_80,sm_90), sorted and without repeats.
func ParseGPUs(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !cudacode.ValidArch(s) || archNum(s) < 50 {
			return nil, fmt.Errorf("--gpu %q: want architectures such as sm_80,sm_90 (sm_50 or later)", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--gpu names no architecture (sm_80,sm_90, ...)")
	}
	slices.SortFunc(out, func(a, b string) int { return archNum(a) - archNum(b) })
	return out, nil
}

func archNum(s string) int {
	n, _ := strconv.Atoi(strings.TrimRight(strings.TrimPrefix(s, "sm_"), "abcdefghijklmnopqrstuvwxyz"))
	return n
}

// ptxArch is the architecture the PTX targets: the lowest asked for, at
// most sm_86 (LLVM 14's newest).
func ptxArch(gpus []string) string {
	if archNum(gpus[0]) > 86 {
		return "sm_86"
	}
	return strings.TrimRight(gpus[0], "abcdefghijklmnopqrstuvwxyz")
}

// ErrNoLLC is returned when llc cannot be found.
var ErrNoLLC = errors.New("llc (LLVM 14) not found: run `make deps`")

// Compile compiles m, whose shapes must be static.
func Compile(m *ir.Model, opts Options) (*Result, error) {
	if len(opts.GPUs) == 0 {
		opts.GPUs = []string{"sm_80"}
	}
	gpus, err := ParseGPUs(strings.Join(opts.GPUs, ","))
	if err != nil {
		return nil, err
	}
	opts.GPUs = gpus
	llc, err := findTool(opts.LLC, "llc")
	if err != nil {
		return nil, ErrNoLLC
	}
	g := &gen{opts: opts, mod: ll.NewModule(), decls: map[string]*ll.Func{}}
	g.prog, err = lower.Build(m, target{g}, lower.Options{Limits: opts.Limits, Dump: opts.Dump})
	if err != nil {
		return nil, err
	}
	g.slots()
	if err := g.lower(); err != nil {
		return nil, err
	}
	weights := g.prog.Weights.Bytes()
	res := &Result{Program: g.prog, Weights: weights, ArenaBytes: g.prog.ArenaBytes, TensorBytes: g.prog.TensorBytes, Inputs: g.inputs, Outputs: g.outputs}
	for _, l := range g.launches {
		res.Kernels = append(res.Kernels, l.Name)
	}
	if opts.Sim {
		g.emitSimEntry()
		res.LLVMIR = g.mod.String()
		res.SharedObject, err = simToolchain(llc, res.LLVMIR)
		return res, err
	}
	g.mod.TargetTriple = cudacode.Triple
	g.mod.DataLayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
	res.LLVMIR = g.mod.String() + g.annotations()
	arch := ptxArch(gpus)
	ptx, err := compilePTX(llc, arch, res.LLVMIR)
	if err != nil {
		return nil, err
	}
	mod := &cudacode.Module{Version: cudacode.Version, PTXArch: arch, PTX: ptx, WeightsBytes: int64(len(weights)),
		ArenaBytes: g.prog.ArenaBytes, Kernels: g.launches}
	for _, io := range append(append([]IO{}, g.inputs...), g.outputs...) {
		mod.Slots = append(mod.Slots, cudacode.Slot{Name: io.Name, Output: io.Index >= len(g.inputs), DType: io.DType.String(),
			Dims: io.Dims, Bytes: io.Bytes, Offset: io.Offset})
	}
	ptxas, perr := findPTXAS(opts.PTXAS)
	if perr != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%v: the engine holds PTX only, which the driver compiles at load (make deps-cuda installs ptxas)", perr))
	}
	for _, gpu := range gpus {
		if ptxas == "" {
			break
		}
		cubin, err := assemble(ptxas, gpu, ptx)
		if err != nil {
			return nil, err
		}
		mod.Cubins = append(mod.Cubins, cudacode.Cubin{Arch: gpu, Data: cubin})
	}
	res.Module = mod
	if res.Code, err = mod.Marshal(); err != nil {
		return nil, err
	}
	if _, err := cudacode.Parse(res.Code); err != nil {
		return nil, fmt.Errorf("codegen/cuda: the module it made: %w", err)
	}
	return res, nil
}

// annotations marks the GPU entries as kernels (nvvm.annotations).
func (g *gen) annotations() string {
	var b strings.Builder
	var refs []string
	for i, l := range g.launches {
		refs = append(refs, fmt.Sprintf("!%d", i))
		fmt.Fprintf(&b, "!%d = !{void (i8*, i8*)* @%s, !\"kernel\", i32 1}\n", i, l.Name)
	}
	return "\n!nvvm.annotations = !{" + strings.Join(refs, ", ") + "}\n" + b.String()
}

// findTool finds an LLVM 14 tool: path, or name / name-14 on PATH.
func findTool(path, name string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	for _, c := range []string{name, name + "-14"} {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// PTXASDirs are where findPTXAS looks after PATH: Debian's
// nvidia-cuda-toolkit, and where make deps-cuda unpacks it.
var PTXASDirs = []string{"/opt/kiln-cuda/usr/bin", "/usr/lib/nvidia-cuda-toolkit/bin"}

// findPTXAS finds ptxas, or says it is absent.
func findPTXAS(path string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if p, err := exec.LookPath("ptxas"); err == nil {
		return p, nil
	}
	for _, d := range PTXASDirs {
		p := filepath.Join(d, "ptxas")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("ptxas not found")
}

// PTXAS reports ptxas's path, or an error saying how to get it.
func PTXAS() (string, error) {
	p, err := findPTXAS("")
	if err != nil {
		return "", fmt.Errorf("%v: run `make deps-cuda`", err)
	}
	return p, nil
}

func withTemp(f func(dir string) error) error {
	dir, remove, err := cleanup.MkdirTemp("", "kiln-cuda-*")
	if err != nil {
		return err
	}
	defer remove()
	return f(dir)
}

func run(what string, cmd *exec.Cmd) error {
	if out, err := cmd.CombinedOutput(); err != nil {
		lines := strings.SplitN(string(out), "\n", 31)
		if len(lines) > 30 {
			lines = lines[:30]
		}
		return fmt.Errorf("codegen/cuda: %s failed: %v\n%s", what, err, strings.Join(lines, "\n"))
	}
	return nil
}

// optimize runs opt -O3 when it is beside llc.
func optimize(llc, triple, mcpu, dir, src string) (string, error) {
	opt := filepath.Join(filepath.Dir(llc), strings.Replace(filepath.Base(llc), "llc", "opt", 1))
	if _, err := os.Stat(opt); err != nil {
		return src, nil
	}
	out := filepath.Join(dir, "opt.bc")
	err := run("opt", exec.Command(opt, "-O3", "-mtriple="+triple, "-mcpu="+mcpu, "-disable-loop-idiom-all", "-o", out, src))
	return out, err
}

// compilePTX turns the module into PTX for arch.
func compilePTX(llc, arch, llvmIR string) (string, error) {
	var ptx []byte
	err := withTemp(func(dir string) error {
		src := filepath.Join(dir, "engine.ll")
		if err := os.WriteFile(src, []byte(llvmIR), 0o644); err != nil {
			return err
		}
		src, err := optimize(llc, cudacode.Triple, arch, dir, src)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, "engine.ptx")
		if err := run("llc", exec.Command(llc, "-O3", "-mtriple="+cudacode.Triple, "-mcpu="+arch, "-o", out, src)); err != nil {
			return err
		}
		ptx, err = os.ReadFile(out)
		return err
	})
	return string(ptx), err
}

// assemble runs ptxas for one architecture.
func assemble(ptxas, arch, ptx string) ([]byte, error) {
	var cubin []byte
	err := withTemp(func(dir string) error {
		src := filepath.Join(dir, "engine.ptx")
		if err := os.WriteFile(src, []byte(ptx), 0o644); err != nil {
			return err
		}
		out := filepath.Join(dir, arch+".cubin")
		if err := run("ptxas -arch="+arch, exec.Command(ptxas, "-O3", "-arch="+arch, "-o", out, src)); err != nil {
			return err
		}
		var err error
		cubin, err = os.ReadFile(out)
		return err
	})
	return cubin, err
}

// GPURows re-exports the kernel layer's launch size for tests.
var _ = kernel.GPURows

var _ = bytes.NewReader
