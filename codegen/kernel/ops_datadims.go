package kernel

import (
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
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
	// The total is its own reduction (not the last position plus the last
	// element), so that no points, an empty input, count none.
	c.Emit(&Kernel{Name: c.Node.OpType + "_count", Out: c.DataDim(dim), Space: []*Expr{C(1)},
		Value: CastTo(Subst(keep, []*Expr{RVar(0)}), ir.Int64), Reduce: &Reduce{Op: SumOp, Extents: []*Expr{n}}})
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
	axis, err := c.CompressAxis(x.Rank())
	if err != nil {
		return c.Unsupported("%v", err)
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
	keep := func(i *Expr) *Expr { in := Lt(i, length); return And(in, LoadOr(in, cond, Bool(false), i)) }
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
		"NonZero":           {Types: all, Build: defNonZero},
		"Compress":          {Types: all, Build: defCompress},
		"Unique":            {Types: all, Build: defUnique},
		"NonMaxSuppression": {Types: []ir.DType{ir.Float32}, Build: defNonMaxSuppression}, // the reference's types
	})
}

// defNonMaxSuppression is greedy NMS per batch and class, as the
// reference's selectBoxes: the boxes in order of score (best first, ties
// to the lower index: a TopK over all of them), then one serial kernel
// keeping each in turn unless it fails the score threshold, the class has
// max_output_boxes_per_class kept already, or it overlaps a kept one by
// more than the IoU threshold (float64, the reference's arithmetic), then
// the kept boxes' (batch, class, index) rows at their running count.
func defNonMaxSuppression(c *Ctx) error {
	boxes, scores, out := c.In[0], c.In[1], c.Out[0]
	dim, err := dataDimOf(c, out, 0)
	if err != nil {
		return err
	}
	if boxes.Rank() != 3 || scores.Rank() != 3 {
		return c.Unsupported("boxes %v and scores %v: want (B, N, 4) and (B, C, N)", boxes.Dims, scores.Dims)
	}
	b, cl, n := scores.Dims[0], scores.Dims[1], scores.Dims[2]
	scalar := func(i int, d ir.DType, absent *Expr) *Expr {
		if i >= len(c.In) || c.In[i] == nil {
			return absent
		}
		in := c.In[i]
		if k, ok := in.Numel().IntValue(); ok && k == 0 {
			return absent
		}
		return CastTo(Load(in, Ints(make([]int64, in.Rank())...)...), d)
	}
	maxOut := scalar(2, ir.Int64, C(0))
	iouMax := scalar(3, ir.Float64, Const(ir.Float64, 0))
	scoreMin := scalar(4, ir.Float64, nil)
	centre := false
	if a := c.Node.Attr("center_point_box"); a != nil {
		centre = a.I != 0
	}

	sorted := c.Temp(scores.DType, b, cl, n)
	order := c.Temp(ir.Int64, b, cl, n)
	c.Emit(&Kernel{Name: "NonMaxSuppression_order", Out: sorted, Space: []*Expr{b, cl, n}, Value: Load(scores, Vars(3)...),
		TopK: &TopK{Axis: 2, N: n, Largest: true, Indices: order}})

	// corners of box i of batch Var(0): y1, x1, y2, x2.
	corners := func(i *Expr) [4]*Expr {
		v := func(k int64) *Expr { return CastTo(Load(boxes, Var(0), i, C(k)), ir.Float64) }
		if centre {
			half := Const(ir.Float64, 0.5)
			xc, yc, w, h := v(0), v(1), v(2), v(3)
			return [4]*Expr{Sub(yc, Mul(h, half)), Sub(xc, Mul(w, half)), Add(yc, Mul(h, half)), Add(xc, Mul(w, half))}
		}
		return [4]*Expr{Min(v(0), v(2)), Min(v(1), v(3)), Max(v(0), v(2)), Max(v(1), v(3))}
	}
	zero := Const(ir.Float64, 0)
	area := func(p [4]*Expr) *Expr { return Mul(Sub(p[2], p[0]), Sub(p[3], p[1])) }
	overlaps := func(i, j *Expr) *Expr { // iou(i, j) > iouMax
		a, o := corners(i), corners(j)
		aa, ao := area(a), area(o)
		h := Sub(Min(a[2], o[2]), Max(a[0], o[0]))
		w := Sub(Min(a[3], o[3]), Max(a[1], o[1]))
		inter := Mul(h, w)
		iou := Div(inter, Sub(Add(aa, ao), inter))
		empty := Or(Or(Le(aa, zero), Le(ao, zero)), Or(Le(h, zero), Le(w, zero)))
		return And(Not(empty), Gt(iou, iouMax))
	}

	// keep[b, c, k] for the box ranked k: a sum over the earlier ranks j (a
	// reduction of k terms)
	// of kept·(1 + M·overlap) counts the kept ones (mod M) and flags an
	// overlap with one (>= M), M above any count.
	keep := c.Temp(ir.Int64, b, cl, n)
	m := Add(n, C(1))
	j := RVar(0)
	boxAt := func(rank *Expr) *Expr { return Load(order, Var(0), Var(1), rank) }
	earlier := Mul(Load(keep, Var(0), Var(1), j), Add(C(1), Mul(m, CastTo(overlaps(boxAt(Var(2)), boxAt(j)), ir.Int64))))
	ok := Lt(Rem(Acc(ir.Int64), m), maxOut)
	ok = And(ok, Lt(Acc(ir.Int64), m))
	if scoreMin != nil {
		ok = And(ok, Gt(CastTo(Load(sorted, Vars(3)...), ir.Float64), scoreMin))
	}
	c.Emit(&Kernel{Name: "NonMaxSuppression_keep", Out: keep, Space: []*Expr{b, cl, n}, Value: earlier, Serial: true,
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{Var(2)}, Post: CastTo(ok, ir.Int64)}})

	total := Mul(Mul(b, cl), n)
	kept := func(i *Expr) *Expr {
		idx := unravel(i, []*Expr{b, cl, n})
		return Ne(Load(keep, idx...), C(0))
	}
	pos := keepPositions(c, total, kept(Var(0)), dim)
	flat := Add(Mul(Add(Mul(Var(0), cl), Var(1)), n), Var(2))
	row := Select(Eq(Var(3), C(0)), Var(0), Select(Eq(Var(3), C(1)), Var(1), boxAt(Var(2))))
	c.Emit(&Kernel{Name: "NonMaxSuppression_scatter", Out: out, Space: []*Expr{b, cl, n, C(3)}, Value: row,
		Store: []*Expr{Load(pos, flat), Var(3)}, When: Ne(Load(keep, Var(0), Var(1), Var(2)), C(0))})
	return nil
}

