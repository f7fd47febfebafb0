package ir

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The spec's definition of each small float type, written out apart from
// smallfloat.go: bias, widths, and which codes are NaN or infinity
// (float8.md, float4.md). decode is its value formula.
type floatSpec struct {
	d              DType
	exp, man, bias int
	isNaN          func(code uint8) bool
	isInf          func(code uint8) bool
	negZero        bool // -0 has a code of its own
	bits           int
}

var floatSpecs = []floatSpec{
	{Float8E4M3FN, 4, 3, 7, func(c uint8) bool { return c&0x7f == 0x7f }, never, true, 8},
	{Float8E4M3FNUZ, 4, 3, 8, func(c uint8) bool { return c == 0x80 }, never, false, 8},
	{Float8E5M2, 5, 2, 15, func(c uint8) bool { return c&0x7c == 0x7c && c&3 != 0 }, func(c uint8) bool { return c&0x7f == 0x7c }, true, 8},
	{Float8E5M2FNUZ, 5, 2, 16, func(c uint8) bool { return c == 0x80 }, never, false, 8},
	{Float4E2M1, 2, 1, 1, never, never, true, 4},
}

func never(uint8) bool { return false }

func (s floatSpec) decode(c uint8) float64 {
	sign := 1.0
	if c>>(s.bits-1) != 0 {
		sign = -1
	}
	e := int(c>>s.man) & (1<<s.exp - 1)
	m := float64(int(c) & (1<<s.man - 1))
	if s.isInf(c) {
		return math.Inf(int(sign))
	}
	if e == 0 {
		return sign * math.Exp2(float64(1-s.bias)) * m / math.Exp2(float64(s.man))
	}
	return sign * math.Exp2(float64(e-s.bias)) * (1 + m/math.Exp2(float64(s.man)))
}

// finite lists the non-negative finite values with their codes, ascending.
func (s floatSpec) finite() (vals []float64, codes []uint8) {
	for c := 0; c < 1<<(s.bits-1); c++ {
		if s.isNaN(uint8(c)) || s.isInf(uint8(c)) {
			continue
		}
		vals, codes = append(vals, s.decode(uint8(c))), append(codes, uint8(c))
	}
	return vals, codes
}

// round is the spec's rounding of a >= 0: the nearer of the two finite
// neighbours, ties to the even code, on a grid that continues one step
// past the largest value (overflow: true when a lands there or beyond).
func (s floatSpec) round(a float64) (code uint8, overflow bool) {
	vals, codes := s.finite()
	top := vals[len(vals)-1]
	vals = append(vals, top+top-vals[len(vals)-2]) // the next step of the top binade
	codes = append(codes, codes[len(codes)-1]+1)
	i := sort.SearchFloat64s(vals, a)
	switch {
	case i == len(vals):
		return 0, true
	case vals[i] == a || i == 0:
	case a-vals[i-1] < vals[i]-a, a-vals[i-1] == vals[i]-a && codes[i-1]%2 == 0:
		i--
	}
	return codes[i], i == len(vals)-1
}

func TestSmallFloatsDecodeAsSpecified(t *testing.T) {
	for _, s := range floatSpecs {
		for c := 0; c < 1<<s.bits; c++ {
			got := DecodeSmallFloat(s.d, uint8(c))
			if s.isNaN(uint8(c)) {
				assert.True(t, math.IsNaN(got), "%s code %#x is NaN", s.d, c)
				continue
			}
			want := s.decode(uint8(c))
			assert.Equal(t, want, got, "%s code %#x", s.d, c)
			assert.Equal(t, math.Signbit(want), math.Signbit(got), "%s code %#x: sign", s.d, c)
		}
	}
	// Known values from the spec's tables.
	assert.Equal(t, 448.0, DecodeSmallFloat(Float8E4M3FN, 0x7e))
	assert.Equal(t, math.Exp2(-9), DecodeSmallFloat(Float8E4M3FN, 0x01))
	assert.Equal(t, 240.0, DecodeSmallFloat(Float8E4M3FNUZ, 0x7f))
	assert.Equal(t, math.Exp2(-10), DecodeSmallFloat(Float8E4M3FNUZ, 0x01))
	assert.Equal(t, 57344.0, DecodeSmallFloat(Float8E5M2, 0x7b))
	assert.Equal(t, math.Inf(-1), DecodeSmallFloat(Float8E5M2, 0xfc))
	assert.Equal(t, math.Exp2(-17), DecodeSmallFloat(Float8E5M2FNUZ, 0x01))
	assert.Equal(t, []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}, func() (v []float64) {
		for c := range uint8(8) {
			v = append(v, DecodeSmallFloat(Float4E2M1, c))
		}
		return v
	}())
}

