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

// Options are the driver's settings.
type Options struct {
	Limits ir.Limits
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
}

// Build lowers m (shapes static, passes run) for target t.
func Build(m *ir.Model, t Target, opts Options) (*Program, error) {
	if err := m.Verify(); err != nil {
		return nil, err
	}
	known, err := ops.InferShapesWithin(m, opts.Limits)
	if err != nil {
		return nil, err
	}
	p := &Program{Model: m, Known: known, Weights: NewWeights(t.Align()), Places: map[*ir.Value]Place{},
		Alias: map[*ir.Value]*ir.Value{}, bufs: map[*ir.Value]*kernel.Buffer{}, skip: map[*ir.Node]bool{}, scratch: map[*ir.Value]bool{}}
	d := &driver{t: t, opts: opts, p: p, out: map[*ir.Value]bool{}, built: map[*ir.Node]*Step{},
		bodies: map[*ir.Node][]*Step{}, views: map[*ir.Node]bool{}}
	for _, v := range m.Graph.Outputs {
		d.out[v] = true
	}
	for _, s := range Stages {
		if err := s.Run(d); err != nil {
			var list ops.UnsupportedErrors
			if errors.As(err, &list) {
				return nil, fmt.Errorf("%s: %w", t.Name(), err)
			}
			return nil, fmt.Errorf("%s: %s: %w", t.Name(), s.Name, err)
		}
		if err := p.Check(s.Name); err != nil {
			return nil, fmt.Errorf("%s: after %s: %w", t.Name(), s.Name, err)
		}
		if opts.Dump != nil {
			opts.Dump(s.Name, p)
		}
	}
	return p, nil
}

