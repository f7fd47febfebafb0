package passes

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// layerNorm is a decomposed LayerNormalization over the last axis, as
// PyTorch exports it before opset 17:
//
//	mean = ReduceMean(x, -1); d = Sub(x, mean)
//	var = ReduceMean(Pow(d, 2), -1)     (or Mul(d, d))
//	y = Div(d, Sqrt(Add(var, eps)))
//
// pro is the elementwise group computing x and epi the one applied to y,
// when the row-wise kernel can take them in.
type layerNorm struct {
	core     []*ir.Node // the pattern above, in that order
	x, y     *ir.Value
	dims     []int64
	pro, epi *ewGroup
}

// body lists the group's nodes: pro, the pattern, epi. That is an
// evaluation order: pro computes x, and epi's nodes read only y, each other
// and outer values.
func (ln *layerNorm) body() ([]*ir.Node, []ops.Role) {
	var nodes []*ir.Node
	var roles []ops.Role
	if ln.pro != nil {
		nodes = ln.pro.body()
		for range nodes {
			roles = append(roles, ops.RolePrologue)
		}
	}
	nodes = append(nodes, ln.core...)
	roles = append(roles, ops.LayerNormCore...)
	if ln.epi != nil {
		for _, n := range ln.epi.body() {
			nodes, roles = append(nodes, n), append(roles, ops.RoleEpilogue)
		}
	}
	return nodes, roles
}

// lastAxisMean reports whether n is an ungrouped float32 ReduceMean over
// the last axis that keeps dims.
func (f *fuser) lastAxisMean(n *ir.Node) bool {
	if !f.is(n, "ReduceMean") || n.Inputs[0].Type.Elem != ir.Float32 || !n.Inputs[0].Type.Shape.IsStatic() {
		return false
	}
	if k := n.Attr("keepdims"); k != nil && k.I == 0 {
		return false
	}
	var axes []int64
	if a := n.Input(1); a != nil {
		t := f.constOf(a)
		if t == nil {
			return false
		}
		for i := range t.Len() {
			axes = append(axes, t.Int64At(int(i)))
		}
	} else if a := n.Attr("axes"); a != nil {
		axes = a.Ints
	}
	rank := int64(len(n.Inputs[0].Type.Shape.Dims))
	return len(axes) == 1 && (axes[0] == rank-1 || axes[0] == -1)
}

// matchLayerNorm matches the pattern rooted at ReduceMean n and marks its
// nodes taken.
func (f *fuser) matchLayerNorm(n *ir.Node) *layerNorm {
	if !f.lastAxisMean(n) {
		return nil
	}
	x, mean := n.Inputs[0], n.Outputs[0]
	sub := f.single(mean)
	if !f.is(sub, "Sub", x, mean) || f.outSet[sub.Outputs[0]] {
		return nil
	}
	d := sub.Outputs[0]
	us := f.uses[d]
	if len(us) != 2 {
		return nil
	}
	sq, div := us[0], us[1]
	if f.is(sq, "Div", d) {
		sq, div = div, sq
	}
	if !f.is(div, "Div", d) || !f.is(sq, "Mul", d, d) && !(f.is(sq, "Pow", d) && f.isScalar(sq.Input(1), 2)) {
		return nil
	}
	r2 := f.single(sq.Outputs[0])
	if !f.lastAxisMean(r2) {
		return nil
	}
	add := f.single(r2.Outputs[0])
	if !f.is(add, "Add") || len(add.Inputs) != 2 {
		return nil
	}
	if _, ok := f.scalar(other(add, r2.Outputs[0])); !ok {
		return nil
	}
	sqrt := f.single(add.Outputs[0])
	if !f.is(sqrt, "Sqrt") || f.single(sqrt.Outputs[0]) != div || div.Inputs[1] != sqrt.Outputs[0] {
		return nil
	}
	dims, _ := staticDims(x)
	ln := &layerNorm{core: []*ir.Node{n, sub, sq, r2, add, sqrt, div}, x: x, y: div.Outputs[0], dims: dims}
	for _, c := range ln.core {
		f.taken[c] = true
	}
	return ln
}

func (f *fuser) isScalar(v *ir.Value, want float64) bool {
	c, ok := f.scalar(v)
	return ok && c == want
}
