package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// The index family's tests: each kernel against a naive formula over
// coordinates, and Resize against the textbook bilinear, bicubic and
// nearest formulas.

// specSlice lists the indices Slice visits on an axis of length n: those
// of Python's a[start:stop:step], except that the spec clamps a
// negative-step start to [0, n-1], where Python would make a start before
// the axis an empty slice.
func specSlice(n, start, stop, step int64) []int64 {
	norm := func(v, lo, hi int64) int64 {
		if v < 0 {
			v += n
		}
		return min(max(v, lo), hi)
	}
	var lo, hi int64 = 0, n
	if step < 0 {
		lo, hi = -1, n-1
	}
	var out []int64
	for i := norm(start, max(lo, 0), hi); step > 0 && i < norm(stop, lo, hi) || step < 0 && i > norm(stop, lo, hi); i += step {
		out = append(out, i)
	}
	return out
}

func TestSliceAgainstPython(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 1))
	x := randTensor(rng, ir.Float32, 5, 6, 7)
	bounds := []int64{math.MinInt64, -9, -7, -3, -1, 0, 1, 2, 5, 7, 9, math.MaxInt64}
	for trial := 0; trial < 300; trial++ {
		axes := rng.Perm(3)[:1+rng.IntN(3)]
		var starts, ends, steps, ax []int64
		for _, a := range axes {
			starts = append(starts, bounds[rng.IntN(len(bounds))])
			ends = append(ends, bounds[rng.IntN(len(bounds))])
			steps = append(steps, []int64{-3, -2, -1, 1, 2, 3}[rng.IntN(6)])
			ax = append(ax, int64(a)-3*int64(rng.IntN(2))) // some axes negative
		}
		out, err := callKernel(t, "Slice", 13, []*ir.Tensor{x, i64s(starts...), i64s(ends...), i64s(ax...), i64s(steps...)}, 1)
		require.NoError(t, err)
		y := out[0]
		picks := [][]int64{specSlice(5, 0, 5, 1), specSlice(6, 0, 6, 1), specSlice(7, 0, 7, 1)}
		for i, a := range axes {
			picks[a] = specSlice(x.Dims[a], starts[i], ends[i], steps[i])
		}
		require.Equal(t, []int64{int64(len(picks[0])), int64(len(picks[1])), int64(len(picks[2]))}, y.Dims,
			"starts %v ends %v axes %v steps %v", starts, ends, ax, steps)
		eachCoord(y.Dims, func(c []int64) {
			src := []int64{picks[0][c[0]], picks[1][c[1]], picks[2][c[2]]}
			assert.Equal(t, x.Float32s()[flatAt(x.Dims, src)], y.Float32s()[flatAt(y.Dims, c)])
		})
	}
	// Slice-1 takes attributes; a zero step is an error.
	out, err := callKernel(t, "Slice", 1, []*ir.Tensor{x}, 1, ir.AttrIs("starts", 1), ir.AttrIs("ends", 1000), ir.AttrIs("axes", 2))
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 6, 6}, out[0].Dims)
	_, err = callKernel(t, "Slice", 13, []*ir.Tensor{x, i64s(0), i64s(1), i64s(0), i64s(0)}, 1)
	assert.ErrorContains(t, err, "has a 0")
}