func (d *driver) slots() error {
	g := d.p.Model.Graph
	if len(g.Outputs) == 0 {
		return errors.New("the graph has no outputs, so an engine would compute nothing (ONNX requires at least one)")
	}
	var ioOff int64
	add := func(v *ir.Value, list *[]Slot) {
		d0, _ := v.Type.Shape.Ints()
		s := Slot{Value: v, Index: len(d.p.Inputs) + len(d.p.Outputs), Bytes: int64(ir.RawLen(v.Type.Elem, ir.Product(d0)))}
		if d.t.SlotsInArena() {
			d.p.Places[v] = Place{Space: InArena, Off: ioOff}
			ioOff += alignUp(s.Bytes, d.t.Align())
		} else {
			d.p.Places[v] = Place{Space: InIO, Slot: s.Index}
		}
		*list = append(*list, s)
	}
	for _, v := range g.Inputs {
		if !v.Type.Shape.IsStatic() {
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
		case !v.Type.Shape.IsStatic():
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

// isView reports whether n only reinterprets its input's bytes.
func isView(n *ir.Node) bool {
	return ops.MovementOf(n) == ops.View && n.Input(0) != nil && n.Output(0) != nil && n.Input(0).Type.Elem == n.Output(0).Type.Elem
}

// support builds each node's parts: a view none, a fusion group its body
// nodes', another node its kernels or the target's micro-kernel.
func (d *driver) support() error {
	var list ops.UnsupportedErrors
	seen := map[string]bool{}
	report := func(ue *ops.UnsupportedError) {
		if !seen[ue.Error()] {
			seen[ue.Error()] = true
			list = append(list, ue)
		}
	}
	opsets := ops.OpsetsOf(d.p.Model)
	for _, n := range d.p.Model.Graph.Nodes {
		if d.p.skip[n] {
			continue
		}
		static := true
		for _, o := range n.Outputs {
			if o != nil && !o.Type.Shape.IsStatic() {
				static = false
				report(&ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain],
					Reason: "an output's shape is not static (this target compiles static shapes: cc build --shape)"})
			}
		}
		switch {
		case !static:
		case isView(n):
			d.views[n] = true
		case isGroup(n):
			steps, err := d.buildBody(n, opsets)
			if err != nil {
				report(asUnsupported(err, n, opsets))
				continue
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
				report(asUnsupported(err, n, opsets))
				continue
			}
			d.built[n] = st
		}
	}
	if len(list) > 0 {
		return list
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
		switch {
		case d.p.skip[n]:
		case d.views[n]:
			d.p.Steps = append(d.p.Steps, &Step{Node: n})
		case d.bodies[n] != nil:
			st, err := fuseGroup(n, d.bodies[n], d.p.Buffer(n.Outputs[0]))
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			d.p.Steps = append(d.p.Steps, st)
		default:
			d.p.Steps = append(d.p.Steps, d.built[n])
		}
	}
	// Graph outputs known at compile time are copied from the weights.
	for _, v := range d.p.Model.Graph.Outputs {
		if t := d.p.ConstOf(v); t != nil && (v.Producer == nil || d.p.skip[v.Producer]) {
			dst := d.p.Buffer(v)
			src := &kernel.Buffer{Name: v.Name + ".const", DType: v.Type.Elem, Dims: dst.Dims, ID: -1, Data: t}
			k := &kernel.Kernel{Name: "const_out", Out: dst, Space: dst.Dims, Value: kernel.Load(src, kernel.Vars(len(dst.Dims))...)}
			d.p.Steps = append(d.p.Steps, &Step{Node: v.Producer, Parts: []Part{{Kernel: k}}})
		}
	}
	if len(d.p.Steps) == 0 {
		return errors.New("the model computes nothing at run time")
	}
	return nil
}

// memory places every intermediate value and each step's scratch; a view
// shares its input's bytes where it can, else its step copies them.
func (d *driver) memory() error {
	var nodes []*ir.Node
	byNode := map[*ir.Node]*Step{}
	for _, st := range d.p.Steps {
		if st.Node != nil && byNode[st.Node] == nil {
			nodes = append(nodes, st.Node)
			byNode[st.Node] = st
		}
	}
	align := d.t.Align()
	plan, err := passes.PlanMemory(nodes, passes.MemoryHooks{
		Limits:  d.opts.Limits,
		InArena: func(v *ir.Value) bool { return !d.out[v] },
		View:    func(n *ir.Node) bool { return d.views[n] },
		Scratch: func(n *ir.Node) int64 {
			var s int64
			if st := byNode[n]; st != nil {
				for _, t := range st.Temps {
					s += TempBytes(t, align)
				}
			}
			return s
		},
	})
	if err != nil {
		return err
	}
	base := d.p.ArenaBytes // the slots, when they live in the arena
	for v, in := range plan.Aliases {
		d.p.Alias[v] = in
	}
	for _, b := range plan.Buffers {
		if b.Value != nil {
			d.p.Places[b.Value] = Place{Space: InArena, Off: base + b.Offset}
		} else if st := byNode[b.Node]; st != nil {
			st.Scratch = base + b.Offset
		}
	}
	for _, st := range d.p.Steps {
		if d.views[st.Node] && d.p.Alias[st.Node.Outputs[0]] == nil {
			st.Copy = true
		}
	}
	d.p.ArenaBytes = base + plan.ArenaBytes
	d.p.TensorBytes = base + plan.TensorBytes
	return d.opts.Limits.CheckArena("the engine's arena", d.p.ArenaBytes)
}

// Check verifies the program's invariants after stage (see Stages): the
// kernels are well formed, and once memory is placed every buffer a step
// reads or writes has bytes.
func (p *Program) Check(stage string) error {
	var errs []string
	for i, st := range p.Steps {
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
			scratch += TempBytes(t, p.Weights.align)
		}
		if st.Scratch+scratch > p.ArenaBytes {
			errs = append(errs, fmt.Sprintf("step %d (%s): scratch [%d, %d) outside the arena of %d bytes", i, st.Node, st.Scratch, st.Scratch+scratch, p.ArenaBytes))
		}
		temp := st.TempOffsets(p.Weights.align)
		for _, b := range st.buffers() {
			if _, ok := temp(b); ok {
				continue
			}
			if b.ID < 0 && b.Data == nil || b.ID >= 0 && b.ID < len(p.vals) && p.scratch[p.vals[b.ID]] {
				errs = append(errs, fmt.Sprintf("step %d (%s): scratch %s is not the step's", i, st.Node, b.Name))
			}
			if v := p.ValueOf(b); v != nil {
				if _, err := p.PlaceOf(v); err != nil {
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
