package cpu

import (
	"encoding/binary"

	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// AMX (Intel's Advanced Matrix Extensions, Sapphire Rapids on): eight
// tile registers of 16 rows × 64 bytes and tdpbsud, which multiplies a
// 16×64 tile of s8 by a 16×(16·4) tile of u8 (K groups of four, as the
// integer GEMMs' vector operand already lies) into 16×16 int32: 16,384
// multiply-adds per instruction against vpdpbusd's 64 (3–4× the int8
// throughput, measured). The integer GEMMs whose vector operand is the
// activations (convolutions, direct and Winograd) take it: weights tiles
// (A) of 16 rows, activation tiles (B) of 16 columns, a register tile of
// up to 2×2 tiles (32 rows × 32 columns) in tmm0–3, A in tmm4–5, B in
// tmm6–7. K runs in blocks of 64 (16 groups): the weights are zero past K,
// and the activation buffers have room for the block's last groups, whose
// bytes (whatever they hold) meet those zeros. The sums go through a
// stack buffer into the usual requantizing store.
//
// Tiles are addressed by number in inline assembly (LLVM 14's AMX
// intrinsics need the x86_amx type, which llir/llvm lacks); every step
// that uses them loads the configuration first and releases them last.
// The engine then records amx_tile and amx_int8, and the runtime asks
// Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM) before it
// runs one.

// amxTile is the tile edge: 16 rows, 16 int32 columns, 64 bytes a row.
const amxTile = 16

// qAMXMinRows: below it, a tile's 16 rows do less useful work per cycle
// than vpdpbusd (16 cycles a tdpbusd, two vpdpbusd of 64 a cycle).
const qAMXMinRows = 8

// hasAMX reports whether the target has AMX's int8 tiles.
func (g *gen) hasAMX() bool {
	return !g.arm64() && hasFeature(g.feats, "amx_tile") && hasFeature(g.feats, "amx_int8")
}

// amxFeatures are the features AMX code needs; an engine records them only
// when it has such code.
var amxFeatures = []string{"amx_tile", "amx_int8"}

// qUseAMX switches q to AMX when the target has it and the activations
// are u8 (s8 ones, flipped to u8 for vpdpbusd, would need the flip in the
// tiles' loads); its register tile becomes tiles. A matrix product of
// fewer than qAMXMinRows rows stays on vpdpbusd, which wastes no rows.
func (g *gen) qUseAMX(q *qgemm) {
	if !g.hasAMX() || q.isa != qVNNI || q.lanes != amxTile || q.flip || q.acts && q.M < qAMXMinRows {
		return
	}
	q.amx = true
	q.mr, q.nv = amxTile, 1
	if q.M > amxTile {
		q.mr = 2 * amxTile
	}
	if q.N > amxTile {
		q.nv = 2
	}
	g.usedAMX = true
}

// qK4Room is how many K groups of four an activation buffer of K holds
// room for: K's own, and with AMX up to the next block of 16.
func (g *gen) qK4Room(K int64) int64 {
	k4 := (K + 3) / 4
	if g.hasAMX() {
		return amxK4(k4)
	}
	return k4
}

// amxK4 rounds k4 groups of four up to whole K blocks of 64 bytes.
func amxK4(k4 int64) int64 { return (k4 + amxTile - 1) / amxTile * amxTile }

// packRowsAMX lays out weights w (rows × K, s8, row-major) as A tiles:
// per row tile of mr, per K block of 64, the mr rows' 64 bytes, zero past
// K and rows. tile, row and group are the row tile's, a row's and a K
// block's bytes.
func packRowsAMX(w []int8, rows, K, mr int64) (buf []byte, tile, row, group int64) {
	kb := (K + 63) / 64
	row, group, tile = 64, 64*mr, 64*mr*kb
	mt := (rows + mr - 1) / mr
	buf = make([]byte, mt*tile)
	for r := int64(0); r < rows; r++ {
		t, i := r/mr, r%mr
		for k := int64(0); k < K; k++ {
			buf[t*tile+(k/64)*group+i*row+k%64] = byte(w[r*K+k])
		}
	}
	return buf, tile, row, group
}

// amxConfig is ldtilecfg's 64 bytes: palette 1, every tile 16 rows of 64
// bytes.
func amxConfig() []byte {
	b := make([]byte, 64)
	b[0] = 1
	for t := 0; t < 8; t++ {
		binary.LittleEndian.PutUint16(b[16+2*t:], 64)
		b[48+t] = amxTile
	}
	return b
}

// asm emits one inline-assembly statement with side effects over args.
func (k *kfn) asm(text, constraints string, args ...value.Value) {
	params := make([]types.Type, len(args))
	for i, a := range args {
		params[i] = a.Type()
	}
	fn := ll.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void, params...)), text, constraints)
	fn.SideEffect = true
	k.B.NewCall(fn, args...)
}

// amxBegin loads the tile configuration (it zeroes the tiles); the
// weights hold it once, addWeights finding it again.
func (k *kfn) amxBegin() {
	off := k.g.addWeights(amxConfig())
	k.asm("ldtilecfg ($0)", "r,~{memory}", k.locPtr(loc{space: inWeights, off: off}, i8))
}

// amxEnd releases the tiles, so that the thread's state is small again.
func (k *kfn) amxEnd() { k.asm("tilerelease", "~{memory}") }

