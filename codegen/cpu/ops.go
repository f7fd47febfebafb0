package cpu

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// opInfo is one row of what the CPU backend supports: the element types of
// the op's primary input, an optional check of attributes and constant
// inputs, the scratch memory a node needs, and its lowering to steps.
type opInfo struct {
	types   []ir.DType
	view    bool                          // the output may alias input 0 (same bytes, new shape)
	viewIf  func(g *gen, n *ir.Node) bool // view for some nodes only
	check   func(g *gen, n *ir.Node) error
	scratch func(g *gen, n *ir.Node) int64
	lower   func(g *gen, n *ir.Node) error
}

var (
	floatOnly = []ir.DType{ir.Float32}
	anyFixed  = []ir.DType{ir.Float32, ir.Int64, ir.Int32, ir.Uint8, ir.Int8, ir.Bool, ir.Float16, ir.BFloat16, ir.Uint16, ir.Int16, ir.Uint32, ir.Uint64, ir.Float64}
)

// opTable lists every op the backend lowers, by family (ops_*.go).
var opTable = map[string]*opInfo{}

// handInfo returns the hand-written lowering node n runs on, or nil when
// n is lowered through the kernel layer. This is the one place that
// decides: a node of an op in opTable runs on its row when the row takes
// it (its element type is in types and check accepts it); a node the row
// refuses runs on the kernel layer's definition of the op when there is
// one (weights known only at run time, other ranks and types, dynamic
// dims it cannot run per sample, ...); an op without a row, only there.
func (g *gen) handInfo(n *ir.Node) *opInfo {
	info := opTable[n.OpType]
	if info == nil || kernel.Lookup(n.OpType) == nil || n.Domain != "" && n.Domain != "ai.onnx" {
		return info
	}
	p := g.plan(n)
	if p.rowDecided {
		return p.row
	}
	if g.rowRefuses(info, n) != nil {
		info = nil
	} else if readsEmpty(n) {
		// The hand kernels tile their inputs; the kernel layer's
		// definitions reduce over an empty axis to the op's identity.
		info = nil
	} else if _, err := g.sliceLead(n); err != nil && !info.view {
		// Dynamic dims the hand kernel cannot run per sample. A view
		// runs no kernel where its output aliases its input, whatever
		// its dims (lowerList copies it flat where it does not).
		info = nil
	}
	p.row, p.rowDecided = info, true
	return info
}

// rowRefuses returns why row info cannot lower n, or nil.
func (g *gen) rowRefuses(info *opInfo, n *ir.Node) *ops.UnsupportedError {
	ue := &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain]}
	d := ir.Undefined
	if v := n.Input(0); v != nil {
		d = v.Type.Elem
	} else if v := n.Output(0); v != nil {
		d = v.Type.Elem
	}
	if !slices.Contains(info.types, d) {
		ue.DType = d
		return ue
	}
	if info.check != nil {
		if err := info.check(g, n); err != nil {
			ue.Reason = err.Error()
			return ue
		}
	}
	return nil
}

func register(rows map[string]*opInfo) {
	for k, v := range rows {
		opTable[k] = v
	}
}

// parallelWorth reports whether elementwise work of n elements is worth
// splitting across threads.
func parallelWorth(n int64) bool { return n >= 1<<15 }

// UnsupportedErrors lists what the CPU backend cannot compile in a model:
// ops, opsets and element types it has no kernel for, attributes or
// inputs its kernels do not handle, and values whose shapes are not
// static. Compile returns it, wrapped with the backend's name; errors.As
// finds it and each *ops.UnsupportedError.
type UnsupportedErrors = ops.UnsupportedErrors

// Unsupported reports what Compile would refuse in m (UnsupportedErrors),
// or an error from verifying m or inferring its shapes, or nil; it
// compiles nothing (the stages up to "support" run). Shape inference
// annotates m's values.
func Unsupported(m *ir.Model) error {
	g, err := newGen(m, nil, Options{})
	if err != nil {
		return err
	}
	restore, err := g.specialize()
	defer restore()
	if err != nil {
		return fmt.Errorf("codegen/cpu: %w", err)
	}
	return g.buildUntil("support")
}

// supports returns nil or what the backend lacks for n.
func (g *gen) supports(n *ir.Node) *ops.UnsupportedError {
	if isGroup(n) {
		return g.supportsGroup(n)
	}
	info := g.handInfo(n)
	if info == nil && kernel.Lookup(n.OpType) != nil {
		return g.supportsKernel(n)
	}
	if info == nil || n.Domain != "" && n.Domain != "ai.onnx" {
		return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: g.opsets[n.Domain], Reason: "no CPU kernel"}
	}
	return g.rowRefuses(info, n)
}
