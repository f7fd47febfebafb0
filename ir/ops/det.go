package ops

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// Det: the determinant of each square matrix in the last two axes, by LU
// decomposition with partial pivoting in float64.

var detOps = []*Schema{
	{Name: "Det", Since: 11, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: floatTypes, Infer: inferDet, Run: runDet},
	{Name: "Det", Since: 22, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: floatTypes, Infer: inferDet, Run: runDet},
}

func init() { register(detOps) }

func inferDet(c *InferContext) error {
	x := c.In(0)
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	r := x.Shape.Rank()
	if r < 2 {
		return c.Errorf("input has rank %d, want at least 2 (*, M, M)", r)
	}
	if a, b := x.Shape.Dims[r-2], x.Shape.Dims[r-1]; a.IsStatic() && b.IsStatic() && a.Value != b.Value {
		return c.Errorf("input has shape %s, want square matrices in the last two axes", x.Shape)
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(x.Shape.Dims[:r-2]...)))
	return nil
}

func runDet(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	r := len(x.Dims)
	if r < 2 || x.Dims[r-1] != x.Dims[r-2] {
		return c.Errorf("input has shape %v, want (*, M, M)", ir.FormatList(x.Dims))
	}
	m := x.Dims[r-1]
	batch := x.Dims[:r-2]
	v := Float64s(x)
	out := make([]float64, ir.Product(batch))
	for b := range out {
		out[b] = determinant(v[int64(b)*m*m:int64(b+1)*m*m], int(m))
	}
	c.Set(0, FromFloat64s(x.DType, batch, out))
	return nil
}

// determinant of the n×n row-major matrix a, which it overwrites.
func determinant(a []float64, n int) float64 {
	det := 1.0
	for k := range n {
		p := k
		for i := k + 1; i < n; i++ {
			if math.Abs(a[i*n+k]) > math.Abs(a[p*n+k]) {
				p = i
			}
		}
		if a[p*n+k] == 0 {
			return 0
		}
		if p != k {
			for j := range n {
				a[k*n+j], a[p*n+j] = a[p*n+j], a[k*n+j]
			}
			det = -det
		}
		det *= a[k*n+k]
		for i := k + 1; i < n; i++ {
			f := a[i*n+k] / a[k*n+k]
			for j := k; j < n; j++ {
				a[i*n+j] -= f * a[k*n+j]
			}
		}
	}
	return det
}
