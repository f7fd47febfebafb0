package cpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// The CPU compiles through codegen/lower's driver, as every target does:
// its stages ("slots", "fold", "support", "inline", this backend's
// "groups" and "conv-algorithms", then "memory") make a lower.Program
// whose steps are the nodes lowered here: hand-written rows and fusion
// groups as Micro parts carrying their nodePlan (Claim), the rest as
// kernel-layer kernels. This backend's own last stages emit the program:
// "lower" writes each step's functions, "entry" the entry points. After
// each stage the driver's Program.Check and this backend's check hold,
// and Options.Dump receives the state (dump).

// emitStages are the stages run after the driver's.
var emitStages = []lower.TargetStage{
	{Name: "lower", Doc: "emits each step's functions, and the copies of constant outputs"},
	{Name: "entry", Doc: "writes the entry points, the derived weights' code and the ABI's functions"},
}

// StageNames are a compilation's stages, in order.
func StageNames() []string {
	names := lower.StageNames(lowerTarget{})
	for _, s := range emitStages {
		names = append(names, s.Name)
	}
	return names
}

// lowerTarget is this backend as the driver's target (lower.Target and
// the optional interfaces it implements).
type lowerTarget struct{ g *gen }

func (lowerTarget) Name() string       { return "codegen/cpu" }
func (lowerTarget) Align() int64       { return 64 }
func (lowerTarget) SlotsInArena() bool { return false }

// Micro: the hand-written kernels are claimed whole (Claim).
func (lowerTarget) Micro(*ir.Node, *kernel.Ctx, []*kernel.Buffer, *kernel.Buffer) any { return nil }

// ControlFlow: the entry point branches and loops (control.go).
func (lowerTarget) ControlFlow() {}

func (t lowerTarget) Claim(n *ir.Node) (any, error)                       { return t.g.claim(n) }
func (t lowerTarget) View(n *ir.Node) bool                                { return t.g.isView(n) }
func (t lowerTarget) Dims(v *ir.Value) []*kernel.Expr                     { return t.g.symDims(v) }
func (t lowerTarget) Maxima() map[string]int64                            { return t.g.maxEnv() }
func (t lowerTarget) Check(stage string) error                            { return t.g.check(stage) }
func (t lowerTarget) MemoryHooks(h passes.MemoryHooks) passes.MemoryHooks { return t.g.memoryHooks(h) }

func (t lowerTarget) Stages() []lower.TargetStage {
	return []lower.TargetStage{
		{Name: "groups", Doc: "makes each fusion group one lowered node: its base with what its store applies, or its own lowering (fuse.go)",
			Run: func(*lower.Program) error { return t.g.prepareGroups() }},
		{Name: "conv-algorithms", Doc: "chooses each convolution's Winograd variant or none, obeying the algorithm its group records (tune.go)",
			Run: func(*lower.Program) error { return t.g.chooseConvAlgorithms() }},
	}
}

// build runs the stages, checking after each.
func (g *gen) build() error { return g.buildUntil("") }

// buildUntil runs the stages up to stop (all of them for "").
func (g *gen) buildUntil(stop string) error {
	opts := lower.Options{Limits: g.opts.Limits, StopAfter: stop}
	if g.opts.Dump != nil {
		opts.Dump = func(stage string, _ *lower.Program) { g.opts.Dump(stage, g.dump(stage)) }
	}
	if err := lower.Lower(g.prog, lowerTarget{g}, opts); err != nil {
		return err
	}
	if stop != "" && !slices.ContainsFunc(emitStages, func(s lower.TargetStage) bool { return s.Name == stop }) {
		return nil
	}
	g.ioRecords()
	g.arenaBytes, g.tensorBytes = g.prog.ArenaBytes, g.prog.TensorBytes
	for _, s := range emitStages {
		var err error
		switch s.Name {
		case "lower":
			err = g.lowerSteps()
		case "entry":
			err = g.emitEntryPoints()
		}
		if err != nil {
			return err
		}
		if err := g.check(s.Name); err != nil {
			return fmt.Errorf("codegen/cpu: after %s: %w", s.Name, err)
		}
		if g.opts.Dump != nil {
			g.opts.Dump(s.Name, g.dump(s.Name))
		}
		if s.Name == stop {
			break
		}
	}
	return nil
}

