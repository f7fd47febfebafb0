package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// space says where a buffer lives.
type space int

const (
	inWeights space = iota
	inDerived       // the derived weights: off is in the derived area
	inArena
	inIO
)

type loc struct {
	space space
	off   int64 // byte offset in weights or arena
	io    int   // slot in io
	// stride, for a tensor a per-sample step reads (dynamic.go), is the
	// bytes between samples: the step adds sample·stride.
	stride int64
}

type step struct {
	f        *ll.Func
	serial   bool // runs on thread 0 only
	counters []counterRange
	// samples, for a step compiled per sample (dynamic.go), is how many
	// times it runs: the dynamic leading dim; group numbers the node whose
	// steps loop over the samples together.
	samples *kernel.Expr
	group   int
	// node is the graph node the step computes (part of), whose work
	// (nodeMACs) counts towards a part of the run on its first step.
	node *ir.Node
	// mark, when set, makes the step a point of control flow (control.go)
	// with no function.
	mark *mark
}

// gen holds one compilation.
type gen struct {
	opts   Options
	model  *ir.Model
	opsets ops.Opsets
	known  map[*ir.Value]*ir.Tensor
	feats  []string
	// usedAMX: a kernel uses AMX's tiles (the engine then records amx_*).
	usedAMX bool
	vl      int   // floats per vector register (16 AVX-512, 8 AVX2)
	mr, nv  int   // GEMM micro-tile: mr rows × nv vectors
	l2      int64 // a core's L2 bytes (schedule)

	mod   *ll.Module
	decls map[string]*ll.Func
	steps []step

	// derived are the ranges of weights the loader computes, in order,
	// in the derivedBytes after the stored weights (addDerived).
	derived      []cpuabi.Derived
	derivedBytes int64
	derivedBase  *ll.Global
	// prog is the program the driver lowers (codegen/lower): its slots,
	// steps, and where every value lives.
	prog *lower.Program
	// nodes is what is lowered, in order: the program's steps' nodes,
	// each fusion group replaced by its base node where it has one
	// (fuse.go); plans says how each node is lowered (lowered.go).
	nodes []*ir.Node
	plans map[*ir.Node]*nodePlan

	arenaBytes, tensorBytes int64
	// counterBase and counterBytes place the work-stealing counters past
	// the planned arena (steal.go).
	counterBase, counterBytes int64
	inputs, outputs           []IO
	kernelNames               []string
	curNode                   *ir.Node
	curStep                   *lower.Step
	parts                     int // kiln_run's
	// host are the host steps (host.go), in order; emitParts sets each
	// one's Resume.
	host  []cpuabi.HostStep
	nstep int

	// syms are the model's symbolic dims (the dims table's order) and
	// symIndex their positions; symShapes the symbolic shapes of values,
	// whose types hold their shapes at the maxima while compiling; slice
	// the node being compiled per sample (dynamic.go).
	syms      []Symbol
	symIndex  map[string]int
	symShapes map[*ir.Value]ir.Shape
	slice     *slicing
	nslice    int
	// sliceErr is why a step emitted during slice cannot run per sample
	// (emitKernel), reported once the node is lowered.
	sliceErr error
}

func newGen(m *ir.Model, feats []string, opts Options) (*gen, error) {
	g := &gen{model: m, opsets: ops.OpsetsOf(m), feats: feats, opts: opts,
		mod: ll.NewModule(), decls: map[string]*ll.Func{},
		nodes: m.Graph.Nodes, plans: map[*ir.Node]*nodePlan{}}
	prog, err := lower.NewProgram(m, lowerTarget{g}, opts.Limits)
	if err != nil {
		return nil, err
	}
	g.prog, g.known = prog, prog.Known
	g.schedule()
	return g, nil
}

// declare returns an external function (an LLVM intrinsic).
func (g *gen) declare(name string, ret types.Type, params ...types.Type) *ll.Func {
	return llvm.Declare(g.mod, g.decls, name, ret, params...)
}

func dimsOf(v *ir.Value) []int64 {
	d, _ := v.Type.Shape.Ints()
	return d
}

func numel(v *ir.Value) int64 { return ir.Product(dimsOf(v)) }

func elemType(d ir.DType) types.Type {
	switch d {
	case ir.Float32:
		return f32
	case ir.Float64:
		return types.Double
	case ir.Int64, ir.Uint64:
		return i64
	case ir.Int32, ir.Uint32:
		return i32
	case ir.Int16, ir.Uint16, ir.Float16, ir.BFloat16:
		return types.I16
	}
	return i8
}

