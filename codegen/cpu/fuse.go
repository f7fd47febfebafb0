package cpu

import (
	"slices"
	"sort"

	"github.com/kiln-ml/kiln/ir"
)

// Fusion rewrites codegen's list of nodes (g.nodes; the model's graph is
// left as it is): patterns become one fused node each, lowered by one
// kernel, so intermediates never reach memory.
//
//   - kiln.Elementwise: a DAG of elementwise nodes over one output shape
//     (inputs broadcast), computed in one vectorized pass; a Transpose whose
//     only readers are in the DAG is read through strides instead of
//     copied.
//   - kiln.LayerNorm: the decomposed LayerNormalization exporters emit
//     (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div) as one
//     row-wise kernel. An elementwise DAG computing its input (a residual
//     Add) is evaluated on the fly as it reads, and one applied to its
//     output (scale and bias) as it writes.
//
// A fused node's Inputs are every tensor its kernel reads, so liveness in
// planMemory sees them; its Outputs are what it writes.
//
// These are graph rewrites in all but name: once the IR has kiln-domain
// fused ops with reference kernels, they belong in passes/ (a "fuse"
// pass), with this file only lowering the fused ops.

// fusion is the state of one rewrite.
type fusion struct {
	g      *gen
	outSet map[*ir.Value]bool
	uses   map[*ir.Value][]*ir.Node
	order  map[*ir.Node]int
	taken  map[*ir.Node]bool // absorbed into some fused node
}

func (g *gen) fuse(outSet map[*ir.Value]bool) {
	f := &fusion{g: g, outSet: outSet, uses: map[*ir.Value][]*ir.Node{}, order: map[*ir.Node]int{}, taken: map[*ir.Node]bool{}}
	for i, n := range g.nodes {
		f.order[n] = i
		if g.skip[n] {
			continue
		}
		for _, v := range uniqueInputs(n) {
			f.uses[v] = append(f.uses[v], n)
		}
	}
	// Patterns that contain elementwise nodes go first, so the generic
	// grouping does not split them.
	var norms []*layerNorm
	for _, n := range g.nodes {
		if ln := f.matchLayerNorm(n); ln != nil {
			norms = append(norms, ln)
		}
	}
	groups := f.groupElementwise()
	byRoot := map[*ir.Node]*ewGroup{}
	for _, gr := range groups {
		byRoot[gr.root()] = gr
	}
	// The fused nodes, by the node whose position they take: the last node
	// they absorb, after everything they read is computed.
	at := map[*ir.Node]*ir.Node{}
	for _, ln := range norms {
		if p := ln.x.Producer; p != nil && byRoot[p] != nil && !outSet[ln.x] && f.onlyUsedBy(ln.x, ln.nodes) && byRoot[p].rowFriendly() {
			ln.pro = byRoot[p]
			delete(byRoot, p)
			f.takeGroup(ln.pro)
		}
		last := ln.nodes[len(ln.nodes)-1]
		if u := f.single(ln.y); u != nil {
			if gr := byRoot[f.rootOf(u, groups)]; gr != nil && slices.Equal(gr.dims, dimsOf(ln.y)) && gr.rowFriendly() {
				ln.epi, gr.hole = gr, ln.y
				delete(byRoot, gr.root())
				f.takeGroup(gr)
				last = gr.root()
			}
		}
		f.takeAll(ln.nodes)
		ln := ln
		at[last] = g.fusedNode("LayerNorm", last.Name, ln.reads(), ln.out(), func() error { return g.lowerLayerNorm(ln) })
	}
	for root, gr := range byRoot {
		gr := gr
		f.takeGroup(gr)
		at[root] = g.fusedNode("Elementwise", root.Name, gr.reads(), gr.out, func() error { return g.lowerGroup(gr) })
	}
	var nodes []*ir.Node
	for _, n := range g.nodes {
		if fn := at[n]; fn != nil {
			nodes = append(nodes, fn)
		} else if !f.taken[n] {
			nodes = append(nodes, n)
		}
	}
	g.nodes = nodes
}

// fusedNode makes a kiln-domain node standing for a fused kernel.
func (g *gen) fusedNode(op, name string, reads []*ir.Value, out *ir.Value, lower func() error) *ir.Node {
	n := &ir.Node{Domain: "kiln", OpType: op, Name: name, Inputs: reads, Outputs: []*ir.Value{out}}
	g.fused[n] = lower
	return n
}

