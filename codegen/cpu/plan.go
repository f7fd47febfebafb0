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
func (g *gen) planMemory(outSet map[*ir.Value]bool) error {
	var nodes []*ir.Node
	for _, n := range g.nodes {
		if !g.skip[n] {
			nodes = append(nodes, n)
		}
	}
	p, err := passes.PlanMemory(nodes, passes.MemoryHooks{
		Limits:  g.opts.Limits,
		InArena: func(v *ir.Value) bool { return !outSet[v] },
		View: func(n *ir.Node) bool {
			if n.Domain != "" {
				return false
			}
			if info := g.handInfo(n); info != nil {
				return info.view || info.viewIf != nil && info.viewIf(g, n)
			}
			return n.OpType == "Transpose" && transposeIsView(g, n)
		},
		Reads: g.reads,
		Writes: func(n *ir.Node) []*ir.Value {
			if len(n.Outputs) == 0 {
				return nil
			}
			return append([]*ir.Value{g.outValue(n)}, n.Outputs[1:]...)
		},
		ConcatInPlace: func(n *ir.Node) bool { return g.fused[n] == nil },
		Scratch: func(n *ir.Node) int64 {
			if s, ok := g.groupScratch[n]; ok {
				return s
			}
			if info := g.handInfo(n); info != nil {
				if info.scratch != nil {
					return info.scratch(g, n)
				}
				return 0
			}
			return g.kernelScratch(n)
		},
	})
	if err != nil {
		return err
	}
	for v, in := range p.Aliases {
		g.alias[v] = in
	}
	g.within, g.inPlace = p.Within, p.InPlace
	for _, b := range p.Buffers {
		if b.Value != nil {
			g.locs[b.Value] = loc{space: inArena, off: b.Offset}
		} else {
			g.scratch[b.Node] = b.Offset
		}
	}
	g.arenaBytes, g.tensorBytes = p.ArenaBytes, p.TensorBytes
	return nil
}
