//go:build unix

package engine

import (
	"io"
	"os"
	"syscall"

	"github.com/kiln-ml/kiln/internal/readfile"
)

// Map maps a file read-only into memory for Parse, so that a loader reads
// its pages straight from the page cache instead of copying the whole file
// into the heap first; unmap releases it. Where a file cannot be mapped
// (not a regular file, empty, or mmap refused) it is read instead.
//
// A mapping of a file another process cuts short faults (SIGBUS) where its
// pages are gone, and one changed under it changes what a reader sees.
// Parse, Verify, Read and Detach read with debug.SetPanicOnFault on and
// turn a fault into an error; Read and Detach hash the copies they hand
// out, not the mapping, so what they hand out is what was verified. A
// loader that keeps only such copies (runtime.Load) and unmaps before it
// returns is safe from both; DecodeFile's Weights, which Detach leaves in
// place, are not.
func Map(path string) (data []byte, unmap func(), err error) {
	f, err := readfile.Open(path) // not a named pipe, which would block
	if err != nil {
		return nil, nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	return MapFile(f)
}

// MapFile is Map of an open file.
func MapFile(f *os.File) (data []byte, unmap func(), err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if !st.Mode().IsRegular() || size == 0 || int64(int(size)) != size {
		// Not mappable (a pipe, an empty or huge file): read it.
		b, err := io.ReadAll(f)
		return b, func() {}, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		b, err := io.ReadAll(f)
		return b, func() {}, err
	}
	return m, func() { syscall.Munmap(m) }, nil
}
