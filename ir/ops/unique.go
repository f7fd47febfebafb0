package ops

import (
	"cmp"
	"math"
	"sort"

	"github.com/kiln-ml/kiln/ir"
)

// Unique: the distinct elements of a tensor, or its distinct slices along
// an axis, with where each first occurs, where each input element went,
// and how often each occurs. Its output lengths are known only at run
// time.

var uniqueOps = []*Schema{
	{Name: "Unique", Since: 11, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 4,
		Attrs: []AttrDef{{Name: "axis", Kind: ir.AttrInt}, defInt("sorted", 1)},
		Types: allTypes, Infer: inferUnique, Run: runUnique},
}

func init() { register(uniqueOps) }

func inferUnique(c *InferContext) error {
	x := c.In(0)
	n := dataDim(c, 0) // Y's, indices' and counts' length: the data's
	vec := ir.TensorType(ir.Int64, ir.ShapeOf(n))
	inverse := ir.TensorType(ir.Int64, ir.ShapeOf(ir.UnknownDim()))
	y := ir.TensorType(x.Elem, ir.ShapeOf(n))
	if c.Has("axis") {
		if !x.Shape.Ranked {
			y = ir.TensorType(x.Elem, ir.Shape{})
		} else {
			axis, err := NormAxis(c.Int("axis"), x.Shape.Rank())
			if err != nil {
				return c.Errorf("%v", err)
			}
			s := x.Shape.Clone()
			s.Dims[axis] = n
			y = ir.TensorType(x.Elem, s)
			inverse = ir.TensorType(ir.Int64, ir.ShapeOf(x.Shape.Dims[axis]))
		}
	} else if x.Shape.Ranked {
		inverse = ir.TensorType(ir.Int64, ir.ShapeOf(mulDims(x.Shape.Dims)))
	}
	c.Set(0, y)
	c.Set(1, vec)
	c.Set(2, inverse)
	c.Set(3, vec.Clone())
	return setConstShapes(c)
}

// sliceView sees a tensor as (outer, n, inner): n slices along one axis,
// each of outer×inner elements.
type sliceView struct{ outer, n, inner int64 }

func (v sliceView) at(s, o, i int64) int { return int((o*v.n+s)*v.inner + i) }

func runUnique(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	view := sliceView{outer: 1, n: x.Len(), inner: 1}
	axis := -1
	if c.Has("axis") {
		a, err := NormAxis(c.Int("axis"), len(x.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		axis = a
		view = sliceView{ir.Product(x.Dims[:a]), x.Dims[a], ir.Product(x.Dims[a+1:])}
	}
	elem := elemOrder(x)
	compare := func(s, t int64) int {
		for o := int64(0); o < view.outer; o++ {
			for i := int64(0); i < view.inner; i++ {
				if r := elem(view.at(s, o, i), view.at(t, o, i)); r != 0 {
					return r
				}
			}
		}
		return 0
	}
	order := make([]int64, view.n)
	for i := range order {
		order[i] = int64(i)
	}
	sort.SliceStable(order, func(a, b int) bool { return compare(order[a], order[b]) < 0 })
	// Runs of equal slices in sorted order are the groups; a stable sort
	// puts each group's first occurrence first.
	var first, counts []int64
	group := make([]int64, view.n)
	for k, s := range order {
		if k == 0 || compare(order[k-1], s) != 0 {
			first = append(first, s)
			counts = append(counts, 0)
		}
		group[s] = int64(len(first) - 1)
		counts[len(counts)-1]++
	}
	rank := make([]int64, len(first)) // output position of each group
	for g := range rank {
		rank[g] = int64(g)
	}
	if c.Int("sorted") == 0 {
		byFirst := make([]int, len(first))
		for g := range byFirst {
			byFirst[g] = g
		}
		sort.Slice(byFirst, func(a, b int) bool { return first[byFirst[a]] < first[byFirst[b]] })
		f, n := make([]int64, len(first)), make([]int64, len(first))
		for pos, g := range byFirst {
			rank[g] = int64(pos)
			f[pos], n[pos] = first[g], counts[g]
		}
		first, counts = f, n
	}
	inverse := make([]int64, view.n)
	for s, g := range group {
		inverse[s] = rank[g]
	}
	u := int64(len(first))
	dims := []int64{u}
	if axis >= 0 {
		dims = append([]int64{}, x.Dims...)
		dims[axis] = u
	}
	idx := make([]int, 0, view.outer*u*view.inner)
	for o := int64(0); o < view.outer; o++ {
		for _, s := range first {
			for i := int64(0); i < view.inner; i++ {
				idx = append(idx, view.at(s, o, i))
			}
		}
	}
	c.Set(0, takeElems(x, dims, idx, nil))
	c.Set(1, FromInt64s(ir.Int64, []int64{u}, first))
	c.Set(2, FromInt64s(ir.Int64, []int64{view.n}, inverse))
	c.Set(3, FromInt64s(ir.Int64, []int64{u}, counts))
	return nil
}

// elemOrder returns a total order of x's elements: orderer's, with NaN
// after every number and equal to itself (numpy's unique treats NaNs as
// one value).
func elemOrder(x *ir.Tensor) func(i, j int) int {
	if !x.DType.IsFloat() {
		return orderer(x, x)
	}
	v := Float64s(x)
	return func(i, j int) int {
		a, b := math.IsNaN(v[i]), math.IsNaN(v[j])
		switch {
		case a || b:
			return cmp.Compare(btoi(a), btoi(b))
		}
		return cmp.Compare(v[i], v[j])
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