func align64(n int64) int64 { return (n + 63) &^ 63 }

// attrs returns an attribute reader with the schema's defaults.
func (g *gen) attrs(n *ir.Node) *ops.KernelContext {
	s, _ := g.opsets.Schema(n)
	return ops.NewKernelContext(s, n, g.opsets[n.Domain], nil)
}

// constOf returns the compile-time value of v, or nil.
func (g *gen) constOf(v *ir.Value) *ir.Tensor { return g.prog.ConstOf(v) }

// addWeights stores bytes in the weights at a 64-byte aligned offset,
// once per contents (lower.Weights).
func (g *gen) addWeights(b []byte) int64 { return g.prog.Weights.AddBytes(b) }

// addDerived reserves d.Bytes for weights the loader computes
// (cpuabi.Derived) and returns their offset in the derived area. That area
// follows the stored weights (placeDerived), so the engine's weights
// section is the live weights' prefix, which a loader can map from the
// file as it is.
func (g *gen) addDerived(d cpuabi.Derived) int64 {
	d.Off = g.derivedBytes
	g.derivedBytes = align64(d.Off + d.Bytes)
	g.derived = append(g.derived, d)
	return d.Off
}

// placeDerived ends the stored weights: it pads them to a 64-byte
// boundary, where the derived area starts, gives derivedBase that offset
// and moves the derived ranges there.
func (g *gen) placeDerived() {
	if len(g.derived) == 0 {
		return
	}
	base := g.prog.Weights.Pad()
	g.derivedBaseGlobal().Init = constant.NewInt(i64, base)
	for i := range g.derived {
		g.derived[i].Off += base
	}
}

// derivedBaseGlobal is the constant the code adds to a derived-area offset
// (known only once every stored weight is placed), declared on first use.
func (g *gen) derivedBaseGlobal() *ll.Global {
	if g.derivedBase == nil {
		g.derivedBase = g.mod.NewGlobalDef("kiln_derived_base", constant.NewInt(i64, 0))
		g.derivedBase.Linkage, g.derivedBase.Immutable = enum.LinkageInternal, true
	}
	return g.derivedBase
}

// liveBytes is the size of the blob the code reads: the stored weights
// and the derived area.
func (g *gen) liveBytes() int64 { return g.prog.Weights.Len() + g.derivedBytes }

// addFloats appends float32s to the weights blob.
func (g *gen) addFloats(f []float32) int64 {
	return g.addWeights(ir.FromSlice(ir.Float32, []int64{int64(len(f))}, f).Raw)
}

func (g *gen) constLoc(t *ir.Tensor) loc {
	return loc{space: inWeights, off: g.prog.Weights.Add(t)}
}

// locOf returns where v's data lives.
func (g *gen) locOf(v *ir.Value) loc {
	l := g.baseLoc(v)
	if g.slice != nil {
		l.stride = g.slice.stride[v]
	}
	return l
}

func (g *gen) baseLoc(v *ir.Value) loc {
	pl, err := g.prog.PlaceOf(v)
	if err != nil {
		panic("codegen/cpu: " + err.Error())
	}
	return locOfPlace(pl)
}

// locOfPlace is a program's place as this backend's loc.
func locOfPlace(pl lower.Place) loc {
	switch pl.Space {
	case lower.InWeights:
		return loc{space: inWeights, off: pl.Off}
	case lower.InArena:
		return loc{space: inArena, off: pl.Off}
	}
	return loc{space: inIO, io: pl.Slot, off: pl.Off}
}

// ---- steps ----

// step adds a kernel step function. A serial step runs on thread 0 only
// (for work too small to split).
func (g *gen) step(name string, serial bool, body func(k *kfn)) {
	g.nstep++
	fname := fmt.Sprintf("k%03d_%s", g.nstep, lower.SymbolName(name))
	f := g.mod.NewFunc(fname, types.Void, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp), ll.NewParam("s", i64))
	f.Linkage = enum.LinkageInternal
	k := &kfn{Fn: llvm.NewFn(g.mod, f, f.Params[0], f.Params[1], nil, g.decls), g: g, w: f.Params[2], a: f.Params[3], io: f.Params[4], sample: f.Params[5], bases: map[string]value.Value{}}
	if serial {
		ret, body := f.NewBlock(""), f.NewBlock("")
		k.B.NewCondBr(k.B.NewICmp(enum.IPredNE, k.Tid, c64(0)), ret, body)
		ret.NewRet(nil)
		k.B = body
	}
	body(k)
	k.B.NewRet(nil)
	st := step{f: f, serial: serial, counters: k.counters, node: g.curNode}
	if g.slice != nil {
		st.samples, st.group = g.slice.n, g.slice.group
	}
	g.steps = append(g.steps, st)
	g.kernelNames = append(g.kernelNames, fname)
}