func TestGatherAgainstCoordinates(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	x := randTensor(rng, ir.Float32, 3, 4, 5)
	ind := ir.FromSlice(ir.Int32, []int64{2, 3}, []int32{0, -1, 2, 3, -4, 1})
	for axis := int64(-3); axis < 3; axis++ {
		a := (axis + 3) % 3
		if a == 0 {
			continue // the indices exceed dim 0
		}
		out, err := callKernel(t, "Gather", 13, []*ir.Tensor{x, ind}, 1, ir.AttrI("axis", axis))
		require.NoError(t, err)
		y := out[0]
		eachCoord(y.Dims, func(c []int64) {
			// y[pre, i, j, post] = x[pre, ind[i, j], post]
			j := int64(ir.Data[int32](ind)[c[a]*3+c[a+1]])
			if j < 0 {
				j += x.Dims[a]
			}
			src := append(append(append([]int64{}, c[:a]...), j), c[a+2:]...)
			assert.Equal(t, x.Float32s()[flatAt(x.Dims, src)], y.Float32s()[flatAt(y.Dims, c)])
		})
	}
	_, err := callKernel(t, "Gather", 13, []*ir.Tensor{x, i64s(3)}, 1)
	assert.ErrorContains(t, err, "out of range")

	// GatherElements: y[i][j][k] = x[i][ind[i][j][k]][k] for axis 1.
	ge := ir.FromSlice(ir.Int64, []int64{3, 2, 5}, make([]int64, 30))
	for i := range ge.Int64s() {
		ge.Int64s()[i] = int64(rng.IntN(8)) - 4
	}
	out, err := callKernel(t, "GatherElements", 13, []*ir.Tensor{x, ge}, 1, ir.AttrI("axis", 1))
	require.NoError(t, err)
	eachCoord(ge.Dims, func(c []int64) {
		j := ge.Int64s()[flatAt(ge.Dims, c)]
		if j < 0 {
			j += 4
		}
		assert.Equal(t, x.Float32s()[flatAt(x.Dims, []int64{c[0], j, c[2]})], out[0].Float32s()[flatAt(ge.Dims, c)])
	})

	// GatherND with a batch dim: y[b, t, :] = x[b, ind[b, t, 0], :].
	nd := ir.FromSlice(ir.Int64, []int64{3, 2, 1}, []int64{0, 3, 1, -1, 2, 2})
	out, err = callKernel(t, "GatherND", 13, []*ir.Tensor{x, nd}, 1, ir.AttrI("batch_dims", 1))
	require.NoError(t, err)
	require.Equal(t, []int64{3, 2, 5}, out[0].Dims)
	eachCoord(out[0].Dims, func(c []int64) {
		j := nd.Int64s()[c[0]*2+c[1]]
		if j < 0 {
			j += 4
		}
		assert.Equal(t, x.Float32s()[flatAt(x.Dims, []int64{c[0], j, c[2]})], out[0].Float32s()[flatAt(out[0].Dims, c)])
	})
	out, err = callKernel(t, "GatherND", 11, []*ir.Tensor{x, ir.FromSlice(ir.Int64, []int64{2, 3}, []int64{0, 0, 0, 2, 3, 4})}, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{x.Float32s()[0], x.Float32s()[flatAt(x.Dims, []int64{2, 3, 4})]}, out[0].Float32s())
}

func TestScatterAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	x := randTensor(rng, ir.Float32, 3, 4)
	// Duplicates in the indices make the reductions matter.
	ind := ir.FromSlice(ir.Int64, []int64{2, 4}, []int64{0, 1, -1, 0, 0, 2, 1, 0})
	upd := randTensor(rng, ir.Float32, 2, 4)
	for _, red := range []string{"none", "add", "mul", "max", "min"} {
		out, err := callKernel(t, "ScatterElements", 18, []*ir.Tensor{x, ind, upd}, 1, ir.AttrI("axis", 0), ir.AttrS("reduction", red))
		require.NoError(t, err, red)
		want := Float64s(x)
		for p, j := range ind.Int64s() {
			r, col := (j+3)%3, int64(p%4)
			w, u := &want[r*4+col], float64(upd.Float32s()[p])
			switch red {
			case "none":
				*w = u
			case "add":
				*w += u
			case "mul":
				*w *= u
			case "max":
				*w = math.Max(*w, u)
			case "min":
				*w = math.Min(*w, u)
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-6, 1e-6, red)
	}
	_, err := callKernel(t, "ScatterElements", 16, []*ir.Tensor{x, ind, upd}, 1, ir.AttrS("reduction", "max"))
	assert.ErrorContains(t, err, "not supported at opset 16")

	// ScatterND with integer data: rows 2 and 0 get the updates (added).
	xi := ir.FromSlice(ir.Int32, []int64{3, 2}, []int32{1, 2, 3, 4, 5, 6})
	ui := ir.FromSlice(ir.Int32, []int64{3, 2}, []int32{10, 20, 30, 40, 50, 60})
	ii := ir.FromSlice(ir.Int64, []int64{3, 1}, []int64{2, 0, 2})
	out, err := callKernel(t, "ScatterND", 16, []*ir.Tensor{xi, ii, ui}, 1, ir.AttrS("reduction", "add"))
	require.NoError(t, err)
	assert.Equal(t, []int32{31, 42, 3, 4, 65, 86}, ir.Data[int32](out[0]))
	out, err = callKernel(t, "ScatterND", 11, []*ir.Tensor{xi, ii, ui}, 1)
	require.NoError(t, err)
	assert.Equal(t, []int32{30, 40, 3, 4, 50, 60}, ir.Data[int32](out[0]), "the last duplicate wins")
	// Strings scatter without reduction.
	out, err = callKernel(t, "ScatterND", 11, []*ir.Tensor{strs([]int64{3}, "a", "b", "c"), ir.FromSlice(ir.Int64, []int64{1, 1}, []int64{1}), strs([]int64{1}, "z")}, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "z", "c"}, out[0].Strings)
	_, err = callKernel(t, "ScatterND", 11, []*ir.Tensor{xi, ii, ir.FromSlice(ir.Int32, []int64{3}, []int32{1, 2, 3})}, 1)
	assert.ErrorContains(t, err, "updates have shape")
}

