package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
)

// planMemory places every intermediate value (and each node's scratch) in
// one arena with passes.PlanMemory. The hooks say what this backend
// materializes: folded nodes run nothing, graph outputs live in io, a
// fused node writes its last fused node's output and reads its residual,
// view ops (opInfo.view, viewIf) alias their input, opInfo.scratch sizes
// each node's scratch, and a Concat whose inputs the planner places in its
// output (ConcatInPlace) runs no kernel.
func (g *gen) planMemory() error {
	var nodes []*ir.Node
	for _, n := range g.nodes {
		if !g.plan(n).folded {
			nodes = append(nodes, n)
		}
	}
	p, err := passes.PlanMemory(nodes, passes.MemoryHooks{
		Limits:  g.opts.Limits,
		InArena: func(v *ir.Value) bool { return !g.isOutput[v] },
		View: func(n *ir.Node) bool {
			if n.Domain != "" {
				return false
			}
			if info := g.handInfo(n); info != nil {
				return info.view || info.viewIf != nil && info.viewIf(g, n)
			}
			return n.OpType == "Transpose" && transposeIsView(g, n)
		},
		Reads:         g.reads,
		Writes:        g.writesOf,
		ConcatInPlace: func(n *ir.Node) bool { return g.plan(n).lower == nil },
		Scratch: func(n *ir.Node) int64 {
			p := g.plan(n)
			p.scratchBytes = g.scratchBytes(n)
			return p.scratchBytes
		},
	})
	if err != nil {
		return err
	}
	for v, in := range p.Aliases {
		g.alias[v] = in
	}
	g.within = p.Within
	for n := range p.InPlace {
		g.plan(n).inPlace = true
	}
	for _, b := range p.Buffers {
		if b.Value != nil {
			g.locs[b.Value] = loc{space: inArena, off: b.Offset}
		} else {
			q := g.plan(b.Node)
			q.scratch, q.hasScratch = b.Offset, true
		}
	}
	g.arenaBytes, g.tensorBytes = p.ArenaBytes, p.TensorBytes
	return nil
}

// scratchBytes is the scratch node n's lowering needs: its group's, its
// hand-written row's or its kernels' temporaries.
func (g *gen) scratchBytes(n *ir.Node) int64 {
	if p := g.plan(n); p.hasGroupScratch {
		return p.groupScratch
	}
	if info := g.handInfo(n); info != nil {
		if info.scratch != nil {
			return info.scratch(g, n)
		}
		return 0
	}
	return g.kernelScratch(n)
}
