package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// Helpers of the shape and index families (shape.go, index.go): kernels
// that only move elements build an index map (output element -> input
// element) and copy through it, which works for every fixed-size dtype and
// for strings with one code path.

// movable reports whether takeElems can copy elements of dtype d.
func movable(d ir.DType) bool {
	switch d.Size() {
	case 1, 2, 4, 8:
		return true
	}
	return d == ir.String
}

// takeElems returns a tensor of src's dtype and shape dims whose element i
// is src's element idx[i], or fill's single element where idx[i] < 0 (zero
// or "" when fill is nil). The caller checks movable(src.DType).
func takeElems(src *ir.Tensor, dims []int64, idx []int, fill *ir.Tensor) *ir.Tensor {
	out := ir.NewTensor(src.DType, dims...)
	if src.DType == ir.String {
		f := ""
		if fill != nil {
			f = fill.Strings[0]
		}
		for i, j := range idx {
			if j < 0 {
				out.Strings[i] = f
			} else {
				out.Strings[i] = src.Strings[j]
			}
		}
		return out
	}
	switch src.DType.Size() {
	case 1:
		takeTyped[uint8](out, src, fill, idx)
	case 2:
		takeTyped[uint16](out, src, fill, idx)
	case 4:
		takeTyped[uint32](out, src, fill, idx)
	case 8:
		takeTyped[uint64](out, src, fill, idx)
	}
	return out
}

func takeTyped[T ir.Numeric](dst, src, fill *ir.Tensor, idx []int) {
	d, s := ir.Data[T](dst), ir.Data[T](src)
	var f T
	if fill != nil {
		f = ir.Data[T](fill)[0]
	}
	for i, j := range idx {
		if j < 0 {
			d[i] = f
		} else {
			d[i] = s[j]
		}
	}
}

// axisIndex returns the index map of an output of shape dims whose
// element at coordinate c reads the input element at offset
// sum(maps[a][c[a]]), or fill (-1) when any maps[a][c[a]] is negative.
// maps[a] has dims[a] entries, already multiplied by the input's stride:
// transposes, slices with steps, tiles and pads are all such maps.
func axisIndex(dims []int64, maps [][]int) []int {
	n := ir.Product(dims)
	idx := make([]int, n)
	if n == 0 {
		return idx
	}
	last := len(dims) - 1
	if last < 0 {
		return idx // a scalar reads element 0
	}
	coord := make([]int, last)
	for k := 0; k < len(idx); {
		base, fill := 0, false
		for a, c := range coord {
			v := maps[a][c]
			fill = fill || v < 0
			base += v
		}
		for _, v := range maps[last] {
			if fill || v < 0 {
				idx[k] = -1
			} else {
				idx[k] = base + v
			}
			k++
		}
		for a := last - 1; a >= 0; a-- {
			coord[a]++
			if coord[a] < int(dims[a]) {
				break
			}
			coord[a] = 0
		}
	}
	return idx
}

// strideMap is the axisIndex map of n output positions reading input
// positions start, start+step, ... along an axis of the given stride.
func strideMap(n, start, step, stride int64) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = int((start + int64(i)*step) * stride)
	}
	return m
}

// permuteIndex is the index map of a transpose: output axis a is input
// axis perm[a].
func permuteIndex(in []int64, perm []int) (dims []int64, idx []int) {
	st := Strides(in)
	dims = make([]int64, len(perm))
	strides := make([]int64, len(perm))
	for a, p := range perm {
		dims[a], strides[a] = in[p], st[p]
	}
	return dims, offsets(dims, strides)
}

// nextCoord advances a row-major coordinate within dims.
func nextCoord(coord, dims []int64) {
	for a := len(dims) - 1; a >= 0; a-- {
		coord[a]++
		if coord[a] < dims[a] {
			return
		}
		coord[a] = 0
	}
}

// indexValues returns an integer tensor's elements (indices, shapes, axes,
// pads), or an error naming what the tensor is for when it is not integer.
func indexValues(t *ir.Tensor, what string) ([]int64, error) {
	if !t.DType.IsInt() {
		return nil, fmt.Errorf("%s must be an integer tensor, got %s", what, t.DType)
	}
	return Int64s(t), nil
}

// constInts returns input i's value as int64s when it is an integer
// constant, else nil.
func constInts(c *InferContext, i int) []int64 {
	t := c.Const(i)
	if t == nil || !t.DType.IsInt() {
		return nil
	}
	return Int64s(t)
}

// unknownDims returns a ranked shape of rank unknown dims, or the unranked
// shape when rank < 0 (so vectorLen's -1 flows through).
func unknownDims(rank int) ir.Shape {
	if rank < 0 {
		return ir.Shape{}
	}
	s := ir.Shape{Ranked: true, Dims: make([]ir.Dim, rank)}
	for i := range s.Dims {
		s.Dims[i] = ir.UnknownDim()
	}
	return s
}

// vectorLen returns the static length of a 1-D input, or -1 when its shape
// is not known to be [n].
func vectorLen(t ir.Type) int {
	if t.Shape.Rank() == 1 && t.Shape.Dims[0].IsStatic() {
		return int(t.Shape.Dims[0].Value)
	}
	return -1
}

// mulDims multiplies dims: static when all are, an expression when some
// are symbolic, unknown when one is unknown (unless a static 0 makes the
// product 0).
func mulDims(ds []ir.Dim) ir.Dim {
	for _, d := range ds {
		if d.IsStatic() && d.Value == 0 {
			return ir.D(0)
		}
	}
	return ir.DimProduct(ds...)
}

// normAxes resolves possibly negative axes against rank and rejects
// duplicates.
func normAxes(axes []int64, rank int) ([]int, error) {
	out := make([]int, len(axes))
	seen := make([]bool, rank)
	for i, a := range axes {
		n, err := NormAxis(a, rank)
		if err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("axis %d appears twice in %v", a, ir.FormatList(axes))
		}
		seen[n] = true
		out[i] = n
	}
	return out, nil
}
