package cpu

import (
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Control flow (codegen/lower's control steps) runs in the entry point:
// the steps of an If's branches and a Loop's body (a Scan's too: it is
// lowered as a Loop of a known trip count) are ordinary steps
// between marks, and where kiln_run meets a mark every thread reads the
// same condition from memory and takes the same branch, so the threads
// still meet at every barrier. A Loop's header reads its iteration
// number, condition and trip count, then the threads meet once more
// before the body's first step (whose writes could otherwise reach the
// header's values before a slow thread read them), and again on leaving
// the loop (before what follows reuses the region). A run is not cut
// into parts inside control flow, and the profile gives a control step's
// whole time to its end mark.

// markKind is what a mark does.
type markKind int

const (
	markIf markKind = iota + 1
	markElse
	markEndIf
	markLoop
	markEndLoop
	// markHost is a host step (host.go): the run ends there, and the
	// runtime computes host step host before it runs the code on.
	markHost
)

// mark is a step that is a point of control flow, not a function.
type mark struct {
	kind markKind
	// cond is an If's condition or a Loop's; iter and trip a Loop's
	// iteration number and trip count (hasTrip: it has one).
	cond, iter, trip loc
	hasTrip          bool
	host             int
}

var markNames = map[markKind]string{markIf: "if", markElse: "else", markEndIf: "end_if", markLoop: "loop", markEndLoop: "end_loop", markHost: "host"}

// addMark appends mark m to the steps.
func (g *gen) addMark(m *mark) {
	g.steps = append(g.steps, step{mark: m, node: g.curNode})
	g.kernelNames = append(g.kernelNames, markNames[m.kind])
}

// lowerControl emits control step st: an If's branches between marks, a
// Loop's init, body between marks, and final copies.
func (g *gen) lowerControl(st *lower.Step) error {
	c := st.Control
	if c.Kind == lower.ControlIf {
		g.addMark(&mark{kind: markIf, cond: g.locOf(g.prog.ValueOf(c.Cond))})
		if err := g.lowerList(c.Bodies[0]); err != nil {
			return err
		}
		g.addMark(&mark{kind: markElse})
		if err := g.lowerList(c.Bodies[1]); err != nil {
			return err
		}
		g.addMark(&mark{kind: markEndIf})
		return nil
	}
	if err := g.lowerList(c.Init); err != nil {
		return err
	}
	m := &mark{kind: markLoop, cond: g.locOf(g.prog.ValueOf(c.CondIn)), iter: g.locOf(g.prog.ValueOf(c.Iter))}
	if c.Trip != nil {
		m.trip, m.hasTrip = g.locOf(g.prog.ValueOf(c.Trip)), true
	}
	g.addMark(m)
	if err := g.lowerList(c.Bodies[0]); err != nil {
		return err
	}
	g.addMark(&mark{kind: markEndLoop})
	return g.lowerList(c.Final)
}

// frame is an open If or Loop while the entry point is written.
type frame struct {
	kind markKind
	// If: the else and join blocks, the sense on entry, and the then
	// branch's last block and sense once it ends.
	elseB, join   *ll.Block
	sense0        value.Value
	thenB         *ll.Block
	thenSense     value.Value
	header, exit  *ll.Block
	headerSense   *ll.InstPhi
	begin, endIdx int // the marks' step indices
}

// entryPtr is a pointer of type et to loc l in entry point f.
func entryPtr(f *ll.Func, x entryArgs, l loc, et types.Type) value.Value {
	base, slots := x.a, value.Value(nil)
	switch l.space {
	case inWeights:
		base = x.w
	case inIO:
		slots = x.io
	}
	return llvm.EntryPtr(f, base, slots, int64(l.io), l.off, nil, 0, types.NewPointer(et))
}

// emitMark writes mark i into entry point f at block b and returns the
// block and barrier sense to go on with.
func (g *gen) emitMark(f *ll.Func, b *ll.Block, x entryArgs, bar *ll.Func, i int, sense value.Value, frames *[]*frame) (*ll.Block, value.Value) {
	m := g.steps[i].mark
	top := func() *frame { return (*frames)[len(*frames)-1] }
	pop := func() { *frames = (*frames)[:len(*frames)-1] }
	switch m.kind {
	case markIf:
		cond := b.NewLoad(i8, entryPtr(f, x, m.cond, i8))
		fr := &frame{kind: markIf, elseB: f.NewBlock(""), join: f.NewBlock(""), sense0: sense, begin: i}
		then := f.NewBlock("")
		b.NewCondBr(b.NewICmp(enum.IPredNE, cond, constant.NewInt(types.I8, 0)), then, fr.elseB)
		*frames = append(*frames, fr)
		return then, sense
	case markElse:
		fr := top()
		fr.thenB, fr.thenSense = b, sense
		b.NewBr(fr.join)
		return fr.elseB, fr.sense0
	case markEndIf:
		fr := top()
		pop()
		b.NewBr(fr.join)
		phi := fr.join.NewPhi(ll.NewIncoming(fr.thenSense, fr.thenB), ll.NewIncoming(sense, b))
		return fr.join, phi
	case markLoop:
		fr := &frame{kind: markLoop, header: f.NewBlock(""), exit: f.NewBlock(""), begin: i}
		b.NewBr(fr.header)
		h := fr.header
		fr.headerSense = h.NewPhi(ll.NewIncoming(sense, b))
		var goOn value.Value = h.NewICmp(enum.IPredNE, h.NewLoad(i8, entryPtr(f, x, m.cond, i8)), constant.NewInt(types.I8, 0))
		if m.hasTrip {
			iter := h.NewLoad(i64, entryPtr(f, x, m.iter, i64))
			trip := h.NewLoad(i64, entryPtr(f, x, m.trip, i64))
			goOn = h.NewAnd(goOn, h.NewICmp(enum.IPredSLT, iter, trip))
		}
		body := f.NewBlock("")
		h.NewCondBr(goOn, body, fr.exit)
		*frames = append(*frames, fr)
		return body, body.NewCall(bar, x.nth, x.bar, fr.headerSense)
	case markEndLoop:
		fr := top()
		pop()
		b.NewBr(fr.header)
		fr.headerSense.Incs = append(fr.headerSense.Incs, ll.NewIncoming(sense, b))
		return fr.exit, fr.exit.NewCall(bar, x.nth, x.bar, fr.headerSense)
	}
	return b, sense
}

// markEnd is the index of the mark that closes the If or Loop opened at
// step i.
func (g *gen) markEnd(i int) int {
	depth := 0
	for j := i; j < len(g.steps); j++ {
		switch m := g.steps[j].mark; {
		case m == nil:
		case m.kind == markIf || m.kind == markLoop:
			depth++
		case m.kind == markEndIf || m.kind == markEndLoop:
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(g.steps) - 1
}

// isControlNode reports whether n is a node codegen/lower lowers as a
// control step.
func isControlNode(n *ir.Node) bool {
	return n.Domain == "" && (n.OpType == "If" || n.OpType == "Loop" || n.OpType == "Scan")
}
