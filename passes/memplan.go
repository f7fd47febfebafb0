package passes

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// MemoryHooks tell PlanMemory what a backend materializes. Nil fields
// take the default noted on each.
type MemoryHooks struct {
	// InArena reports whether a value a node writes needs an arena buffer;
	// graph outputs, for one, live in the caller's memory. Nil: all do.
	InArena func(v *ir.Value) bool
	// View reports whether n's output 0 may share the bytes of its input 0
	// (a reshape-like op). PlanMemory takes the alias only when the element
	// types match and the output is InArena: an output the caller owns
	// must be written.
	View func(n *ir.Node) bool
	// Reads lists the values n reads. Nil: n.Inputs.
	Reads func(n *ir.Node) []*ir.Value
	// Writes lists the values n writes. Nil: n.Outputs.
	Writes func(n *ir.Node) []*ir.Value
	// Scratch is the temporary memory n needs while it runs. Nil: none.
	Scratch func(n *ir.Node) int64
	// ConcatInPlace says the backend can skip Concat node n when its
	// inputs' producers write straight into their slices of its output;
	// PlanMemory then does so where each slice is contiguous. Nil: never.
	ConcatInPlace func(n *ir.Node) bool
	// Limits bound each buffer (MaxTensorBytes; scratch by MaxArenaBytes)
	// and the arena (MaxArenaBytes). Zero fields take ir.DefaultLimits.
	Limits ir.Limits
}

// MemoryPlan is where every intermediate value lives in one arena.
type MemoryPlan struct {
	// Buffers are in the order their nodes run.
	Buffers []*Buffer
	// Aliases maps a view's output to the value whose bytes it shares.
	Aliases map[*ir.Value]*ir.Value
	// Within places a Concat's inputs inside its output, and InPlace marks
	// those Concats: they need no kernel (see MemoryHooks.ConcatInPlace).
	Within  map[*ir.Value]Placement
	InPlace map[*ir.Node]bool
	// ArenaBytes is the arena's size; TensorBytes the sum of all buffers,
	// what the arena would be without reuse.
	ArenaBytes, TensorBytes int64
}

// Buffer is one arena allocation, live from the node that writes it
// (First) to the last node that reads it (Last), as indices into the nodes
// planned.
type Buffer struct {
	Value       *ir.Value // nil for scratch
	Node        *ir.Node  // the node whose scratch this is; nil for a value
	Size        int64     // bytes, a multiple of MemoryAlign
	First, Last int
	Offset      int64
}

// Placement says a value's bytes lie inside another value's, at Offset.
type Placement struct {
	Into   *ir.Value
	Offset int64
}

// MemoryAlign is the alignment of every buffer: a cache line, and the
// widest vector load (AVX-512).
const MemoryAlign = 64

var errNotStatic = errors.New("memory planning needs static shapes")

// PlanMemory places the buffers of nodes (in execution order) in one arena
// so that buffers whose lifetimes overlap never share bytes: greedily,
// largest first, each at the lowest offset that fits. Liveness is by node
// index, so a node's output never shares memory with its inputs (kernels
// need not support in-place updates). Sorts are stable, so equal sizes go
// in node order and the plan is deterministic. Sizes are computed with
// overflow checks; a buffer or arena past the limits is an *ir.LimitError
// naming the value (or, for the arena, its largest buffer).
func PlanMemory(nodes []*ir.Node, h MemoryHooks) (*MemoryPlan, error) {
	h.setDefaults()
	lim := h.Limits.OrDefaults()
	p := &MemoryPlan{Aliases: map[*ir.Value]*ir.Value{}, Within: map[*ir.Value]Placement{}, InPlace: map[*ir.Node]bool{}}
	for _, n := range nodes {
		if len(n.Inputs) == 0 || len(n.Outputs) == 0 || !h.View(n) {
			continue
		}
		in, out := n.Inputs[0], n.Outputs[0]
		if in != nil && out != nil && in.Type.Elem == out.Type.Elem && h.InArena(out) {
			p.Aliases[out] = in
		}
	}
	p.concatInPlace(nodes, h)
	owner := map[*ir.Value]*Buffer{}
	// firstWrite is, for a buffer that values placed within it fill, the
	// first node writing one of them: its lifetime starts there.
	firstWrite := map[*ir.Value]int{}
	for i, n := range nodes {
		for _, v := range h.Writes(n) {
			if v == nil || p.Aliases[v] != nil || !h.InArena(v) {
				continue
			}
			if _, ok := p.Within[v]; ok {
				if r := p.root(v); h.InArena(r) {
					if _, seen := firstWrite[r]; !seen {
						firstWrite[r] = i
					}
				}
				continue
			}
			dims, ok := v.Type.Shape.Ints()
			if !ok {
				return nil, fmt.Errorf("%s: %s has shape %s: %w", n, v.Name, v.Type, errNotStatic)
			}
			first := i
			if f, ok := firstWrite[v]; ok {
				first = f
			}
			size, err := lim.CheckTensor(fmt.Sprintf("%s: value %q", n, v.Name), v.Type.Elem, dims)
			if err != nil {
				return nil, err
			}
			b := &Buffer{Value: v, Size: alignUp(size), First: first, Last: i}
			owner[v] = b
			p.Buffers = append(p.Buffers, b)
		}
		for _, v := range h.Reads(n) {
			if b := owner[p.root(v)]; b != nil {
				b.Last = i
			}
		}
		if size := h.Scratch(n); size > 0 {
			if err := lim.CheckArena(fmt.Sprintf("%s: scratch", n), size); err != nil {
				return nil, err
			}
			p.Buffers = append(p.Buffers, &Buffer{Node: n, Size: alignUp(size), First: i, Last: i})
		}
	}
	if err := p.place(); err != nil {
		return nil, err
	}
	if err := lim.CheckArena("the arena"+p.largest(), p.ArenaBytes); err != nil {
		return nil, err
	}
	return p, nil
}