func TestOneHotAndTrilu(t *testing.T) {
	ind := ir.FromSlice(ir.Float32, []int64{2, 2}, []float32{0, -1, 3, 7})
	vals := ir.FromSlice(ir.Int64, []int64{2}, []int64{-5, 9})
	for _, axis := range []int64{-1, 0, 1, 2} {
		out, err := callKernel(t, "OneHot", 11, []*ir.Tensor{ind, ir.Scalar(ir.Int64, int64(4)), vals}, 1, ir.AttrI("axis", axis))
		require.NoError(t, err)
		a := (axis + 3) % 3
		eachCoord(out[0].Dims, func(c []int64) {
			rest := append(append([]int64{}, c[:a]...), c[a+1:]...)
			j := int64(ind.Float32s()[flatAt([]int64{2, 2}, rest)])
			if j < 0 {
				j += 4
			}
			want := int64(-5)
			if j == c[a] {
				want = 9 // 7 is out of range: a row of off values
			}
			assert.Equal(t, want, out[0].Int64s()[flatAt(out[0].Dims, c)], "axis %d at %v", axis, c)
		})
	}

	rng := rand.New(rand.NewPCG(2, 4))
	x := randTensor(rng, ir.Float32, 2, 3, 4)
	for _, upper := range []int64{0, 1} {
		for _, k := range []int64{-4, -1, 0, 2, 5} {
			out, err := callKernel(t, "Trilu", 14, []*ir.Tensor{x, ir.Scalar(ir.Int64, k)}, 1, ir.AttrI("upper", upper))
			require.NoError(t, err)
			eachCoord(x.Dims, func(c []int64) {
				keep := c[2]-c[1] >= k
				if upper == 0 {
					keep = c[2]-c[1] <= k
				}
				want := float32(0)
				if keep {
					want = x.Float32s()[flatAt(x.Dims, c)]
				}
				assert.Equal(t, want, out[0].Float32s()[flatAt(x.Dims, c)])
			})
		}
	}
}

func TestPadModes(t *testing.T) {
	a := ir.FromSlice(ir.Int32, []int64{5}, []int32{1, 2, 3, 4, 5})
	pad := func(opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) ([]int32, error) {
		out, err := callKernel(t, "Pad", opset, ins, 1, attrs...)
		if err != nil {
			return nil, err
		}
		return ir.Data[int32](out[0]), nil
	}
	// numpy.pad(a, (2, 3), mode)'s documented results.
	for mode, want := range map[string][]int32{
		"constant": {0, 0, 1, 2, 3, 4, 5, 0, 0, 0},
		"reflect":  {3, 2, 1, 2, 3, 4, 5, 4, 3, 2},
		"edge":     {1, 1, 1, 2, 3, 4, 5, 5, 5, 5},
		"wrap":     {4, 5, 1, 2, 3, 4, 5, 1, 2, 3},
	} {
		got, err := pad(19, []*ir.Tensor{a, i64s(2, 3)}, ir.AttrS("mode", mode))
		require.NoError(t, err, mode)
		assert.Equal(t, want, got, mode)
	}
	// Reflection longer than the axis keeps bouncing.
	got, err := pad(13, []*ir.Tensor{ir.FromSlice(ir.Int32, []int64{3}, []int32{1, 2, 3}), i64s(5, 4)}, ir.AttrS("mode", "reflect"))
	require.NoError(t, err)
	assert.Equal(t, []int32{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}, got)
	// Negative pads crop; the constant input sets the value.
	got, err = pad(13, []*ir.Tensor{a, i64s(-1, 2), ir.Scalar(ir.Int32, int32(7))})
	require.NoError(t, err)
	assert.Equal(t, []int32{2, 3, 4, 5, 7, 7}, got)
	// Pad-2 takes pads and value as attributes, Pad-18 an axes input.
	m := ir.FromSlice(ir.Int32, []int64{2, 2}, []int32{1, 2, 3, 4})
	got, err = pad(2, []*ir.Tensor{m}, ir.AttrIs("pads", 0, 1, 0, 0), ir.AttrF("value", 9))
	require.NoError(t, err)
	assert.Equal(t, []int32{9, 1, 2, 9, 3, 4}, got)
	got, err = pad(18, []*ir.Tensor{m, i64s(1, 0), nil, i64s(-1)}, ir.AttrS("mode", "edge"))
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 1, 2, 3, 3, 4}, got)
	_, err = pad(18, []*ir.Tensor{a, i64s(1, 1)}, ir.AttrS("mode", "wrap"))
	assert.ErrorContains(t, err, "not supported at opset 18")
	_, err = pad(13, []*ir.Tensor{a, i64s(1, 1, 1, 1)})
	assert.ErrorContains(t, err, "4 entries for 1 axes")
	_, err = pad(13, []*ir.Tensor{a, i64s(-3, -3)})
	assert.ErrorContains(t, err, "below zero")
}

