package ir

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A 16-bit float format with an 8- or 5-bit exponent, decoded from its
// definition with float64 arithmetic: the oracle the conversions in
// tensor.go are checked against.
type halfFormat struct {
	name     string
	expBits  uint
	mantBits uint
	toF32    func(uint16) float32
	fromF32  func(float32) uint16
}

var (
	binary16 = halfFormat{"float16", 5, 10, HalfToFloat32, Float32ToHalf}
	bfloat16 = halfFormat{"bfloat16", 8, 7, BFloat16ToFloat32, Float32ToBFloat16}
)

func (f halfFormat) bias() int        { return 1<<(f.expBits-1) - 1 }
func (f halfFormat) expMask() uint16  { return 1<<f.expBits - 1 }
func (f halfFormat) mantMask() uint16 { return 1<<f.mantBits - 1 }
func (f halfFormat) inf() uint16      { return f.expMask() << f.mantBits }

func (f halfFormat) isNaN(h uint16) bool {
	return (h>>f.mantBits)&f.expMask() == f.expMask() && h&f.mantMask() != 0
}

// decode returns the value of bits h, with the all-ones exponent read as if
// the exponent range went on: inf() decodes to the power of two just past the
// largest finite value, which is where round-to-nearest-even overflows.
func (f halfFormat) decode(h uint16) float64 {
	exp := int(h>>f.mantBits) & int(f.expMask())
	mant := float64(h & f.mantMask())
	var v float64
	if exp == 0 {
		v = math.Ldexp(mant, 1-f.bias()-int(f.mantBits))
	} else {
		v = math.Ldexp(float64(uint32(1)<<f.mantBits)+mant, exp-f.bias()-int(f.mantBits))
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// magnitudes lists decode(h) for h = 0 .. inf(), ascending.
func (f halfFormat) magnitudes() []float64 {
	m := make([]float64, int(f.inf())+1)
	for h := range m {
		m[h] = f.decode(uint16(h))
	}
	return m
}

// round is the oracle for float32 → 16 bits: the nearest value of the format,
// ties to the even bit pattern, overflowing to infinity.
func (f halfFormat) round(mags []float64, x float32) uint16 {
	sign := uint16(math.Float32bits(x)>>16) & 0x8000
	a := math.Abs(float64(x))
	i := sort.SearchFloat64s(mags, a) // first mags[i] >= a
	var h uint16
	switch {
	case i == len(mags):
		h = f.inf()
	case mags[i] == a || i == 0:
		h = uint16(i)
	default:
		lo, hi := a-mags[i-1], mags[i]-a
		switch {
		case lo < hi:
			h = uint16(i - 1)
		case hi < lo:
			h = uint16(i)
		case i%2 == 0:
			h = uint16(i)
		default:
			h = uint16(i - 1)
		}
	}
	return sign | h
}

func TestHalfFormatsExhaustive(t *testing.T) {
	for _, f := range []halfFormat{binary16, bfloat16} {
		t.Run(f.name, func(t *testing.T) {
			for i := 0; i < 1<<16; i++ {
				h := uint16(i)
				x := f.toF32(h)
				if f.isNaN(h) {
					require.Truef(t, x != x, "%#04x decodes to %v, want NaN", h, x)
					back := f.fromF32(x)
					require.Truef(t, f.isNaN(back), "%#04x → NaN → %#04x, not NaN", h, back)
					require.Equalf(t, h&0x8000, back&0x8000, "%#04x: NaN sign lost", h)
					continue
				}
				want := f.decode(h)
				if h&0x7fff == f.inf() {
					want = math.Copysign(math.Inf(1), want)
				}
				require.Equalf(t, want, float64(x), "%#04x decodes wrong", h)
				require.Equalf(t, math.Signbit(want), math.Signbit(float64(x)), "%#04x sign", h)
				require.Equalf(t, h, f.fromF32(x), "%#04x does not round-trip through %v", h, x)
			}
		})
	}
}

// Every midpoint between two neighbouring values is exactly a float32; it
// must go to the even neighbour, and a float32 ulp either side of it to the
// nearer one.
func TestHalfFormatsTiesToEven(t *testing.T) {
	for _, f := range []halfFormat{binary16, bfloat16} {
		t.Run(f.name, func(t *testing.T) {
			mags := f.magnitudes()
			for h := uint16(0); h < f.inf(); h++ {
				mid64 := (mags[h] + mags[h+1]) / 2
				mid := float32(mid64)
				require.Equalf(t, mid64, float64(mid), "midpoint after %#04x is not a float32", h)
				even := h
				if h%2 == 1 {
					even = h + 1
				}
				below := math.Nextafter32(mid, 0)
				above := math.Nextafter32(mid, float32(math.Inf(1)))
				for _, s := range []uint16{0, 0x8000} {
					sg := float32(1)
					if s != 0 {
						sg = -1
					}
					require.Equalf(t, s|even, f.fromF32(sg*mid), "tie %v", sg*mid)
					require.Equalf(t, s|h, f.fromF32(sg*below), "just below tie %v", sg*below)
					require.Equalf(t, s|(h+1), f.fromF32(sg*above), "just above tie %v", sg*above)
				}
			}
		})
	}
}

// randomFloat32s draws bit patterns from several ranges: anything at all,
// each format's subnormal and underflow range, and around its overflow
// threshold.
func randomFloat32s(rng *rand.Rand, n int) []float32 {
	out := []float32{
		0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		65504, 65519.996, 65520, 65536, 1e-8, 2.9802322e-08, 5.9604645e-08,
	}
	withExp := func(lo, hi int) float32 {
		e := uint32(lo + rng.IntN(hi-lo+1))
		return math.Float32frombits(rng.Uint32()&0x807fffff | e<<23)
	}
	for len(out) < n {
		var x float32
		switch rng.IntN(6) {
		case 0, 1:
			x = math.Float32frombits(rng.Uint32())
		case 2: // float16 subnormals and below: 2^-27 .. 2^-14
			x = withExp(127-27, 127-14)
		case 3: // float16 overflow: 2^14 .. 2^17
			x = withExp(127+14, 127+17)
		case 4: // float32 subnormals, bfloat16's subnormal range
			x = math.Float32frombits(rng.Uint32() & 0x807fffff)
		case 5: // bfloat16 overflow
			x = withExp(250, 254)
		}
		out = append(out, x)
	}
	return out
}

func TestFloat32ToHalfMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := randomFloat32s(rng, 400000)
	for _, f := range []halfFormat{binary16, bfloat16} {
		t.Run(f.name, func(t *testing.T) {
			mags := f.magnitudes()
			bad := 0
			for _, x := range xs {
				got := f.fromF32(x)
				if x != x {
					if !assert.Truef(t, f.isNaN(got), "NaN %#08x → %#04x", math.Float32bits(x), got) {
						bad++
					}
					continue
				}
				if want := f.round(mags, x); got != want {
					t.Errorf("%v (%#08x): got %#04x, want %#04x", x, math.Float32bits(x), got, want)
					bad++
				}
				if bad > 20 {
					t.FailNow()
				}
			}
		})
	}
}

// Spot values that do not depend on the oracle above.
func TestHalfKnownValues(t *testing.T) {
	for _, c := range []struct {
		x    float32
		half uint16
		bf16 uint16
	}{
		{1, 0x3c00, 0x3f80},
		{-2, 0xc000, 0xc000},
		{0.5, 0x3800, 0x3f00},
		{65504, 0x7bff, 0x4780}, // 65504 is 0x477fe000: bfloat16 rounds up to 65536
		{1e6, 0x7c00, 0x4974},
		{5.9604645e-08, 0x0001, 0x3380},
		{float32(math.Inf(-1)), 0xfc00, 0xff80},
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000},
	} {
		assert.Equalf(t, c.half, Float32ToHalf(c.x), "Float32ToHalf(%v)", c.x)
		assert.Equalf(t, c.bf16, Float32ToBFloat16(c.x), "Float32ToBFloat16(%v)", c.x)
	}
	assert.Equal(t, float32(1.0009765625), HalfToFloat32(0x3c01))
	assert.Equal(t, float32(6.097555e-05), HalfToFloat32(0x03ff)) // largest subnormal
	assert.Equal(t, float32(1.0078125), BFloat16ToFloat32(0x3f81))
}
