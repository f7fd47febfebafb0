package build

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
)

// backend is what a build compiles for, chosen once from Options.Target
// (backendFor), as Go's SSA backend picks one Config per architecture:
// the passes' judgements (passes.Target: what fuses, which quantized
// groups form, convolution algorithms), the options it refuses, and how
// it compiles the optimized graph into an engine.
type backend interface {
	passes.Target
	// refuse returns the error for an option this backend does not take,
	// before any work.
	refuse(opts *Options) error
	// configure readies the backend for opts once its inputs are declared
	// (their dims' ranges are known).
	configure(opts Options) error
	// compile turns the optimized graph into an engine.
	compile(m *ir.Model, src []byte, opts Options, pc *passes.Context) (*Output, error)
	// done returns the warnings of a finished build (a timing cache it
	// could not save).
	done() []string
	// stage reports whether name is one of the backend's lowering stages,
	// which --dump-after names as it names passes.
	stage(name string) bool
}

// backendFor chooses opts' backend: a CUDA target, or a CPU triple.
func backendFor(opts Options) (backend, error) {
	if IsCUDA(opts.Target) {
		return &cudaBackend{sim: opts.Target == TargetCUDASim}, nil
	}
	if _, err := cpu.NormalizeTriple(opts.target()); err != nil {
		return nil, err
	}
	cache, err := opts.timingCache()
	if err != nil {
		return nil, err
	}
	return &cpuBackend{cache: cache}, nil
}

// CheckEmit refuses an --emit kind that target's backend does not write:
// ptx is the GPU's, obj the CPU's.
func CheckEmit(target, emit string) error {
	if emit == "obj" && IsCUDA(target) || emit == "ptx" && target != TargetCUDA {
		return errors.New("--emit ptx is --target cuda's (and obj the CPU targets')")
	}
	return nil
}

// cpuBackend compiles x86-64 and AArch64 engines (codegen/cpu).
type cpuBackend struct {
	*cpu.Target
	cache *cpu.TimingCache
	opts  cpu.Options
}

func (*cpuBackend) refuse(*Options) error { return nil }

// configure makes the CPU options (the dynamic dims' ranges included: the
// arena is planned at their maxima) and the passes' Target from them.
func (b *cpuBackend) configure(opts Options) error {
	b.opts = opts.cpuOptions(b.cache)
	t, err := cpu.NewTarget(b.opts)
	b.Target = t
	return err
}

func (b *cpuBackend) done() []string { return saveCache(b.cache) }

func (*cpuBackend) stage(name string) bool { return slices.Contains(cpuStages(), name) }

// cudaBackend compiles CUDA engines, or cuda-sim's (codegen/cuda).
type cudaBackend struct {
	cuda.Target
	sim bool
}

func (*cudaBackend) done() []string { return nil }

func (*cudaBackend) configure(Options) error { return nil }

func (*cudaBackend) stage(name string) bool { return slices.Contains(lowerStages(), name) }

// dumpStages returns a Dump for opts' --dump-after: the text after each
// of the lowering stages (names, in order) named or all, written as
// DumpDir/kernels-NN-STAGE.txt; the first write error is kept in *err.
func dumpStages(opts Options, names []string, err *error) func(stage, text string) {
	after := set(opts.DumpAfter)
	if len(after) == 0 {
		return nil
	}
	write := opts.DumpText
	if write == nil {
		write = func(path, text string) error { return atomicfile.WriteFile(path, []byte(text), 0o644) }
	}
	return func(stage, text string) {
		if *err != nil || !after["all"] && !after[stage] {
			return
		}
		i := slices.Index(names, stage)
		if *err = os.MkdirAll(opts.DumpDir, 0o755); *err == nil {
			*err = write(filepath.Join(opts.DumpDir, fmt.Sprintf("kernels-%02d-%s.txt", i+1, stage)), text)
		}
	}
}

// lowerStages and cpuStages are the two targets' stage names, in order
// (CUDA adds none of its own to the driver's).
func lowerStages() []string { return lower.StageNames(nil) }

func cpuStages() []string { return cpu.StageNames() }
