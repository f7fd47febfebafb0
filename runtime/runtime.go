// Package runtime loads kiln engine files and runs them. It needs no LLVM
// and no cgo: an engine's native code is loaded with purego.
//
//	eng, err := runtime.Load("model.kiln")
//	ctx, err := eng.NewContext(runtime.Options{Threads: 2})
//	out, err := ctx.Run(map[string]*ir.Tensor{"input": x})
//
// An Engine is safe for concurrent use; a Context is not (use one per
// goroutine: each owns its arena and worker threads).
//
// Loading verifies the file's checksums and then the metadata against the
// code's own ABI record before any code is loaded (see LoadBytes);
// LoadWith(path, LoadOptions{RequireSigned: pub}) also requires an ed25519
// signature by pub.
package runtime

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
	cpurt "github.com/kiln-ml/kiln/runtime/cpu"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Engine is a loaded, verified engine.
type Engine struct {
	Meta    engine.Metadata
	Plan    []byte
	lib     *cpurt.Library
	weights []byte // the live weights, in weightBuf
	// weightBuf owns weights' memory (freed when the Engine is collected).
	weightBuf *cpurt.Buffer
	inputs    []binding
	outputs   []binding
	// Signer is the key whose valid signature the file carries (nil:
	// unsigned); Checksum is its digest (see runtime/engine).
	Signer    ed25519.PublicKey
	Checksum  [sha256.Size]byte
	loadTimes LoadTimes
	// dataDims: some dims are the data's (engine.Symbol Data), and the
	// outputs over them get their shapes after a run.
	dataDims bool
	// host are the nodes the engine computes on the host, in order
	// (host.go).
	host []hostStep
}

type binding struct {
	engine.Binding
	dtype  ir.DType
	bytes  int64
	output bool
	// host: the value lives with the runtime, not the code (a string; what
	// a host step computes at a shape only the data gives): no buffer is
	// bound to the slot (cpuabi.Slot Host).
	host bool
	// fallback is an input's default value (Binding.Default), used when a
	// run does not give the input.
	fallback *ir.Tensor
}

// LoadOptions are the checks Load makes beyond the file's integrity and
// consistency, which it always checks, and how it keeps the weights.
type LoadOptions struct {
	// RequireSigned, when set, refuses an engine unless its trailer holds
	// a valid signature by this key (engines are native code: a deployment
	// may run only those its own build signed; see `cc build --sign`).
	// The weights are then copied (CopyWeights), so that what runs is
	// what the signature vouched for even if the file changes later.
	RequireSigned ed25519.PublicKey
	// CopyWeights copies the weights out of the file instead of mapping
	// them: the Engine then keeps no reference to the file, which may be
	// replaced, rewritten or cut short in place while it runs (a server
	// whose model files are updated by copying over them wants this).
	CopyWeights bool
}