func uniqueInputs(n *ir.Node) []*ir.Value {
	var vs []*ir.Value
	seen := map[*ir.Value]bool{}
	for _, v := range n.Inputs {
		if v != nil && !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	return vs
}

func (f *fusion) takeAll(ns []*ir.Node) {
	for _, n := range ns {
		f.taken[n] = true
	}
}

// takeGroup marks a group's nodes, and the Transposes it reads through, as
// absorbed.
func (f *fusion) takeGroup(gr *ewGroup) {
	f.takeAll(gr.nodes)
	for _, l := range gr.leaves {
		if l.from != nil {
			f.taken[l.from] = true
		}
	}
}

// onlyUsedBy reports whether every reader of v is in set.
func (f *fusion) onlyUsedBy(v *ir.Value, set []*ir.Node) bool {
	for _, u := range f.uses[v] {
		found := false
		for _, n := range set {
			found = found || n == u
		}
		if !found {
			return false
		}
	}
	return true
}

// single returns the one reader of v, or nil.
func (f *fusion) single(v *ir.Value) *ir.Node {
	if us := f.uses[v]; len(us) == 1 && !f.outSet[v] {
		return us[0]
	}
	return nil
}

func (f *fusion) rootOf(n *ir.Node, groups []*ewGroup) *ir.Node {
	for _, gr := range groups {
		for _, m := range gr.nodes {
			if m == n {
				return gr.root()
			}
		}
	}
	return nil
}

// fusible reports whether n may join an elementwise group.
func (f *fusion) fusible(n *ir.Node) bool {
	if f.g.skip[n] || f.taken[n] || n.Domain != "" || len(n.Outputs) != 1 || n.Outputs[0].Type.Elem != ir.Float32 {
		return false
	}
	fn, _ := f.g.ewFn(n)
	return fn != nil
}

// groupElementwise forms the elementwise groups: walking the nodes
// backwards, each ungrouped fusible node roots a group, which then takes
// in every fusible producer of the same output shape whose readers are
// all in the group.
func (f *fusion) groupElementwise() []*ewGroup {
	var groups []*ewGroup
	member := map[*ir.Node]*ewGroup{}
	for i := len(f.g.nodes) - 1; i >= 0; i-- {
		n := f.g.nodes[i]
		if !f.fusible(n) || member[n] != nil {
			continue
		}
		gr := &ewGroup{nodes: []*ir.Node{n}, out: n.Outputs[0], dims: dimsOf(n.Outputs[0])}
		member[n] = gr
		for grown := true; grown; {
			grown = false
			for _, m := range gr.nodes {
				_, operands := f.g.ewFn(m)
				for _, oi := range operands {
					v := m.Inputs[oi]
					p := v.Producer
					if p == nil || member[p] != nil || !f.fusible(p) || f.outSet[v] || !slices.Equal(dimsOf(v), gr.dims) {
						continue
					}
					all := true
					for _, u := range f.uses[v] {
						all = all && member[u] == gr
					}
					if all {
						gr.nodes = append(gr.nodes, p)
						member[p] = gr
						grown = true
					}
				}
			}
		}
		sort.Slice(gr.nodes, func(a, b int) bool { return f.order[gr.nodes[a]] < f.order[gr.nodes[b]] })
		f.findLeaves(gr, member)
		groups = append(groups, gr)
	}
	return groups
}

// findLeaves lists the values a group reads from outside, with the strides
// they are read at; a Transpose read only by the group is read through.
func (f *fusion) findLeaves(gr *ewGroup, member map[*ir.Node]*ewGroup) {
	seen := map[*ir.Value]bool{}
	for _, n := range gr.nodes {
		_, operands := f.g.ewFn(n)
		for _, oi := range operands {
			v := n.Inputs[oi]
			if seen[v] || v.Producer != nil && member[v.Producer] == gr {
				continue
			}
			seen[v] = true
			l := &ewLeaf{v: v, buf: v, str: bstrides(dimsOf(v), gr.dims)}
			if t := f.g.constOf(v); t != nil && t.Len() == 1 && v.Type.Elem == ir.Float32 {
				c := float32(t.Float64At(0))
				l.c = &c
			} else if t := v.Producer; t != nil && t.OpType == "Transpose" && t.Domain == "" && !f.g.skip[t] && !f.taken[t] &&
				!f.outSet[v] && f.onlyUsedBy(v, gr.nodes) && f.g.alias[v] == nil {
				if str, ok := f.g.transposeStrides(t, gr.dims); ok {
					l.buf, l.str, l.from = t.Inputs[0], str, t
				}
			}
			gr.leaves = append(gr.leaves, l)
		}
	}
}

// transposeStrides returns the strides of Transpose t's input read as t's
// output broadcast to dims, when the innermost dim stays innermost (so the
// read stays vectorizable).
func (g *gen) transposeStrides(t *ir.Node, dims []int64) ([]int64, bool) {
	id, od := dimsOf(t.Inputs[0]), dimsOf(t.Outputs[0])
	perm := g.transposePerm(t)
	if len(perm) == 0 || perm[len(perm)-1] != int64(len(perm)-1) || len(od) > len(dims) {
		return nil, false
	}
	is := contiguous(id)
	str := make([]int64, len(dims))
	off := len(dims) - len(od)
	for i, p := range perm {
		if od[i] == dims[off+i] && od[i] != 1 { // else broadcast: stride 0
			str[off+i] = is[p]
		}
	}
	return str, true
}
