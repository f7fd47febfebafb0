package lower

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
)

// Target is what the driver asks of the backend it lowers for.
type Target interface {
	// Name prefixes the driver's errors ("codegen/cuda").
	Name() string
	// Align is the alignment of every buffer in the arena and the weights.
	Align() int64
	// SlotsInArena places the graph's inputs and outputs at the arena's
	// start (a GPU, whose kernels read no host pointers); otherwise they
	// stay in the caller's buffers (InIO).
	SlotsInArena() bool
	// Micro is the target's micro-kernel for node n (c its kernel-layer
	// context, in and out its buffers), or nil when n runs on its
	// kernel-layer kernels.
	Micro(n *ir.Node, c *kernel.Ctx, in []*kernel.Buffer, out *kernel.Buffer) any
}

// A Target may implement the interfaces below to lower more of the graph
// its own way; the driver asks for each with a type assertion, as Go's
// io package does for WriterTo.

// Claimer is a target that computes some nodes with code of its own
// (hand-written kernels, whole fusion groups) instead of the kernel
// layer's kernels.
type Claimer interface {
	// Claim returns the target's record of how it computes node n (the
	// step's one Micro part carries it, its Ctx nil), nil to leave n to
	// the driver, or an error (an *ops.UnsupportedError names what is
	// missing) when the target cannot compute n at all.
	Claim(n *ir.Node) (any, error)
}

// Viewer decides which nodes may share their input's bytes (default: the
// ops that only move data, ops.MovementOf). A Viewer's view nodes keep
// their kernels, which run when the view cannot share (a graph output).
type Viewer interface {
	View(n *ir.Node) bool
}

// Shaper gives buffers symbolic dims: a target compiling dynamic dims
// sees each value's type at the dims' maxima and its buffer's dims as
// expressions of the symbols.
type Shaper interface {
	// Dims is v's dims as expressions, or nil when v's type says them.
	Dims(v *ir.Value) []*kernel.Expr
	// Maxima maps each symbol to its largest value (scratch is sized so).
	Maxima() map[string]int64
}

// Stager is a target with stages of its own, run after "inline" and
// before "memory", and checks of its own after every stage.
type Stager interface {
	Stages() []TargetStage
	// Check verifies, after stage (the driver's or the target's), what
	// the target's records promise.
	Check(stage string) error
}

// TargetStage is a stage a Stager adds.
type TargetStage struct {
	Name, Doc string
	Run       func(p *Program) error
}

// MemoryPlanner is a target with a say in the memory plan: which values
// its steps read and write, which nodes are views, their scratch, and
// Concats whose inputs are written in place.
type MemoryPlanner interface {
	// MemoryHooks returns the hooks to plan with, given the driver's.
	MemoryHooks(h passes.MemoryHooks) passes.MemoryHooks
}

// Options are the driver's settings.
type Options struct {
	Limits ir.Limits
	// StopAfter, when set, ends the lowering after that stage (checked):
	// the program is as far as it got.
	StopAfter string
	// Dump, when set, receives the program after each stage.
	Dump func(stage string, p *Program)
}

// Stage is one step of the driver, run in Stages' order, after which
// Program.Check holds.
type Stage struct {
	Name string
	Doc  string
	Run  func(d *driver) error
}

// Stages are the driver's stages, in order.
var Stages = []Stage{
	{"slots", "gives the graph's inputs and outputs their slots", (*driver).slots},
	{"fold", "drops the nodes whose outputs are known at compile time", (*driver).fold},
	{"support", "builds every node's kernels or the target's micro-kernel, listing what cannot be compiled", (*driver).support},
	{"inline", "makes each node one step; a fusion group's maps are inlined into their readers and its last map into the store before it", (*driver).inline},
	{"memory", "places the intermediate values and each step's scratch in the arena", (*driver).memory},
}