// defUnique finds the distinct elements of x flattened (over an axis:
// defUniqueSlices): x sorted (a stable TopK
// on a key ordering as the reference's elemOrder does, NaN greatest), the
// runs of equal keys its groups, a group's first element the first
// occurrence; then each output at its group's rank (the group's own
// number, or with sorted=0 the number of groups occurring earlier).
func defUnique(c *Ctx) error {
	x := c.In[0]
	if a := c.Node.Attr("axis"); a != nil {
		axis, err := ops.NormAxis(a.I, x.Rank())
		if err != nil {
			return c.Unsupported("%v", err)
		}
		return defUniqueSlices(c, axis)
	}
	y := c.Out[0]
	dim, err := dataDimOf(c, y, 0)
	if err != nil {
		return err
	}
	n := x.Numel()
	at := func(i *Expr) *Expr { return Load(x, unravel(i, x.Dims)...) }
	key, keyType := orderKey(at(Var(0)))
	sorted := c.Temp(keyType, n)
	order := c.Temp(ir.Int64, n)
	c.Emit(&Kernel{Name: "Unique_sort", Out: sorted, Space: []*Expr{n}, Value: key, TopK: &TopK{Axis: 0, N: n, Indices: order}})
	isNew := func(k *Expr) *Expr {
		return Or(Eq(k, C(0)), Ne(Load(sorted, k), Load(sorted, Max(Sub(k, C(1)), C(0)))))
	}
	pos := keepPositions(c, n, isNew(Var(0)), dim)
	gid := func(k *Expr) *Expr { return Sub(Add(Load(pos, k), CastTo(isNew(k), ir.Int64)), C(1)) }
	groups := Sym(dim)
	first := c.Temp(ir.Int64, n)
	c.Emit(&Kernel{Name: "Unique_first", Out: first, Space: []*Expr{n}, Value: Load(order, Var(0)), Store: []*Expr{gid(Var(0))}, When: isNew(Var(0))})
	rank := func(g *Expr) *Expr { return g }
	if a := c.Node.Attr("sorted"); a != nil && a.I == 0 {
		ranks := c.Temp(ir.Int64, n)
		c.Emit(&Kernel{Name: "Unique_rank", Out: ranks, Space: []*Expr{groups},
			Value:  CastTo(Lt(Load(first, RVar(0)), Load(first, Var(0))), ir.Int64),
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{groups}}})
		rank = func(g *Expr) *Expr { return Load(ranks, g) }
	}
	c.Emit(&Kernel{Name: "Unique_values", Out: y, Space: []*Expr{n}, Value: at(Load(order, Var(0))),
		Store: []*Expr{rank(gid(Var(0)))}, When: isNew(Var(0))})
	if out := outAt(c, 1); out != nil {
		c.Emit(&Kernel{Name: "Unique_indices", Out: out, Space: []*Expr{groups}, Value: Load(first, Var(0)), Store: []*Expr{rank(Var(0))}})
	}
	if out := outAt(c, 2); out != nil {
		c.Emit(&Kernel{Name: "Unique_inverse", Out: out, Space: []*Expr{n}, Value: rank(gid(Var(0))), Store: []*Expr{Load(order, Var(0))}})
	}
	if out := outAt(c, 3); out != nil {
		counts := c.Temp(ir.Int64, n)
		c.Emit(&Kernel{Name: "Unique_counts", Out: counts, Space: []*Expr{groups},
			Value:  CastTo(Eq(gid(RVar(0)), Var(0)), ir.Int64),
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{n}}})
		c.Emit(&Kernel{Name: "Unique_counts_out", Out: out, Space: []*Expr{groups}, Value: Load(counts, Var(0)), Store: []*Expr{rank(Var(0))}})
	}
	return nil
}

