package cpu

import (
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Work stealing. A step that splits its work statically is as slow as its
// slowest thread, and on a shared host a thread can lose its core for a
// while. A stealing step gives each thread its static share to claim, in
// order and in chunks, from a counter of its own, and a thread that runs
// out claims the rest of the others' shares: on a quiet machine every
// thread does its own share (and keeps the locality a static split has),
// on a busy one the free thread takes over.
//
// The counters (one cache line each, stealThreads per step) live past the
// planned arena. Each must be 0 when its step starts: thread 0 clears a
// step's counters between the barrier after it and the next step, and
// those of the last step when the next run starts (emitCounterResets).

// stealThreads bounds the threads of a stealing step (its counters); it is
// threadSlots, so a stealing step may index per-thread scratch by tid.
const stealThreads = threadSlots

// stealLoop runs body(t) for t in [0, total), split between threads by
// work stealing.
func (k *kfn) stealLoop(total int64, body func(t value.Value)) {
	g := k.g
	off := g.counterBase + g.counterBytes
	g.counterBytes += stealThreads * 64
	k.counters = append(k.counters, counterRange{off, stealThreads * 64})
	T := k.sel(k.icmp(enum.IPredSGT, k.nth, c64(stealThreads)), c64(stealThreads), k.nth)
	k.ifThen(k.icmp(enum.IPredSLT, k.tid, T), func() {
		per := k.b.NewSDiv(c64(total), k.b.NewMul(T, c64(8)))
		chunk := k.sel(k.icmp(enum.IPredSLT, per, c64(1)), c64(1), per)
		k.loop(c64(0), T, func(j value.Value) {
			v := k.b.NewSRem(k.add(k.tid, j), T) // own share first
			lo := k.b.NewSDiv(k.mul(v, c64(total)), T)
			hi := k.b.NewSDiv(k.mul(k.add(v, c64(1)), c64(total)), T)
			raw := k.b.NewGetElementPtr(i8, k.a, k.add(c64(off), k.mul(v, c64(64))))
			ctr := k.b.NewBitCast(raw, i64p)
			// for { start := lo + claim(chunk); if start >= hi break; body over [start, min(start+chunk, hi)) }
			pre := k.b
			hdr, work, exit := k.newBlock(), k.newBlock(), k.newBlock()
			pre.NewBr(hdr)
			k.b = hdr
			claimed := hdr.NewAtomicRMW(enum.AtomicOpAdd, ctr, chunk, enum.AtomicOrderingMonotonic)
			start := hdr.NewAdd(lo, claimed)
			hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, start, hi), work, exit)
			k.b = work
			end := k.add(start, chunk)
			end = k.sel(k.icmp(enum.IPredSLT, end, hi), end, hi)
			k.loop(start, end, body)
			k.b.NewBr(hdr)
			k.b = exit
		})
	})
}

// parLoop runs body(t) for t in [0, total): split by work stealing when
// parallel, else on the step's one thread.
func (k *kfn) parLoop(total int64, parallel bool, body func(t value.Value)) {
	if parallel {
		k.stealLoop(total, body)
		return
	}
	k.loop(c64(0), c64(total), body)
}

// counterRange is a stealing step's counters: bytes at an arena offset.
type counterRange struct{ off, bytes int64 }

// emitCounterClear writes the internal function kiln_clear(tid, arena,
// off, bytes): thread 0 zeroes the bytes, the others return.
func (g *gen) emitCounterClear() *ll.Func {
	f := g.mod.NewFunc("kiln_clear", types.Void, ll.NewParam("tid", i64), ll.NewParam("a", i8p),
		ll.NewParam("off", i64), ll.NewParam("bytes", i64))
	f.Linkage = enum.LinkageInternal
	k := &kfn{g: g, f: f, tid: f.Params[0], a: f.Params[1], bases: map[string]value.Value{}}
	k.b = f.NewBlock("")
	k.ifThen(k.icmp(enum.IPredEQ, k.tid, c64(0)), func() {
		base := k.b.NewBitCast(k.b.NewGetElementPtr(i8, k.a, f.Params[2]), i64p)
		k.loop(c64(0), k.b.NewSDiv(f.Params[3], c64(8)), func(i value.Value) {
			st := k.b.NewStore(c64(0), k.b.NewGetElementPtr(i64, base, i))
			st.Atomic, st.Ordering, st.Align = true, enum.AtomicOrderingMonotonic, 8
		})
	})
	k.b.NewRet(nil)
	return f
}

// clearCounters emits, into an entry point's block b, the clearing of
// step i's counters (after its barrier) or, for i = -1, of the last
// step's (at the start of a run, before the first step). A one-step
// engine meets at a barrier after that first clearing, as its first step
// is its last.
func (g *gen) clearCounters(b *ll.Block, clear *ll.Func, i int, tid, a value.Value) {
	j := i
	if i < 0 {
		j = len(g.steps) - 1
	}
	if j < 0 {
		return // an engine without steps (every output empty)
	}
	for _, r := range g.steps[j].counters {
		b.NewCall(clear, tid, a, c64(r.off), c64(r.bytes))
	}
}
