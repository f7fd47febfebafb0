package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
)

// Matrix products (ir/ops linalg.go): dA = dY·Bᵀ and dB = Aᵀ·dY, as Gemm
// or MatMul nodes, summed over broadcast batch axes.

func init() {
	define("", map[string]Rule{"Gemm": gemmRule, "MatMul": matmulRule})
	notDifferentiable("", "not implemented: each operand's gradient is another Einsum, whose equation the rule would have to derive", "Einsum")
}

// gemmRule: Y = alpha·A'·B' + beta·C with A' = op(A), B' = op(B).
func gemmRule(c *Ctx) ([]*ir.Value, error) {
	a, b, dy := c.X(0), c.X(1), c.DY[0]
	ta, tb := c.Int("transA"), c.Int("transB")
	alpha := ir.AttrF("alpha", c.Float("alpha"))
	out := make([]*ir.Value, len(c.Node.Inputs))
	gemm := func(x, y *ir.Value, tx, ty int64) *ir.Value {
		return c.Op("Gemm", []*ir.Value{x, y}, alpha, ir.AttrI("transA", tx), ir.AttrI("transB", ty))
	}
	if c.Need[0] {
		if ta == 0 {
			out[0] = gemm(dy, b, 0, 1-tb) // dY·B'ᵀ
		} else {
			out[0] = gemm(b, dy, tb, 1) // (dY·B'ᵀ)ᵀ = B'·dYᵀ
		}
	}
	if c.Need[1] {
		if tb == 0 {
			out[1] = gemm(a, dy, 1-ta, 0) // A'ᵀ·dY
		} else {
			out[1] = gemm(dy, a, 1, ta) // (A'ᵀ·dY)ᵀ = dYᵀ·A'
		}
	}
	if len(c.Need) > 2 && c.Need[2] {
		d, err := c.SumTo(dy, c.Y(0).Type.Shape, c.X(2))
		if err != nil {
			return nil, c.Fail("%v", err)
		}
		if beta := c.Float("beta"); beta != 1 {
			d = c.Mul(d, c.k(dy, float64(beta)))
		}
		out[2] = d
	}
	return out, nil
}

// swapLast transposes the last two axes.
func (c *Ctx) swapLast(v *ir.Value) *ir.Value {
	r := v.Type.Shape.Rank()
	perm := make([]int64, r)
	for i := range perm {
		perm[i] = int64(i)
	}
	perm[r-2], perm[r-1] = perm[r-1], perm[r-2]
	return c.Transpose(v, perm...)
}

// matmulRule: 1-D operands are made matrices as numpy does ([K] is [1, K]
// on the left, [K, 1] on the right), and dy gets the axes they add.
func matmulRule(c *Ctx) ([]*ir.Value, error) {
	a, b, dy := c.X(0), c.X(1), c.DY[0]
	ra, rb, ry := a.Type.Shape.Rank(), b.Type.Shape.Rank(), c.Y(0).Type.Shape.Rank()
	if ra < 1 || rb < 1 {
		return nil, c.Fail("the operands' ranks must be known")
	}
	a2, b2, dy2 := a, b, dy
	switch {
	case ra == 1 && rb == 1:
		a2, b2, dy2 = c.Unsqueeze(a, 0), c.Unsqueeze(b, 1), c.Unsqueeze(dy, 0, 1)
	case ra == 1:
		a2, dy2 = c.Unsqueeze(a, 0), c.Unsqueeze(dy, int64(ry-1))
	case rb == 1:
		b2, dy2 = c.Unsqueeze(b, 1), c.Unsqueeze(dy, int64(ry))
	}
	out := make([]*ir.Value, 2)
	for i := range out {
		if !c.Need[i] {
			continue
		}
		x, x2 := a, a2
		var p *ir.Value
		if i == 0 {
			p = c.Op("MatMul", []*ir.Value{dy2, c.swapLast(b2)})
		} else {
			x, x2 = b, b2
			p = c.Op("MatMul", []*ir.Value{c.swapLast(a2), dy2})
		}
		d, err := c.SumTo(p, p.Type.Shape, x2)
		if err != nil {
			return nil, c.Fail("%v", err)
		}
		out[i] = c.ReshapeTo(d, x)
	}
	return out, nil
}
