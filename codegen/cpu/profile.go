package cpu

import (
	"github.com/kiln-ml/kiln/cpuabi"
	ll "github.com/llir/llvm/ir"
)

// The profiling entry points, beside kiln_run (see cpuabi):
//
//	int64_t kiln_run_profile(int64_t tid, int64_t nthreads, uint8_t *weights,
//	                         uint8_t *arena, void **io, int64_t *barrier,
//	                         uint64_t *times, int64_t part);
//	uint64_t kiln_cycles(void);
//
// kiln_run_profile runs the same steps as kiln_run, in the same parts;
// thread tid writes the cycle counter to times[tid*(steps+1) + i] when it
// starts (i = 0) and after step i-1 and the barrier that follows it, so
// each interval is the step's time on the slowest thread. It ends with a
// barrier that kiln_run leaves out, so the last step counts every thread
// too. kiln_cycles reads the same counter, for the runtime to calibrate
// against its clock. kiln_run itself carries none of this.

// barrierAfter reports whether the threads meet after step i: not between
// two steps that both run on thread 0 alone, and not after the last step.
func (g *gen) barrierAfter(i int) bool {
	return i+1 < len(g.steps) && !(g.steps[i].serial && g.steps[i+1].serial)
}

func (g *gen) emitProfileEntry(bar, clear *ll.Func) {
	counter := g.cycleCounter()
	cycles := g.mod.NewFunc(cpuabi.CyclesSymbol, i64)
	cb := cycles.NewBlock("")
	cb.NewRet(cb.NewCall(counter))

	f := g.mod.NewFunc(cpuabi.ProfileEntryPoint, i64, ll.NewParam("tid", i64), ll.NewParam("nth", i64),
		ll.NewParam("w", i8p), ll.NewParam("a", i8p), ll.NewParam("io", i8pp), ll.NewParam("bar", i64p),
		ll.NewParam("times", i64p), ll.NewParam("part", i64))
	p := &profiler{counter: counter}
	x := entryArgs{f.Params[0], f.Params[1], f.Params[2], f.Params[3], f.Params[4], f.Params[5], nil}
	g.emitParts(f, x, f.Params[7], bar, clear, p, func(b *ll.Block) {
		p.row = b.NewGetElementPtr(i64, f.Params[6], b.NewMul(x.tid, c64(int64(len(g.steps)+1))))
	})
}
