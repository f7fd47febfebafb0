package cpu

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"
)

// gemm describes C[b] = act(A[b]·B[b] + bias (+ add)) for a register-blocked
// vector micro-kernel: tiles of mr rows × nb columns (nv vectors of vl
// floats), every tile's accumulators in registers over the whole K loop,
// broadcast A scalars times B vectors with llvm.fma. Threads split the
// tiles.
//
// Operands are described by pointer makers and strides (in floats):
// A row-tile mt starts at aTile*mt and element (i, k) of a tile is at
// i*aRi + k*aKi (a packed [mr][K] panel or a plain matrix); B column-tile nt
// starts at bTile*nt with row k at k*bKi (a packed panel padded to nb, or
// a plain row-major matrix, whose tail is read with masked loads).
type gemm struct {
	M, N, K, batch  int64
	mr, nv, vl      int64
	a, b, c         func(k *kfn) value.Value
	aTile, aRi, aKi int64
	bTile, bKi      int64
	bPadded         bool
	ldc             int64
	// batch offsets (floats) of each operand; nil means 0.
	aBatch, bBatch, cBatch func(k *kfn, bi value.Value) value.Value
	// epilogue
	bias     func(k *kfn) value.Value
	biasRs   int64                    // bias element (m, n) at m*biasRs + n*biasCs
	biasCs   int64                    // 0 or 1
	add      func(k *kfn) value.Value // optional full [M,N] matrix (ldc) added
	act      storeAct
	parallel bool
	// kRange, when set, limits the sum to k in [lo, hi) (values computed
	// in the step): a partial product.
	kRange func(k *kfn) (lo, hi value.Value)
	// turn > 0: the tile's last turn columns are computed turned, rows in
	// the lanes (see micro).
	turn int64
	// l2Share is the bytes of a core's L2 the column operand may take and
	// stay there while every row tile streams it: half (see rowsOuter).
	l2Share int64
}

// shortK is the longest K loop after which a tile still waits on its
// stores (see micro).
const shortK = 64

// maxTurn bounds the columns a tile computes turned (one accumulator
// each).
const maxTurn = 4

func (g *gen) newGemm(M, N, K int64) *gemm {
	vl := int64(g.vl)
	budget := int64(g.mr * g.nv)
	nv := min(int64(g.nv), (N+vl-1)/vl)
	if N > vl && N <= int64(g.nv)*vl && N%vl <= maxTurn && N%vl > 0 {
		// One column tile of a few whole vectors and a short tail (a 7×7
		// plane's 49 pixels: 3 vectors and 1): the tail is turned, so it
		// costs one vector of rows per column, not one vector per row.
		nv = N / vl
		mr := min(budget/nv, vl, M)
		return &gemm{M: M, N: N, K: K, batch: 1, mr: mr, nv: nv, vl: vl, act: noAct, ldc: N,
			parallel: 2*M*N*K >= 1<<18, turn: N % vl, l2Share: g.l2 / 2}
	}
	if tail := N % (nv * vl); tail > 0 && tail <= maxTurn && nv > 1 {
		// Full tiles would leave a last one of a few columns, which costs
		// a K loop of its own for a sliver of the work (a 14×14 plane:
		// three tiles of 64 pixels and one of 4). Tiles one vector
		// narrower with turned columns may divide N instead: 196 = 4 × 49
		// (1×1 convs at 14×14 7–10% faster).
		for t := int64(1); t <= maxTurn; t++ {
			if nb := (nv-1)*vl + t; N%nb == 0 {
				mr := min(budget/(nv-1), vl, M)
				return &gemm{M: M, N: N, K: K, batch: 1, mr: mr, nv: nv - 1, vl: vl, act: noAct, ldc: N,
					parallel: 2*M*N*K >= 1<<18, turn: t, l2Share: g.l2 / 2}
			}
		}
	}
	// Narrow tiles get more rows: the register budget is mr×nv accumulators.
	mr := min(budget/nv, M)
	return &gemm{M: M, N: N, K: K, batch: 1, mr: mr, nv: nv, vl: vl, act: noAct, ldc: N,
		parallel: 2*M*N*K >= 1<<18, l2Share: g.l2 / 2}
}

func (gm *gemm) nb() int64 { return gm.nv*gm.vl + gm.turn }

// packB lays out B (K×N, element get(k, n)) as column panels of nb floats,
// zero padded: the layout the micro-kernel streams.
func (g *gen) packB(gm *gemm, get func(k, n int64) float32) {
	nb := gm.nb()
	nt := (gm.N + nb - 1) / nb
	buf := make([]float32, nt*gm.K*nb)
	for t := int64(0); t < nt; t++ {
		for k := int64(0); k < gm.K; k++ {
			for j := int64(0); j < nb; j++ {
				if n := t*nb + j; n < gm.N {
					buf[(t*gm.K+k)*nb+j] = get(k, n)
				}
			}
		}
	}
	off := g.addFloats(buf)
	gm.b = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
	gm.bTile, gm.bKi, gm.bPadded = gm.K*nb, nb, true
}

