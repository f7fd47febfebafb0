package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/passes"
)

// memoryHooks are what this backend tells the driver's memory plan
// (passes.PlanMemory) beyond h: a fused node writes its last fused
// node's output and reads its residual, view ops (opInfo.view, viewIf)
// alias their input, opInfo.scratch sizes each node's scratch, and a
// Concat whose inputs the planner places in its output (ConcatInPlace)
// runs no kernel.
func (g *gen) memoryHooks(h passes.MemoryHooks) passes.MemoryHooks {
	h.View = g.isView
	h.Reads, h.Writes = g.reads, g.writesOf
	h.ConcatInPlace = func(n *ir.Node) bool { return g.plan(n).lower == nil }
	h.Scratch = func(n *ir.Node) int64 {
		p := g.plan(n)
		p.scratchBytes = g.scratchBytes(n)
		return p.scratchBytes
	}
	return h
}

// isView reports whether node n's output shares its input's bytes.
func (g *gen) isView(n *ir.Node) bool {
	if n.Domain != "" {
		return false
	}
	if info := g.handInfo(n); info != nil {
		return info.view || info.viewIf != nil && info.viewIf(g, n)
	}
	return n.OpType == "Transpose" && transposeIsView(g, n)
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
