package cpu

import (
	"encoding/binary"
	"math"
	"math/rand"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// winoF4G is Winograd F(4×4, 3×3)'s G.
var winoF4G = [][]float64{{0.25, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}}

// derivedCase is stored weights of prefix bytes, a float32 [OC][C][3][3]
// source, suffix bytes, and one Winograd range after the source.
func derivedCase(r *rand.Rand, OC, C, MR int64) (stored []byte, src []float32, d Derived) {
	prefix := make([]byte, 64)
	r.Read(prefix)
	src = make([]float32, OC*C*9)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	stored = append(stored, prefix...)
	for _, v := range src {
		stored = binary.LittleEndian.AppendUint32(stored, math.Float32bits(v))
	}
	for len(stored)%64 != 0 {
		stored = append(stored, byte(r.Intn(256)))
	}
	d = Derived{Kind: DerivedWinograd, Off: int64(len(stored)), Src: 64, OC: OC, C: C, MR: MR, G: winoF4G}
	d.Bytes = 4 * 36 * d.panel()
	suffix := make([]byte, 100)
	r.Read(suffix)
	return append(stored, suffix...), src, d
}

// expandOracle lays out and derives live weights with the reference
// transform (winograd), one range after another.
func expandOracle(stored []byte, derived []Derived) (*Buffer, error) {
	a, err := inMemoryABI(stored, derived)
	if err != nil {
		return nil, err
	}
	l, err := NewLive(a)
	if err != nil {
		return nil, err
	}
	l.Put(0, stored)
	for i := range a.Derived {
		winograd(l.Buf.Bytes, &a.Derived[i], 0, a.Derived[i].OC)
	}
	return l.Buf, nil
}

// winograd is the reference transform, what the engine's kiln_derive
// computes (codegen/cpu/derive.go): output channels [lo, hi) of d
// (DerivedWinograd), lo a multiple of MR, in float64, rounded once.
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

// TestReferenceTransform: the reference's live weights hold the stored
// bytes around the derived range, and the range holds G g Gᵀ of each
// kernel in its panel, summed here the long way.
func TestReferenceTransform(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, dims := range [][3]int64{{37, 5, 16}, {8, 3, 8}, {64, 33, 16}} {
		OC, C, MR := dims[0], dims[1], dims[2]
		stored, src, d := derivedCase(r, OC, C, MR)
		buf, err := expandOracle(stored, []Derived{d})
		require.NoError(t, err)
		live := buf.Bytes
		assert.Equal(t, stored[:d.Off], live[:d.Off])
		assert.Equal(t, stored[d.Off:], live[d.Off+d.Bytes:])
		u := floats(live[d.Off : d.Off+d.Bytes])
		panel := d.panel()
		worst := 0.0
		for oc := int64(0); oc < OC; oc++ {
			for ic := int64(0); ic < C; ic++ {
				for a := 0; a < 6; a++ {
					for b := 0; b < 6; b++ {
						var want float64
						for i := 0; i < 3; i++ {
							for j := 0; j < 3; j++ {
								want += winoF4G[a][i] * float64(src[(oc*C+ic)*9+int64(i*3+j)]) * winoF4G[b][j]
							}
						}
						got := u[int64(a*6+b)*panel+(oc/MR*C+ic)*MR+oc%MR]
						worst = max(worst, math.Abs(float64(got)-want)/(math.Abs(want)+1e-3))
					}
				}
			}
		}
		assert.Less(t, worst, 1e-6, "OC %d C %d MR %d", OC, C, MR)
		buf.Free()
	}
}

// TestLivePut: stored bytes put in pieces of any size, in any order, from
// several goroutines, land where the derived ranges leave room for them.
func TestLivePut(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	stored, _, d1 := derivedCase(r, 20, 4, 8)
	d2 := d1
	d2.Off += d1.Bytes + 128 // a second range, 128 stored bytes after the first
	stored = append(stored, make([]byte, 256)...)
	r.Read(stored)
	a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)) + 2*d1.Bytes, Derived: []Derived{d1, d2}}
	require.NoError(t, a.checkDerived())
	want := make([]byte, a.WeightsBytes)
	copy(want, stored[:d1.Off])
	copy(want[d1.Off+d1.Bytes:], stored[d1.Off:d1.Off+128])
	copy(want[d2.Off+d2.Bytes:], stored[d1.Off+128:])
	for _, piece := range []int{1, 7, 64, 100, len(stored)} {
		l, err := NewLive(a)
		if err != nil {
			t.Fatal(err)
		}
		var offs []int
		for off := 0; off < len(stored); off += piece {
			offs = append(offs, off)
		}
		r.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := w; i < len(offs); i += 3 {
					l.Put(int64(offs[i]), stored[offs[i]:min(offs[i]+piece, len(stored))])
				}
			})
		}
		wg.Wait()
		assert.Equal(t, want, l.Buf.Bytes, "pieces of %d bytes", piece)
	}
}

