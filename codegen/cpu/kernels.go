package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/codegen/llvm"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Ops the kernel layer (codegen/kernel) defines are lowered through it:
// the definition gives the kernels, kernel.CPUSchedule how each runs, and
// every kernel becomes one step. This file binds the layer's buffers to
// codegen's memory plan.

// kernelOp is a node lowered through the kernel layer: its definition's
// context, built once when support is checked.
type kernelOp struct {
	ctx *kernel.Ctx
}

// buffer returns the kernel-layer buffer of value v (the program's).
func (g *gen) buffer(v *ir.Value) *kernel.Buffer { return g.prog.Buffer(v) }

// symDims is v's dims as expressions of the symbols when its shape is
// symbolic (lower.Shaper), else nil.
func (g *gen) symDims(v *ir.Value) []*kernel.Expr {
	s, ok := g.symShapes[v]
	if !ok {
		return nil
	}
	dims := make([]*kernel.Expr, len(s.Dims))
	for i, d := range s.Dims {
		dims[i] = g.dimExpr(d)
	}
	return dims
}

// kernelsOf are node n's kernels and temporaries: its step's, when the
// driver built them (a node of the graph), else its own context's (a
// group's body node).
func (g *gen) kernelsOf(n *ir.Node) ([]*kernel.Kernel, []*kernel.Buffer, error) {
	if st := g.plan(n).step; st != nil && st.Node == n && onKernels(st) {
		var ks []*kernel.Kernel
		for _, pt := range st.Parts {
			ks = append(ks, pt.Kernel)
		}
		return ks, st.Temps, nil
	}
	ko, err := g.kernelCtx(n)
	if err != nil {
		return nil, nil, err
	}
	return ko.ctx.Kernels, ko.ctx.Temps, nil
}

// onKernels reports whether step st runs kernel-layer kernels the driver
// built (none of its parts is claimed).
func onKernels(st *lower.Step) bool {
	for _, pt := range st.Parts {
		if pt.Micro != nil {
			return false
		}
	}
	return true
}

// kernelCtx builds node n's kernels (once) or says why it cannot.
func (g *gen) kernelCtx(n *ir.Node) (*kernelOp, error) {
	if ko := g.plan(n).kernel; ko != nil {
		return ko, nil
	}
	in := make([]*kernel.Buffer, len(n.Inputs))
	consts := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = g.buffer(v)
		consts[i] = g.constOf(v)
	}
	out := make([]*kernel.Buffer, len(n.Outputs))
	for i, v := range n.Outputs {
		out[i] = g.buffer(v)
	}
	c, err := kernel.NewCtx(n, g.opsets, in, out, consts)
	if err != nil {
		return nil, err
	}
	if err := kernel.Build(c); err != nil {
		return nil, err
	}
	ko := &kernelOp{ctx: c}
	g.plan(n).kernel = ko
	return ko, nil
}

// supportsKernel reports what the kernel layer lacks for n, or nil.
func (g *gen) supportsKernel(n *ir.Node) *ops.UnsupportedError {
	if _, err := g.kernelCtx(n); err != nil {
		if ue, ok := err.(*ops.UnsupportedError); ok {
			return ue
		}
		return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain], Reason: err.Error()}
	}
	return nil
}

// kernelScratch is the scratch node n's kernels pass values through.
func (g *gen) kernelScratch(n *ir.Node) int64 {
	_, temps, err := g.kernelsOf(n)
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range temps {
		total += align64(g.tempBytes(t))
	}
	return total
}

// tempBytes is a scratch buffer's size at the symbols' maxima.
func (g *gen) tempBytes(b *kernel.Buffer) int64 {
	n, ok := kernel.EvalInt(b.Numel(), g.maxEnv())
	if !ok {
		panic(fmt.Sprintf("codegen/cpu: scratch %s has no size", b.Name))
	}
	return int64(ir.RawLen(b.DType, n))
}

// maxEnv maps every symbol to its maximum.
func (g *gen) maxEnv() map[string]int64 {
	env := map[string]int64{}
	for _, s := range g.syms {
		env[s.Name] = s.Max
	}
	return env
}