// ioRecords lists the program's slots as the engine's inputs and
// outputs.
func (g *gen) ioRecords() {
	rec := func(s lower.Slot) IO {
		kinds, dtype := cpuabi.Kinds(s.Value.Type)
		return IO{Name: s.Value.Name, DType: dtype, Dims: dimsOf(s.Value), DimNames: g.dimNames(s.Value), Index: s.Index, Host: s.Host, Kinds: kinds}
	}
	for _, s := range g.prog.Inputs {
		g.inputs = append(g.inputs, rec(s))
	}
	for _, s := range g.prog.Outputs {
		g.outputs = append(g.outputs, rec(s))
	}
}

// claim is how this backend computes node n (lower.Claimer): a fusion
// group or a hand-written row is claimed with its plan; an op the kernel
// layer defines is left to the driver; anything else is unsupported.
func (g *gen) claim(n *ir.Node) (any, error) {
	if !isGroup(n) && g.handInfo(n) == nil && kernel.Lookup(n.OpType) != nil {
		return nil, nil
	}
	if ue := g.supports(n); ue != nil {
		return nil, ue
	}
	for _, o := range n.Outputs {
		if o != nil && !o.Type.Shape.IsStatic() {
			return nil, &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain],
				Reason: "an output's shape is not static: it depends on the data, or on a dim no --shape or --max bounds"}
		}
	}
	if info := g.handInfo(n); !isGroup(n) && kernel.Lookup(n.OpType) != nil && (info == nil || !info.view) {
		if _, err := g.sliceLead(n); err != nil {
			// The hand-written kernel runs per sample of a dynamic leading
			// dim only; the kernel layer reads dynamic dims anywhere.
			return nil, nil
		}
	}
	return claimed{g, n}, nil
}

// claimed is a claimed node as its step's Micro part carries it: its
// listing (cc build --emit kernels) is the node's lowering and plan.
type claimed struct {
	g *gen
	n *ir.Node
}

func (c claimed) String() string {
	return strings.TrimPrefix(c.g.lowering(c.n)+c.g.planText(c.n), "; ")
}

// lowerSteps emits every step's functions in order, then a copy for each
// graph output known at compile time.
func (g *gen) lowerSteps() error {
	g.counterBase = align64(g.arenaBytes)
	return g.lowerList(g.prog.Steps)
}

// lowerList emits steps in order: a control step's sub-programs between
// its marks (control.go), a step of the driver's own kernels (a Loop's
// bookkeeping) as they are, a node's step by its lowering.
func (g *gen) lowerList(steps []*lower.Step) error {
	for _, st := range steps {
		switch {
		case st.Const != nil:
			g.emitConstOut(st.Const)
			continue
		case st.Control != nil:
			if err := g.lowerControl(st); err != nil {
				return err
			}
			continue
		case st.Host:
			if err := g.addHostStep(st); err != nil {
				return err
			}
			continue
		case st.Node == nil:
			g.curStep = st
			for _, pt := range st.Parts {
				g.emitKernel(pt.Kernel, nil)
			}
			continue
		}
		n := st.Node
		p := g.plan(n)
		if g.prog.Alias[n.Outputs[0]] != nil || g.prog.InPlace[n] || writesNothing(n) {
			continue
		}
		g.curNode, g.curStep = n, st
		lower := func() error { return g.lowerKernelOp(n) }
		hand := g.handInfo(n)
		if onKernels(st) {
			hand = nil // claim left it to the kernel layer (dynamic dims)
		}
		// A view the planner could not alias (a graph output) copies flat
		// (lowerCopy, a kernel over its symbolic element count), whatever
		// its dynamic dims: it needs no per-sample run.
		flatCopy := false
		if hand != nil && hand.view {
			_, err := g.sliceLead(n)
			flatCopy = err != nil
		}
		if hand != nil {
			lower = func() error { return hand.lower(g, n) }
		}
		if p.lower != nil {
			lower = p.lower
		}
		if hand != nil && !flatCopy || p.lower != nil && !p.layered {
			// Hand-written kernels take static shapes: a node touching
			// dynamic dims runs per sample (dynamic.go).
			sl, err := g.sliceFor(n)
			if err != nil {
				return fmt.Errorf("codegen/cpu: %s: %w", n, err)
			}
			g.slice = sl
		}
		err := lower()
		if g.slice != nil {
			g.slice.done()
			g.slice = nil
		}
		if err == nil {
			err, g.sliceErr = g.sliceErr, nil
		}
		if err != nil {
			return fmt.Errorf("codegen/cpu: %s: %w", n, err)
		}
	}
	return nil
}

