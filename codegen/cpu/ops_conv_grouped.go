package cpu

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// lowerConvGrouped handles grouped and depthwise convolution directly on
// NCHW: each work item is one output plane; an output row is a run of
// vectors along OW, accumulated over the group's input channels and the
// kh×kw taps (unrolled). Everything about the borders is known at compile
// time: output rows are split into runs with the same set of in-range
// kernel rows, and each vector's lanes that fall into the left/right
// padding are masked out of its loads (a tap whose lanes are all padding is
// dropped), so the inner code has no bounds checks.
func (g *gen) lowerConvGrouped(n *ir.Node, c convGeom) error {
	X, Y := n.Inputs[0], g.outValue(n)
	pl := g.groupedPlanes(n, c)
	planes := c.N * c.OC
	par := planes > 1 && 2*planes*c.OH*c.OW*(c.C/c.group)*c.kh*c.kw >= 1<<17
	g.step("ConvGrouped", !par, func(k *kfn) {
		xp, yp := k.ptr(X), k.ptr(Y)
		k.parLoop(planes, par, func(p value.Value) {
			oc := k.SRem(p, c64(c.OC))
			img := k.SDiv(p, c64(c.OC))
			grp := k.SDiv(oc, c64(c.OC/c.group))
			xPlane := k.Mul(k.Add(k.Mul(img, c64(c.C)), k.Mul(grp, c64(c.C/c.group))), c64(c.H*c.W))
			pl.emit(k, xp, xPlane, yp, p)
		})
	})
	return nil
}

// groupedPlanes is what computing one output plane of a grouped
// convolution needs: geometry, weights, bias, fused residual and clamp.
type groupedPlanes struct {
	c          convGeom
	wOff, bOff int64 // weights offsets; bOff -1: no bias
	// w and b, for weights known only at run time (c.runtime), are where
	// they are read instead (b nil: no bias).
	w, b *ir.Value
	res  *ir.Value
	act  storeAct
	vl   int64
}

func (g *gen) groupedPlanes(n *ir.Node, c convGeom) *groupedPlanes {
	pl := &groupedPlanes{c: c, bOff: -1, vl: int64(g.vl)}
	switch {
	case c.runtime:
		pl.w, pl.b = n.Inputs[1], n.Input(2)
	default:
		pl.wOff = g.constLoc(g.constOf(n.Inputs[1])).off
		if b := n.Input(2); b != nil {
			pl.bOff = g.constLoc(g.constOf(b)).off
		}
	}
	pl.act = g.storeActOf(n)
	if a := g.plan(n).residualAdd; a != nil {
		pl.res = residual(a, n.Outputs[0])
	}
	return pl
}

// emit computes output plane p (image-major: p = img*OC + oc) into yp,
// reading the group's input channels from xp at element offset xPlane
// (channel after channel, H×W each).
func (pl *groupedPlanes) emit(k *kfn, xp, xPlane, yp, p value.Value) {
	c, vl := pl.c, pl.vl
	wp := k.locPtr(loc{space: inWeights, off: pl.wOff}, f32)
	if pl.w != nil {
		wp = k.ptr(pl.w)
	}
	oc := k.SRem(p, c64(c.OC))
	wBase := k.Mul(oc, c64(c.C/c.group*c.kh*c.kw))
	var init value.Value = constant.NewZeroInitializer(vecT(int(vl)))
	switch {
	case pl.b != nil:
		init = k.vsplat(k.load(k.ptr(pl.b), oc), int(vl))
	case pl.bOff >= 0:
		init = k.vsplat(k.load(k.locPtr(loc{space: inWeights, off: pl.bOff}, f32), oc), int(vl))
	}
	sum := func(yAt value.Value, n, width int64, khs []int64, load func(xCi value.Value, kh, kw, j int64) value.Value) {
		pl.sumVectors(k, wp, wBase, init, xPlane, yp, yAt, n, width, khs, load)
	}
	P := c.OH * c.OW
	if pl.flat() {
		khs := make([]int64, c.kh)
		for i := range khs {
			khs[i] = int64(i)
		}
		sum(k.Mul(p, c64(P)), (P+vl-1)/vl, P, khs, func(xCi value.Value, kh, kw, j int64) value.Value {
			dy, dx := kh*c.dh-c.ph, kw*c.dw-c.pw
			mask := make([]bool, vl)
			for l := range mask {
				q := j*vl + int64(l)
				ih, iw := q/c.OW+dy, q%c.OW+dx
				mask[l] = q < P && ih >= 0 && ih < c.H && iw >= 0 && iw < c.W
			}
			if !slices.Contains(mask, true) {
				return nil
			}
			return k.vloadMask(xp, k.Add(xCi, c64(j*vl+dy*c.W+dx)), mask, 0)
		})
		return
	}
	for _, run := range tapRuns(c.OH, c.sh, c.ph, c.dh, c.kh, c.H) {
		k.Loop(c64(run.lo), c64(run.hi), func(oh value.Value) {
			yRow := k.Add(k.Mul(p, c64(P)), k.Mul(oh, c64(c.OW)))
			// Each input row's taps, per input channel value (a chunk of
			// sumVectors emits its channel loop's body once).
			taps := map[[2]any]*rowTaps{}
			sum(yRow, (c.OW+vl-1)/vl, c.OW, run.taps, func(xCi value.Value, kh, kw, j int64) value.Value {
				ih := k.Add(k.Mul(oh, c64(c.sh)), c64(kh*c.dh-c.ph))
				valid := int(min(vl, c.OW-j*vl))
				key := [2]any{xCi, kh}
				if taps[key] == nil {
					taps[key] = newRowTaps(k, xp, k.Add(xCi, k.Mul(ih, c64(c.W))), c.sw, c.W, int(vl), 0)
				}
				return taps[key].tap(j, kw*c.dw-c.pw, valid)
			})
		})
	}
}

