package passes

import (
	"slices"
	"sort"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// fuseElementwisePass groups elementwise nodes into FusionGroups a backend
// computes in one pass over the output, intermediates in registers:
//
//   - kind "elementwise": a DAG of fusible nodes (elementwise ops the
//     target computes fused: Target.Fusible) over one output shape,
//     inputs broadcast. Walking the
//     nodes backwards, each ungrouped fusible node roots a group, which
//     takes in every fusible producer of the same output shape whose
//     readers are all in the group. A Transpose read only by the group and
//     keeping the innermost axis innermost joins it too (the backend reads
//     through strides, still vectorized, instead of copying).
//   - kind "layernorm": the decomposed LayerNormalization exporters emit
//     (fuse_layernorm.go), with the elementwise group computing its input
//     (a residual Add) and the one applied to its output (scale and bias)
//     when they can be evaluated row by row.
//
// A lone node with no Transpose to read through stays as it is: there is
// nothing to fuse.
func fuseElementwisePass(c *Context, m *ir.Model) error {
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	// Patterns that contain elementwise nodes go first, so the generic
	// grouping does not split them.
	var norms []*layerNorm
	for _, n := range m.Graph.Nodes {
		if ln := f.matchLayerNorm(n); ln != nil {
			norms = append(norms, ln)
		}
	}
	ews := f.groupElementwise()
	groupOf := groupsByNode(ews)
	byRoot := map[*ir.Node]*ewGroup{}
	for _, gr := range ews {
		byRoot[gr.root()] = gr
	}
	var groups []group
	for _, ln := range norms {
		if p := ln.x.Producer; p != nil && byRoot[p] != nil && !f.outSet[ln.x] && f.onlyUsedBy(ln.x, ln.core) && f.rowFriendly(byRoot[p]) {
			ln.pro = byRoot[p]
			delete(byRoot, p)
		}
		if u := f.single(ln.y); u != nil {
			if gr := byRoot[rootOf(u, groupOf)]; gr != nil && slices.Equal(gr.dims, ln.dims) && f.rowFriendly(gr) {
				ln.epi = gr
				delete(byRoot, gr.root())
			}
		}
		nodes, roles := ln.body()
		groups = append(groups, group{kind: ops.GroupLayerNorm, nodes: nodes, roles: roles})
	}
	for _, gr := range ews {
		if byRoot[gr.root()] == gr && (len(gr.nodes) > 1 || len(gr.through) > 0) {
			groups = append(groups, group{kind: ops.GroupElementwise, nodes: gr.body()})
		}
	}
	f.apply(groups)
	return nil
}

// operands returns which inputs of n a group computes with (constants
// among them are leaves, as any input produced outside the group), or nil
// when n cannot join a group: the target must compute it fused.
func (f *fuser) operands(n *ir.Node) []int {
	if f.taken[n] || len(n.Outputs) != 1 || !n.Outputs[0].Type.Shape.IsStatic() || !f.fusible(n) {
		return nil
	}
	var ins []int
	for i, v := range n.Inputs {
		if v != nil {
			ins = append(ins, i)
		}
	}
	return ins
}

// ewGroup is an elementwise DAG being formed.
type ewGroup struct {
	nodes   []*ir.Node // in graph order; the last is the root
	in      map[*ir.Node]bool
	dims    []int64    // the root's output dims
	through []*ir.Node // Transposes read through
}

func (gr *ewGroup) root() *ir.Node { return gr.nodes[len(gr.nodes)-1] }

// body lists the group's nodes in evaluation order: the Transposes read
// only outer values, so they go first.
func (gr *ewGroup) body() []*ir.Node { return append(slices.Clone(gr.through), gr.nodes...) }

// groupsByNode maps each node of the groups to its group.
func groupsByNode(groups []*ewGroup) map[*ir.Node]*ewGroup {
	of := map[*ir.Node]*ewGroup{}
	for _, gr := range groups {
		for _, n := range gr.nodes {
			of[n] = gr
		}
	}
	return of
}

// rootOf is the root of n's group, or nil.
func rootOf(n *ir.Node, groupOf map[*ir.Node]*ewGroup) *ir.Node {
	if gr := groupOf[n]; gr != nil {
		return gr.root()
	}
	return nil
}

func (f *fuser) groupElementwise() []*ewGroup {
	var groups []*ewGroup
	member := map[*ir.Node]*ewGroup{}
	nodes := f.g.Nodes
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if f.operands(n) == nil || member[n] != nil {
			continue
		}
		gr := f.growGroup(n, member)
		f.findThrough(gr)
		groups = append(groups, gr)
	}
	return groups
}

