package cpu

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kiln-ml/kiln/cpuabi"
)

// Derived weights (cpuabi/derived.go): the loader lays out the live
// weights, the stored ones with each derived range where the ABI record
// puts it, and has the engine's own code compute the ranges
// (cpuabi.DeriveEntryPoint), called on all cores.

// ExpandWeights lays out and derives the live weights of a compile result
// held in memory, its code loaded as lib: the stored weights and the
// derived ranges, checked first.
func ExpandWeights(lib *Library, stored []byte, derived []cpuabi.Derived) (*Buffer, error) {
	a, err := cpuabi.InMemory(int64(len(stored)), derived)
	if err != nil {
		return nil, err
	}
	l, err := NewLive(a)
	if err != nil {
		return nil, err
	}
	l.Put(0, stored)
	if err := l.Derive(lib); err != nil {
		l.Buf.Free()
		return nil, err
	}
	return l.Buf, nil
}

// Live is an engine's live weights being laid out: the stored weights go
// in with Put (the loader puts each chunk as it verifies it), then Derive
// computes the derived ranges.
type Live struct {
	Buf  *Buffer
	abi  *cpuabi.ABI
	segs []segment
}

// segment is a run of stored bytes [from, from+n) and its place at in
// the live weights: the stored weights are the live ones with the derived
// ranges cut out.
type segment struct{ from, at, n int64 }

// NewLive allocates the live weights of a checked record (cpuabi.ParseABI).
func NewLive(a *cpuabi.ABI) (*Live, error) {
	buf, err := NewBuffer(a.WeightsBytes)
	if err != nil {
		return nil, err
	}
	l := &Live{Buf: buf, abi: a}
	at, from := int64(0), int64(0)
	for _, d := range a.Derived {
		if n := d.Off - at; n > 0 {
			l.segs = append(l.segs, segment{from, at, n})
			from += n
		}
		at = d.Off + d.Bytes
	}
	if n := a.WeightsBytes - at; n > 0 {
		l.segs = append(l.segs, segment{from, at, n})
	}
	return l, nil
}

// Put copies stored bytes [off, off+len(b)) to their places in the live
// weights. Puts of disjoint ranges may run at once.
func (l *Live) Put(off int64, b []byte) {
	i, _ := slices.BinarySearchFunc(l.segs, off, func(s segment, off int64) int { return cmp.Compare(s.from+s.n, off+1) })
	for ; len(b) > 0 && i < len(l.segs); i++ {
		s := l.segs[i]
		skip := off - s.from
		n := copy(l.Buf.Bytes[s.at+skip:s.at+s.n], b)
		b, off = b[n:], off+int64(n)
	}
}

// Derive computes the derived ranges with the engine's DeriveEntryPoint,
// on all cores, once every stored byte is in.
func (l *Live) Derive(lib *Library) error {
	if len(l.abi.Derived) == 0 {
		return nil
	}
	if lib.derive == 0 {
		return fmt.Errorf("cpu: the engine's code has no %s for its derived weights (rebuild the engine with this kiln)", cpuabi.DeriveEntryPoint)
	}
	live := l.Buf.Bytes
	// Work items: a block of whole row panels of one range, ~64K source
	// floats: each call fills its panels' cache lines at once, and is long
	// enough that the call (~200 ns) is noise.
	type item struct{ i, lo, hi int64 }
	var items []item
	for i := range l.abi.Derived {
		d := &l.abi.Derived[i]
		step := (max(1, (1<<16)/(d.C*9)) + d.MR - 1) / d.MR * d.MR
		for lo := int64(0); lo < d.OC; lo += step {
			items = append(items, item{int64(i), lo, min(lo+step, d.OC)})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		for {
			k := next.Add(1) - 1
			if k >= int64(len(items)) {
				return
			}
			it := items[k]
			purego.SyscallN(lib.derive, uintptr(it.i), uintptr(it.lo), uintptr(it.hi), uintptr(unsafe.Pointer(&live[0])))
		}
	}
	for range min(runtime.GOMAXPROCS(0), len(items)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	runtime.KeepAlive(l.Buf)
	return nil
}
