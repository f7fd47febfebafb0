package opcase

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// Cases of the 8-, 4- and 2-bit element types (ir/smallfloat.go) through
// Cast, CastLike, QuantizeLinear and DequantizeLinear, and through the ops
// that move data (movingCases): every code of each
// type decoded, and values rounded into each type at its edges: every
// value it holds, the ties between neighbours (to even) and one ulp either
// side of them, the overflow threshold with and without saturate, ±0,
// ±Inf, NaN of both signs, subnormals, and float8e8m0's round modes.

func init() { families = append(families, smallTypeCases()) }

var (
	smallFloats = []ir.DType{ir.Float8E4M3FN, ir.Float8E4M3FNUZ, ir.Float8E5M2, ir.Float8E5M2FNUZ, ir.Float8E8M0, ir.Float4E2M1}
	packedInts  = []ir.DType{ir.Int4, ir.Uint4, ir.Int2, ir.Uint2}
)

func smallTypeCases() map[string][]string {
	rows := map[string][]string{}
	add := func(op, format string, args ...any) { rows[op] = append(rows[op], fmt.Sprintf(format, args...)) }
	for _, d := range append(slices.Clone(smallFloats), packedInts...) {
		codes := allCodes(d)
		// Decoding: every code into float, float16, int32 (truncated) and bool.
		for _, to := range []ir.DType{ir.Float32, ir.Float16, ir.Int32, ir.Bool, ir.Float64} {
			add("Cast", "Cast-25(to=%d) %s", to, codes)
		}
		add("CastLike", "CastLike-25 %s, float[1]=[0]", codes)
		add("DequantizeLinear", "DequantizeLinear-25 %s, float=[0.5], %s=[%s]", codes, d, someValue(d))
		add("DequantizeLinear", "DequantizeLinear-25(axis=0) %s[3,7], float[3]~pos, %s[3]", d, d)
		add("DequantizeLinear", "DequantizeLinear-25 %s, float16=[0.25]", codes)
		// Between small types, and to the type itself (a copy).
		add("Cast", "Cast-25(to=%d) %s", d, codes)
		add("Cast", "Cast-25(to=%d) %s", ir.Float8E4M3FN, codes)
		add("Cast", "Cast-25(to=%d) %s", ir.Int4, codes)
	}
	for _, d := range smallFloats {
		edges := floatList(ir.Float32, roundingEdges(d, ir.Float32))
		for _, sat := range []int{1, 0} {
			if d == ir.Float8E8M0 {
				for _, mode := range []string{"up", "down", "nearest"} {
					add("Cast", `Cast-25(to=%d, saturate=%d, round_mode="%s") %s`, d, sat, mode, edges)
					add("Cast", `Cast-25(to=%d, saturate=%d, round_mode="%s") %s`, d, sat, mode, floatList(ir.Float64, roundingEdges(d, ir.Float64)))
				}
			} else {
				add("Cast", "Cast-25(to=%d, saturate=%d) %s", d, sat, edges)
				add("Cast", "Cast-25(to=%d, saturate=%d) %s", d, sat, floatList(ir.Float64, roundingEdges(d, ir.Float64)))
			}
			add("CastLike", "CastLike-25(saturate=%d) %s, %s[1]=[0]", sat, edges, d)
			add("QuantizeLinear", "QuantizeLinear-25(saturate=%d) %s, float=[1], %s=[0]", sat, edges, d)
		}
		add("Cast", "Cast-25(to=%d) float16[3,17]", d)
		add("Cast", "Cast-25(to=%d) int32[12]~[0 1 -1 3 -7 17 100 -1000 65535 -65536 2147483647 -2147483648]", d)
		add("Cast", "Cast-25(to=%d) bool[2,3]", d)
		add("QuantizeLinear", "QuantizeLinear-25 float[3,17], float=[0.25], %s=[%s]", d, someValue(d))
		add("QuantizeLinear", "QuantizeLinear-25(axis=1) float[2,3,5], float[3]~pos, %s[3]", d)
		add("QuantizeLinear", "QuantizeLinear-25(axis=1, block_size=2) float[2,6,3], float[2,3,3]~pos, %s[2,3,3]", d)
		add("QuantizeLinear", "QuantizeLinear-25(output_dtype=%d) float16[4,9], float16=[0.125]", d)
	}
	ints := floatList(ir.Float32, []float64{0, 0.4, -0.4, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3, -3, 7, -7, 7.5, -8.5, 9.7, -9.7,
		15, 16, 17, -17, 100, -100, 1e10, -1e10, math.Inf(1), math.Inf(-1), math.NaN()})
	for _, d := range packedInts {
		add("Cast", "Cast-25(to=%d) %s", d, ints)
		add("Cast", "Cast-25(to=%d) int32[9]~[0 1 -1 7 -8 15 16 -17 2147483647]", d)
		add("Cast", "Cast-25(to=%d) float[3,7]", d)
		add("CastLike", "CastLike-25 %s, %s[1]=[0]", ints, d)
		add("QuantizeLinear", "QuantizeLinear-25 %s, float=[0.5], %s=[%s]", ints, d, someValue(d))
		add("QuantizeLinear", "QuantizeLinear-25(axis=1) float[2,3,5], float[3]~pos, %s[3]", d)
		add("QuantizeLinear", "QuantizeLinear-25(axis=1, block_size=2) float[3,6,3], float[3,3,3]~pos, %s[3,3,3]", d)
		add("QuantizeLinear", "QuantizeLinear-25(output_dtype=%d) float[3,7], float~[0.3]", d)
	}
	movingCases(add)
	return rows
}

