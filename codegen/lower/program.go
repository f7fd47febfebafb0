// Package lower is the driver between a planned graph and a target's
// code: it turns the graph into a Program (IO slots, weights stored once
// by content, the steps that run in order with their kernel-layer kernels
// or target micro-kernels, and one arena) in named stages, each checked
// by Program.Check and each dumpable. A target then only emits: the
// CUDA backend (codegen/cuda) writes a Program as launches, codegen/cpu
// as step functions. A target with code of its own says so through the
// optional interfaces (Claimer, Viewer, Shaper, Stager, MemoryPlanner):
// the CPU claims its hand-written kernels and fusion groups, gives
// dynamic dims as symbols, adds its "groups" and "conv-algorithms"
// stages before "memory" and tells the memory plan what its kernels
// read and write.
//
// The stages (Stages, in order): "slots" gives the graph's inputs and
// outputs their slots; "fold" drops the nodes whose outputs are known at
// compile time; "support" builds every node's kernels (kernel.Build) or
// lets the target claim it (Claimer, or a micro-kernel), and lists what
// neither can compute; "inline" turns each fusion group into one step, inlining
// its maps into their readers and its last map into the store of the
// reduction or micro-kernel it follows (an epilogue); "memory" places
// every intermediate value and each step's scratch in the arena
// (passes.PlanMemory).
package lower

import (
	"fmt"
	"strings"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
)

// Program is a graph lowered for one target: what runs, in order, and
// where each byte lives.
type Program struct {
	Model *ir.Model
	// Known holds the values known at compile time (ops.InferShapes).
	Known           map[*ir.Value]*ir.Tensor
	Inputs, Outputs []Slot
	Weights         *Weights
	Steps           []*Step
	// Places says where each value with bytes of its own lives; Alias maps
	// a view's output to the value whose bytes it shares.
	Places map[*ir.Value]Place
	Alias  map[*ir.Value]*ir.Value
	// Within places values inside another value's bytes (a Concat's
	// inputs in its output), and InPlace marks the nodes that then run
	// nothing (passes.PlanMemory).
	Within  map[*ir.Value]passes.Placement
	InPlace map[*ir.Node]bool
	// ArenaBytes is the arena's size; TensorBytes what it would be with
	// no reuse.
	ArenaBytes, TensorBytes int64

	bufs   map[*ir.Value]*kernel.Buffer
	vals   []*ir.Value // by buffer ID
	shaper Shaper      // the target's symbolic dims, or nil
	skip   map[*ir.Node]bool
	// scratch marks the values inside fusion groups: their bytes are
	// their step's scratch (Step.Temps), not places of their own.
	scratch map[*ir.Value]bool
}

// Slot is a graph input or output: its index in the engine's bindings.
type Slot struct {
	Value *ir.Value
	Index int
	Bytes int64
	// Host: the value lives with the runtime (Program.OnHost); the
	// target's code never touches the slot.
	Host bool
}

// Space says which memory a Place is in.
type Space int

// The memories.
const (
	InWeights Space = iota
	InArena
	InIO   // the caller's buffer of a slot
	InHost // with the runtime (Program.OnHost); Slot is its slot, if it has one
)

// Place is where a buffer's bytes are: an offset in the weights or the
// arena, or a slot.
type Place struct {
	Space Space
	Off   int64
	Slot  int
}

// Step is one node of the graph (or one fusion group) as it runs: parts,
// in order, each a kernel-layer kernel or a target micro-kernel.
type Step struct {
	Node  *ir.Node
	Parts []Part
	// Temps are the step's scratch buffers (a definition's temporaries and
	// the values inside a fusion group), placed one after another from
	// Scratch in the arena.
	Temps   []*kernel.Buffer
	Scratch int64
	// ScratchBytes is the scratch the memory plan placed at Scratch: at
	// least what the step needs.
	ScratchBytes int64
	// Copy marks a view whose output cannot share its input's bytes (a
	// graph output): the step copies them.
	Copy bool
	// Const is the graph output, known at compile time, that the step
	// copies from the weights (its Node is the folded producer or nil).
	Const *ir.Value
	// Control, for an If, a Loop or a Scan, says how the step runs its
	// sub-programs (controlflow.go, scan.go); it has no parts of its own.
	Control *Control
	// Host marks a host step (host.go): the runtime computes Node; it
	// has no parts.
	Host bool
}

