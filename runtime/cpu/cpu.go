// Package cpu loads a native engine (an ELF shared object made by
// codegen/cpu) without cgo and runs it on a pool of OS threads.
//
// What the code exports and how it is called (kiln_run on every thread,
// part by part, see runParts; the kiln_abi record; the profiling and
// derive entry points) is package cpuabi's contract: the runtime owns the
// threads, the engine owns the schedule. Between inferences the workers
// poll for the next one for up to 200 µs before they park (see pool.go),
// so back-to-back runs start in well under a microsecond instead of the
// 10–120 µs of waking a parked thread.
package cpu

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kiln-ml/kiln/cpuabi"
)

// Library is a loaded engine. It is safe for concurrent use: each Run
// borrows a worker pool of its own.
type Library struct {
	handle  uintptr
	entry   uintptr
	profile uintptr // 0 when the engine has none
	cycles  uintptr
	derive  uintptr // 0 when the engine has none
	cleanup func()
	mu      sync.Mutex
	free    []*pool // idle worker pools, one per concurrent caller
}

// Open loads a shared object from memory. It writes the bytes to an
// anonymous memory file (memfd_create; a temporary file that is removed
// right after loading where memfd is unavailable) and dlopens it.
func Open(so []byte) (*Library, error) {
	if len(so) < 4 || string(so[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("cpu: not an ELF shared object")
	}
	// Code built for AMX needs the tile state granted before it runs; the
	// grant costs nothing until a thread uses the tiles. A refusal stays
	// with cpuabi.EnableAMX, which loading such an engine reports.
	_ = cpuabi.EnableAMX()
	// The image file stays open while the library is loaded: the dynamic
	// loader knows libraries by path, and /proc/self/fd/N must not name two
	// loaded libraries at once.
	path, cleanup, err := writeImage(so)
	if err != nil {
		return nil, fmt.Errorf("cpu: writing the shared object: %w", err)
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cpu: loading the shared object: %w", err)
	}
	entry, err := purego.Dlsym(h, cpuabi.EntryPoint)
	if err != nil {
		purego.Dlclose(h)
		cleanup()
		return nil, fmt.Errorf("cpu: the shared object has no %s: %w", cpuabi.EntryPoint, err)
	}
	l := &Library{handle: h, entry: entry, cleanup: cleanup}
	l.profile, _ = purego.Dlsym(h, cpuabi.ProfileEntryPoint)
	l.cycles, _ = purego.Dlsym(h, cpuabi.CyclesSymbol)
	l.derive, _ = purego.Dlsym(h, cpuabi.DeriveEntryPoint)
	return l, nil
}

// Symbol resolves another exported function of the library.
func (l *Library) Symbol(name string) (uintptr, error) { return purego.Dlsym(l.handle, name) }

// Close unloads the library. No Run may be in flight or follow.
func (l *Library) Close() error {
	l.mu.Lock()
	for _, p := range l.free {
		p.stop()
	}
	l.free = nil
	l.mu.Unlock()
	err := purego.Dlclose(l.handle)
	l.cleanup()
	return err
}

func writeImage(so []byte) (string, func(), error) {
	name := []byte("kiln-engine\x00")
	sysMemfdCreate := map[string]uintptr{"amd64": 319, "arm64": 279}[runtime.GOARCH]
	if sysMemfdCreate != 0 {
		fd, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), 1 /* MFD_CLOEXEC */, 0)
		if errno == 0 {
			// A raw descriptor, not an *os.File: a File's finalizer would
			// close it when an unclosed Library is collected, and the next
			// engine's memfd could then reuse the path of a library that is
			// still loaded (the loader would hand back the old one).
			if err := writeAll(int(fd), so); err != nil {
				syscall.Close(int(fd))
				return "", nil, err
			}
			return fmt.Sprintf("/proc/self/fd/%d", fd), func() { syscall.Close(int(fd)) }, nil
		}
	}
	f, err := os.CreateTemp("", "kiln-engine-*.so")
	if err != nil {
		return "", nil, err
	}
	path := f.Name()
	_, err = f.Write(so)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", nil, err
	}
	return path, func() { os.Remove(path) }, nil
}

