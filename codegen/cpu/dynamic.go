package cpu

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
	"github.com/kiln-ml/kiln/ir/ops"
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// Dynamic shapes. A model's symbolic dims (its inputs' dim_params) stay
// symbolic in the engine: the runtime finds each symbol's value in the
// inputs' shapes, checks it against the symbol's range and passes the
// values in one more io slot (the dims table, int64 in Result.Symbols'
// order). While compiling, every value's type holds its shape at the
// range's maxima (the memory plan is for the largest run) and symShapes
// keeps the symbolic one:
//
//   - kernel-layer ops read symbolic dims as loop bounds (buffers' dims
//     are kernel.Sym expressions, which kernelHost.Sym loads from the
//     table);
//   - hand-written kernels (GEMM, convolutions, pooling, ...) run per
//     sample: where every tensor a node reads or writes is symbolic in its
//     leading dim only (and in the same way), the node is compiled for one
//     sample and its steps run once per sample (sliceFor), reading and
//     writing at the sample's offset. A node that cannot run so is refused
//     with the reason; pinning the dim (cc build --shape) compiles it.

// DimRange is the sizes a symbolic dim may take at run time. Memory is
// planned for Max; choices made by measuring (Winograd) use Opt.
type DimRange struct{ Min, Opt, Max int64 }

// DefaultMaxDim is the largest size of a symbolic dim that no profile
// names: its range is 1 to DefaultMaxDim, tuned at 1.
const DefaultMaxDim = 32

// Symbol is one symbolic dim of an engine and its range. A Data symbol
// is a dim the data decides (NonZero's count, ops.DataDimMax): the run
// computes it, from 0 to Max, and writes it to the dims table for the
// steps after and for the outputs' shapes.
type Symbol struct {
	Name string
	DimRange
	Data bool
}

// specialize gives every symbolic value its shape at the maxima (and
// records the symbolic one) and returns the function restoring the types.
func (g *gen) specialize() (func(), error) {
	g.symShapes = map[*ir.Value]ir.Shape{}
	g.symIndex = map[string]int{}
	for _, v := range g.model.Graph.Inputs {
		for _, d := range v.Type.Shape.Dims {
			if !d.IsSymbolic() {
				continue
			}
			names, err := dimSymbols(d)
			if err != nil {
				return func() {}, fmt.Errorf("input %q: %v", v.Name, err)
			}
			for _, name := range names {
				if _, ok := g.symIndex[name]; ok {
					continue
				}
				r, ok := g.opts.Profile[name]
				if !ok {
					r = DimRange{Min: 1, Opt: 1, Max: DefaultMaxDim}
				}
				if r.Min < 1 || r.Min > r.Opt || r.Opt > r.Max {
					return func() {}, fmt.Errorf("input %q: the range of %s is %d..%d (opt %d): want 1 <= min <= opt <= max", v.Name, name, r.Min, r.Max, r.Opt)
				}
				g.symIndex[name] = len(g.syms)
				g.syms = append(g.syms, Symbol{Name: name, DimRange: r})
			}
		}
	}
	if len(g.syms) == 0 && !hasDataDims(g.model.Graph) {
		return func() {}, nil
	}
	env := map[string]int64{}
	for _, s := range g.syms {
		env[s.Name] = s.Max
	}
	orig := map[*ir.Value]ir.Type{}
	restore := func() {
		for v, t := range orig {
			v.Type = t
		}
	}
	var err error
	visit := func(v *ir.Value) {
		if v == nil || err != nil || orig[v].Kind != ir.UnknownKind || !hasSymbolic(v.Type.Shape) {
			return
		}
		shape := v.Type.Shape.Clone()
		for i, d := range shape.Dims {
			if !d.IsSymbolic() {
				continue
			}
			n, e := dimValue(d, env)
			if e != nil {
				err = fmt.Errorf("%s%q has shape %s: %v: no input gives it and kiln computes no size for it when compiling (a size read from a sequence's elements, say)", producedBy(v), v.Name, v.Type, e)
				return
			}
			shape.Dims[i] = ir.D(n)
		}
		orig[v] = v.Type
		g.symShapes[v] = v.Type.Shape.Clone()
		v.Type.Shape = shape
	}
	var walk func(gr *ir.Graph, top bool)
	walk = func(gr *ir.Graph, top bool) {
		for _, v := range gr.Inputs {
			visit(v)
		}
		for _, n := range gr.Nodes {
			if err == nil && hasDataDim(n) {
				if !top {
					err = fmt.Errorf("%s: an output whose shape depends on the data inside a control-flow body is not compiled", n)
					return
				}
				err = g.addDataSymbols(n, env)
			}
			for _, o := range n.Outputs {
				visit(o)
			}
			for _, sg := range n.Subgraphs() {
				walk(sg, false)
			}
		}
	}
	walk(g.model.Graph, true)
	if err != nil {
		restore()
		return func() {}, err
	}
	return restore, nil
}

