// Package build is cc's compile driver: model file → passes → native code
// → engine file. cmd/cc is a thin flag layer over it.
package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Version is kiln's version, recorded in every engine.
const Version = "0.1.0"

// Options are cc build's settings. They are recorded in the engine, so
// two builds with equal options give identical files.
type Options struct {
	CPU string // llc -mcpu; by default "native" (cpu.DefaultCPU for another target)
	// Target is the triple to compile for ("": this machine's; see
	// cpu.NormalizeTriple for the spellings), or TargetCUDA or
	// TargetCUDASim; GPUs are a CUDA build's architectures (--gpu).
	Target    string
	GPUs      []string
	OptLevel  int      // 0 runs only the required passes
	Disabled  []string // passes to skip
	DumpAfter []string // pass names or "all"
	DumpDir   string
	Verify    bool
	LLC       string
	// Winograd is cpu.WinogradAuto (measure; the default), On or Off.
	Winograd string
	// TimingCache is the file of Winograd measurements ("": none kept
	// between builds). A build that finds its layers there is
	// reproducible: same model, flags and cache, same bytes.
	TimingCache string
	// Dump writes a --dump-after file (nil: text.WriteFile); cc's checks
	// that it overwrites none of the build's inputs. DumpText writes one
	// of the lowered program's (nil: atomically, unchecked).
	Dump     func(path string, m *ir.Model) error
	DumpText func(path, text string) error
	// Limits bound the model file, its nesting, every value's size and the
	// arena (zero fields: ir.DefaultLimits). They change what builds, never
	// what is built, so the engine does not record them.
	Limits ir.Limits
	// MarkOutputs names values of the optimized graph to store as extra,
	// debug outputs (MarkAll: every tensor it stores; see markOutputs).
	MarkOutputs []string
	// Precision is the engine's recorded precision: "" or "fp32", or
	// "int8" for a model cc build quantized (internal/quantize) before
	// compiling; Quantize are the quantization's flags, recorded with the
	// others.
	Precision string
	Quantize  []string
	// Training is the record of a training-step model (cc build --train,
	// internal/training.Step), stored in the engine's metadata; Train
	// are its flags, recorded with the others.
	Training *engine.Training
	Train    []string

	// Shapes pin inputs' dims or give the ranges of their dynamic dims.
	Shapes Shapes
	// OverridableInitializers keeps the inputs that have initializer
	// defaults as inputs, each with its default (see declareInputs); by
	// default they compile as constants.
	OverridableInitializers bool
	profile                 map[string]cpu.DimRange
	pinned                  []engine.Pinned
	folded                  []string          // inputs with defaults compiled as constants
	defaults                map[string][]byte // the defaults of the inputs kept
}

// Output is what one build produced.
type Output struct {
	Model   *ir.Model // after the passes
	Timings []passes.Timing
	// Memory is the memplan pass's plan of the optimized graph (nil if it
	// did not run); Code's arena is the one the engine uses.
	Memory *passes.MemoryPlan
	Code   *cpu.Result
	// GPU is a CUDA target's code instead (Code is nil).
	GPU    *cuda.Result
	Engine []byte
	// Warnings are problems that did not stop the build.
	Warnings []string
}

// ReadModel reads .onnx or .onnxtxt by extension.
func ReadModel(path string) (*ir.Model, error) {
	m, _, err := ReadModelSources(path)
	return m, err
}

// ReadModelSources is ReadModel that also returns the external data files
// the model was read from, so that a caller can refuse to write over them.
func ReadModelSources(path string) (*ir.Model, []string, error) {
	return ReadModelWithin(path, ir.Limits{})
}

// ReadModelWithin is ReadModelSources under the given limits (file size,
// nesting, tensor sizes).
func ReadModelWithin(path string, lim ir.Limits) (*ir.Model, []string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".onnx":
		return onnx.ReadFileWithin(path, lim)
	case ".onnxtxt", ".txt":
		return text.ParseFileWithin(path, lim)
	}
	return nil, nil, fmt.Errorf("%s: unknown model extension (want .onnx or .onnxtxt)", path)
}

