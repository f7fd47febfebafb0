package cpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// Stage is one step of a compilation, run in Stages' order; after it,
// check holds what the stage promises, and Options.Dump receives the
// state (dump).
type Stage struct {
	Name string
	Doc  string
	Run  func(g *gen) error
}

// Stages are a compilation's stages, in order (codegen/lower's driver is
// the model). init sets them: a stage may compile another model
// (measureConv), and a variable's initializer may not refer to itself.
var Stages []Stage

func init() {
	Stages = []Stage{
		{"slots", "gives the graph's inputs and outputs their io slots", (*gen).slots},
		{"support", "folds the nodes whose outputs inference computed and checks that the backend lowers every other one", (*gen).support},
		{"groups", "makes each fusion group one lowered node: its base with what its store applies, or its own lowering (fuse.go)", (*gen).prepareGroups},
		{"conv-algorithms", "chooses each convolution's Winograd variant or none, obeying the algorithm its group records (tune.go)", (*gen).chooseConvAlgorithms},
		{"memory", "places the intermediate values and each node's scratch in the arena (plan.go)", (*gen).planMemory},
		{"lower", "emits each lowered node's step functions, and the copies of constant outputs", (*gen).lowerNodes},
		{"entry", "writes the entry points, the derived weights' code and the ABI's functions", (*gen).emitEntryPoints},
	}
}

// build runs the stages, checking after each.
func (g *gen) build() error {
	for _, s := range Stages {
		if err := s.Run(g); err != nil {
			return err
		}
		if err := g.check(s.Name); err != nil {
			return fmt.Errorf("codegen/cpu: after %s: %w", s.Name, err)
		}
		if g.opts.Dump != nil {
			g.opts.Dump(s.Name, g.dump(s.Name))
		}
	}
	return nil
}

// slots gives the graph's inputs, then its outputs, their io slots.
func (g *gen) slots() error {
	gr := g.model.Graph
	if len(gr.Outputs) == 0 {
		return errors.New("codegen/cpu: the graph has no outputs, so an engine would compute nothing (ONNX requires at least one)")
	}
	slot := 0
	for _, v := range gr.Inputs {
		d, ok := v.Type.Shape.Ints()
		if !ok {
			return fmt.Errorf("codegen/cpu: input %q has shape %s: the CPU backend needs static shapes", v.Name, v.Type)
		}
		g.locs[v] = loc{space: inIO, io: slot}
		g.inputs = append(g.inputs, IO{Name: v.Name, DType: v.Type.Elem, Dims: d, DimNames: g.dimNames(v), Index: slot})
		slot++
	}
	for _, v := range gr.Outputs {
		d, ok := v.Type.Shape.Ints()
		if !ok {
			return fmt.Errorf("codegen/cpu: output %q has shape %s: the CPU backend needs static shapes", v.Name, v.Type)
		}
		if g.isGraphInput(v) {
			return fmt.Errorf("codegen/cpu: output %q is graph input %q: an engine binds each name once (compute the output with a node, e.g. an Identity writing a new name)", v.Name, v.Name)
		}
		if g.isOutput[v] {
			return fmt.Errorf("codegen/cpu: output %q is listed twice: an engine binds each name once", v.Name)
		}
		g.isOutput[v] = true
		g.locs[v] = loc{space: inIO, io: slot}
		g.outputs = append(g.outputs, IO{Name: v.Name, DType: v.Type.Elem, Dims: d, DimNames: g.dimNames(v), Index: slot})
		slot++
	}
	return nil
}

func (g *gen) support() error { return g.checkSupport(g.isOutput) }