// bilinear is the textbook formula: clamp the source coordinate into the
// image, then mix the four surrounding pixels.
func bilinear(x []float64, h, w int64, sy, sx float64) float64 {
	sy, sx = min(max(sy, 0), float64(h-1)), min(max(sx, 0), float64(w-1))
	y0, x0 := int64(math.Floor(sy)), int64(math.Floor(sx))
	y1, x1 := min(y0+1, h-1), min(x0+1, w-1)
	dy, dx := sy-float64(y0), sx-float64(x0)
	at := func(y, xx int64) float64 { return x[y*w+xx] }
	return (1-dy)*((1-dx)*at(y0, x0)+dx*at(y0, x1)) + dy*((1-dx)*at(y1, x0)+dx*at(y1, x1))
}

func TestResizeLinearAgainstFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 5))
	const h, w = 5, 7
	x := randTensor(rng, ir.Float32, 1, 1, h, w)
	xs := Float64s(x)
	for _, tc := range []struct {
		coord  string
		sizes  []int64
		scales []float32
		src    func(o, in, out int64, scale float64) float64
	}{
		{"half_pixel", nil, []float32{1, 1, 2.5, 0.6}, func(o, _, _ int64, s float64) float64 { return (float64(o)+0.5)/s - 0.5 }},
		{"asymmetric", []int64{1, 1, 9, 3}, nil, func(o, _, _ int64, s float64) float64 { return float64(o) / s }},
		{"align_corners", []int64{1, 1, 3, 12}, nil, func(o, in, out int64, _ float64) float64 {
			return float64(o) * float64(in-1) / float64(out-1)
		}},
		{"pytorch_half_pixel", []int64{1, 1, 1, 4}, nil, func(o, _, out int64, s float64) float64 {
			if out == 1 {
				return 0
			}
			return (float64(o)+0.5)/s - 0.5
		}},
	} {
		ins := []*ir.Tensor{x, nil, nil, nil}
		if tc.scales != nil {
			ins[2] = ir.FromSlice(ir.Float32, []int64{4}, tc.scales)
		} else {
			ins[3] = i64s(tc.sizes...)
		}
		out, err := callKernel(t, "Resize", 13, ins, 1, ir.AttrS("mode", "linear"), ir.AttrS("coordinate_transformation_mode", tc.coord))
		require.NoError(t, err, tc.coord)
		y := out[0]
		oh, ow := y.Dims[2], y.Dims[3]
		syScale, sxScale := float64(oh)/h, float64(ow)/w
		if tc.scales != nil {
			syScale, sxScale = float64(tc.scales[2]), float64(tc.scales[3])
			assert.Equal(t, []int64{1, 1, 12, 4}, y.Dims, "floor(5*2.5), floor(7*0.6)")
		}
		want := make([]float64, oh*ow)
		for i := int64(0); i < oh; i++ {
			for j := int64(0); j < ow; j++ {
				want[i*ow+j] = bilinear(xs, h, w, tc.src(i, h, oh, syScale), tc.src(j, w, ow, sxScale))
			}
		}
		assertClose(t, want, Float64s(y), 1e-5, 1e-6, tc.coord)
	}
}