// flat reports whether a plane is computed as vectors of consecutive
// pixels across rows rather than row by row: its rows are narrower than a
// vector (a 7×7 plane in rows fills 7 of 16 lanes, flat 49 of 64), and
// with stride 1 and the input as wide as the output, each tap reads its
// input at one offset from the output pixel, lanes that fall outside the
// input (row or column) masked off. Its code is unrolled over the
// plane's vectors, so planes of at most 16 vectors go flat.
func (pl *groupedPlanes) flat() bool {
	c := pl.c
	return c.sh == 1 && c.sw == 1 && c.OW == c.W && c.OW < pl.vl && c.OH*c.OW <= 16*pl.vl
}

// sumVectors computes n output vectors, of an output row or a flat plane
// width floats long, into yp at yAt: each the bias (init) plus, over the
// group's input channels (plane offset xPlane, then one H×W plane each)
// and the taps (rows khs, every column), load's input vector (nil: all
// lanes padding) times the tap's weight. At most chunkBlock vectors are
// accumulated at once, so the accumulators stay in registers across the
// input-channel loop.
func (pl *groupedPlanes) sumVectors(k *kfn, wp, wBase, init, xPlane, yp, yAt value.Value, n, width int64, khs []int64,
	load func(xCi value.Value, kh, kw, j int64) value.Value) {
	const chunkBlock = 8
	c, vl := pl.c, pl.vl
	for cb := int64(0); cb < n; cb += chunkBlock {
		ce := min(n, cb+chunkBlock)
		accs := make([]value.Value, ce-cb)
		for i := range accs {
			accs[i] = init
		}
		accs = k.LoopAcc(c64(0), c64(c.C/c.group), 1, accs, func(ci value.Value, accs []value.Value) []value.Value {
			out := append([]value.Value(nil), accs...)
			xCi := k.Add(xPlane, k.Mul(ci, c64(c.H*c.W)))
			wCi := k.Add(wBase, k.Mul(ci, c64(c.kh*c.kw)))
			for _, kh := range khs {
				for kw := int64(0); kw < c.kw; kw++ {
					var wv value.Value
					for j := cb; j < ce; j++ {
						xv := load(xCi, kh, kw, j)
						if xv == nil {
							continue // every lane is padding
						}
						if wv == nil {
							wv = k.vsplat(k.load(wp, k.Add(wCi, c64(kh*c.kw+kw))), int(vl))
						}
						out[j-cb] = k.fma(xv, wv, out[j-cb])
					}
				}
			}
			return out
		})
		for j := cb; j < ce; j++ {
			pl.store(k, accs[j-cb], yp, k.Add(yAt, c64(j*vl)), int(min(vl, width-j*vl)))
		}
	}
}

// store writes the valid lanes of output vector v at yp[at:], with the
// fused residual and activation.
func (pl *groupedPlanes) store(k *kfn, v, yp, at value.Value, valid int) {
	if pl.res != nil {
		v = k.fadd(v, k.vload(k.ptr(pl.res), at, int(pl.vl), valid))
	}
	k.vstore(pl.act.apply(k, v), yp, at, int(pl.vl), valid)
}

// tapRun is a range of output rows [lo, hi) whose in-range kernel rows are
// taps.
type tapRun struct {
	lo, hi int64
	taps   []int64
}

// tapRuns splits the n output rows into runs with the same in-range kernel
// rows (0 <= o*stride - pad + t*dil < size).
func tapRuns(n, stride, pad, dil, kern, size int64) []tapRun {
	var runs []tapRun
	for o := int64(0); o < n; o++ {
		var taps []int64
		for t := int64(0); t < kern; t++ {
			if i := o*stride - pad + t*dil; i >= 0 && i < size {
				taps = append(taps, t)
			}
		}
		if l := len(runs); l > 0 && fmt.Sprint(runs[l-1].taps) == fmt.Sprint(taps) {
			runs[l-1].hi = o + 1
			continue
		}
		runs = append(runs, tapRun{lo: o, hi: o + 1, taps: taps})
	}
	return runs
}