// driver is one lowering's state between stages.
type driver struct {
	t    Target
	opts Options
	p    *Program
	out  map[*ir.Value]bool // the graph's outputs
	// built holds each node's parts before inlining, by node; bodies the
	// parts of each fusion group's body nodes.
	built  map[*ir.Node]*Step
	bodies map[*ir.Node][]*Step
	views  map[*ir.Node]bool
	// planAs is the node the memory plan sees for a step without one (a
	// Loop's scan store, which reads its value).
	planAs map[*Step]*ir.Node
	// top holds the graph's own nodes (not a subgraph's).
	top map[*ir.Node]bool
}

// stages is the order the driver runs: its own, with a Stager's before
// "memory".
func (d *driver) stages() []Stage {
	st, ok := d.t.(Stager)
	if !ok {
		return Stages
	}
	var out []Stage
	for _, s := range Stages {
		if s.Name == "memory" {
			for _, ts := range st.Stages() {
				run := ts.Run
				out = append(out, Stage{ts.Name, ts.Doc, func(d *driver) error { return run(d.p) }})
			}
		}
		out = append(out, s)
	}
	return out
}

// StageNames lists the stages the driver runs for t, in order.
func StageNames(t Target) []string {
	var names []string
	for _, s := range (&driver{t: t}).stages() {
		names = append(names, s.Name)
	}
	return names
}

