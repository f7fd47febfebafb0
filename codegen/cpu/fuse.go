package cpu

import (
	"fmt"
	"slices"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Fusion is decided by the passes (passes/fuse*.go), which leave
// kiln.FusionGroup nodes; this file turns each into what the lowering
// functions take, without searching for patterns again:
//
//   - an epilogue group ("conv", "gemm", "matmul") becomes its base node in
//     g.nodes, its plan's biasAdd, residualAdd and clamp saying what its
//     store applies and out where it writes (the group's output). The
//     store applies the activation: a clamp (Relu, Clip) as bounds, any
//     other function of the value alone as a kernel-layer expression
//     (clampExpr); one that reads another tensor runs as an in-place
//     elementwise step right after.
//   - an elementwise group becomes one kernel-layer map: each body node's
//     kernel inlined into the next (kernel.Inline); a layernorm group a
//     layerNorm (ops_norm.go) whose prologue and epilogue are such maps.
//
// A group whose body this backend cannot compute as one kernel is an
// error naming the group; it is never lowered as something else.

func isGroup(n *ir.Node) bool { return n.Domain == ir.KilnDomain && n.OpType == ops.FusionGroup }

// prepareGroups sets g.nodes: the program's steps' nodes with each
// fusion group ready to lower, its step then running as the node g.nodes
// holds for it.
func (g *gen) prepareGroups() error {
	g.nodes = nil
	var steps []*lower.Step // every step of a node, sub-programs' too
	g.prog.Walk(func(st *lower.Step) {
		if st.Const == nil && st.Node != nil {
			steps = append(steps, st)
		}
	})
	for _, st := range steps {
		n := st.Node
		if !isGroup(n) {
			g.plan(n).step = st
			g.nodes = append(g.nodes, n)
			continue
		}
		body := n.Attr("body").G
		if len(body.Nodes) == 0 || body.Nodes[len(body.Nodes)-1].Outputs[0] != body.Outputs[0] {
			return fmt.Errorf("codegen/cpu: %s: the body's last node does not compute its output", n)
		}
		kind, roles, err := ops.GroupOf(n)
		if err != nil {
			return fmt.Errorf("codegen/cpu: %w", err)
		}
		lowered := n // what g.nodes holds for the group
		switch kind {
		case ops.GroupConv, ops.GroupGemm, ops.GroupMatMul:
			lowered, err = g.prepareEpilogue(n, body.Nodes, roles)
		case ops.GroupConvDepthwise:
			lowered, err = g.prepareExpandDW(n, body.Nodes, roles)
		case ops.GroupElementwise:
			var kern *kernel.Kernel
			kern, err = g.fusedMap(body.Nodes, n.Outputs[0])
			p := g.plan(n)
			p.lower = func() error { g.emitKernel(kern, nil); return nil }
			p.layered = true
		case ops.GroupQConv, ops.GroupQGemm, ops.GroupQMatMul, ops.GroupQAdd, ops.GroupQMul, ops.GroupQPool, ops.GroupQLut:
			err = g.prepareQGroup(n, kind, body.Nodes, roles) // ops_qgroup.go
		case ops.GroupLayerNorm:
			var ln *layerNorm
			ln, err = g.layerNormOf(body.Nodes, roles, n.Outputs[0])
			g.plan(n).lower = func() error { return g.lowerLayerNorm(ln) }
		default:
			err = fmt.Errorf("unknown kind %q", kind)
		}
		if err != nil {
			return fmt.Errorf("codegen/cpu: %s: %w", n, err)
		}
		if a := n.Attr("algorithm"); a != nil {
			if a.S == "" {
				return fmt.Errorf("codegen/cpu: %s: the algorithm recorded is empty", n)
			}
			g.plan(lowered).algorithm = a.S
		}
		st.Node = lowered
		st.Parts[0].Micro.Data = claimed{g, lowered}
		g.plan(lowered).step = st
		g.nodes = append(g.nodes, lowered)
	}
	return nil
}

// supportsGroup checks every node of a group's body.
func (g *gen) supportsGroup(n *ir.Node) *ops.UnsupportedError {
	for _, b := range n.Attr("body").G.Nodes {
		if ue := g.supports(b); ue != nil {
			return ue
		}
	}
	return nil
}

// prepareEpilogue reads an epilogue group's body by its roles (checked
// by ops.GroupOf: the base Conv, Gemm or MatMul; a bias Add; a residual
// Add; activations, in that order) and returns the base node, set up to
// write the group's output.
func (g *gen) prepareEpilogue(fg *ir.Node, body []*ir.Node, roles []ops.Role) (*ir.Node, error) {
	base, rest := body[0], body[1:]
	if roles[0] != ops.RoleBase || !slices.Contains([]string{"Conv", "Gemm", "MatMul"}, base.OpType) || base.Domain != "" {
		return nil, fmt.Errorf("an epilogue group's base is %s", base)
	}
	roles = roles[1:]
	p := g.plan(base)
	v := base.Outputs[0]
	if len(rest) > 0 && roles[0] == ops.RoleBias {
		if base.OpType != "MatMul" || !g.isBiasAdd(rest[0], v) {
			return nil, fmt.Errorf("%s is not a bias this backend adds", rest[0])
		}
		p.biasAdd, v, rest, roles = rest[0], rest[0].Outputs[0], rest[1:], roles[1:]
	}
	if len(rest) > 0 && roles[0] == ops.RoleResidual {
		if rest[0].OpType != "Add" || residual(rest[0], v) == nil {
			return nil, fmt.Errorf("%s is not a residual Add of the product", rest[0])
		}
		p.residualAdd, v, rest, roles = rest[0], rest[0].Outputs[0], rest[1:], roles[1:]
	}
	if slices.ContainsFunc(roles, func(r ops.Role) bool { return r != ops.RoleActivation }) {
		return nil, fmt.Errorf("an epilogue group's roles are out of order")
	}
	out := fg.Outputs[0]
	p.out = out
	if g.handInfo(base) == nil {
		return g.prepareLayerEpilogue(base, body[1:], out)
	}
	if len(rest) == 1 && g.storeActivation(rest[0]) {
		p.clamp = rest[0]
		return base, nil
	}
	if len(rest) == 0 {
		return base, nil
	}
	post, err := g.fusedMap(rest, out)
	if err != nil {
		return nil, err
	}
	if e := g.storeActExpr(post, v); e != nil {
		p.clampExpr = e
		return base, nil
	}
	// Else it runs over the stored output in place: the pre-activation
	// value v is read from out itself, at the same point.
	ob := g.buffer(out)
	post.Value = kernel.Inline(post.Value, map[*kernel.Buffer]*kernel.Kernel{
		g.buffer(v): {Out: ob, Value: kernel.Load(ob, kernel.Vars(ob.Rank())...)}})
	p.lower = func() error {
		if err := opTable[base.OpType].lower(g, base); err != nil {
			return err
		}
		g.emitKernel(post, nil)
		return nil
	}
	return base, nil
}

// storeActExpr returns post (a map over the product v) as an expression
// of the value alone, in the hole "y", or nil if it reads anything else:
// such an activation (SiLU, Sigmoid, HardSwish, GELU, ...) is computed in
// the store, on the value in registers.
func (g *gen) storeActExpr(post *kernel.Kernel, v *ir.Value) *kernel.Expr {
	y := kernel.Hole("y", ir.Float32)
	if e := g.scalarConsts(kernel.Inline(post.Value, map[*kernel.Buffer]*kernel.Kernel{g.buffer(v): {Value: y}})); pointwise(e) {
		return e
	}
	return nil
}

// prepareLayerEpilogue sets up an epilogue group whose base the kernel
// layer lowers (handInfo): the base's kernels write the group's output
// out, and the rest of the body (bias, residual, activation) runs over it
// in place as one map. Its plan's biasAdd and residualAdd stay set, so
// that the memory plan keeps the residual alive until then (reads).
func (g *gen) prepareLayerEpilogue(base *ir.Node, rest []*ir.Node, out *ir.Value) (*ir.Node, error) {
	if _, err := g.kernelCtx(base); err != nil {
		return nil, err
	}
	// The base's output buffer lives where the group's output does.
	g.prog.Bind(g.buffer(base.Outputs[0]), out)
	var post *kernel.Kernel
	if len(rest) > 0 {
		var err error
		if post, err = g.fusedMap(rest, out); err != nil {
			return nil, err
		}
	}
	p := g.plan(base)
	p.layered = true
	p.lower = func() error {
		if err := g.lowerKernelOp(base); err != nil {
			return err
		}
		if post != nil {
			g.emitKernel(post, nil)
		}
		return nil
	}
	return base, nil
}

// isBiasAdd reports whether Add a adds a constant vector along v's last dim.
func (g *gen) isBiasAdd(a *ir.Node, v *ir.Value) bool {
	if a.OpType != "Add" || len(a.Inputs) != 2 {
		return false
	}
	b := a.Inputs[0]
	if b == v {
		b = a.Inputs[1]
	}
	d := dimsOf(v)
	t := g.constOf(b)
	return t != nil && b.Type.Elem == ir.Float32 && len(d) > 0 && slices.Equal(t.Dims, d[len(d)-1:])
}

// storeActivation reports whether the store can apply activation n: a
// clamp (Relu, or Clip with constant bounds).
func (g *gen) storeActivation(n *ir.Node) bool {
	if n.Domain != "" || n.OpType != "Relu" && n.OpType != "Clip" {
		return false
	}
	_, _, err := clipBounds(g, n)
	return n.OpType == "Relu" || err == nil
}

// scalarConsts returns e with each load of a one-element constant (GELU's
// √2, SiLU-like scales) replaced by its value.
func (g *gen) scalarConsts(e *kernel.Expr) *kernel.Expr {
	defs := map[*kernel.Buffer]*kernel.Kernel{}
	var walk func(e *kernel.Expr)
	walk = func(e *kernel.Expr) {
		if e.Op == kernel.OpLoad && e.Buf != nil && defs[e.Buf] == nil {
			if t := g.constOf(g.prog.ValueOf(e.Buf)); t != nil && t.Len() == 1 && t.DType.IsFloat() {
				defs[e.Buf] = &kernel.Kernel{Value: kernel.Const(t.DType, t.Float64At(0))}
			}
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(e)
	if len(defs) == 0 {
		return e
	}
	return kernel.Inline(e, defs)
}

// pointwise reports whether e is a function of the hole alone (no loads,
// coordinates or dims), as a store can compute it.
func pointwise(e *kernel.Expr) bool {
	switch e.Op {
	case kernel.OpLoad, kernel.OpLoadOr, kernel.OpVar, kernel.OpRVar, kernel.OpSym, kernel.OpAcc:
		return false
	}
	for _, a := range e.Args {
		if !pointwise(a) {
			return false
		}
	}
	return true
}

// evalHole computes pointwise expression e of the vector v (its hole "y")
// in the current block.
func (k *kfn) evalHole(e *kernel.Expr, v value.Value) value.Value {
	f := llvm.NewFn(k.g.mod, k.F, k.Tid, k.Nth, kernelHost{g: k.g, k: k}, k.g.decls)
	f.B = k.B
	p := llvm.NewPoint(f, nil)
	p.VL = int(v.Type().(*types.VectorType).Len)
	p.Holes = map[string]value.Value{"y": v}
	r := p.EvalVec(e)
	k.B = f.B
	return r
}

// fusedMap is the one kernel computing the last of nodes into out: every
// node's kernel-layer definition must be a single map, and each is inlined
// into the nodes that read it.
func (g *gen) fusedMap(nodes []*ir.Node, out *ir.Value) (*kernel.Kernel, error) {
	defs := map[*kernel.Buffer]*kernel.Kernel{}
	var last *kernel.Kernel
	for _, n := range nodes {
		ko, err := g.kernelCtx(n)
		if err != nil {
			return nil, err
		}
		ks := ko.ctx.Kernels
		if len(ks) != 1 || !kernel.Inlinable(ks[0]) || len(ko.ctx.Temps) > 0 {
			return nil, fmt.Errorf("%s cannot be computed in a fused loop", n)
		}
		defs[ks[0].Out] = ks[0]
		last = ks[0]
	}
	if last == nil {
		return nil, fmt.Errorf("an empty fusion group")
	}
	ob := g.buffer(out)
	return &kernel.Kernel{Name: nodes[len(nodes)-1].OpType, Out: ob, Space: ob.Dims, Value: kernel.Inline(last.Value, defs)}, nil
}

// unfused returns a view of m with every fusion group's body in place of
// the group, for estimates made per original node (maxThreads).
func unfused(m *ir.Model) *ir.Model {
	g := *m.Graph
	g.Nodes = nil
	for _, n := range m.Graph.Nodes {
		if isGroup(n) {
			g.Nodes = append(g.Nodes, n.Attr("body").G.Nodes...)
		} else {
			g.Nodes = append(g.Nodes, n)
		}
	}
	mm := *m
	mm.Graph = &g
	return &mm
}