// largest names the plan's largest buffer, for an arena over its limit.
func (p *MemoryPlan) largest() string {
	var big *Buffer
	for _, b := range p.Buffers {
		if big == nil || b.Size > big.Size {
			big = b
		}
	}
	switch {
	case big == nil:
		return ""
	case big.Value != nil:
		return fmt.Sprintf(" (its largest buffer: %q, %s, %s)", big.Value.Name, big.Value.Type, ir.FormatBytes(big.Size))
	}
	return fmt.Sprintf(" (its largest buffer: the scratch of %s, %s)", big.Node, ir.FormatBytes(big.Size))
}

func (h *MemoryHooks) setDefaults() {
	if h.InArena == nil {
		h.InArena = func(*ir.Value) bool { return true }
	}
	if h.View == nil {
		h.View = func(*ir.Node) bool { return false }
	}
	if h.Reads == nil {
		h.Reads = func(n *ir.Node) []*ir.Value { return n.Inputs }
	}
	if h.Writes == nil {
		h.Writes = func(n *ir.Node) []*ir.Value { return n.Outputs }
	}
	if h.Scratch == nil {
		h.Scratch = func(*ir.Node) int64 { return 0 }
	}
	if h.ConcatInPlace == nil {
		h.ConcatInPlace = func(*ir.Node) bool { return false }
	}
}

// concatInPlace places the inputs of each Concat the backend allows inside
// its output when every slice is contiguous (all dims before the axis are
// 1, as for channels at batch 1). An input qualifies when a planned node
// writes it into the arena, it is not a view, and it is not placed in
// another Concat already (nor twice in this one).
func (p *MemoryPlan) concatInPlace(nodes []*ir.Node, h MemoryHooks) {
	written := map[*ir.Value]bool{}
	for _, n := range nodes {
		for _, v := range h.Writes(n) {
			written[v] = v != nil && h.InArena(v)
		}
	}
	for _, n := range nodes {
		if n.Domain != "" || n.OpType != "Concat" || len(n.Outputs) != 1 || !h.ConcatInPlace(n) {
			continue
		}
		out := n.Outputs[0]
		dims, ok := out.Type.Shape.Ints()
		if !ok || p.Aliases[out] != nil {
			continue
		}
		a := n.Attr("axis")
		if a == nil {
			continue
		}
		axis := a.I
		if axis < 0 {
			axis += int64(len(dims))
		}
		if axis < 0 || axis >= int64(len(dims)) || ir.Product(dims[:axis]) != 1 {
			continue
		}
		seen := map[*ir.Value]bool{}
		for _, v := range n.Inputs {
			_, placed := p.Within[v]
			ok = ok && v != nil && written[v] && p.Aliases[v] == nil && !placed && !seen[v] && v.Type.Elem == out.Type.Elem
			seen[v] = true
		}
		if !ok {
			continue
		}
		off := int64(0)
		for _, v := range n.Inputs {
			d, _ := v.Type.Shape.Ints()
			p.Within[v] = Placement{Into: out, Offset: off}
			off += int64(ir.RawLen(v.Type.Elem, ir.Product(d)))
		}
		p.InPlace[n] = true
	}
}

