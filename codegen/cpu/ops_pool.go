package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/value"
)

type poolGeom struct {
	N, C, H, W, OH, OW int64
	kh, kw, sh, sw     int64
	ph, pw, dh, dw     int64
}

func (g *gen) poolGeom(n *ir.Node) (poolGeom, error) {
	in, out := n.Inputs[0], n.Outputs[0]
	d, od := dimsOf(in), dimsOf(out)
	if len(d) != 4 {
		return poolGeom{}, fmt.Errorf("only 2-D pooling")
	}
	a := g.attrs(n)
	ks := a.Ints("kernel_shape")
	if len(ks) != 2 {
		return poolGeom{}, fmt.Errorf("kernel_shape %v: only 2-D pooling", ks)
	}
	p := poolGeom{N: d[0], C: d[1], H: d[2], W: d[3], OH: od[2], OW: od[3], kh: ks[0], kw: ks[1]}
	win, err := a.Window(ks, []int64{p.H, p.W})
	if err != nil {
		return poolGeom{}, err
	}
	p.sh, p.sw, p.dh, p.dw, p.ph, p.pw = win.Strides[0], win.Strides[1], win.Dilations[0], win.Dilations[1], win.PadBegin[0], win.PadBegin[1]
	return p, nil
}

// lowerPool runs MaxPool and AveragePool like the depthwise convolution
// (lowerConvGrouped): one plane per work item, vectors along the output
// row, taps unrolled, borders resolved at compile time. Padding lanes load
// as -Inf for max and 0 for the average, whose divisor (the count of
// in-range taps unless count_include_pad) is a constant vector per row run
// and vector.
func (g *gen) lowerPool(n *ir.Node) error {
	p, err := g.poolGeom(n)
	if err != nil {
		return err
	}
	in, out := n.Inputs[0], n.Outputs[0]
	isMax := n.OpType == "MaxPool"
	includePad := !isMax && g.attrs(n).Int("count_include_pad") != 0
	vl := int64(g.vl)
	planes := p.N * p.C
	nch := (p.OW + vl - 1) / vl
	fill := 0.0
	if isMax {
		fill = math.Inf(-1)
	}
	runs := tapRuns(p.OH, p.sh, p.ph, p.dh, p.kh, p.H)
	par := planes > 1 && parallelWorth(numel(in))
	g.step(n.OpType, !par, func(k *kfn) {
		ip, op := k.ptr(in), k.ptr(out)
		k.parLoop(planes, par, func(pl value.Value) {
			for _, run := range runs {
				k.loop(c64(run.lo), c64(run.hi), func(oh value.Value) {
					for j := int64(0); j < nch; j++ {
						valid := int(min(vl, p.OW-j*vl))
						acc := fconst(vecT(int(vl)), fill)
						count := make([]float64, vl) // in-range taps per lane
						for _, kh := range run.taps {
							ih := k.add(k.mul(oh, c64(p.sh)), c64(kh*p.dh-p.ph))
							row := k.mul(k.add(k.mul(pl, c64(p.H)), ih), c64(p.W))
							for kw := int64(0); kw < p.kw; kw++ {
								col0 := j*vl*p.sw + kw*p.dw - p.pw
								for l := range count {
									if col := col0 + int64(l)*p.sw; col >= 0 && col < p.W {
										count[l]++
									}
								}
								x := k.loadStrided(ip, row, col0, p.sw, p.W, int(vl), valid, fill)
								switch {
								case x == nil:
								case isMax:
									acc = k.fmax(x, acc)
								default:
									acc = k.fadd(acc, x)
								}
							}
						}
						if !isMax {
							scale := make([]constant.Constant, vl)
							for l, c := range count {
								if includePad {
									c = float64(p.kh * p.kw)
								}
								scale[l] = cf(1 / max(c, 1))
							}
							acc = k.fmul(acc, constant.NewVector(vecT(int(vl)), scale...))
						}
						at := k.add(k.mul(k.add(k.mul(pl, c64(p.OH)), oh), c64(p.OW)), c64(j*vl))
						k.vstore(acc, op, at, int(vl), valid)
					}
				})
			}
		})
	})
	return nil
}

func (g *gen) lowerGlobalPool(n *ir.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	d := dimsOf(in)
	planes := d[0] * d[1]
	hw := ir.Product(d[2:])
	isMax := n.OpType == "GlobalMaxPool"
	par := parallelWorth(numel(in))
	g.step(n.OpType, !par, func(k *kfn) {
		ip, op := k.ptr(in), k.ptr(out)
		k.parLoop(planes, par, func(pl value.Value) {
			base := k.mul(pl, c64(hw))
			init := cf(0)
			if isMax {
				init = cf(math.Inf(-1))
			}
			s := k.loopAcc(c64(0), c64(hw), []value.Value{init}, func(i value.Value, acc []value.Value) []value.Value {
				x := k.load(ip, k.add(base, i))
				if isMax {
					return []value.Value{k.fmax(x, acc[0])}
				}
				return []value.Value{k.fadd(acc[0], x)}
			})[0]
			if !isMax {
				s = k.fmul(s, cf(1/float64(hw)))
			}
			k.store(s, op, pl)
		})
	})
	return nil
}

func init() {
	poolCheck := func(g *gen, n *ir.Node) error {
		if len(n.Outputs) > 1 && n.Outputs[1] != nil {
			return fmt.Errorf("indices output not supported")
		}
		_, err := g.poolGeom(n)
		return err
	}
	register(map[string]*opInfo{
		"MaxPool":           {types: floatOnly, lower: (*gen).lowerPool, check: poolCheck},
		"AveragePool":       {types: floatOnly, lower: (*gen).lowerPool, check: poolCheck},
		"GlobalAveragePool": {types: floatOnly, lower: (*gen).lowerGlobalPool},
		"GlobalMaxPool":     {types: floatOnly, lower: (*gen).lowerGlobalPool},
	})
}