// Load reads and verifies an engine file.
func Load(path string) (*Engine, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with options. The file is mapped into memory, not read
// into it. The small sections are verified as they are copied out (see
// load); the weights, most of the file, stay the file's own pages, mapped
// read-only and verified there (runtime/cpu's MapLive), so loading copies
// nothing and takes no fresh memory for them. While the Engine lives, the
// file must not change in place: replace it by renaming a new file over
// it, as cc does (a file rewritten in place changes the weights the
// engine reads, and one cut short makes an inference fault). Where the
// file cannot be mapped, or with CopyWeights or RequireSigned, the weights
// are copied as they are verified and the file is free once LoadWith
// returns.
func LoadWith(path string, opts LoadOptions) (*Engine, error) {
	start := time.Now()
	f, err := readfile.Open(path) // not a named pipe, which would block
	if err != nil {
		return nil, err
	}
	defer f.Close() // the mappings outlive the descriptor
	buf, unmap, err := engine.MapFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer unmap()
	weightsFile := f
	if opts.CopyWeights || opts.RequireSigned != nil {
		weightsFile = nil
	}
	e, err := load(buf, opts, start, weightsFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// LoadBytes verifies an engine held in memory and loads its code for this
// machine. Before any of its code is loaded it checks the format, every
// checksum (the header's, the section table's, each chunk of each
// section's and the digest), the metadata against the code's own ABI
// record (sizes of the weights, arena and io buffers, io indices, dtypes
// and shapes; see Validate), the target architecture and the CPU
// features. The Engine keeps no reference to buf.
func LoadBytes(buf []byte) (*Engine, error) { return LoadBytesWith(buf, LoadOptions{}) }

// LoadBytesWith is LoadBytes with options.
func LoadBytesWith(buf []byte, opts LoadOptions) (*Engine, error) {
	return load(buf, opts, time.Now(), nil)
}

// LoadTimes says where loading an engine spent its time.
type LoadTimes struct {
	// Check is mapping the file, checking its structure, verifying and
	// copying out its small sections (metadata, plan, code) and checking
	// the metadata against the code.
	Check time.Duration
	// Weights is mapping the weights section and verifying it in place,
	// or verifying it and copying it into the live weights, chunk by
	// chunk on all cores; WeightsMapped says which.
	Weights       time.Duration
	WeightsMapped bool
	// Code is loading the engine's code (dlopen).
	Code time.Duration
	// Derive is computing the derived weights (runtime/cpu's Live.Derive)
	// with the engine's code, on all cores.
	Derive time.Duration
}

// LoadTimes returns where the engine's load spent its time.
func (e *Engine) LoadTimes() LoadTimes { return e.loadTimes }

// load loads an engine from buf, which it only reads, and never after it
// returns: every section but the weights is verified as it is copied out.
// The weights are mapped from weightsFile, buf's file, and verified in
// place when it is set and they can be (liveWeights), else copied out of
// buf, each chunk as it is verified, so a file mapped as buf cannot
// change what runs.
func load(buf []byte, opts LoadOptions, start time.Time, weightsFile *os.File) (*Engine, error) {
	file, err := engine.Parse(buf)
	if err != nil {
		return nil, err
	}
	if err := file.Detach(engine.SectionWeights); err != nil {
		return nil, err
	}
	// f.Weights refers to buf, unverified: only its length is read before
	// Read below verifies it into the live weights.
	f, err := engine.DecodeFile(file)
	if err != nil {
		return nil, err
	}
	if opts.RequireSigned != nil {
		if err := f.VerifySigner(opts.RequireSigned); err != nil {
			return nil, err
		}
	}
	triple := HostTriple()
	if _, ok := f.Code[triple]; !ok {
		var have []string
		for t := range f.Code {
			have = append(have, t)
		}
		slices.Sort(have)
		if f.Meta.Target.Triple == cudacode.Triple {
			return nil, fmt.Errorf("wrong architecture: the engine holds code for %s (built with --target cuda --gpu %s), which runs on an NVIDIA GPU with an infer built with -tags cuda; this runtime runs %s engines: rebuild it with `cc build --target %s --cpu native`",
				cudacode.Triple, f.Meta.Target.CPU, triple, shortTriple(triple))
		}
		return nil, fmt.Errorf("wrong architecture: the engine holds code for %s (built with --target %s --cpu %s), this machine is %s: rebuild it with `cc build --target %s --cpu native`",
			strings.Join(have, ", "), shortTriple(f.Meta.Target.Triple), f.Meta.Target.CPU, triple, shortTriple(triple))
	}
	e := &Engine{Meta: f.Meta, Plan: f.Plan, Signer: f.Signer, Checksum: f.Checksum}
	if e.inputs, err = bindings(f.Meta.Inputs, false); err != nil {
		return nil, err
	}
	e.dataDims = slices.ContainsFunc(f.Meta.Symbols, func(s engine.Symbol) bool { return s.Data })
	if e.outputs, err = bindings(f.Meta.Outputs, true); err != nil {
		return nil, err
	}
	abi, err := checkCode(f, triple, e.inputs, e.outputs)
	if err != nil {
		return nil, err
	}
	for _, bs := range [][]binding{e.inputs, e.outputs} {
		for i := range bs {
			if abi.Slots[bs[i].Index].Host {
				bs[i].host, bs[i].bytes = true, 0
			}
		}
	}
	if e.host, err = hostSteps(abi.Host); err != nil {
		return nil, err
	}
	if err := checkFeatures(abi.Features, f.Meta.Target.CPU); err != nil {
		return nil, err
	}
	t1 := time.Now()
	live, mapped, err := liveWeights(file, abi, weightsFile)
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	if e.lib, err = cpurt.Open(f.Code[triple]); err != nil {
		live.Buf.Free()
		return nil, err
	}
	t3 := time.Now()
	if err := live.Derive(e.lib); err != nil {
		live.Buf.Free()
		e.lib.Close()
		return nil, err
	}
	live.Buf.CollapseLater()
	e.weightBuf, e.weights = live.Buf, live.Buf.Bytes
	e.loadTimes = LoadTimes{Check: t1.Sub(start), Weights: t2.Sub(t1), WeightsMapped: mapped, Code: t3.Sub(t2), Derive: time.Since(t3)}
	return e, nil
}

// liveWeights lays out the live weights with their stored part verified:
// mapped from from, the engine's file, where it is set and the weights
// map (cpurt.MapLive), else copied out of the parsed file chunk by chunk
// as each is verified. It reports whether they are mapped.
func liveWeights(file *engine.File, abi *cpuabi.ABI, from *os.File) (*cpurt.Live, bool, error) {
	if off, ok := file.SectionOffset(engine.SectionWeights); ok && from != nil {
		if live, err := cpurt.MapLive(from, off, abi); err == nil {
			if err := file.VerifyIn(engine.SectionWeights, live.Buf.Bytes[:abi.StoredBytes]); err != nil {
				live.Buf.Free()
				return nil, false, err
			}
			return live, true, nil
		}
	}
	live, err := cpurt.NewLive(abi)
	if err != nil {
		return nil, false, fmt.Errorf("the engine's weights: %w; load it where more memory is free", err)
	}
	if err := file.Read(engine.SectionWeights, func(off int, chunk []byte) { live.Put(int64(off), chunk) }); err != nil {
		live.Buf.Free()
		return nil, false, err
	}
	return live, false, nil
}

func bindings(bs []engine.Binding, output bool) ([]binding, error) {
	out := make([]binding, len(bs))
	for i, b := range bs {
		d, err := ir.ParseDType(b.DType)
		if err != nil || d.Size() == 0 && d != ir.String {
			return nil, fmt.Errorf("%w: binding %q has unsupported dtype %q", ErrInconsistent, b.Name, b.DType)
		}
		n, err := int64(0), error(nil)
		if d != ir.String && len(b.Kinds) == 0 {
			n, err = byteSize(d, b.Shape)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: binding %q: %v", ErrInconsistent, b.Name, err)
		}
		out[i] = binding{Binding: b, dtype: d, bytes: n, output: output}
		if b.Default != nil {
			if int64(len(b.Default)) != n {
				return nil, fmt.Errorf("%w: input %q: a default value of %d bytes for %s", ErrInconsistent, b.Name, len(b.Default), b.ShapeString())
			}
			out[i].fallback = ir.FromRaw(d, b.Shape, b.Default)
		}
	}
	return out, nil
}

// HostTriple is the target triple engines must hold code for to run here.
func HostTriple() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[goruntime.GOARCH]
	if arch == "" {
		arch = goruntime.GOARCH
	}
	return arch + "-unknown-linux-gnu"
}

// shortTriple is a triple as --target spells it (aarch64-linux-gnu).
func shortTriple(t string) string { return strings.Replace(t, "-unknown-", "-", 1) }

// Inputs describes the engine's inputs.
func (e *Engine) Inputs() []engine.Binding { return unwrap(e.inputs) }

// Outputs describes the engine's outputs.
func (e *Engine) Outputs() []engine.Binding { return unwrap(e.outputs) }

func unwrap(bs []binding) []engine.Binding {
	out := make([]engine.Binding, len(bs))
	for i, b := range bs {
		out[i] = b.Binding
	}
	return out
}

// Close unloads the engine's code; no context may be used afterwards.
func (e *Engine) Close() error { return e.lib.Close() }

// Options configure a Context.
type Options struct {
	// Threads is the number of OS threads one inference uses; 0 means all
	// cores. MaxThreads() caps it, and so does the engine's MaxThreads
	// (tiny models run on one); Context.Threads says what it got.
	Threads int
	// Limits bound the arena (MaxArenaBytes) and each input and output
	// (MaxTensorBytes), checked before anything is allocated; zero fields
	// take ir.DefaultLimits.
	Limits ir.Limits
}

// MaxThreads is the most threads a Context runs: four per core. Each is an
// OS thread spinning at the engine's barriers, so more only add switching,
// and tens of thousands exhaust the system's threads.
func MaxThreads() int { return 4 * goruntime.NumCPU() }

// Context runs inferences one at a time: it owns the activation arena.
type Context struct {
	engine  *Engine
	threads int
	arena   []byte
	// arenaBuf owns arena's memory (freed when the Context is collected).
	arenaBuf *cpurt.Buffer
	io       []unsafe.Pointer
	// slotBytes are the bytes of the buffers bound to the io slots (host
	// steps read and write them).
	slotBytes []int64
	// dims is the dims table the code reads the dynamic dims from (the io
	// slot after the outputs); nil for a static engine.
	dims []int64
}

// NewContext allocates a context's arena.
func (e *Engine) NewContext(opts Options) (*Context, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = goruntime.NumCPU()
	}
	threads = min(threads, MaxThreads())
	if limit := e.Meta.MaxThreads; limit > 0 && threads > limit {
		threads = limit
	}
	lim := opts.Limits.OrDefaults()
	if err := lim.CheckArena("the engine's arena", e.Meta.ArenaBytes); err != nil {
		return nil, err
	}
	for _, bs := range [][]binding{e.inputs, e.outputs} {
		for _, b := range bs {
			if _, err := lim.CheckTensor(fmt.Sprintf("engine binding %q", b.Name), b.dtype, b.Shape); err != nil {
				return nil, err
			}
		}
	}
	buf, err := cpurt.NewBuffer(e.Meta.ArenaBytes)
	if err != nil {
		return nil, e.arenaError(err)
	}
	c := &Context{engine: e, threads: threads, arenaBuf: buf, arena: buf.Bytes,
		io: make([]unsafe.Pointer, len(e.inputs)+len(e.outputs)), slotBytes: make([]int64, len(e.inputs)+len(e.outputs))}
	if len(e.Meta.Symbols) > 0 {
		c.dims = make([]int64, len(e.Meta.Symbols))
		c.io = append(c.io, unsafe.Pointer(&c.dims[0]))
	}
	return c, nil
}

// arenaError says what to change when a context's arena does not fit:
// a dynamic engine's arena is planned for its dims' maxima, so a smaller
// --max shrinks it; every context takes one.
func (e *Engine) arenaError(err error) error {
	advice := "run fewer contexts at once, or run it where more memory is free"
	if len(e.Meta.Symbols) > 0 {
		advice = "rebuild it with smaller maxima for its dynamic dims (cc build --max NAME=DIMS), " + advice
	}
	return fmt.Errorf("the engine's arena: %w; %s", err, advice)
}

// Threads returns the context's thread count: the one asked for, capped at
// MaxThreads() and by the engine's MaxThreads. A caller that asked for
// more can say so.
func (c *Context) Threads() int { return c.threads }

// Run checks the inputs against the engine's bindings (names, dtypes,
// shapes), runs one inference and returns freshly allocated outputs.
func (c *Context) Run(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	out, err := c.bind(inputs)
	if err != nil {
		return nil, err
	}
	if err := c.execute(inputs, out); err != nil {
		return nil, err
	}
	return out, c.fitOutputs(out)
}

// execute runs the code on the bound buffers, with the host steps
// between its runs where the engine has them (runHosted), which add
// their outputs to out.
func (c *Context) execute(inputs, out map[string]*ir.Tensor) error {
	e := c.engine
	var err error
	if len(e.host) > 0 {
		err = c.runHosted(inputs, out, func(part int64) error {
			e.lib.RunFrom(part, c.threads, rawPointer(e.weights), rawPointer(c.arena), c.io)
			return nil
		})
	} else {
		e.lib.Run(c.threads, rawPointer(e.weights), rawPointer(c.arena), c.io)
	}
	goruntime.KeepAlive(inputs)
	goruntime.KeepAlive(out)
	goruntime.KeepAlive(c) // the arena and weights are freed with their owners
	return err
}

// fitOutputs gives the outputs over dims the data decides (engine.Symbol
// Data) the shapes the run computed: bind allocated them at the dims'
// maxima, and the code wrote the first elements, row-major at the real
// dims.
func (c *Context) fitOutputs(out map[string]*ir.Tensor) error {
	e := c.engine
	if !e.dataDims {
		return nil
	}
	for i, s := range e.Meta.Symbols {
		if s.Data && (c.dims[i] < 0 || c.dims[i] > s.Max) {
			return fmt.Errorf("%w: the run computed the dim %s as %d, outside 0..%d", ErrInconsistent, s.Name, c.dims[i], s.Max)
		}
	}
	for _, b := range e.outputs {
		if !b.Dynamic() || b.host {
			continue
		}
		dims, err := b.DimsAt(e.Meta.Symbols, c.dims)
		if err != nil {
			return err
		}
		t := out[b.Name]
		n, err := byteSize(b.dtype, dims)
		if err != nil || n > int64(len(t.Raw)) {
			return fmt.Errorf("%w: output %q would be %v, beyond the %d bytes the code wrote", ErrInconsistent, b.Name, dims, len(t.Raw))
		}
		t.Dims, t.Raw = dims, t.Raw[:n]
	}
	return nil
}

// bind checks the inputs (names, dtypes, shapes: dynamic dims inside the
// engine's ranges), allocates the outputs at the shapes the inputs' dims
// give and points c.io at both and at the dims table.
func (c *Context) bind(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	e := c.engine
	known := len(e.inputs)
	inputs = e.withDefaults(inputs)
	for _, b := range e.inputs {
		if _, ok := inputs[b.Name]; !ok {
			return nil, fmt.Errorf("missing input %q (%s)", b.Name, b.ShapeString())
		}
	}
	if len(inputs) != known {
		for name, t := range inputs {
			if err := e.foldedInput(name); err != nil {
				return nil, err
			}
			if p := findPinned(e.Meta.Pinned, name); p != nil {
				if t.DType.String() != p.DType || !slices.Equal(t.Dims, p.Shape) || !bytes.Equal(t.Raw, p.Data) {
					return nil, fmt.Errorf("input %q: the engine was compiled for one value of it (cc build --value), and this is another: rebuild with --value %s=... for it", name, name)
				}
				continue
			}
			if findBinding(e.inputs, name) == nil {
				return nil, fmt.Errorf("unknown input %q; the engine's inputs are %s", name, names(e.inputs))
			}
		}
	}
	if len(e.Meta.Symbols) == 0 { // static shapes: the per-run fast path
		for _, b := range e.inputs {
			t := inputs[b.Name]
			if t.DType != b.dtype || !slices.Equal(t.Dims, b.Shape) {
				return nil, fmt.Errorf("input %q: got %s%v, the engine takes %s", b.Name, t.DType, t.Dims, b.ShapeString())
			}
			if err := checkData(b, t); err != nil {
				return nil, err
			}
			c.bindSlot(b, t)
		}
		out := make(map[string]*ir.Tensor, len(e.outputs))
		for _, b := range e.outputs {
			c.bindSlot(b, c.newOutput(b, b.Shape, out))
		}
		return out, nil
	}
	shapes := make([][]int64, len(e.inputs))
	metas := make([]engine.Binding, len(e.inputs))
	for i, b := range e.inputs {
		t := inputs[b.Name]
		if t.DType != b.dtype {
			return nil, fmt.Errorf("input %q: got %s%v, the engine expects %s", b.Name, t.DType, t.Dims, b.ShapeString())
		}
		shapes[i], metas[i] = t.Dims, b.Binding
	}
	vals, err := engine.Resolve(e.Meta.Symbols, metas, shapes)
	if err != nil {
		return nil, err
	}
	copy(c.dims, vals)
	for i, b := range e.inputs {
		t := inputs[b.Name]
		if b.host {
			if err := checkData(b, t); err != nil {
				return nil, err
			}
			c.bindSlot(b, t)
			continue
		}
		n, err := byteSize(b.dtype, shapes[i])
		if err != nil || n > b.bytes || int64(len(t.Raw)) != n {
			return nil, fmt.Errorf("input %q: %d bytes of data for %s%v (the engine takes at most %d)", b.Name, len(t.Raw), t.DType, t.Dims, b.bytes)
		}
		c.bindSlot(b, t)
	}
	out := map[string]*ir.Tensor{}
	for _, b := range e.outputs {
		if b.host {
			c.bindSlot(b, c.newOutput(b, nil, out))
			continue
		}
		dims, err := b.DimsAt(e.Meta.Symbols, vals)
		if err != nil {
			return nil, err
		}
		if n, err := byteSize(b.dtype, dims); err != nil || n > b.bytes {
			return nil, fmt.Errorf("%w: output %q would be %v, beyond the %d bytes the code writes", ErrInconsistent, b.Name, dims, b.bytes)
		}
		c.bindSlot(b, c.newOutput(b, dims, out))
	}
	return out, nil
}

// checkData checks that input t holds the data its dims say: its bytes,
// or for strings its strings.
func checkData(b binding, t *ir.Tensor) error {
	kinds, _ := cpuabi.Kinds(t.Type())
	if !slices.Equal(kinds, b.Kinds) || t.DType != b.dtype {
		return fmt.Errorf("input %q: got %s, the engine takes %s", b.Name, t.Type(), b.ShapeString())
	}
	if len(kinds) > 0 {
		return nil // the host step reading it checks its tensors
	}
	if b.dtype == ir.String {
		if n := ir.Product(t.Dims); int64(len(t.Strings)) != n {
			return fmt.Errorf("input %q: %d strings for %s%v", b.Name, len(t.Strings), t.DType, t.Dims)
		}
		return nil
	}
	if n, err := byteSize(b.dtype, t.Dims); err != nil || int64(len(t.Raw)) != n {
		return fmt.Errorf("input %q: %d bytes of data, want %d", b.Name, len(t.Raw), n)
	}
	return nil
}

// newOutput allocates output b at dims into out; a host output is the
// host step's, after the run (runHosted), so it has no buffer.
func (c *Context) newOutput(b binding, dims []int64, out map[string]*ir.Tensor) *ir.Tensor {
	if b.host {
		return nil
	}
	t := ir.NewTensor(b.dtype, dims...)
	t.Name = b.Name
	out[b.Name] = t
	return t
}

// bindSlot points b's io slot at t's bytes (none for a host slot, which
// the code never touches).
func (c *Context) bindSlot(b binding, t *ir.Tensor) {
	if b.host || t == nil {
		c.io[b.Index], c.slotBytes[b.Index] = nil, 0
		return
	}
	c.io[b.Index], c.slotBytes[b.Index] = rawPointer(t.Raw), int64(len(t.Raw))
}

// withDefaults returns inputs with each input it leaves out that has a
// default value (Binding.Default) given that value: a new map, the
// caller's left as it is; inputs itself where none is left out.
func (e *Engine) withDefaults(inputs map[string]*ir.Tensor) map[string]*ir.Tensor {
	var all map[string]*ir.Tensor
	for _, b := range e.inputs {
		if _, ok := inputs[b.Name]; !ok && b.fallback != nil {
			if all == nil {
				all = maps.Clone(inputs)
			}
			all[b.Name] = b.fallback
		}
	}
	if all == nil {
		return inputs
	}
	return all
}

// foldedInput refuses a value for an input the engine compiled as a
// constant (Metadata.Folded), saying how to rebuild it to take one.
func (e *Engine) foldedInput(name string) error {
	if slices.Contains(e.Meta.Folded, name) {
		return fmt.Errorf("input %q is a constant in this engine: the model gives it an initializer default, which cc build compiled in; rebuild with `cc build --overridable-initializers` to feed it", name)
	}
	return nil
}

// A Profile records the time of each kernel step (Engine.Meta.Kernels, in
// execution order) over profiled inferences. The engine counts CPU cycles;
// the Profile converts them to time at the rate the counter ran against
// the wall clock over all its runs, so profile for long enough (tens of
// milliseconds or more) for that rate to be exact.
type Profile struct {
	Kernels []string
	Runs    int

	lib     *cpurt.Library
	samples [][]uint64 // per kernel, per run: cycles
	times   []uint64   // one run's counter readings, a row per thread
	c0, c1  uint64
	t0, t1  time.Time
}

// NewProfile starts an empty profile of the engine's kernels. Engines built
// before profiling existed have no profiling entry point.
func (e *Engine) NewProfile() (*Profile, error) {
	if !e.lib.Profiled() {
		return nil, errors.New("the engine has no profiling entry point (rebuild it with this kiln's cc)")
	}
	return &Profile{Kernels: e.Meta.Kernels, lib: e.lib, samples: make([][]uint64, len(e.Meta.Kernels))}, nil
}

// RunProfiled is Run through the engine's profiling entry point, adding
// the run's per-kernel times to p. It is slower than Run by a counter read
// and a barrier per kernel.
func (c *Context) RunProfiled(inputs map[string]*ir.Tensor, p *Profile) (map[string]*ir.Tensor, error) {
	if p.lib != c.engine.lib {
		return nil, errors.New("RunProfiled: the profile belongs to another engine")
	}
	out, err := c.bind(inputs)
	if err != nil {
		return nil, err
	}
	if n := c.threads * (len(p.samples) + 1); len(p.times) < n {
		p.times = make([]uint64, n)
	}
	if p.Runs == 0 {
		p.c0, p.t0 = p.lib.Cycles(), time.Now()
	}
	e := c.engine
	err = c.runHosted(inputs, out, func(part int64) error {
		return e.lib.RunProfileFrom(part, c.threads, rawPointer(e.weights), rawPointer(c.arena), c.io, p.times)
	})
	if err != nil {
		return nil, err
	}
	p.c1, p.t1 = p.lib.Cycles(), time.Now()
	goruntime.KeepAlive(inputs)
	goruntime.KeepAlive(c)
	for i := range p.samples {
		p.samples[i] = append(p.samples[i], p.times[i+1]-p.times[i]) // thread 0's row
	}
	p.Runs++
	return out, c.fitOutputs(out)
}

// Mean returns each kernel's mean time per run.
func (p *Profile) Mean() []time.Duration {
	return p.each(func(s []uint64) float64 {
		sum := 0.0
		for _, c := range s {
			sum += float64(c)
		}
		return sum / float64(len(s))
	})
}

// Median returns each kernel's median time, which a busy machine's
// preemptions disturb less than the mean.
func (p *Profile) Median() []time.Duration {
	return p.each(func(s []uint64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		if n := len(s); n%2 == 0 {
			return (float64(s[n/2-1]) + float64(s[n/2])) / 2
		}
		return float64(s[len(s)/2])
	})
}

// each converts a statistic of each kernel's cycle samples to time.
func (p *Profile) each(stat func([]uint64) float64) []time.Duration {
	out := make([]time.Duration, len(p.samples))
	if p.Runs == 0 || p.c1 <= p.c0 {
		return out
	}
	nsPerCycle := float64(p.t1.Sub(p.t0).Nanoseconds()) / float64(p.c1-p.c0)
	for i, s := range p.samples {
		out[i] = time.Duration(stat(s) * nsPerCycle)
	}
	return out
}

func rawPointer(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func findPinned(ps []engine.Pinned, name string) *engine.Pinned {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

func findBinding(bs []binding, name string) *binding {
	for i := range bs {
		if bs[i].Name == name {
			return &bs[i]
		}
	}
	return nil
}

func names(bs []binding) string {
	var s []string
	for _, b := range bs {
		s = append(s, fmt.Sprintf("%q", b.Name))
	}
	return strings.Join(s, ", ")
}