// Every code that is a number re-encodes to itself, with and without
// saturation (infinity too, without); every NaN encodes to a NaN.
func TestSmallFloatsRoundTrip(t *testing.T) {
	for _, s := range floatSpecs {
		for c := 0; c < 1<<s.bits; c++ {
			v := DecodeSmallFloat(s.d, uint8(c))
			if math.IsNaN(v) {
				assert.True(t, math.IsNaN(DecodeSmallFloat(s.d, EncodeSmallFloat(s.d, v, true))), "%s NaN %#x", s.d, c)
				continue
			}
			assert.Equal(t, uint8(c), EncodeSmallFloat(s.d, v, false), "%s code %#x (%v) without saturation", s.d, c, v)
			if !math.IsInf(v, 0) {
				assert.Equal(t, uint8(c), EncodeSmallFloat(s.d, v, true), "%s code %#x (%v)", s.d, c, v)
			}
		}
	}
}

// Midpoints round to the even code, points beside them to the nearer
// value, and random values as the spec's oracle rounds them.
func TestSmallFloatsRoundToNearestEven(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 4))
	for _, s := range floatSpecs {
		vals, _ := s.finite()
		var probes []float64
		for i := 1; i < len(vals); i++ {
			mid := (vals[i-1] + vals[i]) / 2
			probes = append(probes, mid, math.Nextafter(mid, 0), math.Nextafter(mid, math.Inf(1)))
		}
		top := vals[len(vals)-1]
		next := 2*top - vals[len(vals)-2]
		probes = append(probes, (top+next)/2, math.Nextafter((top+next)/2, 0), next, 2*next, 1e30, 1e-30, math.SmallestNonzeroFloat64)
		for range 2000 {
			probes = append(probes, math.Exp2(rng.Float64()*40-25))
		}
		for _, a := range probes {
			code, overflow := s.round(a)
			for _, neg := range []bool{false, true} {
				x, sign := a, uint8(0)
				if neg {
					x, sign = -a, uint8(1)<<(s.bits-1)
				}
				for _, sat := range []bool{true, false} {
					got := EncodeSmallFloat(s.d, x, sat)
					if !overflow {
						want := sign | code
						if code == 0 && !s.negZero {
							want = 0
						}
						assert.Equal(t, want, got, "%s %v saturate=%v", s.d, x, sat)
						continue
					}
					checkOverflow(t, s, x, sat, got)
				}
			}
		}
	}
}

// checkOverflow holds an out-of-range result to the spec's tables.
func checkOverflow(t *testing.T, s floatSpec, x float64, saturate bool, got uint8) {
	t.Helper()
	vals, _ := s.finite()
	top := vals[len(vals)-1]
	v := DecodeSmallFloat(s.d, got)
	switch {
	case saturate || s.d == Float4E2M1:
		assert.Equal(t, math.Copysign(top, x), v, "%s %v saturates", s.d, x)
	case s.d == Float8E5M2:
		assert.Equal(t, math.Inf(int(math.Copysign(1, x))), v, "%s %v overflows to infinity", s.d, x)
	default:
		assert.True(t, math.IsNaN(v), "%s %v overflows to NaN", s.d, x)
	}
}

// The specials of Cast's tables (Operators.md, Cast), and float4e2m1's
// (float4.md; NaN as ONNX's reference writes it).
func TestSmallFloatsSpecials(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		d        DType
		x        float64
		sat, raw uint8 // with and without saturation
	}{
		{Float8E4M3FN, inf, 0x7e, 0x7f}, {Float8E4M3FN, -inf, 0xfe, 0xff}, {Float8E4M3FN, nan, 0x7f, 0x7f},
		{Float8E4M3FN, -nan, 0xff, 0xff}, {Float8E4M3FN, math.Copysign(0, -1), 0x80, 0x80}, {Float8E4M3FN, 1e6, 0x7e, 0x7f},
		{Float8E4M3FNUZ, inf, 0x7f, 0x80}, {Float8E4M3FNUZ, -inf, 0xff, 0x80}, {Float8E4M3FNUZ, math.Copysign(0, -1), 0, 0},
		{Float8E4M3FNUZ, -1e-7, 0, 0}, {Float8E4M3FNUZ, -nan, 0x80, 0x80},
		{Float8E5M2, inf, 0x7b, 0x7c}, {Float8E5M2, -inf, 0xfb, 0xfc}, {Float8E5M2, -1e6, 0xfb, 0xfc},
		{Float8E5M2FNUZ, inf, 0x7f, 0x80}, {Float8E5M2FNUZ, -1e6, 0xff, 0x80},
		{Float4E2M1, inf, 0x7, 0x7}, {Float4E2M1, -inf, 0xf, 0xf}, {Float4E2M1, -8, 0xf, 0xf}, {Float4E2M1, nan, 0x8, 0x8},
		{Float4E2M1, math.Copysign(0, -1), 0x8, 0x8},
	} {
		assert.Equal(t, c.sat, EncodeSmallFloat(c.d, c.x, true), "%s %v saturate", c.d, c.x)
		assert.Equal(t, c.raw, EncodeSmallFloat(c.d, c.x, false), "%s %v no saturate", c.d, c.x)
	}
}