// movingCases move every code of each small type (NaN codes, -0 and
// padding bits included) through the ops that only move data
// (ir/ops/movement.go), at shapes whose element counts are odd, so that a
// packed type's rows, slices and concatenated parts start and end inside
// a byte.
func movingCases(add func(op, format string, args ...any)) {
	for _, d := range append(slices.Clone(smallFloats), packedInts...) {
		in := func(dims ...int64) string { return codesIn(d, dims) }
		add("Identity", "Identity-25 %s", in(3, 5))
		add("Reshape", "Reshape-25 %s, int64[2]=[5 3]", in(3, 5))
		add("Flatten", "Flatten-25(axis=2) %s", in(3, 1, 5))
		add("Squeeze", "Squeeze-25 %s, int64[1]=[1]", in(3, 1, 5))
		add("Unsqueeze", "Unsqueeze-25 %s, int64[2]=[0 3]", in(3, 5))
		add("Transpose", "Transpose-25(perm=[1 0]) %s", in(3, 5))
		add("Transpose", "Transpose-25(perm=[2 0 1]) %s", in(3, 5, 7))
		add("Concat", "Concat-25(axis=1) %s, %s, %s", in(3, 5), in(3, 1), in(3, 3))
		add("Concat", "Concat-25(axis=0) %s, %s", in(3, 5), in(1, 5))
		add("Slice", "Slice-25 %s, int64[2]=[1 -1], int64[2]=[6 0], int64[2]=[0 1], int64[2]=[2 -2]", in(7, 5))
		add("Gather", "Gather-25(axis=0) %s, int64[4]~[0 -1 2 2]", in(5, 3))
		add("Gather", "Gather-25(axis=1) %s, int64[2,2]~[2 0 -1 1]", in(3, 5))
		add("Split", "Split-25(axis=1) %s, int64[2]=[3 4] -> 2", in(3, 7))
		add("Split", "Split-25(axis=0, num_outputs=2) %s -> 2", in(3, 5))
		add("Expand", "Expand-25 %s, int64[3]=[2 3 5]", in(3, 1))
		add("Tile", "Tile-25 %s, int64[2]=[2 3]", in(3, 5))
		add("Pad", "Pad-25 %s, int64[4]=[1 0 2 1], %s=[%s]", in(3, 5), d, someValue(d))
		add("Pad", "Pad-25 %s, int64[4]=[0 1 1 2], %s", in(3, 5), codesIn(d, nil))
		add("Pad", "Pad-25 %s, int64[4]=[1 2 -1 0]", in(3, 5))
		add("Pad", `Pad-25(mode="reflect") %s, int64[4]=[1 2 2 1]`, in(3, 5))
		add("Pad", `Pad-25(mode="edge") %s, int64[4]=[1 2 0 3]`, in(3, 5))
		add("Pad", `Pad-25(mode="wrap") %s, int64[4]=[2 1 1 2]`, in(3, 5))
		add("DepthToSpace", `DepthToSpace-25(blocksize=2, mode="CRD") %s`, in(1, 8, 3, 1))
		add("DepthToSpace", "DepthToSpace-25(blocksize=2) %s", in(1, 4, 1, 3))
		add("SpaceToDepth", "SpaceToDepth-25(blocksize=2) %s", in(1, 3, 2, 6))
	}
}