// lowerKernelOp emits node n's kernels, one step each.
func (g *gen) lowerKernelOp(n *ir.Node) error {
	kernels, ts, err := g.kernelsOf(n)
	if err != nil {
		return err
	}
	temps := map[*kernel.Buffer]int64{}
	var off int64
	for _, t := range ts {
		temps[t] = off
		off += align64(g.tempBytes(t))
	}
	for _, kern := range kernels {
		g.emitKernel(kern, temps)
	}
	return nil
}

// emitKernel emits one kernel as a step under the CPU schedule.
func (g *gen) emitKernel(kern *kernel.Kernel, temps map[*kernel.Buffer]int64) {
	if sl := g.slice; sl != nil && sl.n.Op != kernel.OpSym && g.sliceErr == nil {
		// kernelHost.Sym can make a plain symbol one sample, not an
		// expression of symbols: the kernel would cover too much.
		g.sliceErr = fmt.Errorf("a kernel-layer step (%s) inside a run per sample of the dynamic leading dim %s, which is not a plain symbol: pin the dim with cc build --shape", kern.Name, sl.n)
	}
	s := kernel.CPUSchedule(kern, g.vl)
	if g.opts.schedule != nil {
		s = g.opts.schedule(kern, s)
	}
	g.step(kern.Name, !s.Parallel, func(k *kfn) {
		f := llvm.NewFn(g.mod, k.F, k.Tid, k.Nth, kernelHost{g: g, k: k, temps: temps}, g.decls)
		f.B = k.B
		llvm.EmitCPU(f, kern, s)
		k.B = f.B
	})
}

// kernelHost binds the kernel layer's buffers to a step's memory.
type kernelHost struct {
	g     *gen
	k     *kfn
	temps map[*kernel.Buffer]int64 // scratch offsets of the node's temps
}

// Fast: AVX-512's vscalefps and vrcp14ps for the kernel layer's Exp and
// reciprocals, on vectors of 16 floats.
func (h kernelHost) Fast(t types.Type) bool {
	vt, ok := t.(*types.VectorType)
	return ok && vt.Len == 16 && vt.ElemType.Equal(f32) && !h.g.arm64() && hasFeature(h.g.feats, "avx512f")
}

func (h kernelHost) Scale(f *llvm.Fn, x, n value.Value) value.Value {
	return f.Call("llvm.x86.avx512.mask.scalef.ps.512", x.Type(), x, n, x, constant.NewInt(types.I16, -1), c32(4))
}

func (h kernelHost) RecipEstimate(f *llvm.Fn, x value.Value) value.Value {
	return f.Call("llvm.x86.avx512.rcp14.ps.512", x.Type(), x, x, constant.NewInt(types.I16, -1))
}

func (h kernelHost) Ptr(_ *llvm.Fn, b *kernel.Buffer) value.Value {
	mt := llvm.MemType(b.DType)
	if b.Data != nil {
		return h.k.locPtr(h.g.constLoc(b.Data), mt)
	}
	if b.Dim != "" { // a data-dependent dim's entry in the dims table
		i, ok := h.g.symIndex[b.Dim]
		if !ok {
			panic(fmt.Sprintf("codegen/cpu: unknown data-dependent dim %q", b.Dim))
		}
		return h.k.locPtr(loc{space: inIO, io: h.g.symSlot(), off: 8 * int64(i)}, mt)
	}
	if b.ID < 0 {
		off, ok := h.temps[b]
		if !ok {
			panic(fmt.Sprintf("codegen/cpu: scratch %s has no place", b.Name))
		}
		return h.k.locPtr(loc{space: inArena, off: h.g.curStep.Scratch + off}, mt)
	}
	return h.k.locPtr(h.g.locOf(h.g.prog.ValueOf(b)), mt)
}

// Sym reads a symbol's value; inside a step compiled per sample
// (dynamic.go), the sliced leading dim is 1: the step's pointers are at
// its sample, and a kernel over the whole dim would run past it.
func (h kernelHost) Sym(_ *llvm.Fn, name string) value.Value {
	if sl := h.g.slice; sl != nil && sl.n.Op == kernel.OpSym && sl.n.Name == name {
		return c64(1)
	}
	return h.k.symValue(name)
}
