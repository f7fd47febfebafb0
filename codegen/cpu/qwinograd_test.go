package cpu

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/ir"
)

// TestQWinograd runs integer Winograd F(2×2, 3×3) on every instruction set
// against the reference: odd output sizes (a last tile row and column half
// outside), channels not a multiple of four, no padding, s8 input and
// output, residuals, batches, tile rows longer than a vector; as three
// steps and fused per block of tile rows (with a shorter last block). It rounds
// its transformed input, which direct convolution does not, so outputs
// are compared by SQNR; uniform random inputs are its worst case (every
// neighbour independent).
func TestQWinograd(t *testing.T) {
	u8, s8 := ir.Uint8, ir.Int8
	cases := []qconvCase{
		{name: "7x9_relu", N: 1, C: 16, H: 7, W: 9, OC: 16, xType: u8, yType: u8, zpX: 0, perChannel: true, bias: true, act: "Relu"},
		{name: "C18_nopad_s8_out", N: 1, C: 18, H: 11, W: 10, OC: 20, xType: u8, yType: s8, zpX: 131, perChannel: true, bias: true},
		{name: "wide_rows_batch2_residual", N: 2, C: 20, H: 12, W: 40, OC: 33, xType: s8, yType: u8, zpX: -5, perChannel: true, bias: true, residual: true, act: "Clip"},
		{name: "pertensor_nobias", N: 1, C: 32, H: 6, W: 6, OC: 17, xType: u8, yType: u8, zpX: 12},
	}
	for i := range cases {
		cases[i].kh, cases[i].kw, cases[i].stride, cases[i].dil, cases[i].grp = 3, 3, 1, 1, 1
		if !strings.Contains(cases[i].name, "nopad") {
			cases[i].pad = 1
		}
	}
	for _, c := range qconvCases() {
		if c.grp == 1 && c.kh == 3 && c.kw == 3 && c.stride == 1 && c.dil == 1 && c.C >= qWinoMinChannels && c.OC >= qWinoMinChannels {
			cases = append(cases, c)
		}
	}
	above, slice, vectors := qWinoFuseAbove, qWinoSlice, qWinoMinVectors
	defer func() { qWinoFuseAbove, qWinoSlice, qWinoMinVectors = above, slice, vectors }()
	// Blocks of 0 rows: three steps; else fused, in blocks of 1 and 2 tile
	// rows (so vectors span rows).
	for _, rows := range []int64{0, 1, 2} {
		want := "QWinogradGemm"
		if rows > 0 {
			want = "QWinograd"
		}
		for _, cpu := range []string{"x86-64-v3", "x86-64-v4", "cascadelake", "icelake-server"} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("rows=%d/%s/%s", rows, cpu, c.name), func(t *testing.T) {
					if hasCPU(cpu) != nil {
						t.Skip(hasCPU(cpu))
					}
					qWinoFuseAbove, qWinoSlice, qWinoMinVectors = 1<<62, slice, vectors
					if rows > 0 {
						perTile := 16 * (4*((c.C+3)/4) + 4*c.OC)
						qWinoFuseAbove, qWinoSlice, qWinoMinVectors = 0, rows*perTile*((c.W+1)/2), 0
					}
					q := newQTest(t, c.name, 5)
					q.minSQNR = 30
					y, roles := c.build(q)
					res := q.run(y, "qconv", roles, "", Options{CPU: cpu, Winograd: WinogradOn})
					if !slices.ContainsFunc(res.Kernels, func(k string) bool { return strings.HasSuffix(k, "_"+want) }) {
						t.Errorf("compiled to %v, want %s", res.Kernels, want)
					}
				})
			}
		}
	}
}

// TestQWinogradNotOnAMX: with AMX, --winograd on leaves integer 3×3
// convolutions direct (on tiles), which is faster there.
func TestQWinogradNotOnAMX(t *testing.T) {
	if err := hasCPU("sapphirerapids"); err != nil {
		t.Skip(err)
	}
	c := qconvCase{name: "3x3", N: 1, C: 32, H: 14, W: 14, OC: 32, kh: 3, kw: 3, stride: 1, pad: 1, dil: 1, grp: 1,
		xType: ir.Uint8, yType: ir.Uint8, perChannel: true, bias: true, act: "Relu"}
	q := newQTest(t, c.name, 5)
	y, roles := c.build(q)
	res := q.run(y, "qconv", roles, "", Options{CPU: "sapphirerapids", Winograd: WinogradOn})
	if slices.ContainsFunc(res.Kernels, func(k string) bool { return strings.Contains(k, "Winograd") }) || !strings.Contains(res.LLVMIR, "tdpbsud") {
		t.Errorf("compiled to %v (tiles used: %v), want the direct convolution on tiles", res.Kernels, strings.Contains(res.LLVMIR, "tdpbsud"))
	}
}

// quantizedSQNR is the ratio (dB) of the reference's energy about the
// middle of its type to that of got's difference from it, in steps.
func quantizedSQNR(t *testing.T, got, want *ir.Tensor) float64 {
	t.Helper()
	if got == nil || got.DType != want.DType || !slices.Equal(got.Dims, want.Dims) {
		t.Fatalf("got %v, want %s%v", got, want.DType, want.Dims)
	}
	mid := 128.0
	if want.DType == ir.Int8 {
		mid = 0
	}
	var sig, noise float64
	for i := 0; i < int(want.Len()); i++ {
		a, b := float64(got.Int64At(i)), float64(want.Int64At(i))
		sig += (b - mid) * (b - mid)
		noise += (a - b) * (a - b)
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}
