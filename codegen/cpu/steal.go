package cpu

import (
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/kiln-ml/kiln/codegen/llvm"
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
	T := k.sel(k.icmp(enum.IPredSGT, k.Nth, c64(stealThreads)), c64(stealThreads), k.Nth)
	k.If(k.icmp(enum.IPredSLT, k.Tid, T), func() {
		per := k.B.NewSDiv(c64(total), k.B.NewMul(T, c64(8)))
		chunk := k.sel(k.icmp(enum.IPredSLT, per, c64(1)), c64(1), per)
		k.Loop(c64(0), T, func(j value.Value) {
			v := k.B.NewSRem(k.Add(k.Tid, j), T) // own share first
			lo := k.B.NewSDiv(k.Mul(v, c64(total)), T)
			hi := k.B.NewSDiv(k.Mul(k.Add(v, c64(1)), c64(total)), T)
			raw := k.B.NewGetElementPtr(i8, k.a, k.Add(c64(off), k.Mul(v, c64(64))))
			ctr := k.B.NewBitCast(raw, i64p)
			// for { start := lo + claim(chunk); if start >= hi break; body over [start, min(start+chunk, hi)) }
			pre := k.B
			hdr, work, exit := k.Block(), k.Block(), k.Block()
			pre.NewBr(hdr)
			k.B = hdr
			claimed := hdr.NewAtomicRMW(enum.AtomicOpAdd, ctr, chunk, enum.AtomicOrderingMonotonic)
			start := hdr.NewAdd(lo, claimed)
			hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, start, hi), work, exit)
			k.B = work
			end := k.Add(start, chunk)
			end = k.sel(k.icmp(enum.IPredSLT, end, hi), end, hi)
			k.Loop(start, end, body)
			k.B.NewBr(hdr)
			k.B = exit
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
	k.Loop(c64(0), c64(total), body)
}

// counterRange is a stealing step's counters: bytes at an arena offset.
type counterRange struct{ off, bytes int64 }

// emitCounterClear writes the internal function kiln_clear(tid, arena,
// off, bytes): thread 0 zeroes the bytes, the others return.
func (g *gen) emitCounterClear() *ll.Func {
	f := g.mod.NewFunc("kiln_clear", types.Void, ll.NewParam("tid", i64), ll.NewParam("a", i8p),
		ll.NewParam("off", i64), ll.NewParam("bytes", i64))
	f.Linkage = enum.LinkageInternal
	k := &kfn{Fn: llvm.NewFn(g.mod, f, f.Params[0], nil, nil, g.decls), g: g, a: f.Params[1], bases: map[string]value.Value{}}
	k.If(k.icmp(enum.IPredEQ, k.Tid, c64(0)), func() {
		base := k.B.NewBitCast(k.B.NewGetElementPtr(i8, k.a, f.Params[2]), i64p)
		k.Loop(c64(0), k.B.NewSDiv(f.Params[3], c64(8)), func(i value.Value) {
			st := k.B.NewStore(c64(0), k.B.NewGetElementPtr(i64, base, i))
			st.Atomic, st.Ordering, st.Align = true, enum.AtomicOrderingMonotonic, 8
		})
	})
	k.B.NewRet(nil)
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