// emitConstOut copies graph output v, known at compile time, from the
// weights.
func (g *gen) emitConstOut(v *ir.Value) {
	t := g.constOf(v)
	src, dst := g.constLoc(t), g.baseLoc(v)
	n := int64(len(t.Raw))
	g.step("const_out", true, func(k *kfn) {
		s, d := k.locPtr(src, i8), k.locPtr(dst, i8)
		k.loopN(0, n, func(i value.Value) { k.store(k.load(s, i), d, i) })
	})
}

// emitEntryPoints places the work-stealing counters past the arena and
// writes kiln_run (and its profiling twin), kiln_derive and the ABI.
func (g *gen) emitEntryPoints() error {
	if g.counterBytes > 0 {
		g.arenaBytes = g.counterBase + g.counterBytes
	}
	g.emitEntry()
	g.placeDerived()
	g.emitDerive()
	g.emitABI()
	noBuiltins(g.mod)
	return nil
}

// ---- checks ----

// check verifies what stage promises of this backend's records, naming
// the first node that breaks it (the driver's Program.Check verifies the
// program itself).
func (g *gen) check(stage string) error {
	switch stage {
	case "slots", "fold", "support", "inline":
		return nil
	case "groups":
		return g.checkGroups()
	case "conv-algorithms":
		return g.checkConvAlgorithms()
	case "memory":
		return g.checkMemory()
	case "lower":
		return g.checkSteps()
	case "entry":
		return g.checkModule()
	}
	return fmt.Errorf("no stage %q", stage)
}

// checkGroups: every node is lowered once and has a known lowering; the
// epilogue pieces sit on the nodes that take them.
func (g *gen) checkGroups() error {
	seen := map[*ir.Node]bool{}
	for _, n := range g.nodes {
		if seen[n] {
			return fmt.Errorf("%s is lowered twice", n)
		}
		seen[n] = true
		p := g.plan(n)
		if g.lowering(n) == "" {
			return fmt.Errorf("%s has no lowering", n)
		}
		base := n.Domain == "" && slices.Contains([]string{"Conv", "Gemm", "MatMul"}, n.OpType)
		switch {
		case !base && (p.out != nil || p.biasAdd != nil || p.residualAdd != nil || p.clamp != nil || p.clampExpr != nil):
			return fmt.Errorf("%s has an epilogue, which only a Conv, Gemm or MatMul takes", n)
		case p.clamp != nil && p.clampExpr != nil:
			return fmt.Errorf("%s has two activations", n)
		case p.biasAdd != nil && n.OpType != "MatMul":
			return fmt.Errorf("%s has a bias Add, which only a MatMul takes", n)
		case p.expansion != nil && (n.OpType != "Conv" || p.lower == nil):
			return fmt.Errorf("%s has an expansion, but is not a depthwise Conv lowering it", n)
		}
	}
	return nil
}

// checkConvAlgorithms: only the hand-written convolutions have a Winograd
// variant, one of those that may run them, and a recorded algorithm is the
// one they run.
func (g *gen) checkConvAlgorithms() error {
	for _, n := range g.nodes {
		p := g.plan(n)
		conv := n.Domain == "" && n.OpType == "Conv" && g.handInfo(n) != nil
		if !conv {
			if p.winograd != nil {
				return fmt.Errorf("%s has a Winograd variant, but is not a convolution lowered by hand", n)
			}
			continue
		}
		c, err := g.convGeom(n)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if s := p.winograd; s != nil && winogradNamed(c, s.name) != s {
			return fmt.Errorf("%s runs as Winograd %s, which does not apply", n, s.name)
		}
		if got := g.convAlgorithm(c, p.winograd); p.algorithm != "" && p.algorithm != algoExpandDW && got != p.algorithm {
			return fmt.Errorf("%s runs as %q, but its group asks for %q", n, got, p.algorithm)
		}
	}
	return nil
}

