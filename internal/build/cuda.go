package build

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/cudacode"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// The GPU targets (--target): cuda, NVIDIA GPUs (--gpu picks the cubins'
// architectures), and cuda-sim, the same kernels compiled for this
// machine's CPU (codegen/cuda), for testing them without a GPU.
const (
	TargetCUDA    = "cuda"
	TargetCUDASim = "cuda-sim"
)

// IsCUDA reports whether target is a GPU target.
func IsCUDA(target string) bool { return target == TargetCUDA || target == TargetCUDASim }

// buildCUDA compiles for a GPU target: the O2 passes less the fusions
// into the CPU's hand-written kernels (cuda.DisabledPasses), then every
// node's kernel-layer kernels under the GPU schedule.
func buildCUDA(m *ir.Model, src []byte, opts Options) (*Output, error) {
	if len(opts.MarkOutputs) > 0 {
		return nil, errors.New("--mark-outputs applies to the CPU targets")
	}
	c, err := cudaPasses(m, &opts)
	if err != nil {
		return nil, err
	}
	for _, d := range m.Graph.Inputs {
		if !d.Type.Shape.IsStatic() {
			return nil, fmt.Errorf("input %q has shape %s: the CUDA targets compile static shapes (cc build --shape %s=DIMS)", d.Name, d.Type, d.Name)
		}
	}
	gpus := opts.GPUs
	if len(gpus) == 0 {
		gpus = []string{"sm_80"}
	}
	code, err := cuda.Compile(m, cuda.Options{GPUs: gpus, Sim: opts.Target == TargetCUDASim, LLC: opts.LLC, Limits: opts.Limits})
	if err != nil {
		return nil, err
	}
	plan, err := text.Print(withoutBigConstants(m))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	meta := engine.Metadata{KilnVersion: Version, ModelName: m.Graph.Name, SourceSHA256: hex.EncodeToString(sum[:]),
		Precision: precisionOf(m), ArenaBytes: code.ArenaBytes, TensorBytes: code.TensorBytes, BuildFlags: opts.flags(), Kernels: code.Kernels}
	e := &engine.Engine{Plan: []byte(plan), Weights: code.Weights}
	if opts.Target == TargetCUDASim {
		meta.Target = engine.Target{Triple: cuda.SimTriple(), CPU: TargetCUDASim, Features: cuda.SimFeatures()}
		meta.MaxThreads = 1
		e.Code = map[string][]byte{meta.Target.Triple: code.SharedObject}
	} else {
		meta.Target = engine.Target{Triple: cudacode.Triple, CPU: strings.Join(gpus, ","), Features: code.Module.Archs()}
		e.Code = map[string][]byte{cudacode.Triple: code.Code}
	}
	for _, io := range code.Inputs {
		meta.Inputs = append(meta.Inputs, engine.Binding{Name: io.Name, DType: io.DType.String(), Shape: io.Dims, Index: io.Index})
	}
	for _, io := range code.Outputs {
		meta.Outputs = append(meta.Outputs, engine.Binding{Name: io.Name, DType: io.DType.String(), Shape: io.Dims, Index: io.Index})
	}
	meta.Pinned = opts.pinned
	meta.Folded = opts.folded
	e.Meta = meta
	buf, err := e.Encode()
	if err != nil {
		return nil, err
	}
	return &Output{Model: m, Timings: c.Timings, Memory: c.Memory, Engine: buf, Warnings: code.Warnings,
		GPU: code}, nil
}

// cudaPasses runs the O2 passes for a GPU target on m: shapes pinned by
// --shape (ranges are refused: the targets compile static shapes), the
// fusions into the CPU's hand-written kernels skipped.
func cudaPasses(m *ir.Model, opts *Options) (*passes.Context, error) {
	if len(opts.Shapes.Min)+len(opts.Shapes.Opt)+len(opts.Shapes.Max) > 0 {
		return nil, fmt.Errorf("the CUDA targets compile static shapes: give each dynamic input's dims with --shape, not --min, --opt or --max")
	}
	if opts.OverridableInitializers {
		return nil, fmt.Errorf("--overridable-initializers applies to the CPU targets (the CUDA runtime has no input defaults)")
	}
	if err := opts.declareInputs(m); err != nil {
		return nil, err
	}
	for _, name := range opts.Disabled {
		if p, ok := passes.Lookup(passes.O2, name); !ok || p.Required {
			return nil, fmt.Errorf("--disable: %q is not a pass that can be skipped (see cc passes)", name)
		}
	}
	dump := opts.Dump
	if dump == nil {
		dump = text.WriteFile
	}
	disabled := set(append(append([]string{}, opts.Disabled...), cuda.DisabledPasses...))
	c := &passes.Context{OptLevel: opts.OptLevel, Verify: opts.Verify, DumpDir: opts.DumpDir, Disabled: disabled,
		DumpAfter: set(opts.DumpAfter), Dump: dump, Limits: opts.Limits}
	return c, passes.Run(c, passes.O2, m)
}