// Optimize runs the O2 pipeline (or the required passes at -O0) for the
// target of opts and returns its context, holding the timings and the
// memory plan, and warnings (a timing cache it could not save).
func Optimize(m *ir.Model, opts Options) (*passes.Context, []string, error) {
	b, err := prepare(m, &opts)
	if err != nil {
		return nil, nil, err
	}
	c, err := optimize(m, opts, b)
	if err != nil {
		return c, nil, err
	}
	return c, b.done(), nil
}

// prepare chooses opts' backend, checks the options against it and
// declares m's inputs (--shape, defaults), before any pass runs.
func prepare(m *ir.Model, opts *Options) (backend, error) {
	b, err := backendFor(*opts)
	if err != nil {
		return nil, err
	}
	if err := b.refuse(opts); err != nil {
		return nil, err
	}
	if err := opts.declareInputs(m); err != nil {
		return nil, err
	}
	return b, b.configure(*opts)
}

// saveCache writes the timing cache back; failing to is a warning, not an
// error: the build is complete, only the next one measures again. So is
// the notice of a cache of another kiln version measured afresh.
func saveCache(cache *cpu.TimingCache) []string {
	var warnings []string
	if notice := cache.Notice(); notice != "" {
		warnings = append(warnings, notice)
	}
	if err := cache.Save(); err != nil {
		warnings = append(warnings, fmt.Sprintf("the timing cache was not saved (the next build measures again): %v", err))
	}
	return warnings
}

func (o Options) cpuOptions(cache *cpu.TimingCache) cpu.Options {
	triple, err := cpu.NormalizeTriple(o.target())
	if err != nil {
		triple = o.Target // Compile reports it
	}
	name := o.CPU
	if name == "" {
		name = cpu.DefaultCPU(triple)
	}
	// The Winograd tuner runs its candidates through the runtime's loader:
	// codegen loads no code itself.
	return cpu.Options{CPU: name, Triple: triple, LLC: o.LLC, Winograd: o.Winograd, TimingCache: cache, Runner: rcpu.TimeRuns,
		Limits: o.Limits, Profile: o.profile}
}

// target is the triple asked for, this machine's by default.
func (o Options) target() string {
	if o.Target == "" {
		return cpu.HostTriple()
	}
	return o.Target
}

func (o Options) timingCache() (*cpu.TimingCache, error) {
	if o.TimingCache == "" {
		return cpu.NewTimingCache(), nil
	}
	return cpu.LoadTimingCache(o.TimingCache)
}

// optimize runs the pipeline for backend b.
func optimize(m *ir.Model, opts Options, b backend) (*passes.Context, error) {
	dump := opts.Dump
	if dump == nil {
		dump = text.WriteFile
	}
	c := &passes.Context{OptLevel: opts.OptLevel, Verify: opts.Verify, DumpDir: opts.DumpDir,
		Disabled: set(opts.Disabled), DumpAfter: set(opts.DumpAfter), Dump: dump, Target: b, Limits: opts.Limits}
	for name := range c.Disabled {
		p, ok := passes.Lookup(passes.O2, name)
		if !ok {
			return nil, fmt.Errorf("--disable: no pass named %q (see cc passes)", name)
		}
		if p.Required {
			return nil, fmt.Errorf("--disable: pass %q is required", name)
		}
	}
	for name := range c.DumpAfter {
		if _, ok := passes.Lookup(passes.O2, name); !ok && name != "all" && !b.stage(name) {
			return nil, fmt.Errorf("--dump-after: no pass named %q (see cc passes)", name)
		}
	}
	return c, passes.Run(c, passes.O2, m)
}