// keys is the cubic convolution kernel.
func keys(d, a float64) float64 {
	d = math.Abs(d)
	switch {
	case d < 1:
		return (a+2)*d*d*d - (a+3)*d*d + 1
	case d < 2:
		return a*d*d*d - 5*a*d*d + 8*a*d - 4*a
	}
	return 0
}

func TestResizeCubicAgainstFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 6))
	x := randTensor(rng, ir.Float64, 9)
	xs := Float64s(x)
	for _, exclude := range []int64{0, 1} {
		for _, a := range []float32{-0.75, -0.5} {
			out, err := callKernel(t, "Resize", 13, []*ir.Tensor{x, nil, ir.FromSlice(ir.Float32, []int64{1}, []float32{1.7})}, 1,
				ir.AttrS("mode", "cubic"), ir.AttrF("cubic_coeff_a", a), ir.AttrI("exclude_outside", exclude))
			require.NoError(t, err)
			y := Float64s(out[0])
			require.Len(t, y, 15)
			for o := range y {
				src := (float64(o)+0.5)/float64(float32(1.7)) - 0.5 // the scale is a float32
				i0 := math.Floor(src)
				var sum, wsum float64
				for k := -1.0; k <= 2; k++ {
					i := i0 + k
					wk := keys(src-i, float64(a))
					if exclude == 1 && (i < 0 || i > 8) {
						continue
					}
					sum += wk * xs[int(min(max(i, 0), 8))]
					wsum += wk
				}
				if exclude == 1 {
					sum /= wsum
				}
				assert.InDelta(t, sum, y[o], 1e-9, "a %v exclude %d at %d", a, exclude, o)
			}
		}
	}
}