// checkMemory: every value a node reads or writes has a place, within
// the arena where it is there, and every node's scratch fits the arena.
func (g *gen) checkMemory() error {
	arena := g.prog.ArenaBytes
	for _, n := range g.nodes {
		p := g.plan(n)
		for _, v := range slices.Concat(g.readsFromMemory(n), g.writesOf(n)) {
			if v == nil {
				continue
			}
			l, ok := g.planned(v)
			if !ok {
				return fmt.Errorf("%s: value %q has no location", n, v.Name)
			}
			if end := l.off + int64(ir.RawLen(v.Type.Elem, numel(v))); l.space == inArena && end > arena {
				return fmt.Errorf("%s: value %q at [%d, %d) is outside the arena of %d bytes", n, v.Name, l.off, end, arena)
			}
		}
		if p.scratchBytes == 0 {
			continue
		}
		st := p.step
		if st.ScratchBytes < p.scratchBytes {
			return fmt.Errorf("%s needs %d bytes of scratch and has %d", n, p.scratchBytes, st.ScratchBytes)
		}
		if end := st.Scratch + p.scratchBytes; end > arena {
			return fmt.Errorf("%s: scratch [%d, %d) is outside the arena of %d bytes", n, st.Scratch, end, arena)
		}
	}
	return nil
}

// checkSteps: every step function's blocks end in a terminator.
func (g *gen) checkSteps() error {
	if len(g.kernelNames) != len(g.steps) {
		return fmt.Errorf("%d steps but %d kernel names", len(g.steps), len(g.kernelNames))
	}
	for _, st := range g.steps {
		if st.mark != nil {
			continue
		}
		if err := terminated(st.f); err != nil {
			return fmt.Errorf("%s: %w", st.node, err)
		}
	}
	return nil
}

// checkModule: every function the module defines ends each block in a
// terminator, and kiln_run is one of them.
func (g *gen) checkModule() error {
	run := false
	for _, f := range g.mod.Funcs {
		run = run || f.Name() == cpuabi.EntryPoint && len(f.Blocks) > 0
		if err := terminated(f); err != nil {
			return err
		}
	}
	if !run {
		return errors.New("the module defines no kiln_run")
	}
	return nil
}

// terminated reports a block of f that does not end in a terminator.
func terminated(f *ll.Func) error {
	for i, b := range f.Blocks {
		if b.Term == nil {
			return fmt.Errorf("function %s: block %d has no terminator", f.Name(), i)
		}
	}
	return nil
}

// readsFromMemory are the values n reads (reads) less a conv-dw group's
// expanded tensor, which its depthwise Conv computes in its scratch.
func (g *gen) readsFromMemory(n *ir.Node) []*ir.Value {
	vs := g.reads(n)
	if g.plan(n).expansion != nil {
		vs = vs[1:]
	}
	return vs
}

// planned returns where v lives without placing a constant (baseLoc
// places one in the weights on first use: its off is then -1).
func (g *gen) planned(v *ir.Value) (loc, bool) {
	pl, err := g.prog.Planned(v)
	if err != nil {
		return loc{}, false
	}
	if pl.Space == lower.InWeights && !g.prog.Stored(v) {
		return loc{space: inWeights, off: -1}, true
	}
	return locOfPlace(pl), true
}

// ---- dump ----