// codesIn is a graph input of type d and dims holding the codes with
// every bit or the sign bit alone set or clear (the NaNs, -0, the types'
// largest and smallest codes) and then a cycle through every code.
func codesIn(d ir.DType, dims []int64) string {
	n := int64(256)
	if b := d.PackedBits(); b > 0 {
		n = 1 << b
	}
	edges := []int64{n - 1, n/2 - 1, n / 2, 0}
	vals := make([]string, ir.Product(dims))
	for i := range vals {
		code := (int64(i)*37 + 11) % n // 37 is odd: a cycle through every code
		if i < len(edges) {
			code = edges[i]
		}
		vals[i] = fmt.Sprintf("0x%x", code)
	}
	shape := make([]string, len(dims))
	for i, x := range dims {
		shape[i] = strconv.FormatInt(x, 10)
	}
	if dims == nil {
		return fmt.Sprintf("%s~[%s]", d, strings.Join(vals, " ")) // a scalar
	}
	return fmt.Sprintf("%s[%s]~[%s]", d, strings.Join(shape, ","), strings.Join(vals, " "))
}

// allCodes is a graph input of type d holding each of its codes once.
func allCodes(d ir.DType) string {
	n := 256
	if b := d.PackedBits(); b > 0 {
		n = 1 << b
	}
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("0x%x", i)
	}
	return fmt.Sprintf("%s[%d]~[%s]", d, n, strings.Join(vals, " "))
}

// someValue is a value of type d other than 0, as a case writes it.
func someValue(d ir.DType) string {
	if d.IsPackedInt() {
		if lo, _ := ir.PackedIntRange(d); lo < 0 {
			return "-1"
		}
		return "1"
	}
	return "1.5"
}

// floatList is a graph input of type src holding vals.
func floatList(src ir.DType, vals []float64) string {
	bits := 64
	if src == ir.Float32 {
		bits = 32
	}
	s := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case math.IsNaN(v) && src == ir.Float32:
			s[i] = fmt.Sprintf("%#x", math.Float32bits(float32(v))) // the bits: a NaN's sign
		case math.IsNaN(v):
			s[i] = fmt.Sprintf("%#x", math.Float64bits(v))
		default:
			s[i] = strconv.FormatFloat(v, 'g', -1, bits)
		}
	}
	return fmt.Sprintf("%s[%d]~[%s]", src, len(vals), strings.Join(s, " "))
}

// roundingEdges are the values of src (Float32 or Float64) where rounding
// into small float type d decides: every positive finite value d holds,
// the midpoints between neighbours (ties) and one ulp of src either side,
// the same past the largest (where saturation or overflow begins), far
// beyond it, half the least value, ±0, ±Inf and NaN; each with both signs.
func roundingEdges(d ir.DType, src ir.DType) []float64 {
	next := func(x, toward float64) float64 {
		if src == ir.Float32 {
			return float64(math.Nextafter32(float32(x), float32(toward)))
		}
		return math.Nextafter(x, toward)
	}
	var vals []float64
	for code := range 256 {
		if d.PackedBits() > 0 && code >= 16 {
			break
		}
		v := ir.DecodeSmallFloat(d, uint8(code))
		if v > 0 && !math.IsInf(v, 0) && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	top := vals[len(vals)-1]
	pts := slices.Clone(vals)
	ends := append(slices.Clone(vals), top+(top-vals[len(vals)-2])) // the value one step past the largest
	for i := 1; i < len(ends); i++ {
		mid := (ends[i-1] + ends[i]) / 2
		pts = append(pts, mid, next(mid, 0), next(mid, math.Inf(1)))
	}
	pts = append(pts, vals[0]/2, next(vals[0]/2, 0), next(vals[0]/2, 1), vals[0]/4, 2*top, 1e30, math.Inf(1), 0)
	var out []float64
	for _, p := range pts {
		if src == ir.Float32 && p > math.MaxFloat32 && !math.IsInf(p, 0) {
			continue
		}
		out = append(out, p, -p)
	}
	return append(out, math.NaN(), math.Copysign(math.NaN(), -1))
}