// Build lowers m (shapes static, passes run) for target t.
func Build(m *ir.Model, t Target, opts Options) (*Program, error) {
	p, err := NewProgram(m, t, opts.Limits)
	if err != nil {
		return nil, err
	}
	if err := Lower(p, t, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// NewProgram verifies m, infers what is known at compile time and
// starts m's program for target t, before any stage: a target whose
// hooks read the program (its buffers, what is known) makes it first.
func NewProgram(m *ir.Model, t Target, limits ir.Limits) (*Program, error) {
	if err := m.Verify(); err != nil {
		return nil, err
	}
	known, err := ops.InferShapesWithin(m, limits)
	if err != nil {
		return nil, err
	}
	p := &Program{Model: m, Known: known, Weights: NewWeights(t.Align()), Places: map[*ir.Value]Place{},
		Alias: map[*ir.Value]*ir.Value{}, Within: map[*ir.Value]passes.Placement{}, InPlace: map[*ir.Node]bool{},
		bufs: map[*ir.Value]*kernel.Buffer{}, skip: map[*ir.Node]bool{}, scratch: map[*ir.Value]bool{}}
	if sh, ok := t.(Shaper); ok {
		p.shaper = sh
	}
	return p, nil
}

// Lower runs the stages on p (NewProgram's) for target t.
func Lower(p *Program, t Target, opts Options) error {
	m := p.Model
	d := &driver{t: t, opts: opts, p: p, out: map[*ir.Value]bool{}, built: map[*ir.Node]*Step{},
		bodies: map[*ir.Node][]*Step{}, views: map[*ir.Node]bool{}, planAs: map[*Step]*ir.Node{}, top: map[*ir.Node]bool{}}
	for _, v := range m.Graph.Outputs {
		d.out[v] = true
	}
	for _, n := range m.Graph.Nodes {
		d.top[n] = true
	}
	stager, _ := t.(Stager)
	for _, s := range d.stages() {
		if err := s.Run(d); err != nil {
			var list ops.UnsupportedErrors
			if errors.As(err, &list) {
				return fmt.Errorf("%s: %w", t.Name(), err)
			}
			return fmt.Errorf("%s: %s: %w", t.Name(), s.Name, err)
		}
		err := p.Check(s.Name)
		if err == nil && stager != nil {
			err = stager.Check(s.Name)
		}
		if err != nil {
			return fmt.Errorf("%s: after %s: %w", t.Name(), s.Name, err)
		}
		if opts.Dump != nil {
			opts.Dump(s.Name, p)
		}
		if s.Name == opts.StopAfter {
			break
		}
	}
	return nil
}

func (d *driver) slots() error {
	g := d.p.Model.Graph
	if len(g.Outputs) == 0 {
		return errors.New("the graph has no outputs, so an engine would compute nothing (ONNX requires at least one)")
	}
	var ioOff int64
	_, hosts := d.t.(HostRunner)
	for _, v := range append(append([]*ir.Value{}, g.Inputs...), g.Outputs...) {
		if ops.HostValue(v.Type) && !hosts {
			return &ops.UnsupportedError{Op: "value " + v.Name,
				Reason: fmt.Sprintf("a %s, which engines keep on the host, and this target runs no host steps (the CPU targets do)", v.Type)}
		}
	}
	add := func(v *ir.Value, list *[]Slot) {
		d0, _ := v.Type.Shape.Ints()
		s := Slot{Value: v, Index: len(d.p.Inputs) + len(d.p.Outputs), Bytes: int64(ir.RawLen(v.Type.Elem, ir.Product(d0)))}
		if d.hostSlot(v) {
			s.Host, s.Bytes = true, 0
			d.p.Places[v] = Place{Space: InHost, Slot: s.Index}
		} else if d.t.SlotsInArena() {
			d.p.Places[v] = Place{Space: InArena, Off: ioOff}
			ioOff += alignUp(s.Bytes, d.t.Align())
		} else {
			d.p.Places[v] = Place{Space: InIO, Slot: s.Index}
		}
		*list = append(*list, s)
	}
	for _, v := range g.Inputs {
		if !v.Type.Shape.IsStatic() && !d.hostSlot(v) {
			return fmt.Errorf("input %q has shape %s: this target compiles static shapes (cc build --shape %s=DIMS)", v.Name, v.Type, v.Name)
		}
		add(v, &d.p.Inputs)
	}
	seen := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		switch {
		case d.p.isInput(v):
			return fmt.Errorf("output %q is graph input %q: an engine binds each name once (compute the output with a node, e.g. an Identity writing a new name)", v.Name, v.Name)
		case seen[v]:
			return fmt.Errorf("output %q is listed twice: an engine binds each name once", v.Name)
		case !v.Type.Shape.IsStatic() && !d.hostSlot(v):
			if n := dataDimNode(g, v); n != nil {
				return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: ops.OpsetsOf(d.p.Model)[n.Domain],
					Reason: fmt.Sprintf("output %q has shape %s, which the data decides: this target compiles static shapes (the CPU targets compile these)", v.Name, v.Type)}
			}
			return fmt.Errorf("output %q has shape %s: this target compiles static shapes (cc build --shape)", v.Name, v.Type)
		}
		seen[v] = true
		add(v, &d.p.Outputs)
	}
	d.p.ArenaBytes = ioOff
	return nil
}

// fold drops the nodes whose outputs are all known at compile time (and
// none is a graph output, which must be written), and takes Constant
// nodes' values.
func (d *driver) fold() error {
	for _, n := range d.p.Model.Graph.Nodes {
		if n.OpType == "Constant" && n.Domain == "" && !d.out[n.Outputs[0]] {
			if t := n.Attr("value"); t != nil && t.T != nil {
				d.p.Known[n.Outputs[0]] = t.T
			}
		}
		known := true
		for _, o := range n.Outputs {
			if o != nil && (d.p.Known[o] == nil || d.out[o]) {
				known = false
			}
		}
		d.p.skip[n] = known
	}
	return nil
}

// dataDimNode is the node of g whose data decides a dim of v's shape
// (ops.DataDimOf), or nil.
func dataDimNode(g *ir.Graph, v *ir.Value) *ir.Node {
	for _, d := range v.Type.Shape.Dims {
		e, ok := ir.DimExpr(d)
		if !ok || d.IsStatic() {
			continue
		}
		for _, sym := range e.Symbols() {
			for _, n := range g.Nodes {
				if ops.DataDimOf(n, ir.Sym(sym)) {
					return n
				}
			}
		}
	}
	return nil
}

