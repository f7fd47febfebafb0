// Package cpu loads a native engine (an ELF shared object made by
// codegen/cpu) without cgo and runs it on a pool of OS threads.
//
// Every engine exports one entry point,
//
//	void kiln_run(int64_t tid, int64_t nthreads, uint8_t *weights,
//	              uint8_t *arena, void **io, int64_t *barrier);
//
// which each worker thread calls once per inference with its id. The
// generated code splits every layer's work by tid and meets at a spin
// barrier (the two int64 words at barrier) between layers: the runtime owns
// the threads, the engine owns the schedule.
package cpu

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// EntryPoint is the symbol every engine exports.
const EntryPoint = "kiln_run"

// Library is a loaded engine. It is safe for concurrent use: each Run
// borrows a worker pool of its own.
type Library struct {
	handle  uintptr
	entry   uintptr
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
	entry, err := purego.Dlsym(h, EntryPoint)
	if err != nil {
		purego.Dlclose(h)
		cleanup()
		return nil, fmt.Errorf("cpu: the shared object has no %s: %w", EntryPoint, err)
	}
	return &Library{handle: h, entry: entry, cleanup: cleanup}, nil
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
	const sysMemfdCreate = 319 // amd64
	if runtime.GOARCH == "amd64" {
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

// call is one inference's arguments, shared by all its workers. It lives
// on the heap (the pool owns it) so native code may hold its addresses.
type call struct {
	entry          uintptr
	n              int64
	weights, arena uintptr
	io             uintptr
	barrier        *[8]int64 // words 0 and 1 are the barrier; padded to a cache line
	wg             sync.WaitGroup
}

// pool is a set of worker goroutines locked to OS threads, reused across
// runs by one caller at a time.
type pool struct {
	workers []chan *call
	barrier [8]int64
	io      []unsafe.Pointer
}

func (p *pool) grow(n int) {
	for len(p.workers) < n {
		ch := make(chan *call)
		tid := int64(len(p.workers) + 1)
		p.workers = append(p.workers, ch)
		go worker(tid, ch)
	}
}

func worker(tid int64, ch chan *call) {
	runtime.LockOSThread()
	// Unlock before exiting: a goroutine that ends locked takes its thread
	// down with it, which crashes cgo builds right after a Dlclose.
	defer runtime.UnlockOSThread()
	for c := range ch {
		purego.SyscallN(c.entry, uintptr(tid), uintptr(c.n), c.weights, c.arena, c.io, uintptr(unsafe.Pointer(c.barrier)))
		c.wg.Done()
	}
}

func (p *pool) stop() {
	for _, ch := range p.workers {
		close(ch)
	}
	p.workers = nil
}

// Run runs one inference on nthreads threads (the caller's plus
// nthreads-1 pooled workers) and returns when all have finished. weights
// and arena must stay valid for the call; io holds the engine's input and
// output buffers in the engine's order.
func (l *Library) Run(nthreads int, weights, arena unsafe.Pointer, io []unsafe.Pointer) {
	if nthreads < 1 {
		nthreads = 1
	}
	l.mu.Lock()
	var p *pool
	if k := len(l.free); k > 0 {
		p, l.free = l.free[k-1], l.free[:k-1]
	} else {
		p = &pool{}
	}
	l.mu.Unlock()
	// Copy io into memory the pool owns so its address is stable.
	p.io = append(p.io[:0], io...)
	if len(p.io) == 0 {
		p.io = append(p.io, nil)
	}
	c := &call{entry: l.entry, n: int64(nthreads), weights: uintptr(weights), arena: uintptr(arena),
		io: uintptr(unsafe.Pointer(&p.io[0])), barrier: &p.barrier}
	if nthreads > 1 {
		p.grow(nthreads - 1)
		c.wg.Add(nthreads - 1)
		for i := 0; i < nthreads-1; i++ {
			p.workers[i] <- c
		}
	}
	purego.SyscallN(c.entry, 0, uintptr(c.n), c.weights, c.arena, c.io, uintptr(unsafe.Pointer(c.barrier)))
	c.wg.Wait()
	runtime.KeepAlive(weights)
	runtime.KeepAlive(arena)
	runtime.KeepAlive(io)
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
