package cpu

import (
	"sort"

	"github.com/kiln-ml/kiln/ir"
)

// buffer is one arena allocation live over nodes [start, end].
type buffer struct {
	size       int64
	start, end int
	off        int64
	set        func(off int64)
}

// planMemory places every intermediate value (and each node's scratch) in
// one arena, reusing memory between buffers whose lifetimes do not overlap
// (greedy, largest first, lowest fitting offset). View ops (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity) alias their input instead of
// copying it.
func (g *gen) planMemory(outSet map[*ir.Value]bool) error {
	nodes := g.nodes
	root := func(v *ir.Value) *ir.Value {
		for {
			if a := g.alias[v]; a != nil {
				v = a
			} else if p, ok := g.within[v]; ok {
				v = p.into
			} else {
				return v
			}
		}
	}
	for _, n := range nodes {
		if g.skip[n] {
			continue
		}
		if info := opTable[n.OpType]; info != nil && n.Domain == "" && (info.view || info.viewIf != nil && info.viewIf(g, n)) &&
			!outSet[n.Outputs[0]] && n.Inputs[0].Type.Elem == n.Outputs[0].Type.Elem {
			g.alias[n.Outputs[0]] = n.Inputs[0]
		}
	}
	g.concatInPlace(outSet)
	bufs := map[*ir.Value]*buffer{}
	firstDef := map[*ir.Value]int{} // of buffers that values placed within them start before
	var order []*buffer
	for i, n := range nodes {
		if g.skip[n] {
			continue
		}
		for oi, o := range n.Outputs {
			if oi == 0 {
				o = g.outValue(n)
			}
			if o == nil || g.alias[o] != nil || outSet[o] {
				continue
			}
			if _, ok := g.within[o]; ok {
				if r := root(o); !outSet[r] {
					if _, seen := firstDef[r]; !seen {
						firstDef[r] = i
					}
				}
				continue
			}
			o := o
			start := i
			if d, ok := firstDef[o]; ok {
				start = d
			}
			b := &buffer{size: align64(int64(ir.RawLen(o.Type.Elem, numel(o)))), start: start, end: i}
			b.set = func(off int64) { g.locs[o] = loc{space: inArena, off: off} }
			bufs[o] = b
			order = append(order, b)
		}
		for _, v := range g.reads(n) {
			if v == nil {
				continue
			}
			if b := bufs[root(v)]; b != nil && b.end < i {
				b.end = i
			}
		}
		if info := opTable[n.OpType]; info != nil && info.scratch != nil {
			if sz := info.scratch(g, n); sz > 0 {
				n := n
				b := &buffer{size: align64(sz), start: i, end: i}
				b.set = func(off int64) { g.scratch[n] = off }
				order = append(order, b)
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].size > order[b].size })
	var placed []*buffer
	for _, b := range order {
		g.tensorBytes += b.size
		var conflicts []*buffer
		for _, p := range placed {
			if p.start <= b.end && b.start <= p.end {
				conflicts = append(conflicts, p)
			}
		}
		sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].off < conflicts[j].off })
		off := int64(0)
		for _, p := range conflicts {
			if off+b.size <= p.off {
				break
			}
			if e := p.off + p.size; e > off {
				off = e
			}
		}
		b.off = off
		b.set(off)
		placed = append(placed, b)
		if e := off + b.size; e > g.arenaBytes {
			g.arenaBytes = e
		}
	}
	return nil
}

// placement says a value is stored inside another one's buffer.
type placement struct {
	into *ir.Value
	off  int64 // bytes
}

// concatInPlace lets the producers of a Concat's inputs write straight
// into their slices of its output when each slice is contiguous (every
// dim before the axis is 1); the Concat then costs nothing. An input
// qualifies when a kernel of this graph writes it (not a graph input,
// constant, view or graph output) and it feeds no other such Concat.
func (g *gen) concatInPlace(outSet map[*ir.Value]bool) {
	written := map[*ir.Value]bool{}
	for _, n := range g.nodes {
		if !g.skip[n] {
			written[g.outValue(n)] = true
		}
	}
	for _, n := range g.nodes {
		if g.skip[n] || n.Domain != "" || n.OpType != "Concat" || g.fused[n] != nil {
			continue
		}
		out := n.Outputs[0]
		od := dimsOf(out)
		axis := normAxis(g.attrs(n).Int("axis"), len(od))
		if ir.Product(od[:axis]) != 1 || g.alias[out] != nil {
			continue
		}
		ok := true
		seen := map[*ir.Value]bool{}
		for _, v := range n.Inputs {
			_, placed := g.within[v]
			ok = ok && written[v] && !outSet[v] && g.alias[v] == nil && !placed && !seen[v] &&
				v.Type.Elem == out.Type.Elem && !g.isGraphInput(v)
			seen[v] = true
		}
		if !ok {
			continue
		}
		off := int64(0)
		for _, v := range n.Inputs {
			g.within[v] = placement{into: out, off: off}
			off += int64(ir.RawLen(v.Type.Elem, numel(v)))
		}
		g.inPlace[n] = true
	}
}
