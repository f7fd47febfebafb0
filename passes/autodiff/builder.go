package autodiff

import (
	"fmt"
	"strconv"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Builder appends nodes to a graph in the model's opsets, typing each
// node's outputs as it is added (rules read the shapes of what they
// build). Ops whose signature changed between opsets (Squeeze, Unsqueeze,
// the reductions) are written in the form the model's opset takes.
type Builder struct {
	G      *ir.Graph
	Opsets ops.Opsets
	known  map[*ir.Value]*ir.Tensor
	names  *ir.Namer
	prefix string
	err    error // the first node that failed inference
}

// NewBuilder prepares a builder over m's graph; known holds the values
// inference found constant (nil: none). New names start with prefix.
func NewBuilder(m *ir.Model, known map[*ir.Value]*ir.Tensor, prefix string) *Builder {
	if known == nil {
		known = map[*ir.Value]*ir.Tensor{}
	}
	for _, v := range m.Graph.Initializers {
		known[v] = v.Const
	}
	return &Builder{G: m.Graph, Opsets: ops.OpsetsOf(m), known: known, names: m.Graph.Namer(), prefix: prefix}
}

// Err returns the first error of a node the builder could not type.
func (b *Builder) Err() error { return b.err }

// Opset is the model's default-domain opset.
func (b *Builder) Opset() int64 { return b.Opsets[""] }

// Name returns an unused name built from base.
func (b *Builder) Name(base string) string { return b.names.Unique(b.prefix + base) }

// Node appends a node of the default domain with nOut outputs.
func (b *Builder) Node(op string, ins []*ir.Value, nOut int, attrs ...*ir.Attribute) *ir.Node {
	return b.DomainNode("", op, ins, nOut, attrs...)
}

// DomainNode appends a node of any domain and types its outputs.
func (b *Builder) DomainNode(domain, op string, ins []*ir.Value, nOut int, attrs ...*ir.Attribute) *ir.Node {
	n := &ir.Node{OpType: op, Domain: domain, Inputs: ins, Attrs: attrs}
	n.Name = b.Name(op)
	for i := 0; i < nOut; i++ {
		n.Outputs = append(n.Outputs, &ir.Value{Name: b.Name(op + "_" + strconv.Itoa(i)), Producer: n})
	}
	b.G.Nodes = append(b.G.Nodes, n)
	if err := ops.InferNode(n, b.Opsets, b.known); err != nil && b.err == nil {
		b.err = err
	}
	return n
}

// Op appends a single-output node and returns its output.
func (b *Builder) Op(op string, ins []*ir.Value, attrs ...*ir.Attribute) *ir.Value {
	return b.Node(op, ins, 1, attrs...).Outputs[0]
}

// Const adds t as an initializer.
func (b *Builder) Const(base string, t *ir.Tensor) *ir.Value {
	v := b.G.AddInitializer(b.Name(base), t)
	b.known[v] = t
	return v
}

// Scalar is a rank-0 constant of type d.
func (b *Builder) Scalar(d ir.DType, x float64) *ir.Value {
	return b.Const("c", ops.FromFloat64s(d, nil, []float64{x}))
}

// Int64s is a 1-D int64 constant.
func (b *Builder) Int64s(vals ...int64) *ir.Value {
	return b.Const("ints", ir.FromSlice(ir.Int64, []int64{int64(len(vals))}, vals))
}

// Value returns v's compile-time value, or nil.
func (b *Builder) Value(v *ir.Value) *ir.Tensor { return b.known[v] }

// Binary and unary shorthands.
func (b *Builder) Add(x, y *ir.Value) *ir.Value { return b.Op("Add", []*ir.Value{x, y}) }
func (b *Builder) Sub(x, y *ir.Value) *ir.Value { return b.Op("Sub", []*ir.Value{x, y}) }
func (b *Builder) Mul(x, y *ir.Value) *ir.Value { return b.Op("Mul", []*ir.Value{x, y}) }
func (b *Builder) Div(x, y *ir.Value) *ir.Value { return b.Op("Div", []*ir.Value{x, y}) }
func (b *Builder) Neg(x *ir.Value) *ir.Value    { return b.Op("Neg", []*ir.Value{x}) }

// Where selects x where cond holds, else y.
func (b *Builder) Where(cond, x, y *ir.Value) *ir.Value {
	return b.Op("Where", []*ir.Value{cond, x, y})
}

// Cast converts x to d.
func (b *Builder) Cast(x *ir.Value, d ir.DType) *ir.Value {
	return b.Op("Cast", []*ir.Value{x}, ir.AttrI("to", int64(d)))
}

// Transpose permutes x's axes.
func (b *Builder) Transpose(x *ir.Value, perm ...int64) *ir.Value {
	return b.Op("Transpose", []*ir.Value{x}, ir.AttrIs("perm", perm...))
}

// ReduceSum sums x over axes (every axis when axes is empty), keeping
// them as size 1 when keep.
func (b *Builder) ReduceSum(x *ir.Value, axes []int64, keep bool) *ir.Value {
	return b.Reduce("ReduceSum", x, axes, keep)
}

// Reduce applies a reduction op in the form the model's opset takes: axes
// as an input from opset 13 (ReduceSum) or 18 (the others).
func (b *Builder) Reduce(op string, x *ir.Value, axes []int64, keep bool) *ir.Value {
	k := int64(0)
	if keep {
		k = 1
	}
	inputForm := b.Opset() >= 18 || op == "ReduceSum" && b.Opset() >= 13
	switch {
	case len(axes) == 0:
		return b.Op(op, []*ir.Value{x}, ir.AttrI("keepdims", k))
	case inputForm:
		return b.Op(op, []*ir.Value{x, b.Int64s(axes...)}, ir.AttrI("keepdims", k))
	}
	return b.Op(op, []*ir.Value{x}, ir.AttrIs("axes", axes...), ir.AttrI("keepdims", k))
}

// Unsqueeze inserts size-1 axes (axes input from opset 13).
func (b *Builder) Unsqueeze(x *ir.Value, axes ...int64) *ir.Value {
	if b.Opset() >= 13 {
		return b.Op("Unsqueeze", []*ir.Value{x, b.Int64s(axes...)})
	}
	return b.Op("Unsqueeze", []*ir.Value{x}, ir.AttrIs("axes", axes...))
}

// Squeeze removes size-1 axes (axes input from opset 13).
func (b *Builder) Squeeze(x *ir.Value, axes ...int64) *ir.Value {
	if b.Opset() >= 13 {
		return b.Op("Squeeze", []*ir.Value{x, b.Int64s(axes...)})
	}
	return b.Op("Squeeze", []*ir.Value{x}, ir.AttrIs("axes", axes...))
}

// ShapeOf is x's shape as a value: a constant where it is static.
func (b *Builder) ShapeOf(x *ir.Value) *ir.Value {
	if dims, ok := x.Type.Shape.Ints(); ok {
		return b.Int64s(dims...)
	}
	return b.Op("Shape", []*ir.Value{x})
}

// ReshapeTo reshapes x to like's shape.
func (b *Builder) ReshapeTo(x, like *ir.Value) *ir.Value {
	if x.Type.Shape.Equal(like.Type.Shape) && x.Type.Shape.IsStatic() {
		return x
	}
	return b.Op("Reshape", []*ir.Value{x, b.ShapeOf(like)})
}

// ExpandTo broadcasts x to like's shape.
func (b *Builder) ExpandTo(x, like *ir.Value) *ir.Value {
	return b.Op("Expand", []*ir.Value{x, b.ShapeOf(like)})
}

// ZerosLike is a tensor of zeros of x's type and shape.
func (b *Builder) ZerosLike(x *ir.Value) *ir.Value {
	zero := ir.NewTensor(x.Type.Elem, 1)
	return b.Op("ConstantOfShape", []*ir.Value{b.ShapeOf(x)}, ir.AttrT("value", zero))
}

// SumTo reduces dy, the gradient of a value of shape out that x was
// broadcast into, to x's shape: the sum over every axis broadcasting
// added or stretched.
func (b *Builder) SumTo(dy *ir.Value, out ir.Shape, x *ir.Value) (*ir.Value, error) {
	xs := x.Type.Shape
	if !xs.Ranked || !out.Ranked {
		return nil, fmt.Errorf("the gradient of %q needs its rank and the broadcast result's", x.Name)
	}
	lead := len(out.Dims) - len(xs.Dims)
	if lead < 0 {
		return nil, fmt.Errorf("%q has rank %d, above its broadcast result's %d", x.Name, len(xs.Dims), len(out.Dims))
	}
	var axes []int64
	for i := range out.Dims {
		if i < lead {
			axes = append(axes, int64(i))
			continue
		}
		xd, od := xs.Dims[i-lead], out.Dims[i]
		switch {
		case xd.IsStatic() && xd.Value == 1 && !(od.IsStatic() && od.Value == 1):
			axes = append(axes, int64(i))
		case ir.DimEqual(xd, od):
		case xd.IsStatic() && od.IsStatic():
			return nil, fmt.Errorf("%q of shape %s does not broadcast to %s", x.Name, xs, out)
		default:
			return nil, fmt.Errorf("cannot tell whether %q (%s) is broadcast to %s: dim %d is unknown", x.Name, xs, out, i)
		}
	}
	if len(axes) == 0 {
		return dy, nil
	}
	s := b.ReduceSum(dy, axes, true)
	if lead == 0 {
		return s, nil
	}
	return b.ReshapeTo(s, x), nil
}
