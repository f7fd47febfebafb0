package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Derived weights. Some packed weights are larger than the weights they
// come from (a Winograd F(4×4, 3×3) kernel is 36 floats for 9) and cheap to
// compute, so an engine stores the source and the loader computes the
// packed form: the file stays about the model's size. The code reads one
// blob, the live weights; the file's weights section is that blob with
// each derived range cut out, and the ABI record lists the ranges.

// DerivedWinograd is the kind of a Winograd kernel transform: for each
// output channel oc and input channel ic of the float32 source
// [OC][C][3][3] at Src, U[p] = (G g Gᵀ)[p] (summed in float64) for each of
// the a×a points p, packed as the GEMM's row panels: point p's panel is
// ⌈OC/MR⌉·C·MR floats, element (oc/MR·C + ic)·MR + oc%MR.
const DerivedWinograd = "winograd"

// Derived is a range of the live weights the loader computes.
type Derived struct {
	Kind  string `json:"kind"`
	Off   int64  `json:"off"`   // in the live weights
	Bytes int64  `json:"bytes"` // the range's size
	Src   int64  `json:"src"`   // the source's offset in the live weights
	OC    int64  `json:"oc"`
	C     int64  `json:"c"`
	MR    int64  `json:"mr"`
	// G is the transform's a×3 matrix.
	G [][]float64 `json:"g"`
}

func (d *Derived) a() int64     { return int64(len(d.G)) }
func (d *Derived) panel() int64 { return (d.OC + d.MR - 1) / d.MR * d.C * d.MR }

// srcBytes is the size of d's source.
func (d *Derived) srcBytes() int64 { return 4 * d.OC * d.C * 9 }

// check validates d against live weights of total bytes.
func (d *Derived) check(total int64) error {
	if d.Kind != DerivedWinograd {
		return fmt.Errorf("unknown kind %q", d.Kind)
	}
	const maxDim = 1 << 20
	if d.OC <= 0 || d.C <= 0 || d.MR <= 0 || d.OC > maxDim || d.C > maxDim || d.MR > 64 || d.MR > d.OC {
		return fmt.Errorf("dims OC %d, C %d, MR %d out of range", d.OC, d.C, d.MR)
	}
	if a := d.a(); a < 3 || a > 8 {
		return fmt.Errorf("a %d×3 transform", a)
	}
	for _, row := range d.G {
		if len(row) != 3 {
			return fmt.Errorf("a transform row of %d values, want 3", len(row))
		}
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("a transform value %v", v)
			}
		}
	}
	if want := 4 * d.a() * d.a() * d.panel(); d.Bytes != want {
		return fmt.Errorf("%d bytes, the transform writes %d", d.Bytes, want)
	}
	if d.Off < 0 || d.Off%64 != 0 || d.Bytes > total-d.Off {
		return fmt.Errorf("range [%d, +%d) outside the %d bytes of weights", d.Off, d.Bytes, total)
	}
	if d.Src < 0 || d.Src%4 != 0 || d.srcBytes() > total-d.Src {
		return fmt.Errorf("source [%d, +%d) outside the %d bytes of weights", d.Src, d.srcBytes(), total)
	}
	return nil
}

// checkDerived validates an ABI record's derived ranges: in order, apart,
// inside the weights, sources outside every derived range, and the stored
// bytes exactly what the ranges leave.
func (a *ABI) checkDerived() error {
	cut, end := int64(0), int64(0)
	for i := range a.Derived {
		d := &a.Derived[i]
		if err := d.check(a.WeightsBytes); err != nil {
			return fmt.Errorf("derived weights %d: %v", i, err)
		}
		if d.Off < end {
			return fmt.Errorf("derived weights %d overlaps the one before", i)
		}
		end = d.Off + d.Bytes
		cut += d.Bytes
	}
	for i := range a.Derived {
		s := &a.Derived[i]
		for j := range a.Derived {
			d := &a.Derived[j]
			if s.Src < d.Off+d.Bytes && d.Off < s.Src+s.srcBytes() {
				return fmt.Errorf("derived weights %d reads derived weights %d", i, j)
			}
		}
	}
	// A range is less than 2·64/9 of its source (an 8×8 transform of 3×3
	// kernels, panels of MR ≤ OC rows), and layers with equal weights may
	// share one: past 64× the stored bytes, a record asks for memory no
	// engine needs.
	if cut > 64*a.StoredBytes {
		return fmt.Errorf("%d bytes of derived weights from %d stored", cut, a.StoredBytes)
	}
	if a.StoredBytes != a.WeightsBytes-cut {
		return fmt.Errorf("%d stored bytes, the derived ranges leave %d of %d", a.StoredBytes, a.WeightsBytes-cut, a.WeightsBytes)
	}
	return nil
}

