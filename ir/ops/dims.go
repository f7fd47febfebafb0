package ops

import "github.com/kiln-ml/kiln/ir"

// What inference reads off its inputs' types: static sizes as int64s (-1
// for a dim that is not static) and back, the dims of a possibly unranked
// shape, and the element type inputs share.

// dimValue returns a static dim's size, or -1.
func dimValue(d ir.Dim) int64 {
	if d.IsStatic() {
		return d.Value
	}
	return -1
}

// knownDims returns a shape's dims with -1 for every dim that is not static.
func knownDims(s ir.Shape) []int64 {
	out := make([]int64, len(s.Dims))
	for i, d := range s.Dims {
		out[i] = dimValue(d)
	}
	return out
}

// dimOf makes a static dim from n, or an unknown one when n < 0.
func dimOf(n int64) ir.Dim {
	if n < 0 {
		return ir.UnknownDim()
	}
	return ir.D(n)
}

// dimsOf returns a shape's dims, or rank unknown dims when it is unranked.
func dimsOf(s ir.Shape, rank int) []ir.Dim {
	if s.Ranked {
		return s.Dims
	}
	out := make([]ir.Dim, rank)
	for i := range out {
		out[i] = ir.UnknownDim()
	}
	return out
}

// sameElem checks that the inputs at idx share an element type (where
// known) and returns it.
func sameElem(c *InferContext, idx ...int) (ir.DType, error) {
	elem, from := ir.Undefined, 0
	for _, i := range idx {
		e := c.In(i).Elem
		switch {
		case e == ir.Undefined || !c.HasInput(i):
		case elem == ir.Undefined:
			elem, from = e, i
		case e != elem:
			return elem, c.Errorf("input %d is %s, input %d %s", from, elem, i, e)
		}
	}
	return elem, nil
}
