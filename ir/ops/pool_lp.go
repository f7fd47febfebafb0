package ops

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// LpPool: each output is (sum over its window of |x|^p)^(1/p); padding
// counts as zeros. v18 added ceil_mode and dilations, v22 bfloat16. (v2's
// rows, before v11 reworded the padding rules, are not implemented.)

func lpPoolAttrs(extra ...AttrDef) []AttrDef {
	return poolAttrs(append([]AttrDef{defInt("p", 2)}, extra...)...)
}

var lpPoolOps = []*Schema{
	poolRow("LpPool", 11, 1, convTypes, lpPoolAttrs(), inferLpPool, runLpPool),
	poolRow("LpPool", 18, 1, convTypes, lpPoolAttrs(defInt("ceil_mode", 0), defInts("dilations")), inferLpPool, runLpPool),
	poolRow("LpPool", 22, 1, convTypes22, lpPoolAttrs(defInt("ceil_mode", 0), defInts("dilations")), inferLpPool, runLpPool),
}

func init() { register(lpPoolOps) }

func inferLpPool(c *InferContext) error {
	if p := c.Int("p"); p <= 0 {
		return c.Errorf("p must be positive, is %d", p)
	}
	return inferPool(c)
}

func runLpPool(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	p := float64(c.Int("p"))
	if p <= 0 {
		return c.Errorf("p must be positive, is %v", p)
	}
	g, dims, err := poolGrid(c.attrs, x.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	in, inPlane, outPlane := Float64s(x), g.inSize(), g.outSize()
	y := make([]float64, ir.Product(dims))
	parallelFor(int(dims[0]*dims[1]), func(plane int) {
		xp, yp := in[plane*inPlane:][:inPlane], y[plane*outPlane:][:outPlane]
		for od := range g.out[0] {
			for oh := range g.out[1] {
				for ow := range g.out[2] {
					var sum float64
					g.eachTap(od, oh, ow, func(i int) { sum += math.Pow(math.Abs(xp[i]), p) })
					yp[(od*g.out[1]+oh)*g.out[2]+ow] = math.Pow(sum, 1/p)
				}
			}
		}
	})
	c.Set(0, FromFloat64s(x.DType, dims, y))
	return nil
}