// orderKey is a key of v that orders as the reference's elemOrder does:
// for floats (in float64) NaN above +Inf above every number, -0 with 0 (a
// float64 input's largest finite value ties with +Inf); integers as they
// are.
func orderKey(v *Expr) (*Expr, ir.DType) {
	if !v.Type.IsFloat() {
		return v, v.Type
	}
	f := CastTo(v, ir.Float64)
	inf := Const(ir.Float64, math.Inf(1))
	return Select(IsNaN(f), inf, Select(Eq(f, inf), Const(ir.Float64, math.MaxFloat64), f)), ir.Float64
}

// defUniqueSlices is Unique over an axis: slices s and t of x along it
// compared whole, pairwise (the first element where they differ decides,
// by orderKey); a slice's group is its first equal slice, the groups'
// ranks are by order of their slices (sorted) or of their first
// occurrence, and each output is at its group's rank.
func defUniqueSlices(c *Ctx, axis int) error {
	x, y := c.In[0], c.Out[0]
	dim, err := dataDimOf(c, y, axis)
	if err != nil {
		return err
	}
	n := x.Dims[axis]
	rest := make([]*Expr, 0, x.Rank()-1) // the dims other than axis
	for i, d := range x.Dims {
		if i != axis {
			rest = append(rest, d)
		}
	}
	e := Product(rest)
	elem := func(slice, k *Expr) *Expr { // element k of slice, k over the other dims
		idx := unravel(k, rest)
		return Load(x, slices.Insert(idx, axis, slice)...)
	}
	key := func(slice, k *Expr) *Expr { v, _ := orderKey(elem(slice, k)); return v }
	// firstDiff[s, t]: the first element where slices s and t differ (e
	// where none does).
	firstDiff := c.Temp(ir.Int64, n, n)
	k := RVar(0)
	c.Emit(&Kernel{Name: "Unique_compare", Out: firstDiff, Space: []*Expr{n, n},
		Value:  Select(Ne(key(Var(0), k), key(Var(1), k)), k, e),
		Reduce: &Reduce{Op: MinOp, Extents: []*Expr{e}}})
	same := func(s, t *Expr) *Expr { return Eq(Load(firstDiff, s, t), e) }
	less := func(s, t *Expr) *Expr {
		fd := Min(Load(firstDiff, s, t), Sub(e, C(1)))
		return And(Not(same(s, t)), Lt(key(s, fd), key(t, fd)))
	}
	rep := c.Temp(ir.Int64, n)
	c.Emit(&Kernel{Name: "Unique_group", Out: rep, Space: []*Expr{n}, Value: Select(same(Var(0), RVar(0)), RVar(0), n),
		Reduce: &Reduce{Op: MinOp, Extents: []*Expr{n}}})
	isRep := func(s *Expr) *Expr { return Eq(Load(rep, s), s) }
	keepPositions(c, n, isRep(Var(0)), dim)
	before := less(RVar(0), Var(0)) // sorted: the groups of smaller slices
	if a := c.Node.Attr("sorted"); a != nil && a.I == 0 {
		before = Lt(RVar(0), Var(0)) // the groups occurring earlier
	}
	ranks := c.Temp(ir.Int64, n)
	c.Emit(&Kernel{Name: "Unique_rank", Out: ranks, Space: []*Expr{n}, Value: CastTo(And(isRep(RVar(0)), before), ir.Int64),
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{n}}})
	rank := func(s *Expr) *Expr { return Load(ranks, Load(rep, s)) }
	store := Vars(x.Rank())
	store[axis] = rank(Var(axis))
	c.Emit(&Kernel{Name: "Unique_values", Out: y, Space: x.Dims, Value: Load(x, Vars(x.Rank())...), Store: store, When: isRep(Var(axis))})
	if out := outAt(c, 1); out != nil {
		c.Emit(&Kernel{Name: "Unique_indices", Out: out, Space: []*Expr{n}, Value: Var(0), Store: []*Expr{rank(Var(0))}, When: isRep(Var(0))})
	}
	if out := outAt(c, 2); out != nil {
		c.Emit(copyOf(out, rank(Var(0))))
	}
	if out := outAt(c, 3); out != nil {
		counts := c.Temp(ir.Int64, n)
		c.Emit(&Kernel{Name: "Unique_counts", Out: counts, Space: []*Expr{n}, Value: CastTo(Eq(Load(rep, RVar(0)), Var(0)), ir.Int64),
			Reduce: &Reduce{Op: SumOp, Extents: []*Expr{n}}})
		c.Emit(&Kernel{Name: "Unique_counts_out", Out: out, Space: []*Expr{n}, Value: Load(counts, Var(0)), Store: []*Expr{rank(Var(0))}, When: isRep(Var(0))})
	}
	return nil
}

// outAt is output i, or nil when the node does not produce it.
func outAt(c *Ctx, i int) *Buffer {
	if i < len(c.Out) {
		return c.Out[i]
	}
	return nil
}