// Run runs one inference on nthreads threads (the caller's plus
// nthreads-1 pooled workers) and returns when all have finished. weights
// and arena must stay valid for the call; io holds the engine's input and
// output buffers in the engine's order.
func (l *Library) Run(nthreads int, weights, arena unsafe.Pointer, io []unsafe.Pointer) {
	l.run(nthreads, l.entry, 0, weights, arena, io, nil)
}

// RunFrom runs the code like Run, from part part on: an engine with host
// steps (cpuabi.HostStep) runs in several calls, the first from part 0,
// each one after a host step from the step's Resume.
func (l *Library) RunFrom(part int64, nthreads int, weights, arena unsafe.Pointer, io []unsafe.Pointer) {
	l.run(nthreads, l.entry, part, weights, arena, io, nil)
}

// Profiled reports whether the engine has the profiling entry point
// (cpuabi.ProfileEntryPoint and cpuabi.CyclesSymbol); engines built
// before it lack them.
func (l *Library) Profiled() bool { return l.profile != 0 && l.cycles != 0 }

// RunProfile runs one inference like Run through the profiling entry
// point: times gets, for each thread (a row of steps+1 words), the cycle
// counter when the run starts and after each kernel step and the barrier
// that follows it.
func (l *Library) RunProfile(nthreads int, weights, arena unsafe.Pointer, io []unsafe.Pointer, times []uint64) error {
	return l.RunProfileFrom(0, nthreads, weights, arena, io, times)
}

// RunProfileFrom is RunProfile from part part on (see RunFrom).
func (l *Library) RunProfileFrom(part int64, nthreads int, weights, arena unsafe.Pointer, io []unsafe.Pointer, times []uint64) error {
	if !l.Profiled() {
		return fmt.Errorf("cpu: the engine has no %s (rebuild it with this kiln)", cpuabi.ProfileEntryPoint)
	}
	if len(times) == 0 {
		return fmt.Errorf("cpu: RunProfile needs a times buffer")
	}
	l.run(nthreads, l.profile, part, weights, arena, io, times)
	return nil
}

// Cycles reads the cycle counter the profiling entry point uses.
func (l *Library) Cycles() uint64 {
	r, _, _ := purego.SyscallN(l.cycles)
	return uint64(r)
}

func (l *Library) run(nthreads int, entry uintptr, part int64, weights, arena unsafe.Pointer, io []unsafe.Pointer, times []uint64) {
	nthreads = max(nthreads, 1)
	l.mu.Lock()
	var p *pool
	if k := len(l.free); k > 0 {
		p, l.free = l.free[k-1], l.free[:k-1]
	} else {
		p = newPool()
	}
	l.mu.Unlock()
	// Copy io into memory the pool owns so its address is stable.
	p.io = append(p.io[:0], io...)
	if len(p.io) == 0 {
		p.io = append(p.io, nil)
	}
	args := []uintptr{uintptr(nthreads), uintptr(weights), uintptr(arena),
		uintptr(unsafe.Pointer(&p.io[0])), uintptr(unsafe.Pointer(&p.barrier))}
	if times != nil {
		args = append(args, uintptr(unsafe.Pointer(&times[0])))
	}
	p.run(nthreads, entry, uintptr(part), args...)
	runtime.KeepAlive(weights)
	runtime.KeepAlive(arena)
	runtime.KeepAlive(io)
	runtime.KeepAlive(times)
	l.mu.Lock()
	l.free = append(l.free, p)
	l.mu.Unlock()
}

// AlignedBytes returns n zeroed bytes whose address is 64-byte aligned, for
// weights and arenas.
func AlignedBytes(n int64) []byte {
	buf := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64
	return buf[off : off+int(n) : off+int(n)]
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
