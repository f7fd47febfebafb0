package lower

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes"
)

// Control flow. An If, a Loop or a Scan node is one step whose subgraphs are
// sub-programs: lists of steps, built by the same stages as the graph's,
// that the step runs (the If one branch, the Loop its body while its
// condition holds). Their values live in the step's region of the arena
// (its scratch), planned by the same memory plan: a branch's values from
// the region's start (the two branches never run together), a Loop's
// iteration number, condition and loop-carried values first and its
// body's values after them. What a subgraph hands back is copied where
// the node's outputs live: the If's outputs by its branch, a Loop's
// carried values into their slots after each iteration (the body reads
// them there next time) and into the Loop's outputs at the end, a scan
// output's value into its row of the Loop's output. A Scan runs as a
// Loop of a known trip count (scan.go).

// ControlFlow is a target that compiles control flow: it runs the steps
// of a Control (its entry point branches and loops on values in memory).
type ControlFlow interface {
	ControlFlow()
}

// ControlKind says what a control step does.
type ControlKind int

// The control steps.
const (
	ControlIf ControlKind = iota + 1
	ControlLoop
)

// Control is how a control step runs its sub-programs.
type Control struct {
	Kind ControlKind
	// If: Cond (a bool) chooses Bodies[0] (then) or Bodies[1] (else).
	// Loop: Init runs; then, while CondIn holds and Trip (int64; nil: no
	// bound) is above Iter, Bodies[0] runs (the body, then its copies
	// and Iter's increment); then Final.
	Cond         *kernel.Buffer
	Trip         *kernel.Buffer
	Iter, CondIn *kernel.Buffer
	Bodies       [][]*Step
	Init, Final  []*Step
	// graphs are the subgraphs Bodies[i] compute; in are the values the
	// region holds for the Loop's body (iteration, condition, carried).
	graphs []*ir.Graph
	in     []*ir.Value
}

// isControl reports whether n is a node of the control-flow ops this
// driver lowers.
func isControl(n *ir.Node) bool {
	return (n.Domain == "" || n.Domain == "ai.onnx") && (n.OpType == "If" || n.OpType == "Loop" || n.OpType == "Scan")
}

// buildControl builds the step of If, Loop or Scan node n.
func (d *driver) buildControl(n *ir.Node, opsets ops.Opsets) (*Step, error) {
	for _, v := range slices.Concat(n.Inputs, n.Outputs) {
		if v != nil && (v.Type.Kind != ir.TensorKind || !v.Type.Shape.IsStatic()) {
			return nil, fmt.Errorf("value %q is %s: compiled control flow takes tensors of static shapes", v.Name, v.Type)
		}
	}
	switch n.OpType {
	case "If":
		return d.buildIf(n, opsets)
	case "Loop":
		return d.buildLoop(n, opsets)
	case "Scan":
		return d.buildScan(n, opsets)
	}
	return nil, fmt.Errorf("%s is not control flow", n)
}

// scalar checks that v is one element of type dt.
func scalar(v *ir.Value, what string, dt ir.DType) error {
	d, _ := v.Type.Shape.Ints()
	if v.Type.Elem != dt || ir.Product(d) != 1 {
		return fmt.Errorf("the %s %q is %s, want one %s", what, v.Name, v.Type, dt)
	}
	return nil
}