// isView reports whether n only reinterprets its input's bytes.
func isView(n *ir.Node) bool {
	return ops.MovementOf(n) == ops.View && n.Input(0) != nil && n.Output(0) != nil && n.Input(0).Type.Elem == n.Output(0).Type.Elem
}

// support builds each node's parts: a view none, a fusion group its body
// nodes', another node its kernels or the target's micro-kernel.
func (d *driver) support() error {
	var list ops.UnsupportedErrors
	seen := map[string]bool{}
	opsets := ops.OpsetsOf(d.p.Model)
	for _, n := range d.p.Model.Graph.Nodes {
		if d.p.skip[n] {
			continue
		}
		if ue := d.supportNode(n, opsets); ue != nil {
			for _, e := range flatten(ue) {
				if !seen[e.Error()] {
					seen[e.Error()] = true
					list = append(list, e)
				}
			}
		}
	}
	if len(list) > 0 {
		return list
	}
	return nil
}

// flatten lists what an error of supportNode says cannot be compiled.
func flatten(err error) []*ops.UnsupportedError {
	var list ops.UnsupportedErrors
	if errors.As(err, &list) {
		return list
	}
	var ue *ops.UnsupportedError
	if errors.As(err, &ue) {
		return []*ops.UnsupportedError{ue}
	}
	return []*ops.UnsupportedError{{Reason: err.Error()}}
}

// supportNode builds node n's parts (a view none; a fusion group its body
// nodes'; a control node its sub-programs; another node its kernels, the
// target's micro-kernel or the target's claim) or says why it cannot.
func (d *driver) supportNode(n *ir.Node, opsets ops.Opsets) error {
	if ops.OnHost(n) {
		return d.supportHost(n, opsets)
	}
	if err := d.readsHostValue(n, opsets); err != nil {
		return err
	}
	if isControl(n) {
		if _, ok := d.t.(ControlFlow); !ok {
			return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain], Reason: "this target compiles no control flow (the CPU targets do)"}
		}
		st, err := d.buildControl(n, opsets)
		if err != nil {
			var list ops.UnsupportedErrors
			if errors.As(err, &list) {
				return list
			}
			return asUnsupported(err, n, opsets)
		}
		d.built[n] = st
		return nil
	}
	if claimer, ok := d.t.(Claimer); ok {
		data, err := claimer.Claim(n)
		if err != nil {
			return asUnsupported(err, n, opsets)
		}
		if data != nil {
			d.built[n] = &Step{Node: n, Parts: []Part{{Micro: &Micro{Node: n, Data: data}}}}
			return nil
		}
	}
	for _, o := range n.Outputs {
		if o != nil && !o.Type.Shape.IsStatic() {
			return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain],
				Reason: "an output's shape is not static: it depends on the data, or on a dim no --shape or --max bounds"}
		}
	}
	viewer, _ := d.t.(Viewer)
	view := isView(n)
	if viewer != nil {
		view = viewer.View(n)
	}
	switch {
	case view && viewer == nil:
		d.views[n] = true
	case isGroup(n):
		steps, err := d.buildBody(n, opsets)
		if err != nil {
			return asUnsupported(err, n, opsets)
		}
		d.bodies[n] = steps
	default:
		in := make([]*kernel.Buffer, len(n.Inputs))
		for i, v := range n.Inputs {
			in[i] = d.p.Buffer(v)
		}
		out := make([]*kernel.Buffer, len(n.Outputs))
		for i, v := range n.Outputs {
			out[i] = d.p.Buffer(v)
		}
		st, err := d.buildNode(n, opsets, in, out)
		if err != nil {
			return asUnsupported(err, n, opsets)
		}
		d.built[n] = st
		d.views[n] = view
	}
	return nil
}