// Part is one kernel of a step, or a micro-kernel.
type Part struct {
	Kernel *kernel.Kernel
	Micro  *Micro
}

// Micro is a node a target computes with a micro-kernel of its own (the
// tiled GEMM) instead of its kernel-layer kernels.
type Micro struct {
	Node *ir.Node
	// In are the buffers of the node's inputs; Out is where the result is
	// stored: the node's output, or the output of the epilogue fused into
	// the store.
	In  []*kernel.Buffer
	Out *kernel.Buffer
	// Epilogue, when set, is the value stored at each point of Out, in
	// which Hole(AccHole) is the node's own value there and Var(i) the
	// point.
	Epilogue *kernel.Expr
	// Ctx is the node's kernel-layer context (its attributes resolved),
	// built before the target claimed the node.
	Ctx *kernel.Ctx
	// Data is the target's own record of the micro-kernel.
	Data any
}

// AccHole names, in an epilogue, the value the micro-kernel computed.
const AccHole = "acc"

// Buffer is the kernel-layer buffer of value v (one per value).
func (p *Program) Buffer(v *ir.Value) *kernel.Buffer {
	if v == nil {
		return nil
	}
	if b, ok := p.bufs[v]; ok {
		return b
	}
	d, _ := v.Type.Shape.Ints()
	dims := kernel.Ints(d...)
	if p.shaper != nil {
		if s := p.shaper.Dims(v); s != nil {
			dims = s
		}
	}
	b := &kernel.Buffer{Name: v.Name, DType: v.Type.Elem, Dims: dims, ID: len(p.vals)}
	p.bufs[v] = b
	p.vals = append(p.vals, v)
	return b
}

// Bind makes buffer b stand for value v's bytes: a target writing a
// node's output where the fusion group it heads stores (the base of an
// epilogue run after it in place).
func (p *Program) Bind(b *kernel.Buffer, v *ir.Value) { p.vals[b.ID] = v }

// ValueOf is the value whose buffer b is (nil for temporaries and
// tables; a value inside a fusion group is its step's scratch).
func (p *Program) ValueOf(b *kernel.Buffer) *ir.Value {
	if b == nil || b.ID < 0 || b.ID >= len(p.vals) || b.Data != nil || p.scratch[p.vals[b.ID]] {
		return nil
	}
	return p.vals[b.ID]
}

// PlaceOf is where value v's bytes are: its own place, its alias's, or
// the weights for a value known at compile time (stored on first use).
func (p *Program) PlaceOf(v *ir.Value) (Place, error) {
	return p.place(v, true)
}

// Planned is v's place, as PlaceOf finds it, but a constant not yet
// stored stays so (its offset is then 0: see Stored).
func (p *Program) Planned(v *ir.Value) (Place, error) { return p.place(v, false) }

// Stored reports whether v's bytes have a place yet: a constant's once
// PlaceOf stored it in the weights.
func (p *Program) Stored(v *ir.Value) bool {
	for p.Alias[v] != nil {
		v = p.Alias[v]
	}
	if w, ok := p.Within[v]; ok {
		return p.Stored(w.Into)
	}
	_, ok := p.Places[v]
	return ok
}

// place finds v's place; store says a constant not yet in the weights
// is stored (else its place is reported as a weight at offset 0: what a
// check needs to know, without fixing the weights' order).
func (p *Program) place(v *ir.Value, store bool) (Place, error) {
	for p.Alias[v] != nil {
		v = p.Alias[v]
	}
	if w, ok := p.Within[v]; ok {
		pl, err := p.place(w.Into, store)
		pl.Off += w.Offset
		return pl, err
	}
	if pl, ok := p.Places[v]; ok {
		return pl, nil
	}
	if p.OnHost(v) {
		return Place{Space: InHost, Slot: -1}, nil
	}
	if t := p.ConstOf(v); t != nil {
		if !store {
			return Place{Space: InWeights}, nil
		}
		pl := Place{Space: InWeights, Off: p.Weights.Add(t)}
		p.Places[v] = pl
		return pl, nil
	}
	return Place{}, fmt.Errorf("value %q has no place", v.Name)
}

// Folded reports whether node n runs nothing: its outputs are known at
// compile time (the "fold" stage).
func (p *Program) Folded(n *ir.Node) bool { return p.skip[n] }

