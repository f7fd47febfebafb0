package cpuabi

import (
	"fmt"
	"math"
)

// Derived weights. Some packed weights are larger than the weights they
// come from (a Winograd F(4×4, 3×3) kernel is 36 floats for 9) and cheap to
// compute, so an engine stores the source and the loader computes the
// packed form: the file stays about the model's size. The code reads one
// blob, the live weights; the file's weights section is that blob with
// each derived range cut out, and the ABI record lists the ranges. The
// engine's own code computes them (DeriveEntryPoint, vector code compiled
// for the engine's CPU, ~9× the scalar Go reference), called on all cores.

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

// Points is a, the side of the transform's a×a points.
func (d *Derived) Points() int64 { return int64(len(d.G)) }

// Panel is the floats of one point's row panels.
func (d *Derived) Panel() int64 { return (d.OC + d.MR - 1) / d.MR * d.C * d.MR }

// SrcBytes is the size of d's source.
func (d *Derived) SrcBytes() int64 { return 4 * d.OC * d.C * 9 }

// check validates d against live weights of total bytes.
func (d *Derived) check(total int64) error {
	if d.Kind != DerivedWinograd {
		return fmt.Errorf("unknown kind %q", d.Kind)
	}
	const maxDim = 1 << 20
	if d.OC <= 0 || d.C <= 0 || d.MR <= 0 || d.OC > maxDim || d.C > maxDim || d.MR > 64 || d.MR > d.OC {
		return fmt.Errorf("dims OC %d, C %d, MR %d out of range", d.OC, d.C, d.MR)
	}
	if a := d.Points(); a < 3 || a > 8 {
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
	if want := 4 * d.Points() * d.Points() * d.Panel(); d.Bytes != want {
		return fmt.Errorf("%d bytes, the transform writes %d", d.Bytes, want)
	}
	if d.Off < 0 || d.Off%64 != 0 || d.Bytes > total-d.Off {
		return fmt.Errorf("range [%d, +%d) outside the %d bytes of weights", d.Off, d.Bytes, total)
	}
	if d.Src < 0 || d.Src%4 != 0 || d.SrcBytes() > total-d.Src {
		return fmt.Errorf("source [%d, +%d) outside the %d bytes of weights", d.Src, d.SrcBytes(), total)
	}
	return nil
}

// CheckDerived validates an ABI record's derived ranges: in order, apart,
// inside the weights, sources outside every derived range, and the stored
// bytes exactly what the ranges leave.
func (a *ABI) CheckDerived() error {
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
			if s.Src < d.Off+d.Bytes && d.Off < s.Src+s.SrcBytes() {
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
	if a.DerivedAfterStored() {
		// The derived area: each range at the first 64-byte boundary after
		// the stored bytes or the range before; the code reads no gap.
		at := align64(a.StoredBytes)
		for i, d := range a.Derived {
			if d.Off != at {
				return fmt.Errorf("derived weights %d at %d, want %d (after the stored bytes and the ranges before)", i, d.Off, at)
			}
			at = align64(d.Off + d.Bytes)
		}
		last := a.Derived[len(a.Derived)-1]
		if a.WeightsBytes < last.Off+last.Bytes || a.WeightsBytes > at {
			return fmt.Errorf("%d bytes of live weights, the derived area ends at %d", a.WeightsBytes, last.Off+last.Bytes)
		}
		return nil
	}
	if a.StoredBytes != a.WeightsBytes-cut {
		return fmt.Errorf("%d stored bytes, the derived ranges leave %d of %d", a.StoredBytes, a.WeightsBytes-cut, a.WeightsBytes)
	}
	return nil
}

// DerivedAfterStored reports whether every derived range follows the
// stored bytes: the live weights are the stored ones, then the derived
// area (engines since runtime/cpu maps the weights). Before, the ranges
// were cut out of the middle of the live weights.
func (a *ABI) DerivedAfterStored() bool {
	for _, d := range a.Derived {
		if d.Off < a.StoredBytes {
			return false
		}
	}
	return len(a.Derived) > 0
}

func align64(n int64) int64 { return (n + 63) &^ 63 }

// InMemory is the weights part of an ABI record for storedBytes of stored
// weights and derived ranges held in memory (a compile result's), checked.
func InMemory(storedBytes int64, derived []Derived) (*ABI, error) {
	a := &ABI{StoredBytes: storedBytes, WeightsBytes: storedBytes, Derived: derived}
	for _, d := range derived {
		a.WeightsBytes += d.Bytes
	}
	if a.DerivedAfterStored() {
		last := derived[len(derived)-1]
		a.WeightsBytes = last.Off + last.Bytes
	}
	if err := a.CheckDerived(); err != nil {
		return nil, err
	}
	return a, nil
}