// producedBy names v's producer for an error ("node \"x\" (Op): "), or
// is empty for a graph input.
func producedBy(v *ir.Value) string {
	if v.Producer == nil {
		return ""
	}
	return v.Producer.String() + ": "
}

// addDataSymbols registers the dims node n's data decides, each from 0
// to the most it can be for n's inputs at their maxima (inputs visited
// already, so static).
func (g *gen) addDataSymbols(n *ir.Node, env map[string]int64) error {
	ins := make([][]int64, len(n.Inputs))
	for i, v := range n.Inputs {
		if v != nil {
			ins[i], _ = v.Type.Shape.Ints()
		}
	}
	for _, o := range n.Outputs {
		if o == nil {
			continue
		}
		for _, d := range o.Type.Shape.Dims {
			if !ops.DataDimOf(n, d) {
				continue
			}
			if _, ok := g.symIndex[d.Param]; ok {
				continue
			}
			most, ok := ops.DataDimMax(n, g.opsets[n.Domain], ins, d, func(x ir.Dim) (int64, error) { return dimValue(x, env) })
			if !ok {
				return fmt.Errorf("%s: its output %q has a dim the data decides, with no bound kiln knows", n, o.Name)
			}
			g.symIndex[d.Param] = len(g.syms)
			g.syms = append(g.syms, Symbol{Name: d.Param, DimRange: DimRange{Min: 0, Opt: most, Max: most}, Data: true})
			env[d.Param] = most
		}
	}
	return nil
}

// hasDataDims reports whether a node of g (not of its subgraphs) has an
// output dim its data decides.
func hasDataDims(g *ir.Graph) bool {
	return slices.ContainsFunc(g.Nodes, hasDataDim)
}

func hasDataDim(n *ir.Node) bool {
	for _, o := range n.Outputs {
		if o != nil && slices.ContainsFunc(o.Type.Shape.Dims, func(d ir.Dim) bool { return ops.DataDimOf(n, d) }) {
			return true
		}
	}
	return false
}

func hasSymbolic(s ir.Shape) bool {
	return slices.ContainsFunc(s.Dims, func(d ir.Dim) bool { return d.IsSymbolic() })
}

// dimSymbols lists the symbols a symbolic dim depends on.
func dimSymbols(d ir.Dim) ([]string, error) {
	e, err := dimexpr.Parse(d.Param)
	if err != nil {
		return nil, err
	}
	return e.Symbols(), nil
}

// dimValue evaluates a dim for the symbols' values.
func dimValue(d ir.Dim, env map[string]int64) (int64, error) {
	if d.IsStatic() {
		return d.Value, nil
	}
	e, err := dimexpr.Parse(d.Param)
	if err != nil {
		return 0, err
	}
	return e.Eval(env)
}

// dimExpr is a dim as a kernel-layer expression over the symbols.
func (g *gen) dimExpr(d ir.Dim) *kernel.Expr {
	if d.IsStatic() {
		return kernel.C(d.Value)
	}
	e, err := dimexpr.Parse(d.Param)
	if err != nil {
		panic(fmt.Sprintf("codegen/cpu: dim %q: %v", d.Param, err)) // specialize parsed it
	}
	return kernelOfDim(e.Tree())
}

// kernelOfDim converts a dim expression's tree.
func kernelOfDim(n dimexpr.Node) *kernel.Expr {
	switch n.Op {
	case dimexpr.OpConst:
		return kernel.C(n.Value)
	case dimexpr.OpSym:
		return kernel.Sym(n.Name)
	}
	args := make([]*kernel.Expr, len(n.Args))
	for i, a := range n.Args {
		args[i] = kernelOfDim(a)
	}
	r := args[0]
	for _, a := range args[1:] {
		switch n.Op {
		case dimexpr.OpAdd:
			r = kernel.Add(r, a)
		case dimexpr.OpMul:
			r = kernel.Mul(r, a)
		case dimexpr.OpFloorDiv:
			r = kernel.FloorDiv(r, a)
		case dimexpr.OpMin:
			r = kernel.Min(r, a)
		case dimexpr.OpMax:
			r = kernel.Max(r, a)
		default:
			panic(fmt.Sprintf("codegen/cpu: dim operation %v", n.Op))
		}
	}
	return r
}

// dimNames is a value's dims as names: "" where static, the expression
// where symbolic.
func (g *gen) dimNames(v *ir.Value) []string {
	s, ok := g.symShapes[v]
	if !ok {
		return nil
	}
	out := make([]string, len(s.Dims))
	for i, d := range s.Dims {
		if d.IsSymbolic() {
			out[i] = d.Param
		}
	}
	return out
}