// dump lists the state after stage: the slots, every lowered node in
// order with its plan and the places of what it reads and writes, and
// once lowered the steps.
func (g *gen) dump(stage string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "after %s: %d nodes, arena %d bytes (all tensors %d), weights %d bytes, %d steps\n",
		stage, len(g.nodes), max(g.arenaBytes, g.prog.ArenaBytes), max(g.tensorBytes, g.prog.TensorBytes), g.prog.Weights.Len(), len(g.steps))
	for _, s := range g.prog.Inputs {
		fmt.Fprintf(&b, "input  %d %s %v\n", s.Index, ir.QuoteName(s.Value.Name), dimsOf(s.Value))
	}
	for _, s := range g.prog.Outputs {
		fmt.Fprintf(&b, "output %d %s %v\n", s.Index, ir.QuoteName(s.Value.Name), dimsOf(s.Value))
	}
	grouped := !slices.Contains([]string{"slots", "fold", "support", "inline"}, stage)
	for i, n := range g.nodes {
		fmt.Fprintf(&b, "node %d: %s", i, n)
		folded := g.prog.Folded(n)
		if grouped {
			fmt.Fprintf(&b, ": %s", g.lowering(n))
		} else if folded {
			b.WriteString(": folded")
		}
		b.WriteString(g.planText(n))
		b.WriteByte('\n')
		if folded {
			continue
		}
		if grouped {
			fmt.Fprintf(&b, "  reads %s; writes %s\n", g.placesText(g.readsFromMemory(n)), g.placesText(g.writesOf(n)))
		}
	}
	for i, st := range g.steps {
		if st.mark != nil {
			fmt.Fprintf(&b, "step %d: %s\n", i, markNames[st.mark.kind])
			continue
		}
		fmt.Fprintf(&b, "step %d: %s", i, st.f.Name())
		if st.node != nil {
			fmt.Fprintf(&b, " for %s", st.node)
		}
		if st.serial {
			b.WriteString(" (thread 0)")
		}
		if st.samples != nil {
			fmt.Fprintf(&b, " (per sample, %s times)", st.samples)
		}
		b.WriteByte('\n')
	}
	if stage == "entry" {
		fmt.Fprintf(&b, "parts %d\n", g.parts)
	}
	return b.String()
}

// planText is the pieces of n's plan that are set.
func (g *gen) planText(n *ir.Node) string {
	p := g.plan(n)
	var parts []string
	add := func(what string, m *ir.Node) {
		if m != nil {
			parts = append(parts, what+" "+m.String())
		}
	}
	add("bias", p.biasAdd)
	add("residual", p.residualAdd)
	add("clamp", p.clamp)
	if p.clampExpr != nil {
		parts = append(parts, "activation "+p.clampExpr.String())
	}
	if p.out != nil {
		parts = append(parts, "out "+ir.QuoteName(p.out.Name))
	}
	if a := p.expansion; a != nil {
		s := "expansion " + a.String()
		if q := g.plan(a); q.clamp != nil {
			s += " clamp " + q.clamp.String()
		} else if q.clampExpr != nil {
			s += " activation " + q.clampExpr.String()
		}
		parts = append(parts, s)
	}
	if p.algorithm != "" {
		parts = append(parts, "recorded algorithm "+p.algorithm)
	}
	if p.winograd != nil {
		parts = append(parts, "winograd "+p.winograd.name)
	}
	if p.hasGroupScratch {
		parts = append(parts, fmt.Sprintf("group scratch %d bytes", p.groupScratch))
	}
	if st := p.step; st != nil && st.ScratchBytes > 0 {
		parts = append(parts, fmt.Sprintf("scratch %d bytes at arena+%d", p.scratchBytes, st.Scratch))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// placesText lists values with where they live.
func (g *gen) placesText(vs []*ir.Value) string {
	var out []string
	for i, v := range vs {
		if v == nil || slices.Contains(vs[:i], v) {
			continue
		}
		l, ok := g.planned(v)
		out = append(out, ir.QuoteName(v.Name)+" "+placeText(l, ok))
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// placeText names a place (planned's): "io[1]", "arena+128",
// "weights+64", "weights" (a constant placed when first read) or
// "nowhere".
func placeText(l loc, placed bool) string {
	switch {
	case !placed:
		return "nowhere"
	case l.space == inIO:
		return fmt.Sprintf("io[%d]", l.io)
	case l.space == inArena:
		return fmt.Sprintf("arena+%d", l.off)
	case l.space == inDerived:
		return fmt.Sprintf("derived+%d", l.off)
	case l.off < 0:
		return "weights"
	}
	return fmt.Sprintf("weights+%d", l.off)
}