// packA lays out A (M×K, element get(m, k)) as row panels [K][mr].
func (g *gen) packA(gm *gemm, get func(m, k int64) float32) {
	mt := (gm.M + gm.mr - 1) / gm.mr
	buf := make([]float32, mt*gm.K*gm.mr)
	for t := int64(0); t < mt; t++ {
		for k := int64(0); k < gm.K; k++ {
			for i := int64(0); i < gm.mr; i++ {
				if m := t*gm.mr + i; m < gm.M {
					buf[(t*gm.K+k)*gm.mr+i] = get(m, k)
				}
			}
		}
	}
	off := g.addFloats(buf)
	gm.a = func(k *kfn) value.Value { return k.locPtr(loc{space: inWeights, off: off}, f32) }
	gm.aTile, gm.aRi, gm.aKi = gm.K*gm.mr, 1, gm.mr
}

// rowMajorBelow is the column-tile count under which threads split the
// row tiles instead (see eachTile).
const rowMajorBelow = 8

// eachTile emits the loop over the register tiles of batch M×N products,
// mr rows by nb columns, that the float and the integer GEMMs share:
// tile(bi, mi, ni, rows, cols) gets the batch index, the row and column
// tile indices and the tile's size (the last row and column tiles' own,
// constants). Column tiles are outermost: one panel of the column operand
// stays in cache while every row tile streams past it. With few column
// tiles, threads splitting them would get unequal shares (the last is
// often narrow), so rowsOuter puts the row tiles outermost instead, where
// the column operand is small enough to stay in cache whole. Parallel:
// split by work stealing.
func (k *kfn) eachTile(batch, M, N, mr, nb int64, parallel, rowsOuter bool, tile func(bi, mi, ni value.Value, rows, cols int64)) {
	mt := (M + mr - 1) / mr
	nt := (N + nb - 1) / nb
	mTail, nTail := M-(mt-1)*mr, N-(nt-1)*nb
	at := func(t value.Value) {
		bi := k.SDiv(t, c64(mt*nt))
		r := k.SRem(t, c64(mt*nt))
		ni, mi := k.SDiv(r, c64(mt)), k.SRem(r, c64(mt))
		if rowsOuter {
			mi, ni = k.SDiv(r, c64(nt)), k.SRem(r, c64(nt))
		}
		byCols := func(rows int64) {
			if nTail == nb {
				tile(bi, mi, ni, rows, nb)
				return
			}
			k.IfElse(k.icmp(enum.IPredEQ, ni, c64(nt-1)), func() { tile(bi, mi, ni, rows, nTail) }, func() { tile(bi, mi, ni, rows, nb) })
		}
		if mTail == mr {
			byCols(mr)
		} else {
			k.IfElse(k.icmp(enum.IPredEQ, mi, c64(mt-1)), func() { byCols(mTail) }, func() { byCols(mr) })
		}
	}
	if parallel {
		k.stealLoop(batch*mt*nt, at)
	} else {
		k.Loop(c64(0), c64(batch*mt*nt), at)
	}
}

// rowsOuter reports whether the row tiles go outermost (see eachTile):
// with few column tiles, or when the tiles add a residual, unless the
// column operand is too large to stay in L2 while every row tile streams
// it. A row tile then reads its residual rows and writes its output rows
// front to back, streams the hardware prefetcher follows; column tiles
// outermost read and write 2·mr rows of nb floats a plane apart per tile
// (ResNet-50's 1×1 convs that add the shortcut at 56×56: 1.05–1.17 →
// 0.72–0.73 ms at 1 thread, the whole model 3% faster).
func (gm *gemm) rowsOuter() bool {
	few := (gm.N+gm.nb()-1)/gm.nb() < rowMajorBelow
	return (few || gm.add != nil) && 4*gm.K*gm.N <= gm.l2Share
}