func TestFloat8E8M0(t *testing.T) {
	for c := 0; c < 255; c++ {
		v := DecodeSmallFloat(Float8E8M0, uint8(c))
		require.Equal(t, math.Exp2(float64(c-127)), v, "code %d", c)
		for _, mode := range []RoundMode{RoundUp, RoundDown, RoundNearest} {
			for _, sat := range []bool{true, false} {
				assert.Equal(t, uint8(c), EncodeFloat8E8M0(v, sat, mode), "2^%d mode %d", c-127, mode)
			}
		}
	}
	assert.True(t, math.IsNaN(DecodeSmallFloat(Float8E8M0, 0xff)))
	for _, c := range []struct {
		x                 float64
		up, down, nearest uint8
	}{
		{1.5, 128, 127, 128}, {1.4999, 128, 127, 127}, {1.0001, 128, 127, 127}, {1.9, 128, 127, 128},
		{0.124, 0x7c, 0x7b, 0x7c}, {1.1, 0x80, 0x7f, 0x7f}, {-3, 129, 128, 129},
		{math.Exp2(-130), 0, 0, 0}, {1.5 * math.Exp2(127), 254, 254, 254},
	} {
		assert.Equal(t, c.up, EncodeFloat8E8M0(c.x, true, RoundUp), "%v up", c.x)
		assert.Equal(t, c.down, EncodeFloat8E8M0(c.x, true, RoundDown), "%v down", c.x)
		assert.Equal(t, c.nearest, EncodeFloat8E8M0(c.x, true, RoundNearest), "%v nearest", c.x)
	}
	// The spec's table of specials: saturate+up and non-saturate+nearest.
	for _, c := range []struct {
		x       float64
		sat, no uint8
	}{
		{0, 0, 0xff}, {math.NaN(), 0xff, 0xff}, {math.Inf(1), 0xfe, 0xff},
		{1.5 * math.Exp2(127), 0xfe, 0xff}, {math.Exp2(-130), 0, 0xff},
	} {
		assert.Equal(t, c.sat, EncodeFloat8E8M0(c.x, true, RoundUp), "%v saturate+up", c.x)
		assert.Equal(t, c.no, EncodeFloat8E8M0(c.x, false, RoundNearest), "%v non-saturate+nearest", c.x)
	}
	assert.Equal(t, uint8(0xfe), EncodeSmallFloat(Float8E8M0, 1e300, true))
	_, err := ParseRoundMode("stochastic")
	assert.ErrorContains(t, err, `round_mode is "stochastic"`)
}

// Packed elements fill each byte from its low bits; int4 and int2 read
// back sign-extended; SetCode drops bits beyond the width.
func TestPackedCodes(t *testing.T) {
	for _, d := range []DType{Int4, Uint4, Int2, Uint2, Float4E2M1} {
		n := 7
		x := NewTensor(d, int64(n))
		require.Equal(t, RawLen(d, int64(n)), len(x.Raw))
		for i := range n {
			x.SetCode(i, uint8(i*5+3))
		}
		mask := uint8(1<<d.PackedBits() - 1)
		for i := range n {
			assert.Equal(t, uint8(i*5+3)&mask, x.Code(i), "%s element %d", d, i)
		}
	}
	x := FromRaw(Int4, []int64{4}, []byte{0x87, 0xf0})
	assert.Equal(t, []float64{7, -8, 0, -1}, []float64{x.Float64At(0), x.Float64At(1), x.Float64At(2), x.Float64At(3)})
	assert.Equal(t, int64(-8), x.Int64At(1))
	u := FromRaw(Uint2, []int64{4}, []byte{0xb4})
	assert.Equal(t, []int64{0, 1, 3, 2}, []int64{u.Int64At(0), u.Int64At(1), u.Int64At(2), u.Int64At(3)})
	i2 := FromRaw(Int2, []int64{4}, []byte{0xb4})
	assert.Equal(t, []int64{0, 1, -1, -2}, []int64{i2.Int64At(0), i2.Int64At(1), i2.Int64At(2), i2.Int64At(3)})
	for d, want := range map[DType][2]int64{Int4: {-8, 7}, Uint4: {0, 15}, Int2: {-2, 1}, Uint2: {0, 3}} {
		lo, hi := PackedIntRange(d)
		assert.Equal(t, want, [2]int64{lo, hi}, d.String())
	}
	f := FromRaw(Float8E5M2, []int64{2}, []byte{0x3c, 0xfc})
	assert.Equal(t, 1.0, f.Float64At(0))
	assert.Equal(t, math.Inf(-1), f.Float64At(1))
	assert.True(t, Float8E8M0.IsSmallFloat() && Float4E2M1.IsSmallFloat() && !Float16.IsSmallFloat())
	assert.True(t, Int2.IsPackedInt() && !Float4E2M1.IsPackedInt() && !Int8.IsPackedInt())
}