// ptr returns a typed pointer to v's data inside a step.
func (k *kfn) ptr(v *ir.Value) value.Value {
	return k.locPtr(k.g.locOf(v), elemType(v.Type.Elem))
}

func (k *kfn) locPtr(l loc, et types.Type) value.Value {
	key := fmt.Sprintf("%d/%d/%d/%d/%s", l.space, l.off, l.io, l.stride, et)
	if p, ok := k.bases[key]; ok {
		return p
	}
	base, slots := k.a, value.Value(nil)
	switch l.space {
	case inWeights:
		base = k.w
	case inDerived:
		// w + the derived area's offset, at the top of the entry block
		// where EntryPtr puts the pointer computed from it.
		off := ll.NewLoad(i64, k.g.derivedBaseGlobal())
		gp := ll.NewGetElementPtr(i8, k.w, off)
		cast := llvm.EntryPtr(k.F, gp, nil, 0, l.off, k.sample, l.stride, types.NewPointer(et))
		entry := k.F.Blocks[0]
		entry.Insts = append([]ll.Instruction{off, gp}, entry.Insts...)
		k.bases[key] = cast
		return cast
	case inArena:
	default:
		slots = k.io
	}
	cast := llvm.EntryPtr(k.F, base, slots, int64(l.io), l.off, k.sample, l.stride, types.NewPointer(et))
	k.bases[key] = cast
	return cast
}

// scratchPtr returns a float pointer to the current node's scratch plus
// byteOff.
func (k *kfn) scratchPtr(byteOff int64) value.Value {
	st := k.g.curStep
	if st.ScratchBytes == 0 {
		panic("codegen/cpu: node has no scratch")
	}
	return k.locPtr(loc{space: inArena, off: st.Scratch + byteOff}, f32)
}

// noBuiltins marks every function the module defines "no-builtins", so
// LLVM does not turn stores into calls of memset or memcpy (an engine
// links no library): opt's -disable-loop-idiom-all stops the loops it
// recognizes, not the stores it merges, as of a small all-zero output
// (a MatMul over K = 0).
func noBuiltins(m *ll.Module) {
	for _, f := range m.Funcs {
		if len(f.Blocks) > 0 {
			f.FuncAttrs = append(f.FuncAttrs, ll.AttrString("no-builtins"))
		}
	}
}

// writesNothing reports whether every output of n has zero elements: a
// step over them would be empty, so n gets none (nor scratch, nor tiles
// to divide its work into).
func writesNothing(n *ir.Node) bool {
	for _, o := range n.Outputs {
		if o != nil && numel(o) > 0 {
			return false
		}
	}
	return true
}

// readsEmpty reports whether an input of n has zero elements.
func readsEmpty(n *ir.Node) bool {
	for _, v := range n.Inputs {
		if v != nil && numel(v) == 0 {
			return true
		}
	}
	return false
}

// emitEntry writes kiln_run: every step in order, a barrier between steps
// unless both run on thread 0 alone, in parts (see runPartMACs).
func (g *gen) emitEntry() {
	bar := g.emitBarrier()
	clear := g.emitCounterClear()
	f := g.mod.NewFunc(cpuabi.EntryPoint, i64, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp), ll.NewParam("bar", i64p),
		ll.NewParam("part", i64))
	g.parts = g.emitParts(f, entryArgs{f.Params[0], f.Params[1], f.Params[2], f.Params[3], f.Params[4], f.Params[5], nil}, f.Params[6], bar, clear, nil, nil)
	g.emitProfileEntry(bar, clear)
}

// runPartMACs bounds the estimated work of one part of a run. An engine
// runs in parts, each a separate call from the runtime, because Go's
// sysmon takes the P of a thread that stays in one native call past 10 ms
// and then wakes every 20 µs for a millisecond or more: with every core
// running an engine thread, each wake-up preempts one of them at a
// barrier (measured at 2 threads on 2 cores: a chain of identical blocks
// ran its first 5 ms 30% slower once a run outlasted 10 ms; ResNet-50's
// early stages scaled 1.3× instead of 1.8×). 64M multiply-adds take about
// a millisecond on one AVX-512 core, so a part stays far below 10 ms even
// on a core ten times slower. A part boundary costs each thread a return
// to Go and a call, well under a microsecond.
const runPartMACs = 64 << 20

