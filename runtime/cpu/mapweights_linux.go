package cpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/kiln-ml/kiln/cpuabi"
)

// MapLive lays out the live weights of a checked record (cpuabi.ParseABI)
// over the engine file f, whose weights section starts at byte off: the stored
// weights are the file's own pages, mapped read-only, not copied; the
// derived area after them (and the stored bytes on the section's last,
// partial page) is fresh memory. The page cache's pages are in memory
// already when the file was just written or read, so loading costs no
// copy and no fresh pages: on a VM whose host backs a guest's free memory
// lazily, 100 MB of fresh huge pages took 230 ms here, a mapping of 100
// cached MB 3 ms.
//
// The mapping's addresses match the file's offsets modulo 2 MiB, and it
// asks for huge pages (MADV_HUGEPAGE): a file system that caches files in
// 2 MiB folios (ext4 and XFS on Linux ≥ 6.x) then maps them as huge
// pages, and reads an uncached file in such folios.
//
// The caller verifies the stored bytes in Buf afterwards, and must keep
// the file unchanged while the weights are in use: a mapping shows what
// the file holds now, and faults where another process cut it short. It
// returns ErrNoMap (wrapped) where the file cannot be mapped or the
// record's derived ranges do not all follow the stored weights (engines
// from before the derived area); the caller then copies.
func MapLive(f *os.File, off int64, a *cpuabi.ABI) (*Live, error) {
	if len(a.Derived) > 0 && !a.DerivedAfterStored() {
		return nil, fmt.Errorf("%w: derived weights inside the stored ones", ErrNoMap)
	}
	if a.WeightsBytes == 0 {
		return nil, fmt.Errorf("%w: no weights", ErrNoMap)
	}
	ps := int64(os.Getpagesize())
	fileLo := off &^ (ps - 1)
	fileHi := (off + a.StoredBytes) &^ (ps - 1) // the section's whole pages end here
	lead := off - fileLo
	span := (lead + a.WeightsBytes + ps - 1) &^ (ps - 1)
	// Reserve 2 MiB more than the region, to place it.
	resAt, err := mmap(0, span+hugePage, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON, -1, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMap, err)
	}
	resEnd := resAt + uintptr(span+hugePage)
	// start ≡ fileLo (mod 2 MiB), inside the reservation.
	start := resAt + uintptr((fileLo-int64(resAt%hugePage)+hugePage)%hugePage)
	end := start + uintptr(span)
	fail := func(err error) (*Live, error) {
		munmap(resAt, resEnd)
		return nil, fmt.Errorf("%w: %v", ErrNoMap, err)
	}
	// The region is outside the Go heap: an address from mmap, made a pointer.
	region := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&start))), span)
	if n := fileHi - fileLo; n > 0 {
		if _, err := mmap(start, n, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_FIXED, int(f.Fd()), fileLo); err != nil {
			return fail(err)
		}
		_ = syscall.Madvise(region[:n], 14) // MADV_HUGEPAGE; a refusal only costs speed
	}
	if n := span - (fileHi - fileLo); n > 0 {
		if _, err := mmap(start+uintptr(fileHi-fileLo), n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_FIXED, -1, 0); err != nil {
			return fail(err)
		}
		// The stored bytes on the section's partial last page.
		if _, err := f.ReadAt(region[fileHi-fileLo:lead+a.StoredBytes], fileHi); err != nil {
			return fail(err)
		}
	}
	munmap(resAt, start) // the reservation around the region
	munmap(end, resEnd)
	b := &Buffer{Bytes: region[lead : lead+a.WeightsBytes : lead+a.WeightsBytes], unmap: func() { munmap(start, end) }}
	if fileHi-fileLo < span {
		b.fresh = region[fileHi-fileLo:]
	}
	runtime.SetFinalizer(b, (*Buffer).Free)
	return &Live{Buf: b, abi: a}, nil
}

// CollapseLater moves the buffer's fresh memory (MapLive's derived area)
// to huge pages in the background (MADV_COLLAPSE, Linux ≥ 6.1), once it
// holds its data. It starts on 4 KiB pages: fresh huge pages can be slow
// to get (see MapLive) and a load should not wait for them, but the
// derived Winograd kernels are re-read by every column tile of their
// GEMMs, and on 4 KiB pages their TLB misses made ResNet-18 9% slower at
// 2 threads. Free waits for the collapse.
func (b *Buffer) CollapseLater() {
	if len(b.fresh) < hugePage {
		return
	}
	b.collapsing.Add(1)
	go func() {
		defer b.collapsing.Done()
		_ = syscall.Madvise(b.fresh, 25) // MADV_COLLAPSE; where refused, the pages stay small
	}()
}

// ErrNoMap says MapLive could not map the weights (see its comment).
var ErrNoMap = errors.New("the weights cannot be mapped from the file")

// mmap and munmap are the system calls, on addresses: syscall.Mmap's
// bookkeeping knows only whole mappings it made, and the region is made
// of several.
func mmap(addr uintptr, n int64, prot, flags, fd int, off int64) (uintptr, error) {
	at, _, errno := syscall.Syscall6(syscall.SYS_MMAP, addr, uintptr(n), uintptr(prot), uintptr(flags), uintptr(fd), uintptr(off))
	if errno != 0 {
		return 0, errno
	}
	return at, nil
}

func munmap(lo, hi uintptr) {
	if hi > lo {
		syscall.Syscall(syscall.SYS_MUNMAP, lo, hi-lo, 0)
	}
}