func (d *driver) buildIf(n *ir.Node, opsets ops.Opsets) (*Step, error) {
	if n.Input(0) == nil {
		return nil, errors.New("an If without a condition")
	}
	if err := scalar(n.Input(0), "condition", ir.Bool); err != nil {
		return nil, err
	}
	c := &Control{Kind: ControlIf, Cond: d.p.Buffer(n.Input(0))}
	for _, name := range []string{"then_branch", "else_branch"} {
		a := n.Attr(name)
		if a == nil || a.G == nil || len(a.G.Inputs) != 0 || len(a.G.Outputs) != len(n.Outputs) {
			return nil, fmt.Errorf("its %s is missing, has inputs or has other than %d outputs", name, len(n.Outputs))
		}
		steps, err := d.buildSteps(a.G.Nodes, opsets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, bo := range a.G.Outputs {
			if sets := d.branchDimSteps(n, bo, n.Outputs[i]); sets != nil {
				steps = append(steps, sets...)
				continue
			}
			cp, err := d.copyStep(bo, n.Outputs[i], opsets)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			steps = append(steps, cp...)
		}
		c.Bodies = append(c.Bodies, steps)
		c.graphs = append(c.graphs, a.G)
	}
	return &Step{Node: n, Control: c}, nil
}

func (d *driver) buildLoop(n *ir.Node, opsets ops.Opsets) (*Step, error) {
	a := n.Attr("body")
	if a == nil || a.G == nil {
		return nil, errors.New("a Loop without a body")
	}
	body := a.G
	carried := len(n.Inputs) - 2
	if carried < 0 || len(body.Inputs) != 2+carried || len(body.Outputs) < 1+carried || len(n.Outputs) != len(body.Outputs)-1 {
		return nil, errors.New("the body's inputs and outputs do not match the Loop's")
	}
	c := &Control{Kind: ControlLoop, Iter: d.p.Buffer(body.Inputs[0]), CondIn: d.p.Buffer(body.Inputs[1]), in: body.Inputs, graphs: []*ir.Graph{body}}
	if err := scalar(body.Inputs[0], "iteration number", ir.Int64); err != nil {
		return nil, err
	}
	if err := scalar(body.Inputs[1], "condition", ir.Bool); err != nil {
		return nil, err
	}
	for i, v := range body.Inputs {
		if i >= 2 && !v.Type.Equal(n.Inputs[i].Type) || !v.Type.Shape.IsStatic() {
			return nil, fmt.Errorf("loop-carried value %q is %s, its initial value %s: compiled loops keep each carried value's shape", v.Name, v.Type, n.Inputs[i].Type)
		}
	}
	if m := n.Input(0); m != nil {
		if err := scalar(m, "trip count", ir.Int64); err != nil {
			return nil, err
		}
		c.Trip = d.p.Buffer(m)
	}
	// Init: the iteration number 0, the condition, the carried values.
	c.Init = append(c.Init, setStep(c.Iter, kernel.IntConst(ir.Int64, 0)))
	if cond := n.Input(1); cond != nil {
		if err := scalar(cond, "condition", ir.Bool); err != nil {
			return nil, err
		}
		cp, err := d.copyStep(cond, body.Inputs[1], opsets)
		if err != nil {
			return nil, err
		}
		c.Init = append(c.Init, cp...)
	} else {
		c.Init = append(c.Init, setStep(c.CondIn, kernel.IntConst(ir.Bool, 1)))
	}
	for i := 0; i < carried; i++ {
		cp, err := d.copyStep(n.Inputs[2+i], body.Inputs[2+i], opsets)
		if err != nil {
			return nil, err
		}
		c.Init = append(c.Init, cp...)
	}
	steps, err := d.buildSteps(body.Nodes, opsets)
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	// Each scan output's value goes to its row of the Loop's output.
	for k, so := range body.Outputs[1+carried:] {
		out := n.Outputs[carried+k]
		if !so.Type.Shape.IsStatic() || !out.Type.Shape.IsStatic() || len(out.Type.Shape.Dims) != len(so.Type.Shape.Dims)+1 {
			return nil, fmt.Errorf("scan output %q is %s: compiled loops need its trip count known (a constant M and a condition that stays true)", out.Name, out.Type)
		}
		steps = append(steps, d.scanStore(d.p.Buffer(so), d.p.Buffer(out), c.Iter))
	}
	// Then the next iteration's condition and carried values.
	next, err := d.nextSteps(body, body.Inputs[1:2+carried], body.Outputs[:1+carried], opsets)
	if err != nil {
		return nil, err
	}
	steps = append(append(steps, next...), setStep(c.Iter, kernel.Add(kernel.Load(c.Iter), kernel.IntConst(ir.Int64, 1))))
	c.Bodies = [][]*Step{steps}
	for i := 0; i < carried; i++ {
		cp, err := d.copyStep(body.Inputs[2+i], n.Outputs[i], opsets)
		if err != nil {
			return nil, err
		}
		c.Final = append(c.Final, cp...)
	}
	return &Step{Node: n, Control: c}, nil
}

// nextSteps copies each body output outs[i] into the slot of body input
// ins[i], for the next iteration. An output that is itself a body input
// (passed through, or swapped) is copied through a temporary first, as
// every slot is overwritten.
func (d *driver) nextSteps(body *ir.Graph, ins, outs []*ir.Value, opsets ops.Opsets) ([]*Step, error) {
	var first, direct, viaTemp []*Step
	for i, in := range ins {
		out := outs[i]
		if out == in {
			continue
		}
		if !slices.Contains(body.Inputs, out) {
			cp, err := d.copyStep(out, in, opsets)
			if err != nil {
				return nil, err
			}
			direct = append(direct, cp...)
			continue
		}
		tmp := &ir.Value{Name: in.Name + ".next", Type: in.Type.Clone()}
		toTemp, err := d.copyStep(out, tmp, opsets)
		if err != nil {
			return nil, err
		}
		fromTemp, err := d.copyStep(tmp, in, opsets)
		if err != nil {
			return nil, err
		}
		first = append(first, toTemp...)
		viaTemp = append(viaTemp, fromTemp...)
	}
	return slices.Concat(first, direct, viaTemp), nil
}

// buildSteps builds the steps of a subgraph's nodes, as fold, support
// and inline do for the graph's.
func (d *driver) buildSteps(nodes []*ir.Node, opsets ops.Opsets) ([]*Step, error) {
	var list ops.UnsupportedErrors
	for _, n := range nodes {
		if d.foldBodyNode(n) {
			continue
		}
		if err := d.supportNode(n, opsets); err != nil {
			list = append(list, flatten(err)...)
		}
	}
	if len(list) > 0 {
		return nil, list
	}
	var steps []*Step
	for _, n := range nodes {
		if d.p.skip[n] {
			continue
		}
		st, err := d.stepOf(n)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// foldBodyNode marks a subgraph's node that runs nothing: a Constant, or
// a node whose outputs inference knows (ops.InferShapes keeps a body's
// values that hold in every run of it). Its outputs are read from the
// weights, a subgraph's outputs too (their copies read them there).
func (d *driver) foldBodyNode(n *ir.Node) bool {
	if n.OpType == "Constant" && n.Domain == "" {
		if t := n.Attr("value"); t != nil && t.T != nil {
			d.p.Known[n.Outputs[0]] = t.T
		}
	}
	for _, o := range n.Outputs {
		if o != nil && d.p.Known[o] == nil {
			return false
		}
	}
	d.p.skip[n] = len(n.Outputs) > 0
	return d.p.skip[n]
}

// copyStep builds the step copying value src into dst (an Identity the
// memory plan sees reading src and writing dst).
func (d *driver) copyStep(src, dst *ir.Value, opsets ops.Opsets) ([]*Step, error) {
	same := src.Type.Equal(dst.Type) || src.Type.Elem == dst.Type.Elem && slices.Equal(dimsOf(src), dimsOf(dst))
	// A value without its leading batch of one (Scan 8's states) is the
	// same bytes: a Reshape copies them.
	reshaped := !same && src.Type.Elem == dst.Type.Elem && ir.Product(dimsOf(src)) == ir.Product(dimsOf(dst))
	if !same && !reshaped {
		return nil, fmt.Errorf("%q (%s) is handed back as %q (%s)", src.Name, src.Type, dst.Name, dst.Type)
	}
	id := &ir.Node{Name: dst.Name + ".copy", OpType: "Identity", Inputs: []*ir.Value{src}, Outputs: []*ir.Value{dst}}
	if reshaped {
		to := dimsOf(dst)
		shape := &ir.Value{Name: dst.Name + ".shape", Type: ir.TensorType(ir.Int64, ir.S(int64(len(to))))}
		d.p.Known[shape] = ir.FromSlice(ir.Int64, []int64{int64(len(to))}, to)
		id.OpType, id.Inputs = "Reshape", []*ir.Value{src, shape}
	}
	if err := d.supportNode(id, opsets); err != nil {
		return nil, err
	}
	st, err := d.stepOf(id)
	if err != nil {
		return nil, err
	}
	return []*Step{st}, nil
}

// branchDimSteps hands branch output src back as If output dst when the
// branches give dst's dims different sizes (ops.BranchDim: dst's buffer
// has a data-dependent dim there): steps setting each such dim to src's
// size there, then a copy of src into dst's first elements, which are dst
// at those dims. Nil when dst has no such dim.
func (d *driver) branchDimSteps(n *ir.Node, src, dst *ir.Value) []*Step {
	sb, db := d.p.Buffer(src), d.p.Buffer(dst)
	var steps []*Step
	for axis, e := range db.Dims {
		if e.Op != kernel.OpSym {
			continue
		}
		if _, j, ok := ops.BranchDim(n, ir.Sym(e.Name)); ok && j == axis && axis < len(sb.Dims) {
			steps = append(steps, setStep(kernel.DataDimBuffer(e.Name), sb.Dims[axis]))
		}
	}
	if steps == nil {
		return nil
	}
	view := &kernel.Buffer{Name: db.Name, DType: db.DType, Dims: sb.Dims, ID: db.ID}
	k := &kernel.Kernel{Name: SymbolName(dst.Name) + "_copy", Out: view, Space: sb.Dims, Value: kernel.Load(sb, kernel.Vars(len(sb.Dims))...)}
	return append(steps, &Step{Parts: []Part{{Kernel: k}}})
}

func dimsOf(v *ir.Value) []int64 {
	d, _ := v.Type.Shape.Ints()
	return d
}

// setStep is a step of one kernel storing value into scalar buffer b.
func setStep(b *kernel.Buffer, value *kernel.Expr) *Step {
	k := &kernel.Kernel{Name: SymbolName(b.Name) + "_set", Out: b, Space: b.Dims, Value: kernel.CastTo(value, b.DType)}
	return &Step{Parts: []Part{{Kernel: k}}}
}

// scanStore is the step storing a Loop body's scan output so (this
// iteration's value) into row iter of the Loop's output out.
func (d *driver) scanStore(so, out, iter *kernel.Buffer) *Step {
	row := kernel.Load(iter)
	return d.storeSlice(so, out, iter, sliceIndex(len(out.Dims), 0, row, false), kernel.Lt(row, out.Dims[0]))
}

// storeSlice is the step storing a body's value so into out at index
// idx (sliceIndex's over so's point, at a position computed from iter),
// where when holds (nil: always).
func (d *driver) storeSlice(so, out, iter *kernel.Buffer, idx []*kernel.Expr, when *kernel.Expr) *Step {
	k := &kernel.Kernel{Name: SymbolName(out.Name) + "_row", Out: out, Space: so.Dims, Value: kernel.Load(so, kernel.Vars(len(so.Dims))...),
		Store: idx, When: when}
	st := &Step{Parts: []Part{{Kernel: k}}}
	// The memory plan sees it read the value (and so keep it until here).
	d.planAs[st] = &ir.Node{Name: out.Name + ".row", OpType: "ScanStore", Domain: ir.KilnDomain, Inputs: []*ir.Value{d.p.ValueOf(so), d.p.ValueOf(iter)}}
	return st
}

// sliceIndex is the index, in a value of rank rank, of the point of a
// slice along axis at pos: the slice's point's variables in order around
// it, and 0 on the axes in batch (a batch of one).
func sliceIndex(rank, axis int, pos *kernel.Expr, batch bool) []*kernel.Expr {
	idx := make([]*kernel.Expr, 0, rank)
	v := 0
	for a := 0; a < rank; a++ {
		switch {
		case a == axis:
			idx = append(idx, pos)
		case batch && a == 0:
			idx = append(idx, kernel.C(0))
		default:
			idx = append(idx, kernel.Var(v))
			v++
		}
	}
	return idx
}

// walkSteps calls f for every step of steps and of their sub-programs,
// in the order they are written.
func walkSteps(steps []*Step, f func(*Step)) {
	for _, st := range steps {
		f(st)
		if c := st.Control; c != nil {
			walkSteps(c.Init, f)
			for _, b := range c.Bodies {
				walkSteps(b, f)
			}
			walkSteps(c.Final, f)
		}
	}
}

// Walk calls f for every step of the program, those of its sub-programs
// included.
func (p *Program) Walk(f func(*Step)) { walkSteps(p.Steps, f) }

// ---- memory ----

// levelPlan is the memory plan of one list of steps: the graph's or a
// sub-program's, its values placed from base by place.
type levelPlan struct {
	plan  *passes.MemoryPlan
	steps []*Step
	// byNode are the steps by the node the plan knows them as; regions
	// the plans of the control steps' sub-programs.
	byNode  map[*ir.Node]*Step
	regions map[*Step]*region
}

// region is a control step's sub-programs' plans: a Loop's slots for its
// body's inputs (offsets from the region's start), then each body's.
type region struct {
	slots  map[*ir.Value]int64
	bodies []*levelPlan
	start  int64 // where the bodies start in the region
	bytes  int64
}

// planLevel plans steps: each control step's region first (its bodies'
// plans), then this level's, whose scratch of a control step is its
// region. outside says which values another level places.
func (d *driver) planLevel(steps []*Step, hooks passes.MemoryHooks, outside func(*ir.Value) bool) (*levelPlan, error) {
	lp := &levelPlan{steps: steps, byNode: map[*ir.Node]*Step{}, regions: map[*Step]*region{}}
	var nodes []*ir.Node
	for _, st := range steps {
		n := st.Node
		if n == nil {
			n = d.planAs[st]
		}
		if st.Const == nil && n != nil && lp.byNode[n] == nil {
			nodes = append(nodes, n)
			lp.byNode[n] = st
		}
		if st.Control != nil {
			r, err := d.planRegion(st, hooks, outside)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.Node, err)
			}
			lp.regions[st] = r
		}
	}
	h := hooks
	inArena := hooks.InArena
	h.InArena = func(v *ir.Value) bool { return !outside(v) && (inArena == nil || inArena(v)) }
	scratch, reads := hooks.Scratch, hooks.Reads
	h.Scratch = func(n *ir.Node) int64 {
		if st := lp.byNode[n]; st != nil && lp.regions[st] != nil {
			return lp.regions[st].bytes
		}
		if scratch != nil {
			return scratch(n)
		}
		var s int64
		if st := lp.byNode[n]; st != nil {
			for _, t := range st.Temps {
				s += d.p.TempBytes(t)
			}
		}
		return s
	}
	// A control node reads, besides its inputs, what its subgraphs read
	// of the graphs around them, until it is done.
	h.Reads = func(n *ir.Node) []*ir.Value {
		var vs []*ir.Value
		if reads != nil {
			vs = reads(n)
		} else {
			vs = n.Inputs
		}
		if st := lp.byNode[n]; st != nil && st.Control != nil {
			for _, g := range st.Control.graphs {
				vs = append(slices.Clip(vs), g.FreeValues()...)
			}
		}
		return vs
	}
	plan, err := passes.PlanMemory(nodes, h)
	if err != nil {
		return nil, err
	}
	lp.plan = plan
	return lp, nil
}

// planRegion plans control step st's region.
func (d *driver) planRegion(st *Step, hooks passes.MemoryHooks, outside func(*ir.Value) bool) (*region, error) {
	c, n := st.Control, st.Node
	r := &region{slots: map[*ir.Value]int64{}}
	align := d.t.Align()
	for _, v := range c.in {
		r.slots[v] = r.start
		r.start += alignUp(int64(ir.RawLen(v.Type.Elem, ir.Product(dimsOf(v)))), align)
	}
	// A body's plan leaves alone what the levels around it place: the
	// region's slots and the node's outputs, which its copies write.
	inner := func(v *ir.Value) bool {
		_, slot := r.slots[v]
		return slot || slices.Contains(n.Outputs, v) || outside(v)
	}
	var most int64
	for _, body := range c.Bodies {
		lp, err := d.planLevel(body, hooks, inner)
		if err != nil {
			return nil, err
		}
		r.bodies = append(r.bodies, lp)
		most = max(most, lp.plan.ArenaBytes)
	}
	r.bytes = r.start + most
	return r, nil
}

// place gives the level's values and scratch their places from base, and
// its control steps' sub-programs theirs in their regions.
func (d *driver) place(lp *levelPlan, base int64) {
	for v, in := range lp.plan.Aliases {
		d.p.Alias[v] = in
	}
	for v, w := range lp.plan.Within {
		d.p.Within[v] = w
	}
	for n := range lp.plan.InPlace {
		d.p.InPlace[n] = true
	}
	for _, b := range lp.plan.Buffers {
		if b.Value != nil {
			d.p.Places[b.Value] = Place{Space: InArena, Off: base + b.Offset}
		} else if st := lp.byNode[b.Node]; st != nil {
			st.Scratch, st.ScratchBytes = base+b.Offset, b.Size
		}
	}
	for _, st := range lp.steps {
		if st.Const == nil && st.Node != nil && d.views[st.Node] && d.p.Alias[st.Node.Outputs[0]] == nil {
			st.Copy = true
		}
		r := lp.regions[st]
		if r == nil {
			continue
		}
		for v, off := range r.slots {
			d.p.Places[v] = Place{Space: InArena, Off: st.Scratch + off}
		}
		for _, body := range r.bodies {
			d.place(body, st.Scratch+r.start)
		}
	}
	d.p.TensorBytes += lp.plan.TensorBytes
}

// ---- evaluation ----

// runSteps runs steps in order.
func (r *run) runSteps(steps []*Step) error {
	for i, st := range steps {
		if err := r.step(st); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, st.Node, err)
		}
	}
	return nil
}

