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

	"github.com/kiln-ml/kiln/cpuabi"
)

// winoF4G is Winograd F(4×4, 3×3)'s G.
var winoF4G = [][]float64{{0.25, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}}

// derivedCase is stored weights of prefix bytes, a float32 [OC][C][3][3]
// source, suffix bytes, and one Winograd range after the source.
func derivedCase(r *rand.Rand, OC, C, MR int64) (stored []byte, src []float32, d cpuabi.Derived) {
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
	d = cpuabi.Derived{Kind: cpuabi.DerivedWinograd, Off: int64(len(stored)), Src: 64, OC: OC, C: C, MR: MR, G: winoF4G}
	d.Bytes = 4 * 36 * d.Panel()
	suffix := make([]byte, 100)
	r.Read(suffix)
	return append(stored, suffix...), src, d
}

// expandOracle lays out and derives live weights with the reference
// transform (winograd), one range after another.
func expandOracle(stored []byte, derived []cpuabi.Derived) (*Buffer, error) {
	a, err := cpuabi.InMemory(int64(len(stored)), derived)
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
// (cpuabi.DerivedWinograd), lo a multiple of MR, in float64, rounded once.
func winograd(live []byte, d *cpuabi.Derived, lo, hi int64) {
	src := floats(live[d.Src : d.Src+d.SrcBytes()])
	u := floats(live[d.Off : d.Off+d.Bytes])
	A, panel := d.Points(), d.Panel()
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
		buf, err := expandOracle(stored, []cpuabi.Derived{d})
		require.NoError(t, err)
		live := buf.Bytes
		assert.Equal(t, stored[:d.Off], live[:d.Off])
		assert.Equal(t, stored[d.Off:], live[d.Off+d.Bytes:])
		u := floats(live[d.Off : d.Off+d.Bytes])
		panel := d.Panel()
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
	a := &cpuabi.ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)) + 2*d1.Bytes, Derived: []cpuabi.Derived{d1, d2}}
	require.NoError(t, a.CheckDerived())
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
	buf, err := expandOracle(stored, []cpuabi.Derived{d1, d2})
	require.NoError(t, err)
	defer buf.Free()
	live := buf.Bytes
	require.Len(t, live, int(d2.Off+d2.Bytes))
	assert.Equal(t, stored, live[:len(stored)], "the stored bytes are the live weights' prefix")
	assert.Equal(t, live[d1.Off:d1.Off+d1.Bytes], live[d2.Off:d2.Off+d2.Bytes], "both ranges transform the same source")
	assert.NotEqual(t, make([]byte, d1.Bytes), live[d1.Off:d1.Off+d1.Bytes])

	a := &cpuabi.ABI{StoredBytes: int64(len(stored)), WeightsBytes: d2.Off + d2.Bytes, Derived: []cpuabi.Derived{d1, d2}}
	require.NoError(t, a.CheckDerived())
	moved := *a
	moved.Derived = []cpuabi.Derived{d1, d2}
	moved.Derived[1].Off += 64
	moved.WeightsBytes += 64
	assert.ErrorContains(t, moved.CheckDerived(), "derived weights 1 at")
	short := *a
	short.WeightsBytes -= 4
	assert.ErrorContains(t, short.CheckDerived(), "outside")
	long := *a
	long.WeightsBytes = align64(a.WeightsBytes) + 64
	assert.ErrorContains(t, long.CheckDerived(), "the derived area ends at")
}

// BenchmarkReferenceTransform: the reference transform's cost on a
// 256×256 3×3 layer's F(4×4, 3×3) kernels, on one core (the engine's
// kiln_derive is benchmarked beside it in derive_native_test.go).
func BenchmarkReferenceTransform(b *testing.B) {
	r := rand.New(rand.NewSource(3))
	stored, _, d := derivedCase(r, 256, 256, 16)
	buf, err := expandOracle(stored, []cpuabi.Derived{d})
	require.NoError(b, err)
	defer buf.Free()
	for b.Loop() {
		winograd(buf.Bytes, &d, 0, d.OC)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.OC*d.C), "ns/kernel")
}

func align64(n int64) int64 { return (n + 63) &^ 63 }

// floats views 4-byte aligned little-endian bytes as float32s.
func floats(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
