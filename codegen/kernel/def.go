package kernel

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// OpDef states one ONNX op in kernels: Build appends to c the kernels that
// compute the node's outputs from its inputs. Types lists the element
// types of the op's first input (or, for ops without inputs, its first
// output) the definition handles; a test runs every op and type against
// the reference executor.
type OpDef struct {
	Types []ir.DType
	Build func(c *Ctx) error
	// Elementwise defs build one map reading their inputs at the output's
	// (broadcast) point: fusion passes may chain them (codegen inlines).
	Elementwise bool
	// Domain is the op's ONNX domain ("" the default; ai.onnx.ml): only
	// nodes of that domain build on the definition.
	Domain string
}

var defs = map[string]*OpDef{}

// define registers a family's op definitions (from each ops_*.go's init).
func define(rows map[string]*OpDef) {
	for name, d := range rows {
		if defs[name] != nil {
			panic("kernel: op " + name + " defined twice")
		}
		defs[name] = d
	}
}

// Lookup returns the definition of an ONNX op (default domain), or nil.
func Lookup(op string) *OpDef { return defs[op] }

// Fusible reports whether node n computes in a fused elementwise loop:
// its definition is elementwise, so its kernel inlines into its readers.
// A node reading or writing a small type is not: its kernel reads and
// writes byte views (ByteView), which a fused loop's inlining does not
// see through.
func Fusible(n *ir.Node) bool {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return false
	}
	for _, v := range append(append([]*ir.Value(nil), n.Inputs...), n.Outputs...) {
		if v != nil && IsSmallType(v.Type.Elem) {
			return false
		}
	}
	d := defs[n.OpType]
	return d != nil && d.Elementwise
}

// Ops lists the defined ops, sorted.
func Ops() []string {
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Ctx is what a definition sees: the node, its attributes (with the
// schema's defaults, read through ops), its inputs and outputs as buffers,
// and the compile-time values of inputs that have one.
type Ctx struct {
	Node *ir.Node
	*ops.KernelContext
	Opset int64
	// In holds one buffer per input (nil for an omitted optional one); Out
	// one per output (nil for an output the node does not produce).
	In, Out []*Buffer
	// Consts holds each input's value when known at compile time.
	Consts []*ir.Tensor

	Kernels []*Kernel
	Temps   []*Buffer
	Tables  []*Buffer
}

// NewCtx prepares a definition's context; consts may be nil.
func NewCtx(n *ir.Node, opsets ops.Opsets, in, out []*Buffer, consts []*ir.Tensor) (*Ctx, error) {
	s, err := opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	if err := checkRanks(n, opsets, "input", n.Inputs, in); err != nil {
		return nil, err
	}
	if err := checkRanks(n, opsets, "output", n.Outputs, out); err != nil {
		return nil, err
	}
	if consts == nil {
		consts = make([]*ir.Tensor, len(n.Inputs))
	}
	return &Ctx{Node: n, KernelContext: ops.NewKernelContext(s, n, opsets[n.Domain], consts), Opset: opsets[n.Domain],
		In: in, Out: out, Consts: consts}, nil
}

// checkRanks refuses a node whose buffers do not have their tensor
// values' ranks: a value shape inference left without a rank (an If's
// output whose branches differ, a shape read from data) has no honest
// buffer, and a definition indexing one by the node's rank would run off
// its dims.
func checkRanks(n *ir.Node, opsets ops.Opsets, role string, vals []*ir.Value, bufs []*Buffer) error {
	for i, v := range vals {
		if v == nil || i >= len(bufs) || bufs[i] == nil || !mayBeTensor(v.Type) {
			continue
		}
		if r := v.Type.Shape.Rank(); r != bufs[i].Rank() {
			const why = "not known when compiling (it depends on the data, or on a branch taken at run time)"
			var reason string
			switch {
			case r < 0:
				reason = fmt.Sprintf("%s %d (%q) has a rank %s", role, i, v.Name, why)
			case !v.Type.Shape.IsStatic():
				reason = fmt.Sprintf("%s %d (%q) is %s: its shape is %s", role, i, v.Name, v.Type, why)
			default:
				reason = fmt.Sprintf("%s %d (%q) is %s but its buffer has rank %d", role, i, v.Name, v.Type, bufs[i].Rank())
			}
			return &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain], Reason: reason}
		}
	}
	return nil
}

// mayBeTensor reports whether a value of type t is (or, untyped, may be)
// a tensor: the values buffers stand for.
func mayBeTensor(t ir.Type) bool { return t.Kind == ir.TensorKind || t.Kind == ir.UnknownKind }