// emit writes the tile loop into the current step.
func (gm *gemm) emit(k *kfn) {
	nb := gm.nb()
	ap, bp, cp := gm.a(k), gm.b(k), gm.c(k)
	var biasP, addP value.Value
	if gm.bias != nil {
		biasP = gm.bias(k)
	}
	if gm.add != nil {
		addP = gm.add(k)
	}
	k.eachTile(gm.batch, gm.M, gm.N, gm.mr, nb, gm.parallel, gm.rowsOuter(), func(bi, mi, ni value.Value, rows, cols int64) {
		aOff := k.Mul(mi, c64(gm.aTile))
		bOff := k.Mul(ni, c64(gm.bTile))
		cOff := k.Add(k.Mul(mi, c64(gm.mr*gm.ldc)), k.Mul(ni, c64(nb)))
		if gm.aBatch != nil {
			aOff = k.Add(aOff, gm.aBatch(k, bi))
		}
		if gm.bBatch != nil {
			bOff = k.Add(bOff, gm.bBatch(k, bi))
		}
		if gm.cBatch != nil {
			cOff = k.Add(cOff, gm.cBatch(k, bi))
		}
		gm.micro(k, rows, cols, ap, bp, cp, biasP, addP, aOff, bOff, cOff, k.Mul(mi, c64(gm.mr)), k.Mul(ni, c64(nb)))
	})
}

// micro computes one tile of rows × cols. A row's accumulators are
// vectors of columns, each k a broadcast A scalar times B vectors. The
// last gm.turn columns of a whole tile are turned instead: per column,
// one accumulator whose lanes are the tile's rows, each k the rows' A
// values (contiguous in a packed panel) times the broadcast B scalar.
func (gm *gemm) micro(k *kfn, rows, cols int64, ap, bp, cp, biasP, addP, aOff, bOff, cOff, m0, n0 value.Value) {
	vl := int(gm.vl)
	turn := int64(0)
	if cols == gm.nb() {
		turn = gm.turn
	}
	cols -= turn
	// The turned accumulators' lanes: a half vector where the rows fit
	// (AVX-512 runs two 8-lane FMAs per cycle), else a whole one.
	W := min(8, vl)
	for int64(W) < rows {
		W *= 2
	}
	nv := (cols + gm.vl - 1) / gm.vl
	lastValid := int(cols - (nv-1)*gm.vl)
	valid := func(j int64) int {
		if j == nv-1 {
			return lastValid
		}
		return vl
	}
	zero := constant.NewZeroInitializer(vecT(vl))
	init := make([]value.Value, rows*nv, rows*nv+turn)
	for i := range init {
		init[i] = zero
	}
	for range turn {
		init = append(init, constant.NewZeroInitializer(vecT(W)))
	}
	// The rows the epilogue adds (a residual) were written layers ago and
	// sit in L3: asked for now, they arrive during the K loop instead of
	// stalling the stores.
	if addP != nil && gm.K >= prefetchMinK {
		for i := int64(0); i < rows; i++ {
			for j := int64(0); j < cols; j += lineFloats {
				k.prefetch(addP, k.Add(cOff, c64(i*gm.ldc+j)))
			}
		}
	}
	// With a short K loop a tile's time is its stores, each a line the
	// arena's previous user left, maybe in the other core's cache (3–7×
	// the cost of one's own here): asked for writing now, they arrive
	// while the loop runs (squeezenet1_1's Winograd GEMMs, K 16–64: 8%
	// faster at 1 and 2 threads).
	if gm.K <= shortK {
		for i := int64(0); i < rows; i++ {
			for j := int64(0); j < cols+turn; j += lineFloats {
				k.prefetchW(cp, k.Add(cOff, c64(i*gm.ldc+j)))
			}
		}
	}
	var kLo, kHi value.Value = c64(0), c64(gm.K)
	if gm.kRange != nil {
		kLo, kHi = gm.kRange(k)
	}
	acc := k.LoopAcc(kLo, kHi, 1, init, func(kk value.Value, acc []value.Value) []value.Value {
		bRow := k.Add(bOff, k.Mul(kk, c64(gm.bKi)))
		bv := make([]value.Value, nv)
		for j := int64(0); j < nv; j++ {
			v := valid(j)
			if gm.bPadded {
				v = vl
			}
			bv[j] = k.vload(bp, k.Add(bRow, c64(j*gm.vl)), vl, v)
		}
		aRow := k.Add(aOff, k.Mul(kk, c64(gm.aKi)))
		if gm.K >= prefetchMinK {
			gm.prefetchAhead(k, ap, bp, aRow, bRow, nv)
		}
		out := make([]value.Value, len(acc))
		var aCol value.Value // the rows' A values, for the turned columns
		if turn > 0 && gm.aRi == 1 {
			aCol = k.vload(ap, aRow, W, int(rows))
		} else if turn > 0 {
			aCol = constant.NewZeroInitializer(vecT(W))
		}
		for i := int64(0); i < rows; i++ {
			a := k.load(ap, k.Add(aRow, c64(i*gm.aRi)))
			av := k.vsplat(a, vl)
			for j := int64(0); j < nv; j++ {
				out[i*nv+j] = k.fma(av, bv[j], acc[i*nv+j])
			}
			if turn > 0 && gm.aRi != 1 {
				aCol = k.B.NewInsertElement(aCol, a, c32(i))
			}
		}
		for t := int64(0); t < turn; t++ {
			x := k.vsplat(k.load(bp, k.Add(bRow, c64(cols+t))), W)
			out[rows*nv+t] = k.fma(aCol, x, acc[rows*nv+t])
		}
		return out
	})
	for t := int64(0); t < turn; t++ {
		gm.storeTurned(k, acc[rows*nv+t], rows, W, cp, biasP, addP, cOff, m0, k.Add(n0, c64(cols+t)), cols+t)
	}
	for i := int64(0); i < rows; i++ {
		m := k.Add(m0, c64(i))
		for j := int64(0); j < nv; j++ {
			v := acc[i*nv+j]
			n := k.Add(n0, c64(j*gm.vl))
			if biasP != nil {
				bo := k.Mul(m, c64(gm.biasRs))
				if gm.biasCs == 0 {
					v = k.fadd(v, k.vsplat(k.load(biasP, bo), vl))
				} else {
					v = k.fadd(v, k.vload(biasP, k.Add(bo, n), vl, valid(j)))
				}
			}
			at := k.Add(cOff, c64(i*gm.ldc+j*gm.vl))
			if addP != nil {
				v = k.fadd(v, k.vload(addP, at, vl, valid(j)))
			}
			v = gm.act.apply(k, v)
			k.vstore(v, cp, at, vl, valid(j))
		}
	}
}

