package cpu

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/value"
)

type poolGeom struct {
	N, C, H, W, OH, OW int64
	kh, kw, sh, sw     int64
	ph, pw, dh, dw     int64
	win                ops.Window
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
	p.win = win
	return p, nil
}

// lowerPool runs MaxPool and AveragePool like the depthwise convolution
// (lowerConvGrouped): one plane per work item, vectors along the output
// row, taps unrolled, borders resolved at compile time. Padding lanes load
// as -Inf for max and 0 for the average, whose divisor
// (ops.AveragePoolCounts: per row times per column) is a constant vector
// per row run and vector: runs are split where the row's count changes.
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
	var counts [][]int64
	if !isMax {
		counts = ops.AveragePoolCounts(p.win, []int64{p.H, p.W}, includePad)
		runs = splitRuns(runs, counts[0])
	}
	par := planes > 1 && parallelWorth(numel(in))
	g.step(n.OpType, !par, func(k *kfn) {
		ip, op := k.ptr(in), k.ptr(out)
		k.parLoop(planes, par, func(pl value.Value) {
			for _, run := range runs {
				k.Loop(c64(run.lo), c64(run.hi), func(oh value.Value) {
					taps := map[int64]*rowTaps{}
					for _, kh := range run.taps {
						ih := k.Add(k.Mul(oh, c64(p.sh)), c64(kh*p.dh-p.ph))
						taps[kh] = newRowTaps(k, ip, k.Mul(k.Add(k.Mul(pl, c64(p.H)), ih), c64(p.W)), p.sw, p.W, int(vl), fill)
					}
					for j := int64(0); j < nch; j++ {
						valid := int(min(vl, p.OW-j*vl))
						var acc value.Value // the first tap's value starts a maximum
						if !isMax {
							acc = fconst(vecT(int(vl)), fill)
						}
						for _, kh := range run.taps {
							for kw := int64(0); kw < p.kw; kw++ {
								x := taps[kh].tap(j, kw*p.dw-p.pw, valid)
								switch {
								case x == nil:
								case isMax && acc == nil:
									acc = x
								case isMax:
									acc = k.FMax(x, acc)
								default:
									acc = k.fadd(acc, x)
								}
							}
						}
						if acc == nil { // no tap inside the input
							acc = fconst(vecT(int(vl)), fill)
						}
						if !isMax {
							scale := make([]constant.Constant, vl)
							for l := range scale {
								c := int64(1)
								if ow := j*vl + int64(l); ow < p.OW {
									c = counts[0][run.lo] * counts[1][ow]
								}
								scale[l] = cf(1 / float64(max(c, 1)))
							}
							acc = k.fmul(acc, constant.NewVector(vecT(int(vl)), scale...))
						}
						at := k.Add(k.Mul(k.Add(k.Mul(pl, c64(p.OH)), oh), c64(p.OW)), c64(j*vl))
						k.vstore(acc, op, at, int(vl), valid)
					}
				})
			}
		})
	})
	return nil
}

// splitRuns splits runs where count (per position) changes, so that
// each run has one.
func splitRuns(runs []tapRun, count []int64) []tapRun {
	var out []tapRun
	for _, r := range runs {
		lo := r.lo
		for o := r.lo + 1; o <= r.hi; o++ {
			if o == r.hi || count[o] != count[lo] {
				out = append(out, tapRun{lo: lo, hi: o, taps: r.taps})
				lo = o
			}
		}
	}
	return out
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
		"MaxPool": {types: []ir.DType{ir.Float32, ir.Uint8, ir.Int8}, check: poolCheck, lower: func(g *gen, n *ir.Node) error {
			if n.Inputs[0].Type.Elem != ir.Float32 {
				return g.lowerQMaxPool(n) // ops_qpool.go
			}
			return g.lowerPool(n)
		}},
		"AveragePool": {types: floatOnly, lower: (*gen).lowerPool, check: poolCheck},
	})
}
