package build

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// The GPU targets (--target): cuda, NVIDIA GPUs (--gpu picks the cubins'
// architectures), and cuda-sim, the same kernels compiled for this
// machine's CPU (codegen/cuda), for testing them without a GPU.
const (
	TargetCUDA    = "cuda"
	TargetCUDASim = "cuda-sim"
)

// IsCUDA reports whether target is a GPU target (cc's flags: --gpu
// rather than --cpu).
func IsCUDA(target string) bool { return target == TargetCUDA || target == TargetCUDASim }

// compile compiles for a GPU target: every node's kernel-layer kernels
// (fusion groups one step each) under the GPU schedule.
func (b *cudaBackend) compile(m *ir.Model, src []byte, opts Options, pc *passes.Context) (*Output, error) {
	// The driver's slots stage refuses inputs whose shapes are not static.
	gpus := opts.GPUs
	if len(gpus) == 0 {
		gpus = []string{"sm_80"}
	}
	var dumpErr error
	copts := cuda.Options{GPUs: gpus, Sim: b.sim, LLC: opts.LLC, Limits: opts.Limits}
	if dump := dumpStages(opts, lowerStages(), &dumpErr); dump != nil {
		copts.Dump = func(stage string, p *lower.Program) { dump(stage, p.String()) }
	}
	code, err := cuda.Compile(m, copts)
	if err == nil {
		err = dumpErr
	}
	if err != nil {
		return nil, err
	}
	plan, err := text.Print(withoutBigConstants(m))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	meta := engine.Metadata{KilnVersion: Version, ModelName: m.Graph.Name, SourceSHA256: hex.EncodeToString(sum[:]),
		Precision: precisionOf(m), ArenaBytes: code.ArenaBytes, TensorBytes: code.TensorBytes, BuildFlags: opts.flags(b), Kernels: code.Kernels}
	e := &engine.Engine{Plan: []byte(plan), Weights: code.Weights}
	if b.sim {
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
	return &Output{Model: m, Timings: pc.Timings, Memory: pc.Memory, Engine: buf, Warnings: code.Warnings,
		GPU: code}, nil
}

// refuse says which options the GPU targets do not take: ranges of
// dynamic dims (they compile static shapes), input defaults and debug
// outputs (the CUDA runtime has neither).
func (*cudaBackend) refuse(opts *Options) error {
	if len(opts.MarkOutputs) > 0 {
		return errors.New("--mark-outputs applies to the CPU targets")
	}
	if len(opts.Shapes.Min)+len(opts.Shapes.Opt)+len(opts.Shapes.Max) > 0 {
		return fmt.Errorf("the CUDA targets compile static shapes: give each dynamic input's dims with --shape, not --min, --opt or --max")
	}
	if opts.OverridableInitializers {
		return fmt.Errorf("--overridable-initializers applies to the CPU targets (the CUDA runtime has no input defaults)")
	}
	return nil
}
