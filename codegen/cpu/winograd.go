package cpu

import (
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Winograd F(m×m, 3×3) for 3×3 stride-1 convolutions: each m×m output tile
// comes from an a×a input patch d (a = m+2) as Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A,
// so the channel reduction becomes a² independent GEMMs (one per patch
// position), with 9m²/a² times the multiplications of direct convolution
// saved (4× for F(4×4), 2.25× for F(2×2)):
//
//	V[p][ic][t] = (Bᵀ d B)[p]            (input transform, per tile t)
//	M[p][oc][t] = Σ_ic U[p][oc][ic]·V[p][ic][t]  (GEMM, U = G g Gᵀ packed at build time)
//	Y[oc][tile t] = Aᵀ M[·][oc][t] A + bias (+ residual), activation
//
// Both transforms run on vectors of tiles along a tile row, so the stride-m
// patch columns are picked out of contiguous loads by shuffles. F(2×2)
// serves small planes (ResNet's 7×7): its 16 tiles fill a vector where
// F(4×4)'s 4 would leave most lanes idle.
type winoSpec struct {
	name      string
	m, a      int64 // output tile and patch size
	bt, g, at [][]float64
}

var (
	winoF4 = &winoSpec{name: algoWinograd, m: 4, a: 6,
		bt: [][]float64{
			{4, 0, -5, 0, 1, 0},
			{0, -4, -4, 1, 1, 0},
			{0, 4, -4, -1, 1, 0},
			{0, -2, -1, 2, 1, 0},
			{0, 2, -1, -2, 1, 0},
			{0, 4, 0, -5, 0, 1},
		},
		g: [][]float64{
			{1.0 / 4, 0, 0},
			{-1.0 / 6, -1.0 / 6, -1.0 / 6},
			{-1.0 / 6, 1.0 / 6, -1.0 / 6},
			{1.0 / 24, 1.0 / 12, 1.0 / 6},
			{1.0 / 24, -1.0 / 12, 1.0 / 6},
			{0, 0, 1},
		},
		at: [][]float64{
			{1, 1, 1, 1, 1, 0},
			{0, 1, -1, 2, -2, 0},
			{0, 1, 1, 4, 4, 0},
			{0, 1, -1, 8, -8, 1},
		},
	}
	winoF2 = &winoSpec{name: algoWinograd2, m: 2, a: 4,
		bt: [][]float64{
			{1, 0, -1, 0},
			{0, 1, 1, 0},
			{0, -1, 1, 0},
			{0, 1, 0, -1},
		},
		g: [][]float64{
			{1, 0, 0},
			{0.5, 0.5, 0.5},
			{0.5, -0.5, 0.5},
			{0, 0, 1},
		},
		at: [][]float64{
			{1, 1, 1, 0},
			{0, 1, -1, -1},
		},
	}
)

// winogradCandidates lists the Winograd variants that may run conv c
// (3×3, stride 1, no dilation or groups, enough channels), F(4×4) first:
// it needs enough tiles per row that the transforms' vectors fill.
func winogradCandidates(c convGeom) []*winoSpec {
	// An empty batch has nothing to transform (or to time).
	if c.N == 0 || c.runtime || c.group != 1 || c.kh != 3 || c.kw != 3 || c.sh != 1 || c.sw != 1 || c.dh != 1 || c.dw != 1 || c.C < 16 || c.OC < 16 {
		return nil
	}
	var specs []*winoSpec
	if c.OW >= 12 && c.OH >= 12 {
		specs = append(specs, winoF4)
	}
	if c.OW >= 4 && c.OH >= 4 {
		specs = append(specs, winoF2)
	}
	return specs
}

type winoGeom struct {
	convGeom
	*winoSpec
	TH, TW, T int64 // tile rows, tiles per row, tiles in all
	// vPlane and mPlane are the floats from one V or M matrix (transform
	// point p) to the next: an odd number of cache lines where whole
	// lines, so that the a² points of a tile, stored or loaded together,
	// fall in different cache sets.
	vPlane, mPlane int64
}

func newWinoGeom(c convGeom, s *winoSpec) winoGeom {
	w := winoGeom{convGeom: c, winoSpec: s, TH: (c.OH + s.m - 1) / s.m, TW: (c.OW + s.m - 1) / s.m}
	w.T = c.N * w.TH * w.TW
	w.vPlane, w.mPlane = oddLines(w.C*w.T), oddLines(w.OC*w.T)
	return w
}

// oddLines returns n floats rounded up to an odd number of cache lines
// when n is whole lines, else n.
func oddLines(n int64) int64 {
	if n%lineFloats == 0 && n/lineFloats%2 == 0 {
		return n + lineFloats
	}
	return n
}

// scratch holds V [a²][C][T] then M [a²][OC][T], planes vPlane and mPlane
// floats apart.
func (w winoGeom) vFloats() int64      { return w.a * w.a * w.vPlane }
func (w winoGeom) scratchBytes() int64 { return 4 * (align64(4*w.vFloats())/4 + w.a*w.a*w.mPlane) }

func (g *gen) lowerWinograd(n *ir.Node, c convGeom, spec *winoSpec) {
	w := newWinoGeom(c, spec)
	A := w.a
	X, Y := n.Inputs[0], g.outValue(n)
	vOff := align64(4 * w.vFloats()) // byte offset of M in the scratch
	g.winoInput(X, w)

	// U[p] = (G g Gᵀ)[p] for every (oc, ic), packed as the GEMM's A
	// panels: four times the plain weights for F(4×4, 3×3), so the engine
	// stores those and the loader computes U (cpuabi.DerivedWinograd).
	gm := g.newGemm(c.OC, w.T, c.C)
	gm.batch, gm.parallel = A*A, true
	mt := (c.OC + gm.mr - 1) / gm.mr
	panel := mt * c.C * gm.mr
	src := g.constLoc(g.constOf(n.Inputs[1]))
	uOff := g.addDerived(cpuabi.Derived{Kind: cpuabi.DerivedWinograd, Bytes: 4 * A * A * panel, Src: src.off, OC: c.OC, C: c.C, MR: gm.mr, G: w.g})
	gm.a = func(k *kfn) value.Value { return k.locPtr(loc{space: inDerived, off: uOff}, f32) }
	gm.aTile, gm.aRi, gm.aKi = c.C*gm.mr, 1, gm.mr
	gm.aBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(panel)) }
	gm.b = func(k *kfn) value.Value { return k.scratchPtr(0) }
	gm.bTile, gm.bKi = gm.nb(), w.T
	gm.bBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(w.vPlane)) }
	gm.c = func(k *kfn) value.Value { return k.scratchPtr(vOff) }
	gm.ldc = w.T
	gm.cBatch = func(k *kfn, bi value.Value) value.Value { return k.Mul(bi, c64(w.mPlane)) }
	g.step("WinogradGemm", false, gm.emit)

	g.winoOutput(n, Y, w, vOff)
}