// TestDerivedChecks: a record whose derived ranges would send the loader
// (or the code) outside the weights, or read what is not yet computed, is
// refused, naming the problem.
func TestDerivedChecks(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	stored, _, d := derivedCase(r, 20, 4, 8)
	for name, c := range map[string]struct {
		edit func(d *Derived, a *ABI)
		want string
	}{
		"unknown kind":   {func(d *Derived, _ *ABI) { d.Kind = "fft" }, `unknown kind "fft"`},
		"bytes":          {func(d *Derived, _ *ABI) { d.Bytes -= 64 }, "the transform writes"},
		"past the end":   {func(d *Derived, a *ABI) { d.Off = a.WeightsBytes - 64 }, "outside"},
		"misaligned":     {func(d *Derived, _ *ABI) { d.Off += 4 }, "outside"},
		"source outside": {func(d *Derived, _ *ABI) { d.Src = 1 << 40 }, "source"},
		"reads itself":   {func(d *Derived, _ *ABI) { d.Src = d.Off }, "reads derived weights 0"},
		"huge dims":      {func(d *Derived, _ *ABI) { d.OC = 1 << 40 }, "out of range"},
		"NaN transform":  {func(d *Derived, _ *ABI) { d.G = [][]float64{{0, 0, 0}, {0, 0, 0}, {0, 0, math.NaN()}} }, "transform value NaN"},
		"short row":      {func(d *Derived, _ *ABI) { d.G = [][]float64{{0, 0}, {0, 0, 0}, {0, 0, 0}} }, "row of 2 values"},
		"stored bytes":   {func(_ *Derived, a *ABI) { a.StoredBytes-- }, "stored bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			dd := d
			dd.G = append([][]float64{}, d.G...)
			a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)) + d.Bytes}
			c.edit(&dd, a)
			a.Derived = []Derived{dd}
			err := a.checkDerived()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// A record asking for far more derived memory than the engine stores.
	// (100 ranges of an 8×8 transform from one stored 3×3 kernel).
	g8 := make([][]float64, 8)
	for i := range g8 {
		g8[i] = []float64{1, 0, 1}
	}
	big := &ABI{StoredBytes: 64, WeightsBytes: 64}
	for i := range int64(100) {
		r := Derived{Kind: DerivedWinograd, Off: 64 + 256*i, Src: 0, OC: 1, C: 1, MR: 1, G: g8, Bytes: 4 * 64}
		big.Derived = append(big.Derived, r)
		big.WeightsBytes += r.Bytes
	}
	assert.ErrorContains(t, big.checkDerived(), "bytes of derived weights from 64 stored")
	// Panels taller than the layer (padding blown up).
	tall := Derived{Kind: DerivedWinograd, Off: 64, Src: 0, OC: 1, C: 1, MR: 64, G: g8, Bytes: 4 * 64 * 64}
	assert.ErrorContains(t, (&ABI{StoredBytes: 64, WeightsBytes: 64 + tall.Bytes, Derived: []Derived{tall}}).checkDerived(), "out of range")
	// Two ranges that overlap.
	a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)) + 2*d.Bytes, Derived: []Derived{d, d}}
	a.Derived[1].Off += 64
	assert.ErrorContains(t, a.checkDerived(), "overlaps")
}

// TestDerivedArea: the layout engines have now, the stored bytes then the
// derived area, each range at the first 64-byte boundary after the one
// before (a gap after a range that is not a whole number of lines); a
// range elsewhere in the area, or live weights shorter or longer than the
// area, are refused.
func TestDerivedArea(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	stored, _, d1 := derivedCase(r, 18, 17, 6)
	stored = stored[:d1.Off] // the area starts where the stored bytes end
	require.NotZero(t, d1.Bytes%64, "the case needs a gap after its first range")
	d2 := d1
	d2.Off = align64(d1.Off + d1.Bytes)
	buf, err := expandOracle(stored, []Derived{d1, d2})
	require.NoError(t, err)
	defer buf.Free()
	live := buf.Bytes
	require.Len(t, live, int(d2.Off+d2.Bytes))
	assert.Equal(t, stored, live[:len(stored)], "the stored bytes are the live weights' prefix")
	assert.Equal(t, live[d1.Off:d1.Off+d1.Bytes], live[d2.Off:d2.Off+d2.Bytes], "both ranges transform the same source")
	assert.NotEqual(t, make([]byte, d1.Bytes), live[d1.Off:d1.Off+d1.Bytes])

	a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: d2.Off + d2.Bytes, Derived: []Derived{d1, d2}}
	require.NoError(t, a.checkDerived())
	moved := *a
	moved.Derived = []Derived{d1, d2}
	moved.Derived[1].Off += 64
	moved.WeightsBytes += 64
	assert.ErrorContains(t, moved.checkDerived(), "derived weights 1 at")
	short := *a
	short.WeightsBytes -= 4
	assert.ErrorContains(t, short.checkDerived(), "outside")
	long := *a
	long.WeightsBytes = align64(a.WeightsBytes) + 64
	assert.ErrorContains(t, long.checkDerived(), "the derived area ends at")
}

// BenchmarkReferenceTransform: the reference transform's cost on a
// 256×256 3×3 layer's F(4×4, 3×3) kernels, on one core (the engine's
// kiln_derive is benchmarked beside it in derive_native_test.go).
func BenchmarkReferenceTransform(b *testing.B) {
	r := rand.New(rand.NewSource(3))
	stored, _, d := derivedCase(r, 256, 256, 16)
	buf, err := expandOracle(stored, []Derived{d})
	require.NoError(b, err)
	defer buf.Free()
	for b.Loop() {
		winograd(buf.Bytes, &d, 0, d.OC)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.OC*d.C), "ns/kernel")
}

// floats views 4-byte aligned little-endian bytes as float32s.
func floats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