// tmm names tile register t.
func tmm(t int64) string { return "%tmm" + string(rune('0'+t)) }

// microAMX is micro on tiles: C (tmm0–3, row tile i's column tile j in
// 2i+j) += A (tmm4+i) · B (tmm6+j) per K block of 64, then through the
// stack into the store. Convolutions: A the weights (s8, packRowsAMX), B
// the activations (u8), tdpbsud. Matrix products (q.acts): A the
// activations' rows (u8), B the weights (packCols, s8), tdpbusd; their
// rows end where the tensor does, so a tile of fewer than 16 rows or the
// last K block when K is not a multiple of 64 is copied to the stack
// first.
func (q *qgemm) microAMX(k *kfn, rows, cols int64, bcp, vecp, cp, resp, bcOff, vecOff, cOff, m0, n0, ch value.Value) {
	ma, nt := (rows+amxTile-1)/amxTile, (cols+amxTile-1)/amxTile
	for i := int64(0); i < ma; i++ {
		for j := int64(0); j < nt; j++ {
			k.asm("tilezero "+tmm(2*i+j), "~{memory}")
		}
	}
	dp := "tdpbsud "
	var aBuf value.Value
	if q.acts {
		dp = "tdpbusd "
		aBuf = k.stackBuffer("amxA", 2*amxTile*64)
	}
	vStride := c64(q.vecGroup)
	block := func(kb value.Value, kTail int64) {
		for i := int64(0); i < ma; i++ {
			valid := min(amxTile, rows-i*amxTile)
			if !q.acts {
				a := k.bytesAt(bcp, k.Add(bcOff, k.Add(k.Mul(kb, c64(q.bcGroup)), c64(i*amxTile*q.bcRow))))
				k.asm("tileloadd ($0,$1,1), "+tmm(4+i), "r,r,~{memory}", a, c64(q.bcRow))
				continue
			}
			a := k.bytesAt(bcp, k.Add(bcOff, k.Add(k.Mul(kb, c64(64)), c64(i*amxTile*q.bcRow))))
			stride := c64(q.bcRow)
			if valid < amxTile || kTail < 64 {
				// The rows' bytes of this block, zeros past K, on the stack;
				// the rows past valid keep what the buffer held: they make
				// only sums that are not stored.
				at := k.bytesAt(aBuf, c64(i*amxTile*64))
				for r := int64(0); r < valid; r++ {
					k.storeAt(k.maskedLoadAt(ivec(64, i8), a, c64(r*q.bcRow), kTail, nil), at, c64(r*64))
				}
				a, stride = at, c64(64)
			}
			k.asm("tileloadd ($0,$1,1), "+tmm(4+i), "r,r,~{memory}", a, stride)
		}
		for j := int64(0); j < nt; j++ {
			b := k.bytesAt(vecp, k.Add(vecOff, k.Add(k.Mul(kb, c64(amxTile*q.vecGroup)), c64(j*amxTile*4))))
			k.asm("tileloadd ($0,$1,1), "+tmm(6+j), "r,r,~{memory}", b, vStride)
		}
		for i := int64(0); i < ma; i++ {
			for j := int64(0); j < nt; j++ {
				k.asm(dp+tmm(6+j)+", "+tmm(4+i)+", "+tmm(2*i+j), "~{memory}")
			}
		}
	}
	full := (q.K + 63) / 64
	if q.acts && q.K%64 != 0 {
		full = q.K / 64
	}
	k.Loop(c64(0), c64(full), func(kb value.Value) { block(kb, 64) })
	if full*64 < q.K {
		block(c64(full), q.K%64)
	}
	// The sums, row-major 32 × 32 int32 (128 bytes a row), on the stack.
	buf := k.stackBuffer("amxC", 2*amxTile*2*amxTile*4)
	const ld = 2 * amxTile * 4
	for i := int64(0); i < ma; i++ {
		for j := int64(0); j < nt; j++ {
			at := k.bytesAt(buf, c64(i*amxTile*ld+j*amxTile*4))
			k.asm("tilestored "+tmm(2*i+j)+", ($0,$1,1)", "r,r,~{memory}", at, c64(ld))
		}
	}
	vt := ivec(amxTile, i32)
	for r := int64(0); r < rows; r++ {
		for j := int64(0); j < nt; j++ {
			c := q.channel(k, ch, m0, n0, r, j*amxTile)
			acc := k.B.NewAdd(k.loadAt(vt, buf, c64(r*ld+j*amxTile*4)), q.corr(k, c, amxTile))
			valid := min(amxTile, cols-j*amxTile)
			q.st.store(k, acc, cp, resp, k.Add(cOff, c64(r*q.st.ldc+j*amxTile)), c, amxTile, valid)
		}
	}
}

// stackBuffer is a 64-byte aligned buffer of n bytes in the step's frame,
// allocated in the entry block, one per name and step.
func (k *kfn) stackBuffer(name string, n int64) value.Value {
	key := "stack/" + name
	if p, ok := k.bases[key]; ok {
		return p
	}
	a := ll.NewAlloca(types.NewArray(uint64(n), i8))
	a.Align = 64
	p := ll.NewBitCast(a, types.NewPointer(i8))
	entry := k.F.Blocks[0]
	entry.Insts = append([]ll.Instruction{a, p}, entry.Insts...)
	k.bases[key] = p
	return p
}