// symValue loads symbol name's value from the dims table, once per step.
func (k *kfn) symValue(name string) value.Value {
	i, ok := k.g.symIndex[name]
	if !ok {
		panic(fmt.Sprintf("codegen/cpu: unknown symbol %q", name))
	}
	key := "sym/" + name
	if v, ok := k.bases[key]; ok {
		return v
	}
	p := k.locPtr(loc{space: inIO, io: k.g.symSlot(), off: 8 * int64(i)}, i64)
	// The load goes into the entry block right after the pointer (locPtr
	// puts its instructions at the block's start).
	entry := k.F.Blocks[0]
	ld := ll.NewLoad(i64, p)
	at := slices.IndexFunc(entry.Insts, func(in ll.Instruction) bool { return any(in) == any(p) })
	entry.Insts = slices.Insert(entry.Insts, at+1, ll.Instruction(ld))
	k.bases[key] = ld
	return ld
}

// symSlot is the io slot of the dims table: after the inputs and outputs.
func (g *gen) symSlot() int { return len(g.inputs) + len(g.outputs) }

// slicing is a node compiled for one sample: the leading dim it runs over
// and the per-sample stride (bytes) of each tensor it reads or writes
// along that dim.
type slicing struct {
	n      *kernel.Expr
	group  int
	stride map[*ir.Value]int64
	orig   map[*ir.Value]ir.Shape
}

// sliceVals lists the tensors node n reads or writes that are not
// constants.
func (g *gen) sliceVals(n *ir.Node) []*ir.Value {
	var vals []*ir.Value
	for _, v := range append(append([]*ir.Value{}, g.reads(n)...), g.writesOf(n)...) {
		if v != nil && g.constOf(v) == nil && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	return vals
}

// sliceLead returns the dynamic leading dim node n runs per sample of
// ("" when n touches no dynamic dim), or why it cannot run so: every
// dynamic dim it touches must be that leading dim of its tensors, and
// what it writes must have it.
func (g *gen) sliceLead(n *ir.Node) (string, error) {
	lead := ""
	vals := g.sliceVals(n)
	for _, v := range vals {
		s, ok := g.symShapes[v]
		if !ok {
			continue
		}
		for i, d := range s.Dims {
			if !d.IsSymbolic() {
				continue
			}
			if i != 0 {
				return "", fmt.Errorf("%q has the dynamic dim %s at axis %d: this kernel runs per sample of a dynamic leading dim only (pin the dim with cc build --shape)", v.Name, d.Param, i)
			}
			if lead != "" && d.Param != lead {
				return "", fmt.Errorf("%q's leading dim is %s where others' is %s: this kernel runs per sample of one dynamic leading dim", v.Name, d.Param, lead)
			}
			lead = d.Param
		}
	}
	if lead == "" {
		return "", nil
	}
	for _, v := range g.writesOf(n) {
		if _, ok := g.symShapes[v]; v != nil && !ok {
			return "", fmt.Errorf("%q is static while the inputs' leading dim %s is dynamic", v.Name, lead)
		}
	}
	return lead, nil
}

// sliceFor returns how node n runs per sample when it touches dynamic
// dims (nil when it does not), or why it cannot, and gives the tensors it
// touches their one-sample shapes until done.
func (g *gen) sliceFor(n *ir.Node) (*slicing, error) {
	lead, err := g.sliceLead(n)
	if lead == "" || err != nil {
		return nil, err
	}
	g.nslice++
	sl := &slicing{n: g.dimExpr(ir.Dim{Param: lead, Value: -1}), group: g.nslice, stride: map[*ir.Value]int64{}, orig: map[*ir.Value]ir.Shape{}}
	for _, v := range g.sliceVals(n) {
		if _, ok := g.symShapes[v]; !ok {
			continue // a static tensor every sample reads whole
		}
		d, _ := v.Type.Shape.Ints()
		sl.stride[v] = int64(ir.RawLen(v.Type.Elem, ir.Product(d[1:])))
		sl.orig[v] = v.Type.Shape
		one := v.Type.Shape.Clone()
		one.Dims[0] = ir.D(1)
		v.Type.Shape = one
	}
	return sl, nil
}

// done restores the sliced values' shapes at the maxima.
func (sl *slicing) done() {
	for v, s := range sl.orig {
		v.Type.Shape = s
	}
}

// writesOf lists what node n writes (its fused output in place of its own).
func (g *gen) writesOf(n *ir.Node) []*ir.Value {
	if len(n.Outputs) == 0 {
		return nil
	}
	return append([]*ir.Value{g.outValue(n)}, n.Outputs[1:]...)
}
