package engine

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// Verifying sections. Parse checks a file's structure from its head; the
// sections' data, most of a file, are checked against their chunks'
// checksums here, the chunks shared out to all cores.

// chunk is chunk i of section sec.
type chunk struct{ sec, i int }

func (f *File) chunkData(c chunk) []byte { return chunkOf(f.Sections[c.sec].Data, c.i) }

// chunkOf is chunk i of a section's data d.
func chunkOf(d []byte, i int) []byte { return d[i*ChunkSize : min((i+1)*ChunkSize, len(d))] }

// checkChunk checks b, chunk c's bytes, against its checksum.
func (f *File) checkChunk(c chunk, b []byte) error {
	if sha256.Sum256(b) != f.sums[c.sec][c.i] {
		return f.mismatch(c)
	}
	return nil
}

// section returns the index of the named section.
func (f *File) section(name string) (int, error) {
	i := slices.IndexFunc(f.Sections, func(s Section) bool { return s.Name == name })
	if i < 0 {
		return 0, fmt.Errorf("%w: section %q is missing", ErrBadSection, name)
	}
	return i, nil
}

// mismatch names a chunk whose checksum fails: the section, and where in
// it when it has more than one chunk.
func (f *File) mismatch(c chunk) error {
	name := f.Sections[c.sec].Name
	if len(f.sums[c.sec]) == 1 {
		return fmt.Errorf("%w in section %q", ErrChecksum, name)
	}
	lo := c.i * ChunkSize
	hi := lo + len(f.chunkData(c))
	return fmt.Errorf("%w in section %q, its bytes %d to %d (file offset %d)", ErrChecksum, name, lo, hi, f.offs[c.sec]+lo)
}

// Verify checks every section's data against its chunks' checksums, in
// place, on all cores.
func (f *File) Verify() error {
	return f.eachChunk(nil, false, func(c chunk, _ []byte) error { return f.checkChunk(c, f.chunkData(c)) })
}

// VerifyIn checks data, the named section as another mapping or copy of
// the file holds it, against the section's chunk checksums, in place, on
// all cores.
func (f *File) VerifyIn(name string, data []byte) error {
	i, err := f.section(name)
	if err != nil {
		return err
	}
	if len(data) != len(f.Sections[i].Data) {
		return fmt.Errorf("%w: section %q holds %d bytes, %d were given", ErrBadSection, name, len(f.Sections[i].Data), len(data))
	}
	return f.eachChunk(func(sec int) bool { return sec == i }, false, func(c chunk, _ []byte) error {
		return f.checkChunk(c, chunkOf(data, c.i))
	})
}

// SectionOffset returns the named section's offset in the file.
func (f *File) SectionOffset(name string) (int64, bool) {
	i, err := f.section(name)
	if err != nil {
		return 0, false
	}
	return int64(f.offs[i]), true
}

// Read verifies the named section and hands it to put chunk by chunk: the
// chunk's offset in the section and a copy of its bytes, which put may
// read until it returns (it copies what it keeps). Each chunk is copied
// out of the file, then hashed, so put gets exactly the bytes that were
// checked even if the file changes meanwhile. put runs on several
// goroutines at once, in no particular order, and only with verified
// chunks; after an error some chunks may not have been put.
func (f *File) Read(name string, put func(off int, chunk []byte)) error {
	i, err := f.section(name)
	if err != nil {
		return err
	}
	return f.read(func(sec int) bool { return sec == i }, func(_, off int, chunk []byte) { put(off, chunk) })
}

// Detach replaces the data of every section but those named in keep by a
// verified copy (as Read makes), so that the File refers to the buffer it
// was parsed from only through the sections kept.
func (f *File) Detach(keep ...string) error {
	copies := make([][]byte, len(f.Sections))
	for i, s := range f.Sections {
		if !slices.Contains(keep, s.Name) {
			copies[i] = make([]byte, len(s.Data))
		}
	}
	err := f.read(func(sec int) bool { return copies[sec] != nil }, func(sec, off int, chunk []byte) {
		copy(copies[sec][off:], chunk)
	})
	if err != nil {
		return err
	}
	for i, c := range copies {
		if c != nil {
			f.Sections[i].Data = c
		}
	}
	return nil
}

// read is Read over the sections want selects.
func (f *File) read(want func(sec int) bool, put func(sec, off int, chunk []byte)) error {
	return f.eachChunk(want, true, func(c chunk, scratch []byte) error {
		b := scratch[:copy(scratch, f.chunkData(c))]
		if err := f.checkChunk(c, b); err != nil {
			return err
		}
		put(c.sec, c.i*ChunkSize, b)
		return nil
	})
}

// eachChunk runs fn on every chunk of the sections want selects (nil:
// all), on up to GOMAXPROCS goroutines, each with a scratch buffer of
// ChunkSize bytes when scratch is set. It stops soon after a chunk fails
// and returns the error of the first failed chunk in file order.
func (f *File) eachChunk(want func(sec int) bool, scratch bool, fn func(c chunk, scratch []byte) error) error {
	var list []chunk
	for sec := range f.Sections {
		if want == nil || want(sec) {
			for i := range f.sums[sec] {
				list = append(list, chunk{sec, i})
			}
		}
	}
	errs := make([]error, len(list))
	var next atomic.Int64
	var failed atomic.Bool
	work := func() {
		var buf []byte
		if scratch {
			buf = make([]byte, ChunkSize)
		}
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(list) {
				return
			}
			if errs[i] = guard(func() error { return fn(list[i], buf) }); errs[i] != nil {
				failed.Store(true)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(list)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// guard runs fn, turning a memory fault while it reads the file into an
// error (see catchFault).
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err)
	return fn()
}

// catchFault, deferred where debug.SetPanicOnFault is on, turns a memory
// fault into an error: a file mapped into memory and cut short by another
// process faults (SIGBUS) where its pages are gone, and a loader must
// refuse it, not crash. Any other panic goes on.
func catchFault(err *error) {
	if r := recover(); r != nil {
		if _, ok := r.(interface{ Addr() uintptr }); !ok {
			panic(r)
		}
		*err = fmt.Errorf("%w: the file was cut short or changed while it was read (a fault at a mapped page)", ErrTruncated)
	}
}
