package cpu

import (
	ll "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// The profiling entry points, beside kiln_run (see runtime/cpu):
//
//	void kiln_run_profile(int64_t tid, int64_t nthreads, uint8_t *weights,
//	                      uint8_t *arena, void **io, int64_t *barrier,
//	                      uint64_t *times);
//	uint64_t kiln_cycles(void);
//
// kiln_run_profile runs the same steps as kiln_run; thread tid writes the
// cycle counter to times[tid*(steps+1) + i] when it starts (i = 0) and after
// step i-1 and the barrier that follows it, so each interval is the step's
// time on the slowest thread. It ends with a barrier that kiln_run leaves
// out, so the last step counts every thread too. kiln_cycles reads the same
// counter, for the runtime to calibrate against its clock. kiln_run itself
// carries none of this.
const (
	profileEntry = "kiln_run_profile"
	cyclesEntry  = "kiln_cycles"
)

// barrierAfter reports whether the threads meet after step i: not between
// two steps that both run on thread 0 alone, and not after the last step.
func (g *gen) barrierAfter(i int) bool {
	return i+1 < len(g.steps) && !(g.steps[i].serial && g.steps[i+1].serial)
}

func (g *gen) emitProfileEntry(bar, clear *ll.Func) {
	counter := g.cycleCounter()
	cycles := g.mod.NewFunc(cyclesEntry, i64)
	cb := cycles.NewBlock("")
	cb.NewRet(cb.NewCall(counter))

	f := g.mod.NewFunc(profileEntry, types.Void, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp), ll.NewParam("bar", i64p),
		ll.NewParam("times", i64p))
	b := f.NewBlock("")
	tid, nth, w, a, io, bp, times := f.Params[0], f.Params[1], f.Params[2], f.Params[3], f.Params[4], f.Params[5], f.Params[6]
	row := b.NewGetElementPtr(i64, times, b.NewMul(tid, c64(int64(len(g.steps)+1))))
	senseP := b.NewGetElementPtr(i64, bp, c64(1))
	ld := b.NewLoad(i64, senseP)
	ld.Atomic, ld.Ordering, ld.Align = true, enum.AtomicOrderingAcquire, 8
	var sense value.Value = ld
	g.clearCounters(b, clear, -1, tid, a)
	if len(g.steps) == 1 && len(g.steps[0].counters) > 0 {
		sense = b.NewCall(bar, nth, bp, sense)
	}
	p := &profiler{counter: counter, row: row}
	p.record(b, 0, b.NewCall(counter))
	b, _ = g.emitSteps(f, b, entryArgs{tid, nth, w, a, io, bp, sense}, bar, clear, p)
	b.NewRet(nil)
}