func TestResizeNearestAndMore(t *testing.T) {
	x := ir.FromSlice(ir.Float32, []int64{1, 4}, []float32{10, 20, 30, 40})
	resize := func(opset int64, ins []*ir.Tensor, attrs ...*ir.Attribute) []float32 {
		t.Helper()
		out, err := callKernel(t, "Resize", opset, ins, 1, attrs...)
		require.NoError(t, err)
		return out[0].Float32s()
	}
	scales := func(v ...float32) *ir.Tensor { return ir.FromSlice(ir.Float32, []int64{int64(len(v))}, v) }
	// Asymmetric x/1.5 = 0, .67, 1.33, 2, 2.67, 3.33: each mode rounds its way.
	for mode, want := range map[string][]float32{
		"round_prefer_floor": {10, 20, 20, 30, 40, 40},
		"round_prefer_ceil":  {10, 20, 20, 30, 40, 40},
		"floor":              {10, 10, 20, 30, 30, 40},
		"ceil":               {10, 20, 30, 30, 40, 40},
	} {
		got := resize(13, []*ir.Tensor{x, nil, scales(1, 1.5)}, ir.AttrS("coordinate_transformation_mode", "asymmetric"), ir.AttrS("nearest_mode", mode))
		assert.Equal(t, want, got, mode)
	}
	// Halfway points: x/2 = 0, .5, 1, 1.5, ... separate the round modes.
	assert.Equal(t, []float32{10, 10, 20, 20, 30, 30, 40, 40}, resize(13, []*ir.Tensor{x, nil, scales(1, 2)},
		ir.AttrS("coordinate_transformation_mode", "asymmetric")))
	assert.Equal(t, []float32{10, 20, 20, 30, 30, 40, 40, 40}, resize(13, []*ir.Tensor{x, nil, scales(1, 2)},
		ir.AttrS("coordinate_transformation_mode", "asymmetric"), ir.AttrS("nearest_mode", "round_prefer_ceil")))
	// Resize-10: scales is input 1, nearest floors when upsampling.
	assert.Equal(t, []float32{10, 10, 20, 20, 30, 30, 40, 40}, resize(10, []*ir.Tensor{x, scales(1, 2)}))
	// Resize-11 takes empty roi and scales when sizes are given.
	assert.Equal(t, []float32{10, 40}, resize(11, []*ir.Tensor{x, scales(), scales(), i64s(1, 2)}, ir.AttrS("coordinate_transformation_mode", "align_corners")))

	// tf_crop_and_resize samples roi [0.4, 1.2] of the axis: 1.2, 2.4, 3.6,
	// and the last lies outside, so it takes the extrapolation value.
	got := resize(13, []*ir.Tensor{x, scales(0, 0.4, 1, 1.2), nil, i64s(1, 3)}, ir.AttrS("mode", "linear"),
		ir.AttrS("coordinate_transformation_mode", "tf_crop_and_resize"), ir.AttrF("extrapolation_value", -1))
	assertClose(t, []float64{22, 34, -1}, []float64{float64(got[0]), float64(got[1]), float64(got[2])}, 1e-6, 1e-5)

	// Antialiased linear downsampling by 2 is a tent of width 4 input
	// pixels: output 0 (source 0.5) weighs pixels -1..2 by 1:3:3:1.
	got = resize(18, []*ir.Tensor{x, nil, scales(0.5)}, ir.AttrS("mode", "linear"), ir.AttrI("antialias", 1), ir.AttrIs("axes", 1))
	assert.InDelta(t, (10+3*10+3*20+30)/8.0, got[0], 1e-5)
	assert.InDelta(t, (20+3*30+3*40+40)/8.0, got[1], 1e-5)
	// Filters sum to one: a constant image stays constant for every mode.
	c := FromFloat64s(ir.Float32, []int64{1, 1, 5, 6}, filled(30, 3.5))
	for _, mode := range []string{"nearest", "linear", "cubic"} {
		for _, aa := range []int64{0, 1} {
			got := resize(18, []*ir.Tensor{c, nil, scales(1, 1, 0.7, 1.9)}, ir.AttrS("mode", mode), ir.AttrI("antialias", aa))
			assertClose(t, filled(len(got), 3.5), Float64s(ir.FromSlice(ir.Float32, []int64{int64(len(got))}, got)), 1e-6, 1e-6, mode)
		}
	}
	// keep_aspect_ratio_policy scales both axes by the smaller (or larger)
	// of the ratios 8/4 and 8/6: 4x6 becomes 5x8 (not_larger) or 8x12.
	out, err := callKernel(t, "Resize", 18, []*ir.Tensor{ir.NewTensor(ir.Float32, 4, 6), nil, nil, i64s(8, 8)}, 1, ir.AttrS("keep_aspect_ratio_policy", "not_larger"))
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 8}, out[0].Dims)
	out, err = callKernel(t, "Resize", 18, []*ir.Tensor{ir.NewTensor(ir.Float32, 4, 6), nil, nil, i64s(8, 8)}, 1, ir.AttrS("keep_aspect_ratio_policy", "not_smaller"))
	require.NoError(t, err)
	assert.Equal(t, []int64{8, 12}, out[0].Dims)
	// Integers round and saturate.
	u := ir.FromSlice(ir.Uint8, []int64{2}, []uint8{0, 255})
	out, err = callKernel(t, "Resize", 13, []*ir.Tensor{u, nil, scales(2)}, 1, ir.AttrS("mode", "cubic"))
	require.NoError(t, err)
	// Cubic overshoots at the edges (-26.9, 281.9) and saturates; inside
	// 57.77 and 197.23 round.
	assert.Equal(t, []uint8{0, 58, 197, 255}, ir.Data[uint8](out[0]))
	_, err = callKernel(t, "Resize", 13, []*ir.Tensor{x, nil, scales(1, 2), i64s(1, 8)}, 1)
	assert.ErrorContains(t, err, "only one of scales and sizes")
	_, err = callKernel(t, "Resize", 13, []*ir.Tensor{x, nil, scales(2)}, 1)
	assert.ErrorContains(t, err, "want 2 floats")
	_, err = callKernel(t, "Resize", 18, []*ir.Tensor{x, nil, scales(1, 2)}, 1, ir.AttrS("coordinate_transformation_mode", "half_pixel_symmetric"))
	assert.ErrorContains(t, err, "not supported at opset 18")
}