// winoInput writes V: one work item per (image, channel, tile row).
func (g *gen) winoInput(X *ir.Value, w winoGeom) {
	vl := int64(g.vl)
	items := w.N * w.C * w.TH
	g.step("WinogradIn", false, func(k *kfn) {
		xp, vp := k.ptr(X), k.scratchPtr(0)
		k.parLoop(items, true, func(it value.Value) {
			th := k.SRem(it, c64(w.TH))
			plane := k.SDiv(it, c64(w.TH)) // n*C + ic
			ic := k.SRem(plane, c64(w.C))
			img := k.SDiv(plane, c64(w.C))
			for tw0 := int64(0); tw0 < w.TW; tw0 += vl {
				valid := int(min(vl, w.TW-tw0))
				d := make([][]value.Value, w.a)
				for i := int64(0); i < w.a; i++ {
					d[i] = make([]value.Value, w.a)
					ih := k.Add(k.Mul(th, c64(w.m)), c64(i-w.ph))
					ok := k.icmp(enum.IPredULT, ih, c64(w.H))
					row := k.Mul(k.Add(k.Mul(plane, c64(w.H)), k.sel(ok, ih, c64(0))), c64(w.W))
					// Patch column j of lane l is input column m(tw0+l) + j - pw.
					cols := k.loadSpan(xp, row, w.m*tw0-w.pw, w.m*int64(valid-1)+w.a, w.W, int(vl))
					zero := constant.NewZeroInitializer(vecT(int(vl)))
					for j := 0; j < int(w.a); j++ {
						d[i][j] = k.sel(ok, k.pick(cols, int(vl), func(l int) int { return int(w.m)*l + j }), zero)
					}
				}
				t := make([][]value.Value, w.a)
				for i := range t {
					t[i] = k.matVec(w.bt, d[i])
				}
				t0 := k.Add(k.Mul(k.Add(k.Mul(img, c64(w.TH)), th), c64(w.TW)), c64(tw0))
				for b := int64(0); b < w.a; b++ {
					for a, v := range k.matVec(w.bt, column(t, b)) {
						p := int64(a)*w.a + b
						k.vstore(v, vp, k.Add(k.Add(c64(p*w.vPlane), k.Mul(ic, c64(w.T))), t0), int(vl), valid)
					}
				}
			}
		})
	})
}

