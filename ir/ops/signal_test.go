package ops

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

func window(t *testing.T, op string, size int64, periodic int64) []float64 {
	t.Helper()
	out, err := callKernel(t, op, 17, []*ir.Tensor{ir.Scalar(ir.Int64, size)}, 1, ir.AttrI("periodic", periodic), ir.AttrI("output_datatype", int64(ir.Float64)))
	require.NoError(t, err)
	return Float64s(out[0])
}

func TestWindows(t *testing.T) {
	for _, op := range []string{"HannWindow", "HammingWindow", "BlackmanWindow"} {
		sym := window(t, op, 9, 0)
		for n := range sym {
			assert.InDelta(t, sym[n], sym[len(sym)-1-n], 1e-12, "%s symmetric", op)
		}
		// A periodic window of N is the symmetric one of N+1 less its last sample.
		assertClose(t, window(t, op, 11, 0)[:10], window(t, op, 10, 1), 1e-12, 1e-12, op)
		assert.InDelta(t, 1, sym[4], 1e-12, "%s peaks at 1 in the middle", op)
	}
	hann := window(t, "HannWindow", 8, 1)
	for n, v := range hann {
		s := math.Sin(math.Pi * float64(n) / 8)
		assert.InDelta(t, s*s, v, 1e-12, "Hann is sin²")
	}
	out, err := callKernel(t, "HannWindow", 17, []*ir.Tensor{ir.Scalar(ir.Int32, int32(4))}, 1)
	require.NoError(t, err)
	assert.Equal(t, ir.Float32, out[0].DType, "output_datatype defaults to float")
	_, err = callKernel(t, "HannWindow", 17, []*ir.Tensor{ir.Scalar(ir.Int64, int64(-1))}, 1)
	assert.ErrorContains(t, err, "out of range")
	_, err = callKernel(t, "HannWindow", 17, []*ir.Tensor{ir.Scalar(ir.Int64, int64(3))}, 1, ir.AttrI("output_datatype", int64(ir.String)))
	assert.ErrorContains(t, err, "not a numeric type")
	outs, err := callInferSym("HammingWindow", 17, []ir.Type{tt(ir.Int64)}, nil, []*SymTensor{symScalar("N")}, 1)
	require.NoError(t, err)
	assert.Equal(t, sym(ir.Float32, "N").String(), outs[0].String())
}

// naiveDFT is the definition: y[k] = Σ_t x[t]·e^(∓2πikt/n), over the
// first n samples (zero-padded), divided by n when inverse.
func naiveDFT(x []complex128, n int, inverse bool) []complex128 {
	sign := -1.0
	if inverse {
		sign = 1
	}
	y := make([]complex128, n)
	for k := range y {
		for t := 0; t < n && t < len(x); t++ {
			y[k] += x[t] * cmplx.Exp(complex(0, sign*2*math.Pi*float64(k*t)/float64(n)))
		}
		if inverse {
			y[k] /= complex(float64(n), 0)
		}
	}
	return y
}

// dftCase runs DFT-20 on a random [2, L, 3, C] input along axis 1 and
// compares each line with the naive transform.
func TestDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 20))
	for _, tc := range []struct {
		l, chans          int64
		length            int64 // 0: absent
		inverse, onesided int64
	}{
		{8, 1, 0, 0, 0}, {7, 2, 0, 0, 0}, {8, 1, 0, 0, 1}, {7, 1, 0, 0, 1},
		{6, 2, 9, 0, 0}, {9, 2, 5, 0, 0}, {8, 2, 0, 1, 0}, {5, 2, 0, 1, 1}, {5, 2, 9, 1, 1},
	} {
		name := fmt.Sprintf("L%d C%d len%d inv%d one%d", tc.l, tc.chans, tc.length, tc.inverse, tc.onesided)
		x := randTensor(rng, ir.Float64, 2, tc.l, 3, tc.chans)
		lengthT := (*ir.Tensor)(nil)
		if tc.length > 0 {
			lengthT = ir.Scalar(ir.Int64, tc.length)
		}
		out, err := callKernel(t, "DFT", 20, []*ir.Tensor{x, lengthT, ir.Scalar(ir.Int64, int64(-3))}, 1,
			ir.AttrI("inverse", tc.inverse), ir.AttrI("onesided", tc.onesided))
		require.NoError(t, err, name)
		y, xs := out[0], Float64s(x)
		n := int(tc.length)
		irfft := tc.inverse == 1 && tc.onesided == 1
		if n == 0 {
			n = int(tc.l)
			if irfft {
				n = 2 * (n - 1)
			}
		}
		for b := 0; b < 2; b++ {
			for j := 0; j < 3; j++ {
				line := make([]complex128, tc.l)
				for s := range line {
					o := ((b*int(tc.l)+s)*3 + j) * int(tc.chans)
					line[s] = complex(xs[o], 0)
					if tc.chans == 2 {
						line[s] = complex(xs[o], xs[o+1])
					}
				}
				if irfft { // numpy's irfft: the hermitian spectrum's inverse, real
					full := make([]complex128, n)
					for k := 0; k <= n/2 && k < len(line); k++ {
						full[k] = line[k]
						if k > 0 {
							full[n-k] = cmplx.Conj(line[k])
						}
					}
					if n%2 == 0 && n/2 < len(line) {
						full[n/2] = complex(real(line[n/2]), 0)
					}
					line = full
				}
				want := naiveDFT(line, n, tc.inverse == 1)
				bins, chans := y.Dims[1], y.Dims[3]
				require.Equal(t, []int64{2, bins, 3, chans}, y.Dims, name)
				for k := 0; k < int(bins); k++ {
					o := ((b*int(bins)+k)*3 + j) * int(chans)
					assert.InDelta(t, real(want[k]), y.Float64At(o), 1e-9, "%s: re[%d]", name, k)
					if chans == 2 {
						assert.InDelta(t, imag(want[k]), y.Float64At(o+1), 1e-9, "%s: im[%d]", name, k)
					}
				}
			}
		}
	}
}

