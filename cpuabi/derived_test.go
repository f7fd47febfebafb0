package cpuabi

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// winoF4G is Winograd F(4×4, 3×3)'s G.
var winoF4G = [][]float64{{0.25, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}}

// derivedCase is random stored weights: a 64-byte prefix, a float32
// [OC][C][3][3] source, 100 bytes more; and one Winograd range cut out
// before the last 100.
func derivedCase(r *rand.Rand, OC, C, MR int64) (stored []byte, d Derived) {
	stored = make([]byte, align64(64+4*OC*C*9)+100)
	r.Read(stored)
	d = Derived{Kind: DerivedWinograd, Off: int64(len(stored)) - 100, Src: 64, OC: OC, C: C, MR: MR, G: winoF4G}
	d.Bytes = 4 * 36 * d.Panel()
	return stored, d
}

// TestDerivedChecks: a record whose derived ranges would send the loader
// (or the code) outside the weights, or read what is not yet computed, is
// refused, naming the problem.
func TestDerivedChecks(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	stored, d := derivedCase(r, 20, 4, 8)
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
			err := a.CheckDerived()
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
	assert.ErrorContains(t, big.CheckDerived(), "bytes of derived weights from 64 stored")
	// Panels taller than the layer (padding blown up).
	tall := Derived{Kind: DerivedWinograd, Off: 64, Src: 0, OC: 1, C: 1, MR: 64, G: g8, Bytes: 4 * 64 * 64}
	assert.ErrorContains(t, (&ABI{StoredBytes: 64, WeightsBytes: 64 + tall.Bytes, Derived: []Derived{tall}}).CheckDerived(), "out of range")
	// Two ranges that overlap.
	a := &ABI{StoredBytes: int64(len(stored)), WeightsBytes: int64(len(stored)) + 2*d.Bytes, Derived: []Derived{d, d}}
	a.Derived[1].Off += 64
	assert.ErrorContains(t, a.CheckDerived(), "overlaps")
}

// TestInMemory: the record for a compile result's weights puts the live
// weights' end after its last range, and refuses ranges that overlap.
func TestInMemory(t *testing.T) {
	stored, d := derivedCase(rand.New(rand.NewSource(3)), 18, 17, 6)
	stored = stored[:d.Off] // the derived area follows the stored bytes
	d2 := d
	d2.Off = align64(d.Off + d.Bytes)
	a, err := InMemory(int64(len(stored)), []Derived{d, d2})
	require.NoError(t, err)
	assert.Equal(t, int64(len(stored)), a.StoredBytes)
	assert.Equal(t, d2.Off+d2.Bytes, a.WeightsBytes)
	assert.True(t, a.DerivedAfterStored())
	d2.Off += 64
	_, err = InMemory(int64(len(stored)), []Derived{d, d2})
	assert.ErrorContains(t, err, "derived weights 1 at")
}
