package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// How a thread waits: it polls, giving its core away (sched_yield) every
// yieldEvery, and parks once the wait outlasts its bound. Parking and
// waking an OS thread through the Go scheduler costs 10–40 µs on bare
// metal and over 100 µs in a VM whose idle vCPUs halt (measured here: ~120
// µs), more than a whole inference of a small model.
//
// idleSpin bounds an idle worker's wait for the next inference: it bridges
// the gaps of back-to-back inferences (and of a server's short pauses
// between requests) without holding a core for long once calls stop.
// doneSpin bounds the caller's wait for its workers to finish the
// inference they are running: parking there would add a wake-up to every
// inference whose threads finish a little apart.
//
// The yields matter on a loaded machine, where the thread being waited
// for may be runnable but waiting for a core: pure spinning then holds the
// core it needs (measured: the digits models at 2 threads took 0.5–1 ms an
// inference instead of 2–25 µs with another process busy).
const (
	idleSpin   = 200 * time.Microsecond
	doneSpin   = 500 * time.Microsecond
	yieldEvery = 10 * time.Microsecond
)

// schedEvery is how long a pool goroutine (the caller's included) goes
// without passing through the Go scheduler. Go's sysmon preempts a
// goroutine that has not been scheduled for 10 ms; one in a native call
// loses its P, and every such retake sets sysmon polling every 20 µs for
// the next millisecond or more. Back-to-back runs never block, so without
// a scheduling point that happened every 10 ms: measured here, 5,000
// sysmon wake-ups a second at ~20 µs of a vCPU each, and mobilenet_v2 at 2
// threads running in streaks at 1-thread speed (median 3.2 ms, p90 4.3;
// with the yield 2.8 and 2.95). runParts passes one between a long run's
// parts too. runtime.Gosched costs well under a microsecond, but each may
// wake an idle thread of the Go scheduler: with one every millisecond,
// ResNet-50 ran 2% slower at 1 thread than with one every 4.
const schedEvery = 4 * time.Millisecond

// schedPoint calls runtime.Gosched if the goroutine has gone schedEvery
// without one since *last.
func schedPoint(last *time.Time) {
	if now := time.Now(); now.Sub(*last) >= schedEvery {
		runtime.Gosched()
		*last = time.Now()
	}
}

// pool is a set of worker goroutines, reused across runs by one caller at
// a time. A run publishes its job by storing a new state word; workers
// poll it, then park on their channel. They are not locked to OS threads:
// a native call cannot move threads anyway, and runtime.Gosched on a
// locked goroutine hands its thread off and wakes it again.
type pool struct {
	// state is the current job, seq<<16 | nthreads (nthreads 0: stop).
	// Workers with tid < nthreads take part; the others skip the job.
	state atomic.Uint64
	// done counts the workers that have finished the current job.
	done   atomic.Int64
	caller waiter

	// The job, written before state is stored and read after it is
	// loaded: entry(args[:nargs]...) with args[0] = tid (0 here: the
	// caller's).
	entry   uintptr
	part    uintptr // the part the job starts at
	args    [maxArgs]uintptr
	nargs   int
	workers []*worker

	barrier [8]int64 // words 0 and 1 are the engine's barrier; a cache line
	io      []unsafe.Pointer
	sched   time.Time // the caller's last schedPoint
}

const maxArgs = 8 // an entry's arguments, the part included

type worker struct {
	tid   int64
	args  [maxArgs]uintptr // the job's arguments with this worker's tid
	sched time.Time        // its last schedPoint
	waiter
}

// waiter is one goroutine's park/wake handshake. A waiter that has
// polled long enough sets parked and blocks on wake; whoever makes its
// condition true clears parked and, if it was the one to clear it, sends
// the token. The seq-cst atomics make sure that either the waiter sees the
// condition after setting parked, or the waker sees parked.
type waiter struct {
	parked atomic.Bool
	wake   chan struct{}
}

func newWaiter() waiter { return waiter{wake: make(chan struct{}, 1)} }

