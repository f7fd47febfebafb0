package kernel

import (
	"github.com/kiln-ml/kiln/ir"
)

// Ops whose output dims the data decides (ir/ops datadims.go): NonZero
// and Compress. Each is a running count of the elements it keeps (the
// position each one takes in the output), the total written to the dims
// table (Ctx.DataDim), and then, in a step of its own that reads the
// total as the output's dim, a scatter of the kept elements to their
// positions. The output's memory is planned for the most the dim can be.

// dataDimOf is the data-dependent dim of out at axis: a lone symbol.
func dataDimOf(c *Ctx, out *Buffer, axis int) (string, error) {
	if axis >= out.Rank() || out.Dims[axis].Op != OpSym {
		return "", c.Unsupported("its output's dim %d is not one the data decides (%v)", axis, out.Dims)
	}
	return out.Dims[axis].Name, nil
}

// truth is whether a loaded element counts as true: nonzero, or true.
func truth(v *Expr) *Expr {
	if v.Type == ir.Bool {
		return v
	}
	return Ne(v, IntConst(v.Type, 0))
}

// keepPositions emits the running count of keep (a Bool of Var(0) over
// n points) into a temporary and the total into the dims table entry of
// dim, and returns the temporary: each point's position among the kept.
func keepPositions(c *Ctx, n *Expr, keep *Expr, dim string) *Buffer {
	pos := c.Temp(ir.Int64, n)
	c.Emit(&Kernel{Name: c.Node.OpType + "_positions", Out: pos, Space: []*Expr{n}, Value: CastTo(keep, ir.Int64),
		Scan: &Scan{Axis: 0, Op: SumOp, Exclusive: true}})
	last := Sub(n, C(1))
	total := Add(Load(pos, last), CastTo(Subst(keep, []*Expr{last}), ir.Int64))
	c.Emit(&Kernel{Name: c.Node.OpType + "_count", Out: c.DataDim(dim), Space: []*Expr{C(1)}, Value: total})
	return pos
}

// defNonZero writes the coordinates of x's nonzero elements, in row-major
// order: row d of the output holds their coordinates along axis d.
func defNonZero(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	dim, err := dataDimOf(c, out, 1)
	if err != nil {
		return err
	}
	dims := x.Dims
	if len(dims) == 0 {
		dims = []*Expr{C(1)} // a scalar is one element at [0]
	}
	n := Product(dims)
	elem := func(i *Expr) *Expr { return truth(Load(x, unravel(i, x.Dims)...)) }
	pos := keepPositions(c, n, elem(Var(0)), dim)
	coords := unravel(Var(0), dims)
	value := coords[len(coords)-1]
	for d := len(coords) - 2; d >= 0; d-- {
		value = Select(Eq(Var(1), C(int64(d))), coords[d], value)
	}
	c.Emit(&Kernel{Name: "NonZero_scatter", Out: out, Space: []*Expr{n, C(int64(len(dims)))}, Value: value,
		Store: []*Expr{Var(1), Load(pos, Var(0))}, When: elem(Var(0))})
	return nil
}

// defCompress keeps the slices of x along axis (of x flattened, without
// one) that the condition selects; condition entries past the axis's
// length select nothing (the reference refuses them).
func defCompress(c *Ctx) error {
	x, cond, out := c.In[0], c.In[1], c.Out[0]
	axis := -1
	if a := c.Node.Attr("axis"); a != nil {
		axis = int(a.I)
		if axis < 0 {
			axis += x.Rank()
		}
	}
	dims := x.Dims
	if axis < 0 {
		dims, axis = []*Expr{x.Numel()}, 0
	}
	dim, err := dataDimOf(c, out, axis)
	if err != nil {
		return err
	}
	length := Min(cond.Dims[0], dims[axis])
	keep := func(i *Expr) *Expr { return And(Lt(i, length), Load(cond, Min(i, Sub(cond.Dims[0], C(1))))) }
	pos := keepPositions(c, length, keep(Var(0)), dim)
	flat := C(0)
	for k, d := range dims {
		flat = Add(Mul(flat, d), Var(k))
	}
	store := Vars(len(dims))
	store[axis] = Load(pos, Var(axis))
	c.Emit(&Kernel{Name: "Compress_scatter", Out: out, Space: dims, Value: Load(x, unravel(flat, x.Dims)...),
		Store: store, When: keep(Var(axis))})
	return nil
}

func init() {
	all := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int8, ir.Int16, ir.Int32, ir.Int64,
		ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64, ir.Bool}
	define(map[string]*OpDef{
		"NonZero":  {Types: all, Build: defNonZero},
		"Compress": {Types: all, Build: defCompress},
	})
}
