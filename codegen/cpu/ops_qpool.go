package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/value"
)

// lowerQMaxPool is lowerPool's MaxPool on 8-bit integers (a quantized
// model's MaxPool keeps its input's scale, so it runs on the bytes): one
// plane per work item, vectors of 4·vl bytes along the output row, taps
// unrolled, padding lanes at the type's lowest value.
func (g *gen) lowerQMaxPool(n *ir.Node) error {
	p, err := g.poolGeom(n)
	if err != nil {
		return err
	}
	in, out := n.Inputs[0], n.Outputs[0]
	signed := in.Type.Elem == ir.Int8
	lowest, op := int64(0), "umax"
	if signed {
		lowest, op = -128, "smax"
	}
	L := int64(4 * g.vl)
	planes := p.N * p.C
	nch := (p.OW + L - 1) / L
	runs := tapRuns(p.OH, p.sh, p.ph, p.dh, p.kh, p.H)
	par := planes > 1 && parallelWorth(numel(in))
	vmax := fmt.Sprintf("llvm.%s.v%di8", op, L)
	g.step("MaxPool", !par, func(k *kfn) {
		ip, yp := k.bytesAt(k.ptr(in), c64(0)), k.bytesAt(k.ptr(out), c64(0))
		k.parLoop(planes, par, func(pl value.Value) {
			for _, run := range runs {
				k.Loop(c64(run.lo), c64(run.hi), func(oh value.Value) {
					for j := int64(0); j < nch; j++ {
						valid := min(L, p.OW-j*L)
						var acc value.Value
						for _, kh := range run.taps {
							ih := k.Add(k.Mul(oh, c64(p.sh)), c64(kh*p.dh-p.ph))
							row := k.Mul(k.Add(k.Mul(pl, c64(p.H)), ih), c64(p.W))
							for kw := int64(0); kw < p.kw; kw++ {
								x := k.loadU8Strided(ip, row, j*L*p.sw+kw*p.dw-p.pw, p.sw, p.W, L, valid, lowest)
								if acc == nil {
									acc = x
								} else {
									acc = k.call(vmax, x.Type(), acc, x)
								}
							}
						}
						if acc == nil { // no tap inside the input
							acc = splat(int(L), constant.NewInt(i8, lowest))
						}
						at := k.Add(k.Mul(k.Add(k.Mul(pl, c64(p.OH)), oh), c64(p.OW)), c64(j*L))
						k.maskedStoreAt(acc, yp, at, valid)
					}
				})
			}
		})
	})
	return nil
}