// buildNode builds n's step: the target's micro-kernel, or n's kernels.
func (d *driver) buildNode(n *ir.Node, opsets ops.Opsets, in, out []*kernel.Buffer) (*Step, error) {
	consts := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		consts[i] = d.p.ConstOf(v)
	}
	c, err := kernel.NewCtx(n, opsets, in, out, consts)
	if err == nil {
		err = kernel.Build(c)
	}
	if err != nil {
		return nil, err
	}
	if len(out) == 1 {
		if data := d.t.Micro(n, c, in, out[0]); data != nil {
			return &Step{Node: n, Parts: []Part{{Micro: &Micro{Node: n, In: in, Out: out[0], Ctx: c, Data: data}}}}, nil
		}
	}
	st := &Step{Node: n, Temps: c.Temps}
	for _, k := range c.Kernels {
		st.Parts = append(st.Parts, Part{Kernel: k})
	}
	return st, nil
}

func asUnsupported(err error, n *ir.Node, opsets ops.Opsets) *ops.UnsupportedError {
	var ue *ops.UnsupportedError
	if errors.As(err, &ue) {
		return ue
	}
	return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain], Reason: err.Error()}
}

func isGroup(n *ir.Node) bool { return n.Domain == ir.KilnDomain && n.OpType == ops.FusionGroup }

// inline makes every node that runs one step, in the graph's order.
func (d *driver) inline() error {
	for _, n := range d.p.Model.Graph.Nodes {
		if d.p.skip[n] {
			continue
		}
		st, err := d.stepOf(n)
		if err != nil {
			return err
		}
		d.p.Steps = append(d.p.Steps, st)
	}
	// Graph outputs known at compile time are copied from the weights.
	for _, v := range d.p.Model.Graph.Outputs {
		if t := d.p.ConstOf(v); t != nil && (v.Producer == nil || d.p.skip[v.Producer]) {
			dst := d.p.Buffer(v)
			src := &kernel.Buffer{Name: v.Name + ".const", DType: v.Type.Elem, Dims: dst.Dims, ID: -1, Data: t}
			k := &kernel.Kernel{Name: "const_out", Out: dst, Space: dst.Dims, Value: kernel.Load(src, kernel.Vars(len(dst.Dims))...)}
			d.p.Steps = append(d.p.Steps, &Step{Node: v.Producer, Const: v, Parts: []Part{{Kernel: k}}})
		}
	}
	if len(d.p.Steps) == 0 {
		return errors.New("the model computes nothing at run time")
	}
	return nil
}