// ConstOf is v's value when known at compile time (never a graph
// input's: the caller feeds those).
func (p *Program) ConstOf(v *ir.Value) *ir.Tensor {
	if v == nil || p.isInput(v) {
		return nil
	}
	if v.Const != nil {
		return v.Const
	}
	return p.Known[v]
}

func (p *Program) isInput(v *ir.Value) bool {
	for _, in := range p.Model.Graph.Inputs {
		if in == v {
			return true
		}
	}
	return false
}

// TempOffsets places st's scratch buffers from st.Scratch: the offset of
// each, by the buffer's bytes (a view of one finds it too).
func (p *Program) TempOffsets(st *Step) func(b *kernel.Buffer) (int64, bool) {
	offs := map[bufKey]int64{}
	off := st.Scratch
	for _, t := range st.Temps {
		offs[keyOf(t)] = off
		off += p.TempBytes(t)
	}
	return func(b *kernel.Buffer) (int64, bool) {
		o, ok := offs[keyOf(b)]
		return o, ok
	}
}

// TempBytes is the arena bytes of a scratch buffer, aligned, at the
// symbols' maxima.
func (p *Program) TempBytes(b *kernel.Buffer) int64 {
	var env map[string]int64
	if p.shaper != nil {
		env = p.shaper.Maxima()
	}
	n, _ := kernel.EvalInt(b.Numel(), env)
	return alignUp(int64(ir.RawLen(b.DType, n)), p.Weights.align)
}

func alignUp(n, align int64) int64 { return (n + align - 1) / align * align }

// String lists the steps (cc build --emit kernels): each node, its parts
// and scratch.
func (p *Program) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program: %d steps, arena %d bytes (all tensors %d), weights %d bytes\n", len(p.Steps), p.ArenaBytes, p.TensorBytes, p.Weights.Len())
	for _, s := range p.Inputs {
		fmt.Fprintf(&b, "input  %d %s %s\n", s.Index, ir.QuoteName(s.Value.Name), s.Value.Type)
	}
	for _, s := range p.Outputs {
		fmt.Fprintf(&b, "output %d %s %s\n", s.Index, ir.QuoteName(s.Value.Name), s.Value.Type)
	}
	writeSteps(&b, p.Steps, "")
	return b.String()
}

// writeSteps lists steps at indent, a control step's sub-programs under
// it.
func writeSteps(b *strings.Builder, steps []*Step, indent string) {
	for i, st := range steps {
		if st.Node != nil {
			fmt.Fprintf(b, "%sstep %d: %s", indent, i, st.Node)
		} else {
			fmt.Fprintf(b, "%sstep %d: the driver's", indent, i)
		}
		if st.Copy {
			b.WriteString(" (copy)")
		}
		if len(st.Temps) > 0 {
			fmt.Fprintf(b, " scratch %d", len(st.Temps))
		}
		b.WriteByte('\n')
		for _, pt := range st.Parts {
			switch {
			case pt.Micro != nil:
				fmt.Fprintf(b, indent+"  micro %s", pt.Micro.Node.OpType)
				if pt.Micro.Out != nil {
					fmt.Fprintf(b, " -> %s", pt.Micro.Out.Name)
				}
				if s, ok := pt.Micro.Data.(fmt.Stringer); ok {
					fmt.Fprintf(b, ": %s", s)
				}
				if pt.Micro.Epilogue != nil {
					fmt.Fprintf(b, " epilogue %s", pt.Micro.Epilogue)
				}
				b.WriteByte('\n')
			case pt.Kernel != nil:
				k := pt.Kernel
				fmt.Fprintf(b, indent+"  kernel %s -> %s = %s", k.Name, k.Out.Name, k.Value)
				if r := k.Reduce; r != nil {
					fmt.Fprintf(b, " reduced by %s over %v", r.Op, r.Extents)
					if r.Post != nil {
						fmt.Fprintf(b, ", then %s", r.Post)
					}
				}
				b.WriteByte('\n')
			}
		}
		if c := st.Control; c != nil {
			sub := func(what string, steps []*Step) {
				if len(steps) > 0 {
					fmt.Fprintf(b, "%s  %s:\n", indent, what)
					writeSteps(b, steps, indent+"    ")
				}
			}
			sub("init", c.Init)
			for j, body := range c.Bodies {
				sub([]string{"then", "else", "body"}[j+int(c.Kind-ControlIf)*2], body)
			}
			sub("final", c.Final)
		}
	}
}