// ExpandWeights is LiveWeights for a compile result held in memory: the
// stored weights and the derived ranges, checked first.
func ExpandWeights(stored []byte, derived []Derived) (*Buffer, error) {
	a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)), Derived: derived}
	for _, d := range derived {
		a.WeightsBytes += d.Bytes
	}
	if err := a.checkDerived(); err != nil {
		return nil, err
	}
	return LiveWeights(a, stored)
}

// LiveWeights lays the stored weights out with room for the derived
// ranges and computes them, on all cores. The record has been checked
// (ParseABI); stored must be StoredBytes long.
func LiveWeights(a *ABI, stored []byte) (*Buffer, error) {
	if int64(len(stored)) != a.StoredBytes {
		return nil, fmt.Errorf("%d bytes of stored weights, the code's record says %d", len(stored), a.StoredBytes)
	}
	buf := NewBuffer(a.WeightsBytes)
	live := buf.Bytes
	at, from := int64(0), int64(0)
	for _, d := range a.Derived {
		n := d.Off - at
		copy(live[at:d.Off], stored[from:from+n])
		at, from = d.Off+d.Bytes, from+n
	}
	copy(live[at:], stored[from:])
	// Work items: a block of output channels of one range.
	type item struct {
		d      *Derived
		lo, hi int64
	}
	var items []item
	for i := range a.Derived {
		d := &a.Derived[i]
		// Whole row panels of MR channels: each fills its cache lines at once.
		step := (max(1, (1<<16)/(d.C*9)) + d.MR - 1) / d.MR * d.MR
		for lo := int64(0); lo < d.OC; lo += step {
			items = append(items, item{d, lo, min(lo+step, d.OC)})
		}
	}
	work := make(chan item)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(items))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				winograd(live, it.d, it.lo, it.hi)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return buf, nil
}

// winograd computes output channels [lo, hi) of d (DerivedWinograd), lo
// a multiple of MR: a panel's MR channels of one input channel in turn,
// so each cache line of U is written whole.
func winograd(live []byte, d *Derived, lo, hi int64) {
	src := floats(live[d.Src : d.Src+d.srcBytes()])
	u := floats(live[d.Off : d.Off+d.Bytes])
	A, panel := d.a(), d.panel()
	var G [8][3]float64
	for a := range A {
		copy(G[a][:], d.G[a])
	}
	// (G g) Gᵀ in two products: 27a + 3a² multiplications, not 18a².
	var t [8][3]float64
	for ob := lo; ob < hi; ob += d.MR {
		for ic := int64(0); ic < d.C; ic++ {
			for oc := ob; oc < min(ob+d.MR, hi); oc++ {
				gk := (*[9]float32)(src[(oc*d.C+ic)*9:])
				for a := range A {
					for j := range 3 {
						t[a][j] = G[a][0]*float64(gk[j]) + G[a][1]*float64(gk[3+j]) + G[a][2]*float64(gk[6+j])
					}
				}
				at := (oc/d.MR*d.C+ic)*d.MR + oc%d.MR
				for a := range A {
					for b := range A {
						u[(a*A+b)*panel+at] = float32(t[a][0]*G[b][0] + t[a][1]*G[b][1] + t[a][2]*G[b][2])
					}
				}
			}
		}
	}
}

// floats views 4-byte aligned little-endian bytes as float32s.
func floats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
