package ir

import "strconv"

// Namer hands out names no value or node of a graph uses, as UniqueName
// does, but lists the graph's names once: a pass that adds a node per
// match asks it instead of UniqueName, which walks the whole graph per
// call (quadratic in a graph of many matches).
type Namer struct {
	used map[string]bool
	// next is, per base, the least N whose base_N may be unused: every
	// smaller one was found used, and used names stay used, so a base
	// handed out k times costs O(k) in all, not O(k²).
	next map[string]int
	// probes counts the names Unique has looked up (TestNamerLinear
	// bounds it).
	probes int
}

// NewNamer returns a namer that knows no names yet (Reserve adds them).
func NewNamer() *Namer { return &Namer{used: map[string]bool{}, next: map[string]int{}} }

// Namer returns a namer over g's names now, subgraphs included. Names
// that join g afterwards without it (say from AddNode) need Reserve.
func (g *Graph) Namer() *Namer {
	n := NewNamer()
	g.visitNames(n.Reserve)
	return n
}

// Unique returns base, or base_N for the least N ≥ 1, whichever is unused,
// and marks it used: the name UniqueName gives for the same names.
func (n *Namer) Unique(base string) string {
	name := base
	n.probes++
	if n.used[base] {
		i := max(n.next[base], 1)
		for n.probes++; n.used[base+"_"+strconv.Itoa(i)]; n.probes++ {
			i++
		}
		name = base + "_" + strconv.Itoa(i)
		n.next[base] = i + 1
	}
	n.used[name] = true
	return name
}

// Reserve marks name used, for a name that joined the graph some other way.
func (n *Namer) Reserve(name string) { n.used[name] = true }