// emitParts writes into entry point f (kiln_run's parameters first) the
// engine's steps cut into parts, and returns how many: called with part k,
// f runs part k and returns the next part's number, or 0 after the last.
// A part ends at a barrier once its steps' estimated work reaches
// runPartMACs; each part re-reads the barrier's sense, which every thread
// sees alike there. setup adds to f's entry block what every part uses.
func (g *gen) emitParts(f *ll.Func, x entryArgs, part value.Value, bar, clear *ll.Func, p *profiler, setup func(entry *ll.Block)) int {
	dispatch := f.NewBlock("")
	if setup != nil {
		setup(dispatch)
	}
	first := f.NewBlock("")
	loadSense := func(b *ll.Block) value.Value {
		ld := b.NewLoad(i64, b.NewGetElementPtr(i64, x.bar, c64(1)))
		ld.Atomic, ld.Ordering, ld.Align = true, enum.AtomicOrderingAcquire, 8
		return ld
	}
	x.sense = loadSense(first)
	g.clearCounters(first, clear, -1, x.tid, x.a)
	if len(g.steps) == 1 && len(g.steps[0].counters) > 0 {
		x.sense = first.NewCall(bar, x.nth, x.bar, x.sense)
	}
	if p != nil {
		p.record(first, 0, first.NewCall(p.counter))
	}
	var starts []*ll.Block
	work := int64(0)
	counted := map[*ir.Node]bool{}
	cut := func(b *ll.Block, from, to int) (*ll.Block, value.Value) {
		for _, st := range g.steps[from:to] {
			if st.node != nil && !counted[st.node] {
				counted[st.node] = true
				work += nodeMACs(st.node)
			}
		}
		if m := g.steps[to-1].mark; m != nil && m.kind == markHost {
			// The run ends for the runtime to compute the host step,
			// which then runs the code on from the next part.
			work = 0
			next := f.NewBlock("")
			starts = append(starts, next)
			b.NewRet(c64(0))
			if h := &g.host[m.host]; h.Resume < 0 {
				h.Resume = int64(len(starts))
			} else if h.Resume != int64(len(starts)) {
				panic("codegen/cpu: the entry points resume a host step at different parts")
			}
			if p != nil {
				// The host step's time is the wait until the code runs on.
				p.record(next, to, next.NewCall(p.counter))
			}
			return next, loadSense(next)
		}
		if work < runPartMACs || !g.barrierAfter(to-1) {
			return b, nil
		}
		work = 0
		next := f.NewBlock("")
		starts = append(starts, next)
		b.NewRet(c64(int64(len(starts))))
		return next, loadSense(next)
	}
	b, _ := g.emitSteps(f, first, x, bar, clear, p, cut)
	b.NewRet(c64(0))
	cases := make([]*ll.Case, len(starts))
	for k, s := range starts {
		cases[k] = ll.NewCase(constant.NewInt(i64, int64(k+1)), s)
	}
	dispatch.NewSwitch(part, first, cases...)
	return len(starts) + 1
}

// inlineStepsUpTo is the most steps whose calls opt may inline into the
// entry point: 2,000 inlined steps took opt -O3 8 s, not inlined 1.8 s
// (10,000: 340 s), and a call per step costs nothing measurable.
const inlineStepsUpTo = 512

// entryArgs are an entry point's parameters and the barrier's sense.
type entryArgs struct {
	tid, nth, w, a, io, bar, sense value.Value
}

// profiler records, in a profiling entry point, the cycle counter after
// each step (profile.go).
type profiler struct {
	counter *ll.Func
	row     value.Value // this thread's row of readings
}

func (p *profiler) record(b *ll.Block, i int, t value.Value) {
	b.NewStore(t, b.NewGetElementPtr(i64, p.row, c64(int64(i))))
}