// prefetchMinK is the depth from which a tile's K loop prefetches.
const prefetchMinK = 64

// lineFloats is the floats in a 64-byte cache line.
const lineFloats = 16

// prefetchDistance is how far ahead (bytes) the K loop asks for the
// panels it streams: about 2 KB, a few hundred cycles of FMAs at a 6×4
// tile, a DRAM latency.
const prefetchDistance = 2048

// prefetchAhead asks, at depth k, for the lines the tile reads
// prefetchDistance ahead. A weights panel ([K][mr] A, [K][nb] B) streams
// from DRAM when a model's weights exceed the caches, at a pace too slow
// and in pages too short for the hardware prefetcher to run ahead of it
// (ResNet-50 at 1 thread: 61.8 → 55.2 ms). An unpacked B (a 1×1 conv's
// activations) has its rows a plane apart, each row a stream of its own.
func (gm *gemm) prefetchAhead(k *kfn, ap, bp, aRow, bRow value.Value, nv int64) {
	if gm.aRi == 1 {
		k.prefetch(ap, k.Add(aRow, c64(prefetchDistance/4)))
	}
	if !gm.bPadded && gm.bKi < 256 {
		return // rows close together: one stream the hardware follows
	}
	// The rows 2 KB of the tile's columns on: in a packed panel (bKi =
	// nb), the floats 2 KB on; in a row-major B (an im2col matrix, a
	// band, a 1×1 conv's input), rows bKi apart.
	ahead := max(1, prefetchDistance/(4*gm.nb())) * gm.bKi
	for j := int64(0); j < nv; j++ {
		k.prefetch(bp, k.Add(bRow, c64(ahead+j*gm.vl)))
	}
}

// storeTurned stores a turned column: lane i of v is row m0+i of column
// n (at offset col of the tile's first column), with micro's epilogue.
func (gm *gemm) storeTurned(k *kfn, v value.Value, rows int64, W int, cp, biasP, addP, cOff, m0, n value.Value, col int64) {
	gather := func(p value.Value, at func(i int64) value.Value) value.Value {
		var g value.Value = constant.NewZeroInitializer(vecT(W))
		for i := int64(0); i < rows; i++ {
			g = k.B.NewInsertElement(g, k.load(p, at(i)), c32(i))
		}
		return g
	}
	if biasP != nil {
		v = k.fadd(v, gather(biasP, func(i int64) value.Value {
			return k.Add(k.Mul(k.Add(m0, c64(i)), c64(gm.biasRs)), k.Mul(n, c64(gm.biasCs)))
		}))
	}
	at := func(i int64) value.Value { return k.Add(cOff, c64(i*gm.ldc+col)) }
	if addP != nil {
		v = k.fadd(v, gather(addP, at))
	}
	v = gm.act.apply(k, v)
	for i := int64(0); i < rows; i++ {
		k.store(k.B.NewExtractElement(v, c32(i)), cp, at(i))
	}
}

// batchOffset returns a function mapping a flat batch index over dims to
// an element offset with the given strides.
func batchOffset(dims, strides []int64) func(k *kfn, bi value.Value) value.Value {
	ds := collapse(dims, []operand{{str: strides}})
	return func(k *kfn, bi value.Value) value.Value {
		return k.offsets(bi, ds, []operand{{str: make([]int64, 1)}})[0]
	}
}

var _ = ir.Float32
