package cpu

import (
	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
)

// nodePlan is how one node is lowered: what the stages (Stages) decide
// about it, which the later stages read and check and the dump show. A
// node's record is made the first time a stage asks about it (plan); the
// nodes lowered are g.nodes, the others (a group's body nodes) hold what
// their group's lowering reads of them.
type nodePlan struct {
	// step is the program's step the node runs as (groups).
	step *lower.Step
	// row is the hand-written row the node runs on, nil for the kernel
	// layer, once rowDecided (handInfo decides, once).
	row        *opInfo
	rowDecided bool
	// kernel is the node's kernel-layer context, built once (kernelCtx).
	kernel *kernelOp
	// qop is an ONNX integer op's reading, made once (qlinOfOp).
	qop *qlin

	// For the base Conv, Gemm or MatMul of an epilogue group (groups,
	// fuse.go): the bias Add (MatMul) and the residual Add its store
	// applies, its activation as a clamp (Relu, Clip) or else as an
	// expression of the stored value in the hole "y" (clampExpr), and
	// out, the value it writes: the group's output. A conv-dw group's
	// expansion has a clamp or clampExpr alone.
	biasAdd, residualAdd, clamp *ir.Node
	clampExpr                   *kernel.Expr
	out                         *ir.Value
	// expansion is, for the depthwise Conv of a conv-dw group, the 1×1
	// Conv it computes its input with (ops_conv_expand.go).
	expansion *ir.Node
	// lower is the lowering of a fusion group, or of a base node that
	// runs more than its op's row (groups); layered says it runs on the
	// kernel layer, which needs no per-sample slicing (dynamic.go).
	lower   func() error
	layered bool
	// groupScratch, when hasGroupScratch, is the scratch of a group
	// lowered whole (ops_qgroup.go), which the memory plan takes instead
	// of its op's.
	groupScratch    int64
	hasGroupScratch bool

	// algorithm is the convolution algorithm its group records
	// (passes' conv-layout; "": none), winograd the Winograd variant the
	// convolution runs as (conv-algorithms; nil: direct).
	algorithm string
	winograd  *winoSpec

	// scratchBytes is the scratch the memory plan sized for the node
	// (its step says where it is).
	scratchBytes int64
}

// plan returns node n's record, made on first use.
func (g *gen) plan(n *ir.Node) *nodePlan {
	p := g.plans[n]
	if p == nil {
		p = &nodePlan{}
		g.plans[n] = p
	}
	return p
}

// lowering names how node n is lowered once groups has run, or "" when
// nothing can lower it: the order is the lower stage's (a plan's own
// lowering, else its op's hand-written row, else its kernels).
func (g *gen) lowering(n *ir.Node) string {
	p := g.plan(n)
	switch {
	case isControlNode(n):
		return "control flow"
	case g.prog.InPlace[n]:
		return "in place"
	case p.lower != nil && p.layered:
		return "group on the kernel layer"
	case p.lower != nil:
		return "group on hand-written kernels"
	case isGroup(n):
		return ""
	case g.handInfo(n) != nil:
		return "hand-written"
	case p.kernel != nil || p.step != nil && onKernels(p.step):
		return "kernel layer"
	}
	return ""
}