// growGroup forms the group rooted at root. A producer joins once every
// reader of its output has: readers counts a value's readers in the group,
// and each member's operands are looked at once, when it joins, so a group
// forms in time linear in its size (a chain of 10^5 nodes is one group).
func (f *fuser) growGroup(root *ir.Node, member map[*ir.Node]*ewGroup) *ewGroup {
	dims, _ := staticDims(root.Outputs[0])
	gr := &ewGroup{nodes: []*ir.Node{root}, in: map[*ir.Node]bool{root: true}, dims: dims}
	member[root] = gr
	readers := map[*ir.Value]int{}
	for work := []*ir.Node{root}; len(work) > 0; {
		m := work[len(work)-1]
		work = work[:len(work)-1]
		for _, oi := range f.operands(m) {
			v := m.Inputs[oi]
			if slices.Contains(m.Inputs[:oi], v) {
				continue // one reader however many times it reads v
			}
			readers[v]++
			p := v.Producer
			if p == nil || member[p] != nil || readers[v] < len(f.uses[v]) || f.operands(p) == nil || f.outSet[v] {
				continue
			}
			if d, _ := staticDims(v); !slices.Equal(d, gr.dims) {
				continue
			}
			gr.nodes = append(gr.nodes, p)
			gr.in[p] = true
			member[p] = gr
			work = append(work, p)
		}
	}
	sort.Slice(gr.nodes, func(a, b int) bool { return f.order[gr.nodes[a]] < f.order[gr.nodes[b]] })
	return gr
}

// findThrough records the Transposes the group may read through: the
// producer of a non-constant operand from outside, read by nothing else,
// keeping the last axis last (so the read stays contiguous).
func (f *fuser) findThrough(gr *ewGroup) {
	taken := map[*ir.Node]bool{}
	for _, l := range f.leaves(gr) {
		t := l.Producer
		if t == nil || !f.is(t, "Transpose") || f.outSet[l] || !f.onlyUsedByGroup(l, gr) || taken[t] {
			continue
		}
		if _, ok := f.scalar(l); ok {
			continue
		}
		rank := len(t.Inputs[0].Type.Shape.Dims)
		perm := t.Attr("perm")
		if rank > 0 && perm != nil && len(perm.Ints) == rank && perm.Ints[rank-1] == int64(rank-1) {
			gr.through = append(gr.through, t)
			taken[t] = true
		}
	}
}

// onlyUsedByGroup reports whether every reader of v is in the group.
func (f *fuser) onlyUsedByGroup(v *ir.Value, gr *ewGroup) bool {
	for _, u := range f.uses[v] {
		if !gr.in[u] {
			return false
		}
	}
	return true
}

// leaves lists the operands a group reads from outside, in order of first
// read.
func (f *fuser) leaves(gr *ewGroup) []*ir.Value {
	var vs []*ir.Value
	seen := map[*ir.Value]bool{}
	for _, n := range gr.nodes {
		for _, oi := range f.operands(n) {
			v := n.Inputs[oi]
			if (v.Producer == nil || !gr.in[v.Producer]) && !seen[v] {
				seen[v] = true
				vs = append(vs, v)
			}
		}
	}
	return vs
}

// rowFriendly reports whether a row-wise kernel (LayerNorm) can evaluate
// the group as it reads or writes rows of the last dim: the group has one,
// and every operand read from memory is float32 (each is then contiguous
// or broadcast along that dim, as read-through Transposes keep it last).
func (f *fuser) rowFriendly(gr *ewGroup) bool {
	for _, v := range f.leaves(gr) {
		if _, ok := f.scalar(v); !ok && v.Type.Elem != ir.Float32 {
			return false
		}
	}
	return len(gr.dims) > 0
}