// winoOutput turns M into Y with the fused bias, residual and activation:
// one work item per (image, output channel, tile row).
func (g *gen) winoOutput(n *ir.Node, Y *ir.Value, w winoGeom, mOff int64) {
	vl := int64(g.vl)
	var bOff int64 = -1
	if b := n.Input(2); b != nil {
		bOff = g.constLoc(g.constOf(b)).off
	}
	act := g.storeActOf(n)
	var res *ir.Value
	if a := g.plan(n).residualAdd; a != nil {
		res = residual(a, n.Outputs[0])
	}
	items := w.N * w.OC * w.TH
	g.step("WinogradOut", false, func(k *kfn) {
		mp, yp := k.scratchPtr(mOff), k.ptr(Y)
		k.parLoop(items, true, func(it value.Value) {
			th := k.SRem(it, c64(w.TH))
			plane := k.SDiv(it, c64(w.TH)) // n*OC + oc
			oc := k.SRem(plane, c64(w.OC))
			img := k.SDiv(plane, c64(w.OC))
			var bias value.Value
			if bOff >= 0 {
				bias = k.vsplat(k.load(k.locPtr(loc{space: inWeights, off: bOff}, f32), oc), int(vl))
			}
			for tw0 := int64(0); tw0 < w.TW; tw0 += vl {
				valid := int(min(vl, w.TW-tw0))
				t0 := k.Add(k.Mul(k.Add(k.Mul(img, c64(w.TH)), th), c64(w.TW)), c64(tw0))
				s := make([][]value.Value, w.a)
				for a := int64(0); a < w.a; a++ {
					m := make([]value.Value, w.a)
					for b := int64(0); b < w.a; b++ {
						m[b] = k.vload(mp, k.Add(k.Add(c64((a*w.a+b)*w.mPlane), k.Mul(oc, c64(w.T))), t0), int(vl), valid)
					}
					s[a] = k.matVec(w.at, m)
				}
				// Output row r of the tile row holds, at column ml + q, the
				// value of tile l's column q.
				width := min(w.m*int64(valid), w.OW-w.m*tw0)
				for r := int64(0); r < w.m; r++ {
					y := make([]value.Value, w.m)
					for q := range y {
						y[q] = k.matVec(w.at, column(s, int64(q)))[r]
					}
					store := func() {
						oh := k.Add(k.Mul(th, c64(w.m)), c64(r))
						rowAt := k.Add(k.Mul(k.Add(k.Mul(plane, c64(w.OH)), oh), c64(w.OW)), c64(w.m*tw0))
						for e0 := int64(0); e0 < width; e0 += vl {
							v := k.pick(y, int(vl), func(e int) int {
								el := e0 + int64(e) // element ml + q of the row segment
								return int(el%w.m)*int(vl) + int(el/w.m)
							})
							if bias != nil {
								v = k.fadd(v, bias)
							}
							at, nv := k.Add(rowAt, c64(e0)), int(min(vl, width-e0))
							if res != nil {
								v = k.fadd(v, k.vload(k.ptr(res), at, int(vl), nv))
							}
							k.vstore(act.apply(k, v), yp, at, int(vl), nv)
						}
					}
					if rem := w.OH % w.m; rem != 0 && r >= rem {
						k.If(k.icmp(enum.IPredULT, th, c64(w.TH-1)), store)
					} else {
						store()
					}
				}
			}
		})
	})
}