// wait returns once ready() holds, polling for up to spin first.
func (w *waiter) wait(spin time.Duration, ready func() bool) {
	start := time.Now()
	yielded := start
	for i := 1; !ready(); i++ {
		if i%64 != 0 {
			pause()
			continue
		}
		if now := time.Now(); now.Sub(start) < spin {
			if now.Sub(yielded) >= yieldEvery {
				osYield()
				yielded = now
			}
			continue
		}
		w.parked.Store(true)
		if ready() && w.parked.CompareAndSwap(true, false) {
			return
		}
		// The waker cleared parked and sends the token. It may be stale:
		// a waker of an earlier wait that ended by polling can still find
		// this one parked (a worker's last signal of the run before, the
		// caller's signal to a worker that had already taken the job). So
		// the loop checks ready again: returning on such a token let a run
		// return before its workers had finished, and a worker run a job
		// twice.
		<-w.wake
	}
}

// signal wakes the waiter if it has parked; call it after making its
// condition true.
func (w *waiter) signal() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		w.wake <- struct{}{}
	}
}

func newPool() *pool { return &pool{caller: newWaiter()} }

// grow starts workers up to n. Each pool goroutine holds a P (GOMAXPROCS's
// unit) through its native calls and needs one whenever it is back in Go,
// so the process keeps a P for the caller, one per worker and one spare
// for the program's other goroutines, the GC's workers and timers: without
// the spare, a returning worker can wait in the Go scheduler and the next
// run's first barrier with it (measured on 2 cores at 2 threads, schedPoint
// in place: squeezenet1_1 took 3.1 ms in some processes at GOMAXPROCS 2,
// 2.45 in all at GOMAXPROCS 3). The threads run native code between those
// moments, so the extra Ps do not oversubscribe the cores with kiln's Go
// code.
func (p *pool) grow(n int) {
	if want := n + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	for len(p.workers) < n {
		w := &worker{tid: int64(len(p.workers) + 1), waiter: newWaiter()}
		p.workers = append(p.workers, w)
		go p.work(w, p.state.Load())
	}
}

func (p *pool) work(w *worker, seen uint64) {
	for {
		schedPoint(&w.sched)
		w.wait(idleSpin, func() bool { return p.state.Load() != seen })
		seen = p.state.Load()
		n := int64(seen & 0xffff)
		if n == 0 {
			return
		}
		if w.tid >= n {
			continue
		}
		copy(w.args[:], p.args[:p.nargs])
		w.args[0] = uintptr(w.tid)
		runParts(p.entry, p.part, w.args[:p.nargs+1], &w.sched)
		if p.done.Add(1) == n-1 {
			p.caller.signal()
		}
	}
}

// run calls entry(tid, args...) on nthreads threads, the caller's as tid
// 0, and returns when all have returned.
func (p *pool) run(nthreads int, entry, part uintptr, args ...uintptr) {
	nthreads = min(nthreads, 0xffff)
	schedPoint(&p.sched)
	p.entry, p.part, p.nargs = entry, part, 1+copy(p.args[1:], args)
	p.args[0] = 0
	if nthreads > 1 {
		p.grow(nthreads - 1)
		p.done.Store(0)
		seq := p.state.Load()>>16 + 1
		p.state.Store(seq<<16 | uint64(nthreads))
		for _, w := range p.workers[:nthreads-1] {
			w.signal()
		}
	}
	runParts(entry, p.part, p.args[:p.nargs+1], &p.sched)
	if nthreads > 1 {
		want := int64(nthreads - 1)
		p.caller.wait(doneSpin, func() bool { return p.done.Load() == want })
	}
}

// runParts calls an entry point part by part until it returns 0 (see
// EntryPoint): args is the entry's arguments, the last slot the part's.
// Between parts the goroutine passes a schedPoint (*sched its last). Go's
// sysmon takes the P of a thread that stays in one native call past 10 ms,
// or that has not been through the scheduler for 10 ms, and then wakes
// every 20 µs for a millisecond or more: with every core running an engine
// thread, each wake-up preempts one of them while the others wait at a
// barrier. Parts keep each call and each stretch between scheduling points
// short.
func runParts(entry, first uintptr, args []uintptr, sched *time.Time) {
	last := len(args) - 1
	for args[last] = first; ; {
		next, _, _ := purego.SyscallN(entry, args...)
		if next == 0 {
			return
		}
		args[last] = next
		schedPoint(sched)
	}
}

func (p *pool) stop() {
	seq := p.state.Load()>>16 + 1
	p.state.Store(seq << 16)
	for _, w := range p.workers {
		w.signal()
	}
	p.workers = nil
}