// root follows view aliases and in-place Concats to the value that owns
// the bytes.
func (p *MemoryPlan) root(v *ir.Value) *ir.Value {
	for {
		if a := p.Aliases[v]; a != nil {
			v = a
		} else if w, ok := p.Within[v]; ok {
			v = w.Into
		} else {
			return v
		}
	}
}

// place assigns offsets: largest buffer first, each at the lowest offset
// where it overlaps no placed buffer live at the same time. An arena
// whose end overflows int64 is an error.
func (p *MemoryPlan) place() error {
	order := slices.Clone(p.Buffers)
	slices.SortStableFunc(order, func(a, b *Buffer) int { return cmp.Compare(b.Size, a.Size) })
	placed := newLiveIndex(order)
	var conflicts []*Buffer
	for _, b := range order {
		conflicts = placed.overlapping(conflicts[:0], b.First, b.Last)
		slices.SortStableFunc(conflicts, func(a, b *Buffer) int { return cmp.Compare(a.Offset, b.Offset) })
		off := int64(0)
		for _, q := range conflicts {
			if off+b.Size <= q.Offset {
				break
			}
			off = max(off, q.Offset+q.Size)
		}
		end := ir.AddSizes(off, b.Size)
		if end < 0 {
			return ir.Limits{}.CheckArena("the arena"+p.largest(), -1)
		}
		b.Offset = off
		placed.add(b)
		p.ArenaBytes = max(p.ArenaBytes, end)
		if p.TensorBytes = ir.AddSizes(p.TensorBytes, b.Size); p.TensorBytes < 0 {
			p.TensorBytes = math.MaxInt64 // only reported
		}
	}
	return nil
}

// alignUp rounds n up to MemoryAlign; n is at most a limit, far below
// where this could overflow.
func alignUp(n int64) int64 { return (n + MemoryAlign - 1) &^ (MemoryAlign - 1) }

// Summary is the one-line report of the plan.
func (p *MemoryPlan) Summary() string {
	pct := 100.0
	if p.TensorBytes > 0 {
		pct = 100 * float64(p.ArenaBytes) / float64(p.TensorBytes)
	}
	return fmt.Sprintf("arena %d bytes vs %d bytes of tensors (%.0f%%)", p.ArenaBytes, p.TensorBytes, pct)
}

// Print writes the plan as a table: one row per buffer, then the aliases
// and the Summary.
func (p *MemoryPlan) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "buffer\tbytes\tlive\toffset")
	for _, b := range p.Buffers {
		var name string
		if b.Value != nil {
			name = b.Value.Name
		} else {
			name = "scratch of " + b.Node.String()
		}
		fmt.Fprintf(tw, "%s\t%d\t[%d,%d]\t%d\n", name, b.Size, b.First, b.Last, b.Offset)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var aliases []string
	for v, in := range p.Aliases {
		aliases = append(aliases, fmt.Sprintf("%s aliases %s\n", v.Name, in.Name))
	}
	for v, w := range p.Within {
		aliases = append(aliases, fmt.Sprintf("%s is in %s at +%d\n", v.Name, w.Into.Name, w.Offset))
	}
	slices.Sort(aliases)
	_, err := fmt.Fprintf(w, "%s%s\n", strings.Join(aliases, ""), p.Summary())
	return err
}

// memplanPass plans the final graph's arena with view aliasing and no
// scratch, and records it in c.Memory for reports. A backend re-plans
// with PlanMemory and its own hooks (fused nodes, kernel scratch), so its
// arena can differ. A graph with dynamic shapes gets no plan.
func memplanPass(c *Context, m *ir.Model) error {
	g := m.Graph
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	p, err := PlanMemory(g.Nodes, MemoryHooks{
		InArena: func(v *ir.Value) bool {
			p := v.Producer
			return !outputs[v] && !(p != nil && p.OpType == "Constant" && p.Domain == "")
		},
		View:          func(n *ir.Node) bool { return ops.MovementOf(n) == ops.View },
		ConcatInPlace: func(*ir.Node) bool { return true },
		Limits:        c.Limits,
		Reads: func(n *ir.Node) []*ir.Value {
			reads := n.Inputs
			for _, sg := range n.Subgraphs() {
				reads = append(slices.Clip(reads), sg.FreeValues()...)
			}
			return reads
		},
	})
	if errors.Is(err, errNotStatic) {
		c.Memory = nil
		return nil
	}
	c.Memory = p
	return err
}