// column returns column j of a matrix of vectors.
func column(rows [][]value.Value, j int64) []value.Value {
	col := make([]value.Value, len(rows))
	for i, r := range rows {
		col[i] = r[j]
	}
	return col
}

// matVec returns m·x for a constant matrix m (rows of len(x)) on vectors,
// skipping zero coefficients and multiplying only where |m| != 1.
func (k *kfn) matVec(m [][]float64, x []value.Value) []value.Value {
	out := make([]value.Value, len(m))
	for i, r := range m {
		var acc value.Value
		for j, c := range r {
			if c == 0 {
				continue
			}
			switch {
			case acc == nil && c == 1:
				acc = x[j]
			case acc == nil:
				acc = k.fmul(x[j], fconst(x[j].Type(), c))
			case c == 1:
				acc = k.fadd(acc, x[j])
			case c == -1:
				acc = k.fsub(acc, x[j])
			default:
				acc = k.fma(x[j], fconst(x[j].Type(), c), acc)
			}
		}
		out[i] = acc
	}
	return out
}

// loadSpan loads n floats p[row+col0 : row+col0+n] as vectors of vl,
// with the elements whose column lies outside [0, width) zero (and never
// read).
func (k *kfn) loadSpan(p, row value.Value, col0, n, width int64, vl int) []value.Value {
	var vs []value.Value
	for s := int64(0); s < n; s += int64(vl) {
		mask := make([]bool, vl)
		for e := range mask {
			col := col0 + s + int64(e)
			mask[e] = s+int64(e) < n && col >= 0 && col < width
		}
		vs = append(vs, k.vloadMask(p, k.Add(row, c64(col0+s)), mask, 0))
	}
	return vs
}

// pick builds an n-lane vector whose lane l is element src(l) of the
// concatenation of vs (vectors of one type, of any width; a negative src
// leaves the lane undefined), with a tree of two-input shuffles.
func (k *kfn) pick(vs []value.Value, n int, src func(l int) int) value.Value {
	vt := vs[0].Type().(*types.VectorType)
	w := int(vt.Len)
	maskT := types.NewVector(uint64(n), i32)
	var build func(lo, hi int) value.Value
	build = func(lo, hi int) value.Value {
		mask := make([]constant.Constant, n)
		if hi-lo == 1 {
			for l := range mask {
				mask[l] = constant.NewUndef(i32)
				if s := src(l); s >= lo*w && s < hi*w {
					mask[l] = c32(int64(s - lo*w))
				}
			}
			return k.B.NewShuffleVector(vs[lo], constant.NewUndef(vt), constant.NewVector(maskT, mask...))
		}
		mid := (lo + hi) / 2
		a, b := build(lo, mid), build(mid, hi)
		for l := range mask {
			mask[l] = constant.NewUndef(i32)
			switch s := src(l); {
			case s >= lo*w && s < mid*w:
				mask[l] = c32(int64(l))
			case s >= mid*w && s < hi*w:
				mask[l] = c32(int64(n + l))
			}
		}
		return k.B.NewShuffleVector(a, b, constant.NewVector(maskT, mask...))
	}
	return build(0, len(vs))
}