func TestIndexShapesGolden(t *testing.T) {
	f, i := ir.Float32, ir.Int64
	unranked := ir.TensorType(f, ir.Shape{})
	checkShapeGolden(t, "index", []shapeCase{
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", 10, 8), tt(i, 2), tt(i, 2), tt(i, 2), tt(i, 2)},
			consts: []*ir.Tensor{nil, i64s(1, -1), i64s(math.MaxInt64, -100), i64s(1, 2), i64s(2, -3)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", 10, 8), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(0), i64s(2)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", 10, 8), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, nil, nil, i64s(-1)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{tt(f, 4, 4), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(0), i64s(2), i64s(2)}, nOut: 1},
		{op: "Slice", opset: 1, ins: []ir.Type{tt(f, 4, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("starts", 1, 1), ir.AttrIs("ends", 3, -1)}},
		{op: "Gather", opset: 13, ins: []ir.Type{sym(f, "V", 64), sym(i, "B", "S")}, nOut: 1},
		{op: "Gather", opset: 13, ins: []ir.Type{tt(i, 3), tt(i)}, nOut: 1},
		{op: "Gather", opset: 13, ins: []ir.Type{tt(f, 3, 4), tt(i, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 2)}},
		{op: "GatherElements", opset: 13, ins: []ir.Type{tt(f, 3, 4), sym(i, "N", 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 1)}},
		{op: "GatherElements", opset: 13, ins: []ir.Type{tt(f, 3, 4), tt(i, 2)}, nOut: 1},
		{op: "GatherND", opset: 13, ins: []ir.Type{sym(f, "B", 4, 5, 6), sym(i, "B", 7, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("batch_dims", 1)}},
		{op: "GatherND", opset: 11, ins: []ir.Type{tt(f, 4, 5), tt(i, 3, 3)}, nOut: 1},
		{op: "ScatterElements", opset: 16, ins: []ir.Type{sym(f, "N", 4), tt(i, 2, 4), tt(f, 2, 4)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("reduction", "add")}},
		{op: "ScatterElements", opset: 16, ins: []ir.Type{tt(f, 3, 4), tt(i, 2, 4), tt(f, 2, 3)}, nOut: 1},
		{op: "ScatterND", opset: 18, ins: []ir.Type{tt(f, 4, 5, 6), tt(i, 3, 2), tt(f, 3, 6)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("reduction", "max")}},
		{op: "ScatterND", opset: 16, ins: []ir.Type{tt(f, 4, 5, 6), tt(i, 3, 2), tt(f, 3, 6)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("reduction", "min")}},
		{op: "ScatterND", opset: 11, ins: []ir.Type{tt(f, 4, 5, 6), tt(i, 3, 2), tt(f, 3, 5)}, nOut: 1},
		{op: "OneHot", opset: 11, ins: []ir.Type{sym(i, "N", 3), tt(i), tt(f, 2)}, consts: []*ir.Tensor{nil, ir.Scalar(ir.Int64, int64(10))}, nOut: 1},
		{op: "OneHot", opset: 11, ins: []ir.Type{sym(i, "N", 3), tt(i), tt(f, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrI("axis", 0)}},
		{op: "OneHot", opset: 11, ins: []ir.Type{tt(i, 3), tt(i), tt(f, 3)}, nOut: 1},
		{op: "Trilu", opset: 14, ins: []ir.Type{sym(f, "B", 4, 4), tt(i)}, nOut: 1},
		{op: "Trilu", opset: 14, ins: []ir.Type{tt(f, 4)}, nOut: 1},
		{op: "Pad", opset: 13, ins: []ir.Type{sym(f, "N", 3, 8, 8), tt(i, 8)}, consts: []*ir.Tensor{nil, i64s(0, 0, 1, 2, 0, 0, 3, -4)}, nOut: 1},
		{op: "Pad", opset: 18, ins: []ir.Type{sym(f, "N", 3, 8, 8), tt(i, 4), {}, tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(1, 1, 2, 2), nil, i64s(-2, -1)}, nOut: 1},
		{op: "Pad", opset: 13, ins: []ir.Type{sym(f, "N", 3), tt(i, 4)}, nOut: 1},
		{op: "Pad", opset: 2, ins: []ir.Type{tt(f, 3, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("pads", 1, 1, 1, 1), ir.AttrS("mode", "edge")}},
		{op: "Pad", opset: 13, ins: []ir.Type{tt(f, 3), tt(i, 2)}, consts: []*ir.Tensor{nil, i64s(-2, -2)}, nOut: 1},
		{op: "Pad", opset: 13, ins: []ir.Type{tt(f, 3), tt(i, 2)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("mode", "wrap")}},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, 8, 8), {}, tt(f, 4)}, consts: []*ir.Tensor{nil, nil, ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 2, 3})}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, 8, 8), {}, {}, tt(i, 4)}, consts: []*ir.Tensor{nil, nil, nil, i64s(1, 3, 5, 4)}, nOut: 1},
		{op: "Resize", opset: 11, ins: []ir.Type{sym(f, "N", 3, 8, 8), tt(f, 0), tt(f, 0), tt(i, 4)}, consts: []*ir.Tensor{nil, nil, nil, i64s(1, 3, 5, 4)}, nOut: 1},
		{op: "Resize", opset: 18, ins: []ir.Type{sym(f, "N", 3, 8, 6), {}, {}, tt(i, 2)}, consts: []*ir.Tensor{nil, nil, nil, i64s(4, 4)}, nOut: 1,
			attrs: []*ir.Attribute{ir.AttrIs("axes", 2, 3), ir.AttrS("keep_aspect_ratio_policy", "not_larger")}},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, 8, 8), {}, tt(f, 4)}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{unranked, {}, {}, tt(i, 2)}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{tt(f, 2, 2), {}, {}, tt(i, 3)}, consts: []*ir.Tensor{nil, nil, nil, i64s(1, 3, 5)}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{tt(f, 2, 2), {}, {}, tt(i, 2)}, consts: []*ir.Tensor{nil, nil, nil, i64s(1, 3)}, nOut: 1, attrs: []*ir.Attribute{ir.AttrS("mode", "bilinear")}},
		// Slices of symbolic dims clamp with min and max, which simplify
		// where the symbols' being at least 1 decides them.
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(1), i64s(math.MaxInt64), i64s(1)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(0), i64s(-1), i64s(-2)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 1), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(-1), i64s(math.MinInt64), i64s(1), i64s(-1)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 1), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(0), i64s(math.MaxInt64), i64s(1), i64s(2)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(2), i64s(math.MaxInt64), i64s(1)}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{tt(i, 1, 512), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, i64s(0), nil, i64s(1)}, syms: []*SymTensor{nil, nil, symInts("S"), nil}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "B", "P + S", 8), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, nil, i64s(math.MaxInt64), i64s(1)}, syms: []*SymTensor{nil, symInts("P"), nil, nil}, nOut: 1},
		{op: "Slice", opset: 13, ins: []ir.Type{sym(f, "N", "S"), tt(i, 1), tt(i, 1), tt(i, 1)}, consts: []*ir.Tensor{nil, nil, i64s(math.MaxInt64), i64s(1)}, syms: []*SymTensor{nil, symInts("3 - S"), nil, nil}, nOut: 1},
		{op: "Slice", opset: 1, ins: []ir.Type{sym(f, "N", "S")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("starts", 0), ir.AttrIs("ends", 1), ir.AttrIs("axes", 1)}},
		{op: "Pad", opset: 13, ins: []ir.Type{sym(f, "N", 3, "H", "W"), tt(i, 8)}, consts: []*ir.Tensor{nil, i64s(0, 0, 1, 2, 0, 0, 1, -1)}, nOut: 1},
		{op: "Pad", opset: 13, ins: []ir.Type{sym(f, "N", "S", 8), tt(i, 6)}, syms: []*SymTensor{nil, symInts("0", "0", "0", "0", "64 - S", "0")}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, "H", "W"), {}, tt(f, 4)}, consts: []*ir.Tensor{nil, nil, ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 2, 0.5})}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, "H", "W"), {}, tt(f, 4)}, consts: []*ir.Tensor{nil, nil, ir.FromSlice(ir.Float32, []int64{4}, []float32{1, 1, 1.5, 0.3})}, nOut: 1},
		{op: "Resize", opset: 13, ins: []ir.Type{sym(f, "N", 3, "H", "W"), {}, {}, tt(i, 4)}, syms: []*SymTensor{nil, nil, nil, symInts("N", "3", "2*H", "2*W")}, nOut: 1},
		{op: "Resize", opset: 18, ins: []ir.Type{sym(f, "N", 3, "H", "W"), {}, {}, tt(i, 2)}, syms: []*SymTensor{nil, nil, nil, symInts("H + 1", "W")}, nOut: 1, attrs: []*ir.Attribute{ir.AttrIs("axes", 2, 3)}},
	})
}