// emitSteps calls every step in order from block b of entry point f, the
// threads meeting at a barrier between steps (barrierAfter) and the
// finished step's work-stealing counters cleared after it. A run of steps
// compiled per sample for one node (dynamic.go) loops over the samples,
// all of the node's steps for a sample before the next (they share its
// scratch), meeting between steps and samples. With p, the readings of
// the cycle counter go to p's row: after each step, or for a looped run
// the sums of each step's time over the samples. After each step, or each
// such run of steps [from, to), cut may end the block (a part, see
// emitParts) and return the block to go on in and the sense read there;
// nil keeps the block. It returns the block to go on in and the barrier's
// sense.
func (g *gen) emitSteps(f *ll.Func, b *ll.Block, x entryArgs, bar, clear *ll.Func, p *profiler, cut func(b *ll.Block, from, to int) (*ll.Block, value.Value)) (*ll.Block, value.Value) {
	sense := x.sense
	call := func(b *ll.Block, i int, sample value.Value) {
		c := b.NewCall(g.steps[i].f, x.tid, x.nth, x.w, x.a, x.io, sample)
		// Not inlined in the profiling entry, whose step bodies stay
		// shared with kiln_run; nor past inlineStepsUpTo steps, where one
		// entry holding every step's body takes opt superlinear time.
		if p != nil || len(g.steps) > inlineStepsUpTo {
			c.FuncAttrs = append(c.FuncAttrs, enum.FuncAttrNoInline)
		}
	}
	last := func(i int) bool { return i+1 == len(g.steps) }
	var frames []*frame // the Ifs and Loops open at step i (control.go)
	for i := 0; i < len(g.steps); {
		st := g.steps[i]
		if m := st.mark; m != nil {
			if p != nil && len(frames) == 0 && m.kind != markHost {
				// The control step's time goes to its end mark.
				t0 := b.NewCall(p.counter)
				for j := i; j < g.markEnd(i); j++ {
					p.record(b, j+1, t0)
				}
			}
			b, sense = g.emitMark(f, b, x, bar, i, sense, &frames)
			if len(frames) == 0 {
				if p != nil {
					p.record(b, i+1, b.NewCall(p.counter))
				}
				if nb, s := cut(b, i, i+1); s != nil {
					b, sense = nb, s
				}
			}
			i++
			continue
		}
		if st.samples == nil {
			call(b, i, c64(0))
			if g.barrierAfter(i) || p != nil && last(i) {
				sense = b.NewCall(bar, x.nth, x.bar, sense)
				if !last(i) {
					g.clearCounters(b, clear, i, x.tid, x.a)
				}
			}
			if p != nil && len(frames) == 0 {
				p.record(b, i+1, b.NewCall(p.counter))
			}
			if len(frames) == 0 {
				if nb, s := cut(b, i, i+1); s != nil {
					b, sense = nb, s
				}
			}
			i++
			continue
		}
		end := i + 1
		for end < len(g.steps) && g.steps[end].samples == st.samples && g.steps[end].group == st.group {
			end++
		}
		allSerial := true
		for j := i; j < end; j++ {
			allSerial = allSerial && g.steps[j].serial
		}
		kf := llvm.NewFn(g.mod, f, x.tid, x.nth, entryHost{g: g, io: x.io}, g.decls)
		kf.B = b
		n := llvm.NewPoint(kf, nil).Eval(st.samples)
		b = kf.B
		var t0 value.Value
		if p != nil {
			t0 = b.NewCall(p.counter)
		}
		hdr, body, exit := f.NewBlock(""), f.NewBlock(""), f.NewBlock("")
		b.NewBr(hdr)
		smp := hdr.NewPhi(ll.NewIncoming(c64(0), b))
		sph := hdr.NewPhi(ll.NewIncoming(sense, b))
		var accs []*ll.InstPhi // per step of the run, its time so far
		if p != nil {
			for j := i; j < end; j++ {
				accs = append(accs, hdr.NewPhi(ll.NewIncoming(c64(0), b)))
			}
		}
		hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, smp, n), body, exit)
		var cur value.Value = sph
		next := make([]value.Value, len(accs))
		for j := i; j < end; j++ {
			var ta value.Value
			if p != nil {
				ta = body.NewCall(p.counter)
			}
			call(body, j, smp)
			if !allSerial {
				cur = body.NewCall(bar, x.nth, x.bar, cur)
				for _, r := range g.steps[j].counters {
					body.NewCall(clear, x.tid, x.a, c64(r.off), c64(r.bytes))
				}
			}
			if p != nil {
				next[j-i] = body.NewAdd(accs[j-i], body.NewSub(body.NewCall(p.counter), ta))
			}
		}
		smp.Incs = append(smp.Incs, ll.NewIncoming(body.NewAdd(smp, c64(1)), body))
		sph.Incs = append(sph.Incs, ll.NewIncoming(cur, body))
		for j, a := range accs {
			a.Incs = append(a.Incs, ll.NewIncoming(next[j], body))
		}
		body.NewBr(hdr)
		b, sense = exit, sph
		if allSerial && (g.barrierAfter(end-1) || p != nil && last(end-1)) {
			sense = b.NewCall(bar, x.nth, x.bar, sense)
			if !last(end - 1) {
				g.clearCounters(b, clear, end-1, x.tid, x.a)
			}
		}
		if p != nil && len(frames) == 0 {
			// Each step's reading: the run's start plus the steps' sums so far.
			t := t0
			for j := i; j < end; j++ {
				t = b.NewAdd(t, accs[j-i])
				p.record(b, j+1, t)
			}
		}
		if len(frames) == 0 {
			if nb, s := cut(b, i, end); s != nil {
				b, sense = nb, s
			}
		}
		i = end
	}
	return b, sense
}