// Build runs n's definition: the kernels, in order, and their scratch.
func Build(c *Ctx) error {
	d := defs[c.Node.OpType]
	if d == nil || nodeDomain(c.Node) != d.Domain {
		return c.Unsupported("no kernel definition")
	}
	var dt ir.DType
	if len(c.In) > 0 && c.In[0] != nil {
		dt = c.In[0].DType
	} else if len(c.Out) > 0 && c.Out[0] != nil {
		dt = c.Out[0].DType
	}
	if !slices.Contains(d.Types, dt) {
		return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, DType: dt}
	}
	if err := d.Build(c); err != nil {
		return err
	}
	for _, k := range c.Kernels {
		if err := k.Check(); err != nil {
			return fmt.Errorf("%s: %w", c.Node, err)
		}
	}
	return nil
}

// nodeDomain is n's domain, "" for the default one however it is spelled.
func nodeDomain(n *ir.Node) string {
	if n.Domain == "ai.onnx" {
		return ""
	}
	return n.Domain
}

// Emit appends kernels.
func (c *Ctx) Emit(ks ...*Kernel) {
	for _, k := range ks {
		if k.Name == "" {
			k.Name = c.Node.OpType
		}
	}
	c.Kernels = append(c.Kernels, ks...)
}

// Temp returns a scratch buffer for values passed between the node's
// kernels.
func (c *Ctx) Temp(d ir.DType, dims ...*Expr) *Buffer {
	b := &Buffer{Name: fmt.Sprintf("%s.tmp%d", c.Node.OpType, len(c.Temps)), DType: d, Dims: dims, ID: -1 - len(c.Temps)}
	c.Temps = append(c.Temps, b)
	return b
}

// DataDim returns the buffer a kernel writes the value of data-dependent
// dim name to (an output dim of the node that ops.DataDimMax bounds). A
// kernel reading Sym(name) must come after the one writing it, in a step
// of its own.
func (c *Ctx) DataDim(name string) *Buffer { return DataDimBuffer(name) }

// DataDimBuffer is the buffer a kernel writes the value of data-dependent
// dim name to (Buffer.Dim).
func DataDimBuffer(name string) *Buffer {
	return &Buffer{Name: name, DType: ir.Int64, Dims: []*Expr{C(1)}, ID: -1, Dim: name}
}

// Table returns a constant buffer holding t: lookup tables a definition
// computes at compile time (Resize's taps, say).
func (c *Ctx) Table(t *ir.Tensor) *Buffer {
	b := &Buffer{Name: fmt.Sprintf("%s.table%d", c.Node.OpType, len(c.Tables)), DType: t.DType, Dims: Ints(t.Dims...), ID: -1, Data: t}
	c.Tables = append(c.Tables, b)
	return b
}

// Unsupported returns the error for a node this backend cannot compile,
// naming why.
func (c *Ctx) Unsupported(format string, args ...any) error {
	return &ops.UnsupportedError{Domain: c.Node.Domain, Op: c.Node.OpType, Opset: c.Opset, Reason: fmt.Sprintf(format, args...)}
}

// Input returns input i's buffer, or nil when absent.
func (c *Ctx) Input(i int) *Buffer {
	if i < len(c.In) {
		return c.In[i]
	}
	return nil
}

// Output returns output i's buffer, or nil when the node does not
// produce it.
func (c *Ctx) Output(i int) *Buffer {
	if i < len(c.Out) {
		return c.Out[i]
	}
	return nil
}

// Const returns input i's compile-time value, or nil.
func (c *Ctx) Const(i int) *ir.Tensor {
	if i < len(c.Consts) {
		return c.Consts[i]
	}
	return nil
}

// Scalar returns input i's single element as an expression of type d: a
// constant when known at compile time, else a load (a runtime parameter).
// ok is false when the input is absent.
func (c *Ctx) Scalar(i int, d ir.DType) (*Expr, bool) {
	b := c.Input(i)
	if b == nil {
		return nil, false
	}
	if t := c.Const(i); t != nil && t.Len() == 1 {
		if d.IsFloat() {
			return Const(d, t.Float64At(0)), true
		}
		return CastTo(IntConst(t.DType, t.Int64At(0)), d), true
	}
	return CastTo(Load(b, Ints(make([]int64, b.Rank())...)...), d), true
}

// ConstInts returns input i's compile-time value as int64s; present is
// false when the input is absent, and an error says it is not known at
// compile time.
func (c *Ctx) ConstInts(i int) (vals []int64, present bool, err error) {
	if c.Input(i) == nil {
		return nil, false, nil
	}
	t := c.Const(i)
	if t == nil {
		return nil, true, c.Unsupported("input %d must be known at compile time (it sets the output's shape)", i)
	}
	return ops.Int64s(t), true, nil
}