// control runs a control step: the If's branch its condition picks, or
// the Loop's body while it goes on (at most ir.DefaultMaxLoopIterations
// times: Program.Run is a test harness).
func (r *run) control(c *Control) error {
	flag := func(b *kernel.Buffer) (int64, error) {
		t, err := r.tensor(b)
		if err != nil {
			return 0, err
		}
		return t.Int64At(0), nil
	}
	if c.Kind == ControlIf {
		cond, err := flag(c.Cond)
		if err != nil {
			return err
		}
		if cond != 0 {
			return r.runSteps(c.Bodies[0])
		}
		return r.runSteps(c.Bodies[1])
	}
	if err := r.runSteps(c.Init); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	for n := int64(0); ; n++ {
		iter, err := flag(c.Iter)
		if err != nil {
			return err
		}
		cond, err := flag(c.CondIn)
		if err != nil {
			return err
		}
		if c.Trip != nil {
			trip, err := flag(c.Trip)
			if err != nil {
				return err
			}
			cond = cond & boolInt(iter < trip)
		}
		if cond == 0 {
			break
		}
		if n >= ir.DefaultMaxLoopIterations {
			return fmt.Errorf("the loop ran %d iterations", n)
		}
		if err := r.runSteps(c.Bodies[0]); err != nil {
			return fmt.Errorf("iteration %d: %w", iter, err)
		}
	}
	return r.runSteps(c.Final)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