// entryHost lets an entry point evaluate dims: it reads the dims table.
type entryHost struct {
	g  *gen
	io value.Value
}

func (h entryHost) Ptr(*llvm.Fn, *kernel.Buffer) value.Value {
	panic("codegen/cpu: an entry point reads no buffers")
}

func (h entryHost) Sym(f *llvm.Fn, name string) value.Value {
	slot := f.B.NewLoad(i8p, f.B.NewGetElementPtr(i8p, h.io, c64(int64(h.g.symSlot()))))
	table := f.B.NewBitCast(slot, i64p)
	return f.B.NewLoad(i64, f.B.NewGetElementPtr(i64, table, c64(int64(h.g.symIndex[name]))))
}

// emitBarrier writes a sense-reversing spin barrier over bar[0] (arrival
// count) and bar[1] (sense): i64 kiln_barrier(i64 n, i64* bar, i64 sense).
func (g *gen) emitBarrier() *ll.Func {
	f := g.mod.NewFunc("kiln_barrier", i64, ll.NewParam("n", i64), ll.NewParam("bar", i64p), ll.NewParam("sense", i64))
	f.Linkage = enum.LinkageInternal
	n, bp, sense := f.Params[0], f.Params[1], f.Params[2]
	entry, multi, last, wait, spin, done := f.NewBlock(""), f.NewBlock(""), f.NewBlock(""), f.NewBlock(""), f.NewBlock(""), f.NewBlock("")
	entry.NewCondBr(entry.NewICmp(enum.IPredSLE, n, c64(1)), done, multi)
	flip := multi.NewXor(sense, c64(1))
	old := multi.NewAtomicRMW(enum.AtomicOpAdd, bp, c64(1), enum.AtomicOrderingAcquireRelease)
	multi.NewCondBr(multi.NewICmp(enum.IPredEQ, old, multi.NewSub(n, c64(1))), last, wait)
	st := last.NewStore(c64(0), bp)
	st.Atomic, st.Ordering, st.Align = true, enum.AtomicOrderingMonotonic, 8
	senseP := last.NewGetElementPtr(i64, bp, c64(1))
	st2 := last.NewStore(flip, senseP)
	st2.Atomic, st2.Ordering, st2.Align = true, enum.AtomicOrderingRelease, 8
	last.NewRet(flip)
	// The wait spins with PAUSE and gives the core away (sched_yield) every
	// yieldEvery polls: on a loaded machine the thread being waited for may
	// be runnable but without a core, and pure spinning would hold it off
	// for a whole scheduler slice.
	const yieldEvery = 256
	wait.NewBr(spin)
	polls := spin.NewPhi(ll.NewIncoming(c64(0), wait))
	senseP2 := spin.NewGetElementPtr(i64, bp, c64(1))
	cur := spin.NewLoad(i64, senseP2)
	cur.Atomic, cur.Ordering, cur.Align = true, enum.AtomicOrderingAcquire, 8
	g.spinPause(spin)
	back, giveAway, again := f.NewBlock(""), f.NewBlock(""), f.NewBlock("")
	next := spin.NewAdd(polls, c64(1))
	spin.NewCondBr(spin.NewICmp(enum.IPredEQ, cur, flip), back, again)
	again.NewCondBr(again.NewICmp(enum.IPredEQ, again.NewAnd(next, c64(yieldEvery-1)), c64(0)), giveAway, spin)
	g.schedYield(giveAway)
	giveAway.NewBr(spin)
	polls.Incs = append(polls.Incs, ll.NewIncoming(next, again), ll.NewIncoming(next, giveAway))
	back.NewRet(flip)
	done.NewRet(sense)
	return f
}
