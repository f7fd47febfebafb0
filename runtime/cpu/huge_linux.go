package cpu

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

const hugePage = 2 << 20

// Buffer is memory outside the Go heap backed by transparent huge pages
// where the kernel allows them: weights and arenas are megabytes that
// every inference sweeps, and 4 KiB pages would cost a TLB miss every few
// cache lines once they outgrow the TLB's reach.
type Buffer struct {
	Bytes []byte // 64-byte aligned (NewBuffer: 2 MiB aligned when mapped; MapLive: at its file offset modulo 2 MiB)
	unmap func() // releases a mapping (nil: the Go heap's memory)
	// fresh is the part of a MapLive buffer on 4 KiB pages that
	// CollapseLater moves to huge pages, and collapsing its progress.
	fresh      []byte
	collapsing sync.WaitGroup
}

// NewBuffer returns n zeroed bytes. The memory is released when the
// Buffer becomes unreachable (or by Free). Sizes of a megabyte and more are
// mapped, after a check against the memory the process can get
// (Available); a size past it, or a mapping the kernel refuses, is a
// *MemoryError, never the Go heap's fatal out-of-memory.
func NewBuffer(n int64) (*Buffer, error) {
	if n < hugePage/2 {
		return &Buffer{Bytes: AlignedBytes(n)}, nil
	}
	if avail, from := Available(); n > avail {
		return nil, &MemoryError{Bytes: n, Available: avail, Bound: from}
	}
	return mapZeroed(n)
}

// mapZeroed maps n zeroed bytes, 2 MiB aligned, asking for huge pages.
func mapZeroed(n int64) (*Buffer, error) {
	size := (n + hugePage - 1) &^ (hugePage - 1)
	m, err := syscall.Mmap(-1, 0, int(size+hugePage), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		avail, from := Available()
		return nil, &MemoryError{Bytes: n, Available: avail, Bound: from, Err: err}
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))%hugePage)) % hugePage
	b := &Buffer{Bytes: m[off : off+int(n) : off+int(n)], unmap: func() { syscall.Munmap(m) }}
	_ = syscall.Madvise(m[off:off+int(size)], 14) // MADV_HUGEPAGE; a refusal only costs speed
	runtime.SetFinalizer(b, (*Buffer).Free)
	return b, nil
}

// Free releases the memory now; the Buffer must not be used after.
func (b *Buffer) Free() {
	b.collapsing.Wait()
	if b.unmap != nil {
		b.unmap()
		b.unmap, b.Bytes = nil, nil
	}
}