// Build compiles the model at path into an engine.
func Build(path string, opts Options) (*Output, error) {
	// The model first: its reader checks the file's size and first bytes
	// before reading the rest.
	m, _, err := ReadModelWithin(path, opts.Limits)
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := BuildModel(m, src, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// BuildModel compiles a model held in memory (the passes change m); src
// is the bytes of the file it came from, whose hash the engine records.
func BuildModel(m *ir.Model, src []byte, opts Options) (*Output, error) {
	if err := checkBindingNames(m.Graph); err != nil {
		return nil, err
	}
	b, err := prepare(m, &opts)
	if err != nil {
		return nil, err
	}
	pc, err := optimize(m, opts, b)
	if err != nil {
		return nil, err
	}
	out, err := b.compile(m, src, opts, pc)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(b.done(), out.Warnings...)
	return out, nil
}

// compile is the CPU targets' code generation and engine.
func (b *cpuBackend) compile(m *ir.Model, src []byte, opts Options, pc *passes.Context) (*Output, error) {
	debug, err := markOutputs(m.Graph, opts.MarkOutputs)
	if err != nil {
		return nil, err
	}
	copts := b.opts
	cpuName := copts.CPU
	var dumpErr error
	copts.Dump = dumpStages(opts, cpuStages(), &dumpErr)
	code, err := cpu.Compile(m, copts)
	if err == nil {
		err = dumpErr
	}
	if err != nil {
		return nil, err
	}
	var warnings []string
	if opts.Precision == "int8" && precisionOf(m) != "int8" {
		warnings = append(warnings, "nothing in the model computes in INT8 (where it would be slower, quantization left it float): the engine is FP32")
	}
	plan, err := text.Print(withoutBigConstants(m))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	meta := engine.Metadata{
		KilnVersion:  Version,
		ModelName:    m.Graph.Name,
		SourceSHA256: hex.EncodeToString(sum[:]),
		Precision:    precisionOf(m),
		Target:       engine.Target{Triple: copts.Triple, CPU: cpuName, Features: code.Features},
		ArenaBytes:   code.ArenaBytes,
		TensorBytes:  code.TensorBytes,
		BuildFlags:   opts.flags(b),
		Kernels:      code.Kernels,
		MaxThreads:   code.MaxThreads,
	}
	for _, io := range code.Inputs {
		meta.Inputs = append(meta.Inputs, engine.Binding{Name: io.Name, DType: io.DType.String(), Shape: io.Dims, Dims: io.DimNames, Kinds: io.Kinds, Index: io.Index, Default: opts.defaults[io.Name]})
	}
	for _, io := range code.Outputs {
		meta.Outputs = append(meta.Outputs, engine.Binding{Name: io.Name, DType: io.DType.String(), Shape: io.Dims, Dims: io.DimNames, Kinds: io.Kinds, Index: io.Index, Debug: debug[io.Name]})
	}
	meta.Pinned = opts.pinned
	meta.Folded = opts.folded
	meta.Training = opts.Training
	for _, s := range code.Symbols {
		meta.Symbols = append(meta.Symbols, engine.Symbol{Name: s.Name, Min: s.Min, Opt: s.Opt, Max: s.Max, Data: s.Data})
	}
	if err := meta.Validate(); err != nil {
		return nil, fmt.Errorf("the engine would not load: %w", err)
	}
	e := &engine.Engine{Meta: meta, Plan: []byte(plan), Weights: code.Weights,
		Code: map[string][]byte{meta.Target.Triple: code.SharedObject}}
	buf, err := e.Encode()
	if err != nil {
		return nil, err
	}
	return &Output{Model: m, Timings: pc.Timings, Memory: pc.Memory, Code: code, Engine: buf, Warnings: warnings}, nil
}

// checkBindingNames refuses, before any work, a graph input or output
// whose name the engine loader refuses (engine.CheckName): the build would
// otherwise write an engine infer cannot load.
func checkBindingNames(g *ir.Graph) error {
	check := func(kind string, vs []*ir.Value) error {
		for _, v := range vs {
			if err := engine.CheckName(v.Name); err != nil {
				return fmt.Errorf("%s %s: %v; an engine binds it by name, so rename it in the model", kind, ir.QuoteName(v.Name), err)
			}
		}
		return nil
	}
	if err := check("input", g.Inputs); err != nil {
		return err
	}
	return check("output", g.Outputs)
}

func (o Options) flags(b backend) []string {
	f := []string{fmt.Sprintf("-O%d", o.OptLevel)}
	if _, ok := b.(*cpuBackend); ok {
		f = append(f, "--cpu="+o.CPU)
	}
	if o.Target != "" {
		f = append(f, "--target="+o.Target)
	}
	if o.Target == TargetCUDA && len(o.GPUs) > 0 {
		f = append(f, "--gpu="+strings.Join(o.GPUs, ","))
	}
	if o.Winograd != "" && o.Winograd != cpu.WinogradAuto {
		f = append(f, "--winograd="+o.Winograd)
	}
	for _, d := range o.Disabled {
		f = append(f, "--disable="+d)
	}
	if len(o.MarkOutputs) > 0 {
		f = append(f, "--mark-outputs="+strings.Join(o.MarkOutputs, ","))
	}
	if o.OverridableInitializers {
		f = append(f, "--overridable-initializers")
	}
	f = append(f, o.Train...)
	if o.Precision != "" && o.Precision != "fp32" {
		f = append(append(f, "--precision="+o.Precision), o.Quantize...)
	}
	for _, s := range []struct {
		flag   string
		shapes map[string][]int64
	}{{"--shape", o.Shapes.Pin}, {"--min", o.Shapes.Min}, {"--opt", o.Shapes.Opt}, {"--max", o.Shapes.Max}} {
		for _, name := range sortedNames(s.shapes) {
			dims := make([]string, len(s.shapes[name]))
			for i, d := range s.shapes[name] {
				dims[i] = fmt.Sprint(d)
			}
			f = append(f, s.flag+"="+name+"="+strings.Join(dims, "x"))
		}
	}
	for _, name := range sortedNames(o.Shapes.Values) {
		vals := make([]string, len(o.Shapes.Values[name]))
		for i, v := range o.Shapes.Values[name] {
			vals[i] = fmt.Sprint(v)
		}
		f = append(f, "--value="+name+"="+strings.Join(vals, ","))
	}
	return f
}

// withoutBigConstants returns a shallow copy of m for the engine's plan in
// which initializers above text.ExternalThreshold elements become graph
// inputs of the same type: the plan shows the graph and its weights' types,
// while the data lives (pre-packed) in the weights section only.
func withoutBigConstants(m *ir.Model) *ir.Model {
	c := *m
	g := *m.Graph
	c.Graph = &g
	g.Initializers = nil
	g.Inputs = append([]*ir.Value{}, m.Graph.Inputs...)
	for _, v := range m.Graph.Initializers {
		if v.Const.Len() > text.ExternalThreshold {
			g.Inputs = append(g.Inputs, &ir.Value{Name: v.Name, Type: v.Type})
			continue
		}
		g.Initializers = append(g.Initializers, v)
	}
	return &c
}

func set(names []string) map[string]bool {
	s := map[string]bool{}
	for _, n := range names {
		if n != "" {
			s[n] = true
		}
	}
	return s
}

// precisionOf is the precision an optimized graph computes in: "int8" when
// integer kernels compute some of it (quantized fusion groups, ONNX's
// integer ops), else "fp32".
func precisionOf(m *ir.Model) string {
	for _, n := range m.Graph.Nodes {
		switch {
		case n.Domain == ir.KilnDomain && n.OpType == ops.FusionGroup && ops.GroupKind(n.Attr("kind").S).Quantized(),
			n.Domain == "" && slices.Contains([]string{"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}, n.OpType):
			return "int8"
		}
	}
	return "fp32"
}
