package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// BroadcastShape applies ONNX's multidirectional (numpy) broadcasting to
// possibly symbolic shapes. An unknown rank anywhere gives an unknown rank;
// a symbolic dim against 1 keeps the symbol, and against a static size
// other than 1 is that size. Two different expressions give the one that
// is provably at least the other when both are provably at least 1 (for a
// model that runs, that is the broadcast size: min(512, S) against S is
// S); otherwise the dim is unknown, not an error, since either may be 1
// at run time. Executors check the real sizes.
func BroadcastShape(shapes ...ir.Shape) (ir.Shape, error) {
	rank := 0
	for _, s := range shapes {
		if !s.Ranked {
			return ir.Shape{}, nil
		}
		rank = max(rank, len(s.Dims))
	}
	out := ir.Shape{Ranked: true, Dims: make([]ir.Dim, rank)}
	for i := range out.Dims {
		out.Dims[i] = ir.D(1)
	}
	for _, s := range shapes {
		off := rank - len(s.Dims)
		for i, d := range s.Dims {
			cur := &out.Dims[off+i]
			switch {
			case d.IsStatic() && d.Value == 1:
			case cur.IsStatic() && cur.Value == 1:
				*cur = d
			case d.IsStatic() && cur.IsStatic():
				if d.Value != cur.Value {
					return ir.Shape{}, fmt.Errorf("shapes %v cannot broadcast (dim %d: %d vs %d)", ir.FormatList(shapes), off+i, cur.Value, d.Value)
				}
			case d == *cur || ir.DimEqual(d, *cur):
			case d.IsStatic():
				*cur = d // the symbol must equal the static size
			case cur.IsStatic():
			default:
				*cur = broadcastSymbolic(*cur, d)
			}
		}
	}
	return out, nil
}

// broadcastSymbolic broadcasts two different non-static dims: the larger
// when one is provably at least the other and both are at least 1 (so
// neither can be a 0 that a 1 broadcasts to), else unknown.
func broadcastSymbolic(a, b ir.Dim) ir.Dim {
	x, ok1 := ir.DimExpr(a)
	y, ok2 := ir.DimExpr(b)
	one := dimexpr.Const(1)
	if !ok1 || !ok2 || !x.GE(one) || !y.GE(one) {
		return ir.UnknownDim()
	}
	switch {
	case x.GE(y):
		return a
	case y.GE(x):
		return b
	}
	return ir.UnknownDim()
}

// BroadcastDims is BroadcastShape for static shapes.
func BroadcastDims(dims ...[]int64) ([]int64, error) {
	shapes := make([]ir.Shape, len(dims))
	for i, d := range dims {
		shapes[i] = ir.S(d...)
	}
	s, err := BroadcastShape(shapes...)
	if err != nil {
		return nil, err
	}
	out, _ := s.Ints()
	return out, nil
}

// Strides returns row-major element strides for dims.
func Strides(dims []int64) []int64 {
	st := make([]int64, len(dims))
	acc := int64(1)
	for i := len(dims) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= dims[i]
	}
	return st
}

// BroadcastIndex maps every element of the output shape out to the flat
// index of the corresponding element of an input of shape in (which must
// broadcast to out).
func BroadcastIndex(in, out []int64) []int {
	n := ir.Product(out)
	idx := make([]int, n)
	inStrides := Strides(in)
	// Per output axis, the input stride (0 where the input broadcasts).
	st := make([]int64, len(out))
	off := len(out) - len(in)
	for i := range in {
		if in[i] != 1 {
			st[off+i] = inStrides[i]
		}
	}
	coord := make([]int64, len(out))
	for k := int64(0); k < n; k++ {
		var flat int64
		for a := range coord {
			flat += coord[a] * st[a]
		}
		idx[k] = int(flat)
		for a := len(coord) - 1; a >= 0; a-- {
			coord[a]++
			if coord[a] < out[a] {
				break
			}
			coord[a] = 0
		}
	}
	return idx
}

// NormAxis resolves a possibly negative axis against rank, or fails.
func NormAxis(axis int64, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += int64(rank)
	}
	if a < 0 || a >= int64(rank) {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	return int(a), nil
}

// SameAsInput is the inference of ops whose single output has the type of
// input 0 (unary elementwise ops, activations, normalizations).
func SameAsInput(c *InferContext) error {
	c.Set(0, c.In(0).Clone())
	return nil
}