// vloadMask loads the lanes of p[idx:idx+len(mask)] where mask is set
// (others fill); a lane outside the mask is never touched.
func (k *kfn) vloadMask(p, idx value.Value, mask []bool, fill float64) value.Value {
	vl := len(mask)
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	if n == 0 {
		return fconst(vecT(vl), fill)
	}
	if n == vl {
		return k.vload(p, idx, vl, vl)
	}
	elems := make([]constant.Constant, vl)
	for i, m := range mask {
		elems[i] = constant.NewBool(m)
	}
	vt := vecT(vl)
	q := k.B.NewBitCast(k.gep(p, idx), types.NewPointer(vt))
	return k.call(fmt.Sprintf("llvm.masked.load.v%df32.p0v%df32", vl, vl), vt, q, c32(4),
		constant.NewVector(types.NewVector(uint64(vl), i1), elems...), fconst(vt, fill))
}

// rowTaps gives a window's taps along one input row for every output
// vector of the row, loading each stretch of the row once: stride 2 as
// pairs of vectors split into their even and odd elements, stride 1 as
// plain vectors; a tap is one of these, or two neighbours shifted by a few
// lanes (valignd). Larger strides load lane by lane. Loaded by itself, a
// stride-2 tap was two masked loads (mostly split across cache lines) and
// a shuffle, and a 3×3 depthwise convolution of stride 2 was bound by its
// loads (96 channels, 56×56 → 28×28: 0.042 → 0.023 ms; stride 1 at 56×56
// 0.080 → 0.065; squeezenet1_1's first MaxPool 0.139 → 0.120). Lanes past
// the output row's end may hold any element of the input row (their
// stores are masked); elements outside [0, width) are fill and never read.
type rowTaps struct {
	k       *kfn
	p, row  value.Value
	stride  int64
	width   int64
	vl      int
	fill    float64
	streams map[int64][]value.Value // J → per parity, elements of vl·J + l, l < vl
}

func newRowTaps(k *kfn, p, row value.Value, stride, width int64, vl int, fill float64) *rowTaps {
	return &rowTaps{k: k, p: p, row: row, stride: stride, width: width, vl: vl, fill: fill, streams: map[int64][]value.Value{}}
}

// stream is the J-th vector of each parity stream: lane l of parity r is
// x[row + stride·(vl·J + l) + r].
func (t *rowTaps) stream(J int64) []value.Value {
	if s, ok := t.streams[J]; ok {
		return s
	}
	k, vl := t.k, int64(t.vl)
	parts := make([]value.Value, t.stride)
	for h := range parts {
		first := t.stride*vl*J + int64(h)*vl
		mask := make([]bool, vl)
		for e := range mask {
			col := first + int64(e)
			mask[e] = col >= 0 && col < t.width
		}
		parts[h] = k.vloadMask(t.p, k.Add(t.row, c64(first)), mask, t.fill)
	}
	s := parts
	if t.stride == 2 {
		s = make([]value.Value, 2)
		for r := range s {
			idx := make([]constant.Constant, vl)
			for l := range idx {
				idx[l] = c32(2*int64(l) + int64(r))
			}
			s[r] = k.B.NewShuffleVector(parts[0], parts[1], constant.NewVector(types.NewVector(uint64(vl), i32), idx...))
		}
	}
	t.streams[J] = s
	return s
}

// tap is output vector j's elements x[row + stride·(vl·j + l) + d], or
// nil when its first valid lanes all fall outside the row (padding).
func (t *rowTaps) tap(j, d int64, valid int) value.Value {
	inRow := false
	for l := range int64(valid) {
		col := t.stride*(int64(t.vl)*j+l) + d
		inRow = inRow || (col >= 0 && col < t.width)
	}
	if !inRow {
		return nil
	}
	vl := int64(t.vl)
	if t.stride > 2 { // lane by lane
		v := fconst(vecT(t.vl), t.fill)
		for l := range int64(valid) {
			if col := t.stride*(vl*j+l) + d; col >= 0 && col < t.width {
				v = t.k.B.NewInsertElement(v, t.k.load(t.p, t.k.Add(t.row, c64(col))), c32(l))
			}
		}
		return v
	}
	q := dimexpr.FloorDiv(d, t.stride) // lanes to shift
	r := d - q*t.stride                // parity
	J := j + dimexpr.FloorDiv(q, vl)
	off := q - (J-j)*vl
	a := t.stream(J)[r]
	if off == 0 {
		return a
	}
	b := t.stream(J + 1)[r]
	idx := make([]constant.Constant, vl)
	for l := range idx {
		idx[l] = c32(off + int64(l))
	}
	return t.k.B.NewShuffleVector(a, b, constant.NewVector(types.NewVector(uint64(vl), i32), idx...))
}