// stepOf is the step node n runs as, once support built it: a view's
// (no parts), a fusion group's (its body inlined), or the one built.
func (d *driver) stepOf(n *ir.Node) (*Step, error) {
	switch {
	case d.views[n] && d.built[n] == nil:
		return &Step{Node: n}, nil
	case d.bodies[n] != nil:
		st, err := fuseGroup(n, d.bodies[n], d.p.Buffer(n.Outputs[0]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		return st, nil
	case d.built[n] != nil:
		return d.built[n], nil
	}
	return nil, fmt.Errorf("%s was not built", n)
}

// memory places every intermediate value and each step's scratch; a view
// shares its input's bytes where it can, else its step copies them.
func (d *driver) memory() error {
	hooks := passes.MemoryHooks{
		Limits:  d.opts.Limits,
		InArena: func(v *ir.Value) bool { return !d.out[v] && !d.p.OnHost(v) },
		View:    func(n *ir.Node) bool { return d.views[n] },
		// Scratch nil: each step's temporaries (planLevel).
	}
	if mp, ok := d.t.(MemoryPlanner); ok {
		hooks = mp.MemoryHooks(hooks)
	}
	lp, err := d.planLevel(d.p.Steps, hooks, func(*ir.Value) bool { return false })
	if err != nil {
		return err
	}
	base := d.p.ArenaBytes // the slots, when they live in the arena
	d.place(lp, base)
	d.p.ArenaBytes = base + lp.plan.ArenaBytes
	d.p.TensorBytes += base
	return d.opts.Limits.CheckArena("the engine's arena", d.p.ArenaBytes)
}

// Check verifies the program's invariants after stage (see Stages): the
// kernels are well formed, and once memory is placed every buffer a step
// reads or writes has bytes.
func (p *Program) Check(stage string) error {
	var errs []string
	if stage == "slots" {
		for i, s := range append(append([]Slot(nil), p.Inputs...), p.Outputs...) {
			if pl := p.Places[s.Value]; s.Index != i || pl.Space == InIO && pl.Slot != i || pl.Space == InWeights {
				errs = append(errs, fmt.Sprintf("%q has no slot %d", s.Value.Name, i))
			}
		}
	}
	if stage == "fold" {
		out := map[*ir.Value]bool{}
		for _, s := range p.Outputs {
			out[s.Value] = true
		}
		for _, n := range p.Model.Graph.Nodes {
			for _, o := range n.Outputs {
				if p.skip[n] && o != nil && (p.Known[o] == nil || out[o]) {
					errs = append(errs, fmt.Sprintf("%s is folded, but its output %q is not known at compile time or is a graph output", n, o.Name))
				}
			}
		}
	}
	var all []*Step
	p.Walk(func(st *Step) { all = append(all, st) })
	for i, st := range all {
		if st.Control != nil && len(st.Parts) > 0 {
			errs = append(errs, fmt.Sprintf("step %d (%s): a control step with parts of its own", i, st.Node))
		}
		for _, pt := range st.Parts {
			if (pt.Kernel == nil) == (pt.Micro == nil) {
				errs = append(errs, fmt.Sprintf("step %d (%s): a part is neither a kernel nor a micro-kernel", i, st.Node))
				continue
			}
			if pt.Kernel != nil {
				if err := pt.Kernel.Check(); err != nil {
					errs = append(errs, fmt.Sprintf("step %d (%s): %v", i, st.Node, err))
				}
			}
		}
		if stage != "memory" {
			continue
		}
		var scratch int64
		for _, t := range st.Temps {
			scratch += p.TempBytes(t)
		}
		if st.Scratch+scratch > p.ArenaBytes {
			errs = append(errs, fmt.Sprintf("step %d (%s): scratch [%d, %d) outside the arena of %d bytes", i, st.Node, st.Scratch, st.Scratch+scratch, p.ArenaBytes))
		}
		temp := p.TempOffsets(st)
		for _, b := range st.buffers() {
			if b == nil {
				continue
			}
			if _, ok := temp(b); ok {
				continue
			}
			if b.ID < 0 && b.Data == nil && b.Dim == "" || b.ID >= 0 && b.ID < len(p.vals) && p.scratch[p.vals[b.ID]] {
				errs = append(errs, fmt.Sprintf("step %d (%s): scratch %s is not the step's", i, st.Node, b.Name))
			}
			if v := p.ValueOf(b); v != nil {
				if _, err := p.Planned(v); err != nil {
					errs = append(errs, fmt.Sprintf("step %d (%s): %v", i, st.Node, err))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// buffers lists the buffers a step's parts load and store.
func (st *Step) buffers() []*kernel.Buffer {
	var out []*kernel.Buffer
	add := func(e *kernel.Expr) {
		kernel.Walk(e, func(x *kernel.Expr) {
			if x.Buf != nil {
				out = append(out, x.Buf)
			}
		})
	}
	for _, pt := range st.Parts {
		if k := pt.Kernel; k != nil {
			out = append(out, k.Out)
			add(k.Value)
			if k.Reduce != nil {
				add(k.Reduce.Post)
			}
			for _, e := range k.Store {
				add(e)
			}
			add(k.When)
			if k.TopK != nil {
				out = append(out, k.TopK.Indices)
			}
		}
		if m := pt.Micro; m != nil {
			out = append(append(out, m.In...), m.Out)
			add(m.Epilogue)
		}
	}
	return out
}