func TestDFTRoundTripsAndOpset17(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randTensor(rng, ir.Float64, 3, 10, 1)
	// DFT-17: the axis is an attribute (default 1), input 2 does not exist.
	spec, err := callKernel(t, "DFT", 17, []*ir.Tensor{x}, 1, ir.AttrI("onesided", 1))
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 6, 2}, spec[0].Dims)
	back, err := callKernel(t, "DFT", 20, []*ir.Tensor{spec[0], nil, ir.Scalar(ir.Int64, int64(1))}, 1, ir.AttrI("inverse", 1), ir.AttrI("onesided", 1))
	require.NoError(t, err)
	assertClose(t, Float64s(x), Float64s(back[0]), 1e-12, 1e-12, "irfft(rfft(x)) = x")

	c := randTensor(rng, ir.Float64, 4, 7, 2)
	full, err := callKernel(t, "DFT", 20, []*ir.Tensor{c}, 1)
	require.NoError(t, err)
	inv, err := callKernel(t, "DFT", 20, []*ir.Tensor{full[0]}, 1, ir.AttrI("inverse", 1))
	require.NoError(t, err)
	assertClose(t, Float64s(c), Float64s(inv[0]), 1e-12, 1e-12, "ifft(fft(x)) = x (axis -2 by default)")

	for _, bad := range []struct {
		ins []*ir.Tensor
		msg string
	}{
		{[]*ir.Tensor{c, nil, ir.Scalar(ir.Int64, int64(2))}, "trailing"},
		{[]*ir.Tensor{c, nil, ir.Scalar(ir.Int64, int64(5))}, "out of range"},
		{[]*ir.Tensor{c, ir.Scalar(ir.Int64, int64(0))}, "dft_length 0"},
		{[]*ir.Tensor{randTensor(rng, ir.Float32, 4, 3)}, "trailing dim"},
	} {
		_, err := callKernel(t, "DFT", 20, bad.ins, 1)
		assert.ErrorContains(t, err, bad.msg)
	}
	// Inference follows symbolic dims along the axis.
	outs, err := callInfer("DFT", 20, []ir.Type{sym(ir.Float32, "B", "N", 1), {}, tt(ir.Int64)}, []*ir.Tensor{nil, nil, ir.Scalar(ir.Int64, int64(1))}, 1, ir.AttrI("onesided", 1))
	require.NoError(t, err)
	assert.Equal(t, "float[B,N//2 + 1,2]", outs[0].String())
	outs, err = callInfer("DFT", 20, []ir.Type{sym(ir.Float32, "B", "M", 2)}, nil, 1, ir.AttrI("onesided", 1), ir.AttrI("inverse", 1))
	require.NoError(t, err)
	assert.Equal(t, ir.D(1), outs[0].Shape.Dims[2], "irfft is real")
	_, err = callInfer("DFT", 20, []ir.Type{tt(ir.Float32)}, nil, 1)
	assert.ErrorContains(t, err, "rank 0")
	_, err = callInfer("DFT", 20, []ir.Type{tt(ir.Float32, 4, 3)}, nil, 1)
	assert.ErrorContains(t, err, "trailing dim is 3")
	_, err = callInfer("DFT", 20, []ir.Type{tt(ir.Float32, 4, 1), tt(ir.Int64)}, []*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(-4))}, 1)
	assert.ErrorContains(t, err, "not positive")
}

func TestSTFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, chans := range []int64{1, 2} {
		x := randTensor(rng, ir.Float64, 2, 30, chans)
		w := randTensor(rng, ir.Float64, 8)
		for _, onesided := range []int64{0, 1} {
			out, err := callKernel(t, "STFT", 17, []*ir.Tensor{x, ir.Scalar(ir.Int64, int64(3)), w}, 1, ir.AttrI("onesided", onesided))
			require.NoError(t, err)
			frames, bins := int64(1+(30-8)/3), int64(8)
			if onesided == 1 {
				bins = 5
			}
			require.Equal(t, []int64{2, frames, bins, 2}, out[0].Dims)
			xs, ws := Float64s(x), Float64s(w)
			for b := 0; b < 2; b++ {
				for f := 0; f < int(frames); f++ {
					frame := make([]complex128, 8)
					for j := range frame {
						o := (b*30 + f*3 + j) * int(chans)
						frame[j] = complex(xs[o]*ws[j], 0)
						if chans == 2 {
							frame[j] = complex(xs[o]*ws[j], xs[o+1]*ws[j])
						}
					}
					want := naiveDFT(frame, 8, false)
					for k := 0; k < int(bins); k++ {
						o := ((b*int(frames)+f)*int(bins) + k) * 2
						assert.InDelta(t, real(want[k]), out[0].Float64At(o), 1e-9)
						assert.InDelta(t, imag(want[k]), out[0].Float64At(o+1), 1e-9)
					}
				}
			}
		}
	}
	x := randTensor(rng, ir.Float32, 1, 16, 1)
	for _, bad := range []struct {
		ins []*ir.Tensor
		msg string
	}{
		{[]*ir.Tensor{x, ir.Scalar(ir.Int64, int64(2))}, "needs a window or a frame_length"},
		{[]*ir.Tensor{x, ir.Scalar(ir.Int64, int64(0)), nil, ir.Scalar(ir.Int64, int64(4))}, "not positive"},
		{[]*ir.Tensor{x, ir.Scalar(ir.Int64, int64(2)), nil, ir.Scalar(ir.Int64, int64(17))}, "not in [1, 16]"},
		{[]*ir.Tensor{x, ir.Scalar(ir.Int64, int64(2)), randTensor(rng, ir.Float32, 4), ir.Scalar(ir.Int64, int64(5))}, "differs from the window"},
	} {
		_, err := callKernel(t, "STFT", 17, bad.ins, 1)
		assert.ErrorContains(t, err, bad.msg)
	}
	outs, err := callInfer("STFT", 17, []ir.Type{sym(ir.Float32, "B", 128, 1), tt(ir.Int64), tt(ir.Float32, 16)}, []*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(8))}, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[B,15,9,2]", outs[0].String())
}

func TestMelWeightMatrix(t *testing.T) {
	ins := []*ir.Tensor{ir.Scalar(ir.Int64, int64(6)), ir.Scalar(ir.Int64, int64(64)), ir.Scalar(ir.Int64, int64(8000)),
		ir.Scalar(ir.Float32, float32(100)), ir.Scalar(ir.Float32, float32(3500))}
	out, err := callKernel(t, "MelWeightMatrix", 17, ins, 1, ir.AttrI("output_datatype", int64(ir.Float64)))
	require.NoError(t, err)
	m := out[0]
	require.Equal(t, []int64{33, 6}, m.Dims)
	v := Float64s(m)
	prevPeak := -1
	for i := 0; i < 6; i++ {
		peak, top := 0, 0.0
		for j := 0; j < 33; j++ {
			x := v[j*6+i]
			assert.True(t, x >= 0 && x <= 1, "weights lie in [0, 1]")
			if x > top {
				peak, top = j, x
			}
		}
		assert.Equal(t, 1.0, top, "filter %d peaks at 1", i)
		assert.Greater(t, peak, prevPeak, "filters rise in frequency")
		prevPeak = peak
	}
	bad := append([]*ir.Tensor{}, ins...)
	bad[4] = ir.Scalar(ir.Float32, float32(9000))
	_, err = callKernel(t, "MelWeightMatrix", 17, bad, 1)
	assert.ErrorContains(t, err, "outside the 33 spectrogram bins")
	bad[0] = ir.Scalar(ir.Int64, int64(0))
	_, err = callKernel(t, "MelWeightMatrix", 17, bad, 1)
	assert.ErrorContains(t, err, "must be positive")
	outs, err := callInferSym("MelWeightMatrix", 17, []ir.Type{tt(ir.Int64), tt(ir.Int64), tt(ir.Int64), tt(ir.Float32), tt(ir.Float32)},
		[]*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(256))}, []*SymTensor{symScalar("M")}, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[129,M]", outs[0].String())
	outs, err = callInferSym("MelWeightMatrix", 17, []ir.Type{tt(ir.Int64), tt(ir.Int64), tt(ir.Int64), tt(ir.Float32), tt(ir.Float32)},
		[]*ir.Tensor{ir.Scalar(ir.Int64, int64(8))}, []*SymTensor{nil, symScalar("L")}, 1, ir.AttrI("output_datatype", int64(ir.Float16)))
	require.NoError(t, err)
	assert.Equal(t, "float16[L//2 + 1,8]", outs[0].String())
}
