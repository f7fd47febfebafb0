package ops

import "github.com/kiln-ml/kiln/ir"

// Helpers of the reduce family that other families use too: the walk over
// groups of elements that reductions, normalizations and per-axis ops
// share, and the element-type check of kernels.

// A reduction splits the elements of a tensor into groups, one per
// combination of coordinates on the kept axes: element k of group g has the
// flat index base[g] + offs[k]. Groups come in row-major order of the kept
// axes, which is the order of the reduced tensor's elements; the elements
// of a group come in row-major order of the reduced axes, so for a single
// reduced axis k is the coordinate along it.
type reduction struct {
	base []int
	offs []int
}

// newReduction splits a tensor of shape dims; reduced marks the reduced axes.
func newReduction(dims []int64, reduced []bool) reduction {
	strides := Strides(dims)
	var keptDims, keptStrides, redDims, redStrides []int64
	for i, d := range dims {
		if reduced[i] {
			redDims, redStrides = append(redDims, d), append(redStrides, strides[i])
		} else {
			keptDims, keptStrides = append(keptDims, d), append(keptStrides, strides[i])
		}
	}
	return reduction{base: offsets(keptDims, keptStrides), offs: offsets(redDims, redStrides)}
}

// offsets lists the flat offsets sum(coord[a]*strides[a]) of every
// coordinate of a box of shape dims, in row-major order.
func offsets(dims, strides []int64) []int {
	out := make([]int, ir.Product(dims))
	coord := make([]int64, len(dims))
	var off int64
	for k := range out {
		out[k] = int(off)
		for a := len(dims) - 1; a >= 0; a-- {
			coord[a]++
			off += strides[a]
			if coord[a] < dims[a] {
				break
			}
			off -= coord[a] * strides[a]
			coord[a] = 0
		}
	}
	return out
}

// alongAxis is the reduction over one axis: each group is a line of the
// tensor parallel to that axis.
func alongAxis(dims []int64, axis int) reduction {
	reduced := make([]bool, len(dims))
	reduced[axis] = true
	return newReduction(dims, reduced)
}

// fromAxis is the reduction over the axes from axis on (Softmax before
// opset 13, LayerNormalization): each group is a contiguous block.
func fromAxis(dims []int64, axis int) reduction {
	reduced := make([]bool, len(dims))
	for i := axis; i < len(dims); i++ {
		reduced[i] = true
	}
	return newReduction(dims, reduced)
}

// foldGroups applies f to each group's elements (gathered into a scratch
// slice that f must not keep) and returns one result per group.
func foldGroups[T, R any](r reduction, xs []T, f func(group []T) R) []R {
	out := make([]R, len(r.base))
	buf := make([]T, len(r.offs))
	for g, b := range r.base {
		for k, o := range r.offs {
			buf[k] = xs[b+o]
		}
		out[g] = f(buf)
	}
	return out
}

// mapGroups replaces each group's elements in place by f's transform of
// them (f rewrites the gathered slice).
func mapGroups[T any](r reduction, xs []T, f func(group []T)) {
	buf := make([]T, len(r.offs))
	for _, b := range r.base {
		for k, o := range r.offs {
			buf[k] = xs[b+o]
		}
		f(buf)
		for k, o := range r.offs {
			xs[b+o] = buf[k]
		}
	}
}

// checkType returns the Unsupported error when the row's kernel lacks d,
// so kernels run by constant folding (which skips the executor's check)
// never see a type they cannot read.
func checkType(c *KernelContext, d ir.DType) error {
	if !c.schema.SupportsType(d) {
		return c.Unsupported(d)
	}
	return nil
}