// lowerNodes emits every lowered node's steps in order, then a copy for
// each graph output known at compile time.
func (g *gen) lowerNodes() error {
	g.counterBase = align64(g.arenaBytes)
	for _, n := range g.nodes {
		p := g.plan(n)
		if p.folded || g.alias[n.Outputs[0]] != nil || p.inPlace || writesNothing(n) {
			continue
		}
		g.curNode = n
		lower := func() error { return g.lowerKernelOp(n) }
		if info := g.handInfo(n); info != nil {
			lower = func() error { return info.lower(g, n) }
		}
		if p.lower != nil {
			lower = p.lower
		}
		if g.handInfo(n) != nil || p.lower != nil && !p.layered {
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
		if err != nil {
			return fmt.Errorf("codegen/cpu: %s: %w", n, err)
		}
	}
	for _, v := range g.model.Graph.Outputs {
		if t := g.constOf(v); t != nil && (v.Producer == nil || g.plan(v.Producer).folded) {
			src := g.constLoc(t)
			dst := g.locs[v]
			n := int64(len(t.Raw))
			g.step("const_out", true, func(k *kfn) {
				s, d := k.locPtr(src, i8), k.locPtr(dst, i8)
				k.loopN(0, n, func(i value.Value) { k.store(k.load(s, i), d, i) })
			})
		}
	}
	return nil
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

// check verifies what stage promises, naming the first node that breaks
// it.
func (g *gen) check(stage string) error {
	switch stage {
	case "slots":
		return g.checkSlots()
	case "support":
		return g.checkFolded()
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

// checkSlots: each input and output has the io slot it is listed with.
func (g *gen) checkSlots() error {
	gr := g.model.Graph
	values := slices.Concat(gr.Inputs, gr.Outputs)
	for i, io := range slices.Concat(g.inputs, g.outputs) {
		if l, ok := g.locs[values[i]]; !ok || l.space != inIO || l.io != io.Index {
			return fmt.Errorf("%q has no io slot %d", io.Name, io.Index)
		}
	}
	return nil
}

// checkFolded: a folded node's outputs are all known, and none is a
// graph output (which a step must write).
func (g *gen) checkFolded() error {
	for _, n := range g.nodes {
		if !g.plan(n).folded {
			continue
		}
		for _, o := range n.Outputs {
			if o != nil && (g.known[o] == nil || g.isOutput[o]) {
				return fmt.Errorf("%s is folded, but its output %q is not known at compile time or is a graph output", n, o.Name)
			}
		}
	}
	return nil
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
		conv := !p.folded && n.Domain == "" && n.OpType == "Conv" && g.handInfo(n) != nil
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
	for _, n := range g.nodes {
		p := g.plan(n)
		if p.folded {
			continue
		}
		for _, v := range slices.Concat(g.readsFromMemory(n), g.writesOf(n)) {
			if v == nil {
				continue
			}
			l, ok := g.planned(v)
			if !ok {
				return fmt.Errorf("%s: value %q has no location", n, v.Name)
			}
			if end := l.off + int64(ir.RawLen(v.Type.Elem, numel(v))); l.space == inArena && end > g.arenaBytes {
				return fmt.Errorf("%s: value %q at [%d, %d) is outside the arena of %d bytes", n, v.Name, l.off, end, g.arenaBytes)
			}
		}
		if p.scratchBytes == 0 {
			continue
		}
		if !p.hasScratch {
			return fmt.Errorf("%s needs %d bytes of scratch and has none", n, p.scratchBytes)
		}
		if end := p.scratch + p.scratchBytes; end > g.arenaBytes {
			return fmt.Errorf("%s: scratch [%d, %d) is outside the arena of %d bytes", n, p.scratch, end, g.arenaBytes)
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
		run = run || f.Name() == "kiln_run" && len(f.Blocks) > 0
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
	for g.alias[v] != nil {
		v = g.alias[v]
	}
	if p, ok := g.within[v]; ok {
		l, ok := g.planned(p.Into)
		l.off += p.Offset
		return l, ok
	}
	if l, ok := g.locs[v]; ok {
		return l, true
	}
	return loc{space: inWeights, off: -1}, g.constOf(v) != nil
}

// ---- dump ----

// dump lists the state after stage: the slots, every lowered node in
// order with its plan and the places of what it reads and writes, and
// once lowered the steps.
func (g *gen) dump(stage string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "after %s: %d nodes, arena %d bytes (all tensors %d), weights %d bytes, %d steps\n",
		stage, len(g.nodes), g.arenaBytes, g.tensorBytes, g.weights.Len(), len(g.steps))
	for _, io := range g.inputs {
		fmt.Fprintf(&b, "input  %d %s %v\n", io.Index, ir.QuoteName(io.Name), io.Dims)
	}
	for _, io := range g.outputs {
		fmt.Fprintf(&b, "output %d %s %v\n", io.Index, ir.QuoteName(io.Name), io.Dims)
	}
	grouped := stage != "slots" && stage != "support"
	for i, n := range g.nodes {
		fmt.Fprintf(&b, "node %d: %s", i, n)
		if grouped {
			fmt.Fprintf(&b, ": %s", g.lowering(n))
		} else if g.plan(n).folded {
			b.WriteString(": folded")
		}
		b.WriteString(g.planText(n))
		b.WriteByte('\n')
		if g.plan(n).folded {
			continue
		}
		if grouped {
			fmt.Fprintf(&b, "  reads %s; writes %s\n", g.placesText(g.readsFromMemory(n)), g.placesText(g.writesOf(n)))
		}
	}
	for i, st := range g.steps {
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
	if p.hasScratch {
		parts = append(parts, fmt.Sprintf("scratch %d bytes at arena+%d", p.scratchBytes, p.scratch))
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
