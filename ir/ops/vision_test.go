package ops

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// Tests of the integer, vision and detection ops (bitwise.go, croppad.go,
// grid.go, image.go, detection.go, unique.go, det.go, deform_conv.go),
// each against an independent oracle: Go's own typed arithmetic, naive
// loops, or an identity the op must satisfy.

// randInts is a tensor of uniformly random bit patterns of an integer type.
func randInts(rng *rand.Rand, dtype ir.DType, dims ...int64) *ir.Tensor {
	v := make([]int64, ir.Product(dims))
	for i := range v {
		v[i] = int64(rng.Uint64())
	}
	return FromInt64s(dtype, dims, v)
}

// narrowTo truncates v to the width of dtype, sign-extending signed types:
// what the type's own arithmetic keeps.
func narrowTo(dtype ir.DType, v uint64) int64 {
	bits := 8 * dtype.Size()
	if bits == 64 {
		return int64(v)
	}
	v &= 1<<bits - 1
	if dtype.IsSigned() && v>>(bits-1) == 1 {
		return int64(v) - 1<<bits
	}
	return int64(v)
}

func TestBitwiseEveryIntegerType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ops := map[string]func(a, b uint64) uint64{
		"BitwiseAnd": func(a, b uint64) uint64 { return a & b },
		"BitwiseOr":  func(a, b uint64) uint64 { return a | b },
		"BitwiseXor": func(a, b uint64) uint64 { return a ^ b },
	}
	for _, dt := range intTypes {
		a, b := randInts(rng, dt, 3, 4), randInts(rng, dt, 4) // b broadcasts
		av, bv := Int64s(a), Int64s(b)
		for op, f := range ops {
			out, err := callKernel(t, op, 18, []*ir.Tensor{a, b}, 1)
			require.NoError(t, err, "%s %s", op, dt)
			got := Int64s(out[0])
			for k := range got {
				assert.Equal(t, narrowTo(dt, f(uint64(av[k]), uint64(bv[k%4]))), got[k], "%s %s element %d", op, dt, k)
			}
		}
		out, err := callKernel(t, "BitwiseNot", 18, []*ir.Tensor{a}, 1)
		require.NoError(t, err)
		for k, g := range Int64s(out[0]) {
			assert.Equal(t, narrowTo(dt, ^uint64(av[k])), g, "BitwiseNot %s", dt)
		}
	}
	_, err := callKernel(t, "BitwiseAnd", 18, []*ir.Tensor{randTensor(rng, ir.Float32, 2), randTensor(rng, ir.Float32, 2)}, 1)
	assert.Error(t, err, "floats have no bitwise ops")
}

func TestBitShiftDropsBitsPastTheWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range unsignedTypes {
		bits := uint64(8 * dt.Size())
		x := randInts(rng, dt, 20)
		n := make([]int64, 20)
		for i := range n {
			n[i] = int64(rng.Uint64N(bits + 2)) // some shift every bit out
		}
		shift := FromInt64s(dt, []int64{20}, n)
		xv := Int64s(x)
		for _, dir := range []string{"LEFT", "RIGHT"} {
			out, err := callKernel(t, "BitShift", 11, []*ir.Tensor{x, shift}, 1, ir.AttrS("direction", dir))
			require.NoError(t, err)
			for k, g := range Int64s(out[0]) {
				v, s := uint64(xv[k])&widthMask(bits), uint64(n[k])
				want := v >> s
				if dir == "LEFT" {
					want = v << s
				}
				if s >= bits {
					want = 0
				}
				assert.Equal(t, narrowTo(dt, want), g, "%s %s %d by %d", dt, dir, v, s)
			}
		}
	}
	_, err := callKernel(t, "BitShift", 11, []*ir.Tensor{i64s(1), i64s(1)}, 1, ir.AttrS("direction", "RIGHT"))
	assert.Error(t, err, "signed types are not shifted")
	_, err = callKernel(t, "BitShift", 11, []*ir.Tensor{FromInt64s(ir.Uint8, []int64{1}, []int64{1}), FromInt64s(ir.Uint8, []int64{1}, []int64{1})}, 1, ir.AttrS("direction", "UP"))
	assert.ErrorContains(t, err, "direction")
}

// widthMask keeps the low bits of a value.
func widthMask(bits uint64) uint64 {
	if bits == 64 {
		return math.MaxUint64
	}
	return 1<<bits - 1
}

func TestCenterCropPadAgainstLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randTensor(rng, ir.Int32, 5, 4, 3)
	xv := Int64s(x)
	target := []int64{3, 7, 3} // crop, pad, keep
	out, err := callKernel(t, "CenterCropPad", 18, []*ir.Tensor{x, i64s(target...)}, 1)
	require.NoError(t, err)
	require.Equal(t, target, out[0].Dims)
	got := Int64s(out[0])
	for i := int64(0); i < 3; i++ {
		for j := int64(0); j < 7; j++ {
			for k := int64(0); k < 3; k++ {
				si, sj := i+1, j-1 // crop 5->3 starts at 1; pad 4->7 puts the input at 1
				var want int64
				if sj >= 0 && sj < 4 {
					want = xv[(si*4+sj)*3+k]
				}
				assert.Equal(t, want, got[(i*7+j)*3+k])
			}
		}
	}
	// The axes attribute picks the axes the shape applies to.
	out, err = callKernel(t, "CenterCropPad", 18, []*ir.Tensor{x, i64s(2)}, 1, ir.AttrIs("axes", -1))
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 4, 2}, out[0].Dims)
	_, err = callKernel(t, "CenterCropPad", 18, []*ir.Tensor{x, i64s(2, 2)}, 1)
	assert.Error(t, err, "a shape entry per axis")

	// A target from another tensor's Shape gives symbolic dims.
	outs, err := callInferSym("CenterCropPad", 18, []ir.Type{sym(ir.Float32, "N", 8, 8), tt(ir.Int64, 2)}, nil,
		[]*SymTensor{nil, symInts("H", "?")}, 1, ir.AttrIs("axes", 1, 2))
	require.NoError(t, err)
	assert.Equal(t, "float[N,H,?]", outs[0].String())
}

// identityGrid is AffineGrid of the identity map: sampling an image there
// must give the image back.
func identityGrid(t *testing.T, n int64, space []int64, align int64) *ir.Tensor {
	k := int64(len(space))
	if k == 1 { // AffineGrid makes 2-D and 3-D grids only
		v := make([]float32, n*space[0])
		for i := range v {
			v[i] = float32(gridCoord(int64(i)%space[0], space[0], align != 0))
		}
		return f32([]int64{n, space[0], 1}, v...)
	}
	theta := make([]float32, n*k*(k+1))
	for b := int64(0); b < n; b++ {
		for i := int64(0); i < k; i++ {
			theta[b*k*(k+1)+i*(k+1)+i] = 1
		}
	}
	size := append([]int64{n, 1}, space...)
	out, err := callKernel(t, "AffineGrid", 20, []*ir.Tensor{f32([]int64{n, k, k + 1}, theta...), i64s(size...)}, 1, ir.AttrI("align_corners", align))
	require.NoError(t, err)
	return out[0]
}

func TestGridSampleIdentityGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, space := range [][]int64{{4, 5}, {3, 4, 2}, {6}} {
		x := randTensor(rng, ir.Float32, append([]int64{2, 3}, space...)...)
		for _, align := range []int64{0, 1} {
			grid := identityGrid(t, 2, space, align)
			for _, mode := range []string{"nearest", "linear", "cubic"} {
				for _, pad := range []string{"zeros", "border", "reflection"} {
					out, err := callKernel(t, "GridSample", 22, []*ir.Tensor{x, grid}, 1,
						ir.AttrS("mode", mode), ir.AttrS("padding_mode", pad), ir.AttrI("align_corners", align))
					require.NoError(t, err)
					assertClose(t, Float64s(x), Float64s(out[0]), 1e-5, 1e-5, mode, pad, align, space)
				}
			}
		}
	}
}

func TestGridSampleLinearOfLinearImage(t *testing.T) {
	// Bilinear sampling reproduces a linear function inside the image
	// exactly: at random points, Y = a*y + b*x + c.
	rng := rand.New(rand.NewPCG(9, 10))
	const h, w = 5, 7
	a, b, c := rng.Float64()+0.5, rng.Float64()-2, rng.Float64()
	img := make([]float32, h*w)
	for y := range h {
		for x := range w {
			img[y*w+x] = float32(a*float64(y) + b*float64(x) + c)
		}
	}
	const points = 30
	grid := make([]float32, points*2)
	want := make([]float64, points)
	for p := range points {
		px, py := rng.Float64()*(w-1), rng.Float64()*(h-1)
		grid[2*p], grid[2*p+1] = float32(2*px/(w-1)-1), float32(2*py/(h-1)-1)
		want[p] = a*py + b*px + c
	}
	out, err := callKernel(t, "GridSample", 16, []*ir.Tensor{f32([]int64{1, 1, h, w}, img...), f32([]int64{1, 1, points, 2}, grid...)}, 1,
		ir.AttrS("mode", "bilinear"), ir.AttrI("align_corners", 1))
	require.NoError(t, err)
	assertClose(t, want, Float64s(out[0]), 1e-4, 1e-4)
}

func TestGridSampleRefusesBadInput(t *testing.T) {
	x, grid := f32([]int64{1, 1, 2, 2}, 1, 2, 3, 4), f32([]int64{1, 1, 1, 2}, 0, 0)
	_, err := callKernel(t, "GridSample", 20, []*ir.Tensor{x, grid}, 1, ir.AttrS("mode", "bilinear"))
	assert.ErrorContains(t, err, "mode", "v20 renamed bilinear to linear")
	_, err = callKernel(t, "GridSample", 20, []*ir.Tensor{x, grid}, 1, ir.AttrS("padding_mode", "wrap"))
	assert.ErrorContains(t, err, "padding_mode")
	_, err = callKernel(t, "GridSample", 20, []*ir.Tensor{x, f32([]int64{1, 1, 1, 3}, 0, 0, 0)}, 1)
	assert.Error(t, err, "a grid of 3 coordinates for a 2-D image")
	_, err = callKernel(t, "GridSample", 16, []*ir.Tensor{f32([]int64{1, 1, 2, 2, 1}, 1, 2, 3, 4), f32([]int64{1, 1, 1, 1, 3}, 0, 0, 0)}, 1)
	assert.Error(t, err, "v16 samples 2-D images only")

	outs, err := callInfer("GridSample", 20, []ir.Type{sym(ir.Float32, "N", 3, "H", "W"), sym(ir.Float32, "N", 5, 6, 2)}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "float[N,3,5,6]", outs[0].String())
}

func TestAffineGridAgainstLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	theta := randTensor(rng, ir.Float64, 2, 2, 3)
	th := Float64s(theta)
	out, err := callKernel(t, "AffineGrid", 20, []*ir.Tensor{theta, i64s(2, 3, 4, 5)}, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4, 5, 2}, out[0].Dims)
	got := Float64s(out[0])
	for b := range 2 {
		for i := range 4 {
			for j := range 5 {
				x, y := (2*float64(j)+1)/5-1, (2*float64(i)+1)/4-1
				for r := range 2 {
					m := th[b*6+r*3:]
					want := m[0]*x + m[1]*y + m[2]
					assert.InDelta(t, want, got[((b*4+i)*5+j)*2+r], 1e-12)
				}
			}
		}
	}
	_, err = callKernel(t, "AffineGrid", 20, []*ir.Tensor{theta, i64s(2, 3, 4)}, 1)
	assert.Error(t, err)
}

func TestCol2ImInvertsIm2Col(t *testing.T) {
	// Col2Im sums each column entry into its image position: for the
	// columns of an image (im2col), each pixel comes back times the
	// number of blocks that cover it.
	rng := rand.New(rand.NewPCG(13, 14))
	const n, ch, h, w, kh, kw, stride, dil, pad = 2, 3, 5, 6, 2, 3, 2, 1, 1
	x := randTensor(rng, ir.Float64, n, ch, h, w)
	xv := Float64s(x)
	bh, bw := (h+2*pad-dil*(kh-1)-1)/stride+1, (w+2*pad-dil*(kw-1)-1)/stride+1
	cols := make([]float64, n*ch*kh*kw*bh*bw)
	cover := make([]float64, h*w)
	for b := range n {
		for c := range ch {
			for i := range kh {
				for j := range kw {
					for bi := range bh {
						for bj := range bw {
							y, z := bi*stride-pad+i*dil, bj*stride-pad+j*dil
							if y < 0 || y >= h || z < 0 || z >= w {
								continue
							}
							cols[(((b*ch+c)*kh+i)*kw+j)*bh*bw+bi*bw+bj] = xv[((b*ch+c)*h+y)*w+z]
							if b == 0 && c == 0 {
								cover[y*w+z]++
							}
						}
					}
				}
			}
		}
	}
	out, err := callKernel(t, "Col2Im", 18, []*ir.Tensor{ir.FromSlice(ir.Float64, []int64{n, ch * kh * kw, int64(bh * bw)}, cols), i64s(h, w), i64s(kh, kw)}, 1,
		ir.AttrIs("strides", stride, stride), ir.AttrIs("pads", pad, pad, pad, pad), ir.AttrIs("dilations", dil, dil))
	require.NoError(t, err)
	want := make([]float64, len(xv))
	for k := range want {
		want[k] = xv[k] * cover[k%(h*w)]
	}
	assertClose(t, want, Float64s(out[0]), 1e-12, 1e-12)
	_, err = callKernel(t, "Col2Im", 18, []*ir.Tensor{ir.FromSlice(ir.Float64, []int64{n, ch * kh * kw, int64(bh*bw + 1)}, append(cols, make([]float64, n*ch*kh*kw)...)), i64s(h, w), i64s(kh, kw)}, 1,
		ir.AttrIs("strides", stride, stride), ir.AttrIs("pads", pad, pad, pad, pad), ir.AttrIs("dilations", dil, dil))
	assert.Error(t, err, "a block count the geometry does not give")
	_, err = callKernel(t, "Col2Im", 18, []*ir.Tensor{x, i64s(h, w), i64s(kh)}, 1)
	assert.Error(t, err)
}

func TestMaxUnpoolScatters(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := randTensor(rng, ir.Float32, 2, 3, 2, 2)
	// Each 2x2 window of a 4x4 output gets its value at a random place.
	ind := make([]int64, 24)
	for k := range ind {
		nc, i, j := int64(k/4), int64(k/2%2), int64(k%2)
		ind[k] = nc*16 + (2*i+rng.Int64N(2))*4 + 2*j + rng.Int64N(2)
	}
	it := ir.FromSlice(ir.Int64, []int64{2, 3, 2, 2}, ind)
	for _, shape := range [][]int64{nil, {2, 3, 5, 6}} {
		ins := []*ir.Tensor{x, it}
		if shape != nil {
			ins = append(ins, i64s(shape...))
		}
		out, err := callKernel(t, "MaxUnpool", 11, ins, 1, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
		require.NoError(t, err)
		dims := []int64{2, 3, 4, 4}
		if shape != nil {
			dims = shape
		}
		require.Equal(t, dims, out[0].Dims)
		want := make([]float64, ir.Product(dims))
		for k, j := range ind {
			nc, y, z := j/16, j/4%4, j%4
			want[(nc*dims[2]+y)*dims[3]+z] = float64(x.Float32s()[k])
		}
		assertClose(t, want, Float64s(out[0]), 0, 0)
	}
	ind[0] = 999
	_, err := callKernel(t, "MaxUnpool", 11, []*ir.Tensor{x, ir.FromSlice(ir.Int64, []int64{2, 3, 2, 2}, ind)}, 1, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
	assert.ErrorContains(t, err, "outside")
}

func TestNonMaxSuppressionIsGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const batches, classes, n = 2, 3, 40
	boxes := make([]float32, batches*n*4)
	for i := range batches * n {
		y, x := rng.Float32()*10, rng.Float32()*10
		h, w := rng.Float32()*4+0.1, rng.Float32()*4+0.1
		boxes[4*i], boxes[4*i+1], boxes[4*i+2], boxes[4*i+3] = y, x, y+h, x+w
		if i%3 == 0 { // flipped corners mean the same box
			boxes[4*i], boxes[4*i+2] = boxes[4*i+2], boxes[4*i]
		}
	}
	scores := make([]float32, batches*classes*n)
	for i := range scores {
		scores[i] = rng.Float32()
	}
	const maxOut, iouT, scoreT = 8, 0.3, 0.2
	out, err := callKernel(t, "NonMaxSuppression", 11, []*ir.Tensor{f32([]int64{batches, n, 4}, boxes...), f32([]int64{batches, classes, n}, scores...),
		i64s(maxOut), f32([]int64{1}, iouT), f32([]int64{1}, scoreT)}, 1)
	require.NoError(t, err)
	sel := Int64s(out[0])
	bx := func(b, i int64) box {
		v := make([]float64, 4)
		for k := range v {
			v[k] = float64(boxes[(b*n+i)*4+int64(k)])
		}
		return boxAt(v, false)
	}
	picked := map[[2]int64][]int64{}
	for k := 0; k < len(sel); k += 3 {
		picked[[2]int64{sel[k], sel[k+1]}] = append(picked[[2]int64{sel[k], sel[k+1]}], sel[k+2])
	}
	for b := int64(0); b < batches; b++ {
		for c := int64(0); c < classes; c++ {
			s := scores[(b*classes+c)*n:]
			kept := picked[[2]int64{b, c}]
			assert.LessOrEqual(t, len(kept), maxOut)
			for k, i := range kept {
				assert.Greater(t, s[i], float32(scoreT))
				if k > 0 {
					assert.GreaterOrEqual(t, s[kept[k-1]], s[i], "selected in score order")
				}
				for _, j := range kept[:k] {
					assert.LessOrEqual(t, iou(bx(b, i), bx(b, j)), iouT, "kept boxes overlap")
				}
			}
			if len(kept) == maxOut {
				continue
			}
			// Every box left out is below the threshold or overlaps a
			// better kept one.
			for i := int64(0); i < n; i++ {
				if s[i] <= scoreT || contains(kept, i) {
					continue
				}
				covered := false
				for _, j := range kept {
					covered = covered || s[j] >= s[i] && iou(bx(b, i), bx(b, j)) > iouT
				}
				assert.True(t, covered, "box %d of batch %d class %d was dropped for nothing", i, b, c)
			}
		}
	}
	outs, err := callInfer("NonMaxSuppression", 11, []ir.Type{sym(ir.Float32, "B", "N", 4), sym(ir.Float32, "B", 3, "N")}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "int64[count_out0,3]", outs[0].String())
	_, err = callKernel(t, "NonMaxSuppression", 11, []*ir.Tensor{f32([]int64{1, 2, 3}, 1, 2, 3, 4, 5, 6), f32([]int64{1, 1, 2}, 1, 2)}, 1)
	assert.Error(t, err)
}

func contains(s []int64, v int64) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func TestRoiAlignOfLinearImage(t *testing.T) {
	// Over a linear image, each bin's average of bilinear samples on a
	// symmetric grid is the image at the bin's centre.
	rng := rand.New(rand.NewPCG(19, 20))
	const ch, h, w, oh, ow = 2, 12, 14, 3, 4
	img := make([]float32, ch*h*w)
	coef := [ch][3]float64{}
	for c := range ch {
		coef[c] = [3]float64{rng.Float64() + 0.5, rng.Float64() - 1, rng.Float64()}
		for y := range h {
			for x := range w {
				img[(c*h+y)*w+x] = float32(coef[c][0]*float64(y) + coef[c][1]*float64(x) + coef[c][2])
			}
		}
	}
	const scale = 0.5
	rois := []float32{2, 3, 20, 16, 5, 4, 19, 21} // x1, y1, x2, y2 at twice the image's scale
	for _, half := range []string{"half_pixel", "output_half_pixel"} {
		out, err := callKernel(t, "RoiAlign", 16, []*ir.Tensor{f32([]int64{1, ch, h, w}, img...), f32([]int64{2, 4}, rois...), i64s(0, 0)}, 1,
			ir.AttrS("coordinate_transformation_mode", half), ir.AttrI("output_height", oh), ir.AttrI("output_width", ow),
			ir.AttrF("spatial_scale", scale), ir.AttrI("sampling_ratio", 2))
		require.NoError(t, err)
		require.Equal(t, []int64{2, ch, oh, ow}, out[0].Dims)
		off := 0.0
		if half == "half_pixel" {
			off = 0.5
		}
		var want []float64
		for r := range 2 {
			x0, y0 := float64(rois[4*r])*scale-off, float64(rois[4*r+1])*scale-off
			bw, bh := (float64(rois[4*r+2])*scale-off-x0)/ow, (float64(rois[4*r+3])*scale-off-y0)/oh
			for c := range ch {
				for i := range oh {
					for j := range ow {
						yc, xc := y0+(float64(i)+0.5)*bh, x0+(float64(j)+0.5)*bw
						want = append(want, coef[c][0]*yc+coef[c][1]*xc+coef[c][2])
					}
				}
			}
		}
		assertClose(t, want, Float64s(out[0]), 1e-5, 1e-5, half)
	}
	_, err := callKernel(t, "RoiAlign", 16, []*ir.Tensor{f32([]int64{1, ch, h, w}, img...), f32([]int64{2, 4}, rois...), i64s(0, 3)}, 1)
	assert.ErrorContains(t, err, "batch index")
	_, err = callKernel(t, "RoiAlign", 16, []*ir.Tensor{f32([]int64{1, ch, h, w}, img...), f32([]int64{2, 4}, rois...), i64s(0, 0)}, 1, ir.AttrS("mode", "median"))
	assert.ErrorContains(t, err, "mode")
}

// cofactorDet is the determinant by Laplace expansion along the first row.
func cofactorDet(a []float64, n int) float64 {
	if n == 1 {
		return a[0]
	}
	var det float64
	for j := range n {
		minor := make([]float64, 0, (n-1)*(n-1))
		for r := 1; r < n; r++ {
			for c := range n {
				if c != j {
					minor = append(minor, a[r*n+c])
				}
			}
		}
		sign := 1.0
		if j%2 == 1 {
			sign = -1
		}
		det += sign * a[j] * cofactorDet(minor, n-1)
	}
	return det
}

func TestDetAgainstCofactors(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int64{1, 2, 3, 5} {
		x := randTensor(rng, ir.Float64, 2, 3, n, n)
		out, err := callKernel(t, "Det", 22, []*ir.Tensor{x}, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{2, 3}, out[0].Dims)
		v := Float64s(x)
		for b, got := range Float64s(out[0]) {
			assert.InDelta(t, cofactorDet(v[int64(b)*n*n:int64(b+1)*n*n], int(n)), got, 1e-9)
		}
	}
	// A singular matrix (two equal rows).
	out, err := callKernel(t, "Det", 22, []*ir.Tensor{f32([]int64{2, 2}, 1, 2, 1, 2)}, 1)
	require.NoError(t, err)
	assert.Equal(t, float32(0), out[0].Float32s()[0])
	_, err = callKernel(t, "Det", 22, []*ir.Tensor{f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, 1)
	assert.Error(t, err)
}

func TestUniqueAgainstMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	v := make([]int64, 50)
	for i := range v {
		v[i] = rng.Int64N(12) - 6
	}
	x := FromInt64s(ir.Int32, []int64{5, 10}, v)
	for _, sorted := range []int64{0, 1} {
		out, err := callKernel(t, "Unique", 11, []*ir.Tensor{x}, 4, ir.AttrI("sorted", sorted))
		require.NoError(t, err)
		y, first, inverse, counts := Int64s(out[0]), Int64s(out[1]), Int64s(out[2]), Int64s(out[3])
		count := map[int64]int64{}
		firstAt := map[int64]int64{}
		for i := len(v) - 1; i >= 0; i-- {
			count[v[i]]++
			firstAt[v[i]] = int64(i)
		}
		require.Len(t, y, len(count))
		for k, e := range y {
			assert.Equal(t, count[e], counts[k])
			assert.Equal(t, firstAt[e], first[k])
		}
		for i, e := range v {
			assert.Equal(t, e, y[inverse[i]])
		}
		if sorted == 1 {
			assert.True(t, sort.SliceIsSorted(y, func(a, b int) bool { return y[a] < y[b] }))
		} else {
			assert.True(t, sort.SliceIsSorted(first, func(a, b int) bool { return first[a] < first[b] }), "unsorted keeps first-occurrence order")
		}
	}
	// Along an axis: the distinct rows of a matrix with repeated rows.
	rows := randTensor(rng, ir.Float32, 3, 4)
	rv := rows.Float32s()
	m := f32([]int64{6, 4}, append(append(append(append([]float32{}, rv[4:8]...), rv...), rv[4:8]...), rv[0:4]...)...)
	out, err := callKernel(t, "Unique", 11, []*ir.Tensor{m}, 4, ir.AttrI("axis", 0), ir.AttrI("sorted", 0))
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 4}, out[0].Dims)
	assert.Equal(t, append(append(append([]float32{}, rv[4:8]...), rv[0:4]...), rv[8:12]...), out[0].Float32s())
	assert.Equal(t, []int64{0, 1, 3}, Int64s(out[1]))
	assert.Equal(t, []int64{0, 1, 0, 2, 0, 1}, Int64s(out[2]))
	assert.Equal(t, []int64{3, 2, 1}, Int64s(out[3]))

	_, err = callKernel(t, "Unique", 11, []*ir.Tensor{m}, 1, ir.AttrI("axis", 2))
	assert.Error(t, err)
	outs, err := callInfer("Unique", 11, []ir.Type{sym(ir.Float32, "N", 4)}, nil, 4, ir.AttrI("axis", 0))
	require.NoError(t, err)
	assert.Equal(t, "float[count_out0,4]", outs[0].String())
	assert.Equal(t, "int64[N]", outs[2].String())
}

func TestDeformConvWithoutOffsetsIsConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	x := randTensor(rng, ir.Float64, 2, 4, 6, 7)
	w := randTensor(rng, ir.Float64, 6, 2, 3, 2)
	b := randTensor(rng, ir.Float64, 6)
	attrs := []*ir.Attribute{ir.AttrI("group", 2), ir.AttrIs("strides", 2, 1), ir.AttrIs("pads", 1, 0, 1, 1), ir.AttrIs("dilations", 1, 2)}
	conv, err := callKernel(t, "Conv", 11, []*ir.Tensor{x, w, b}, 1, attrs...)
	require.NoError(t, err)
	out := conv[0].Dims[2:]
	offset := ir.NewTensor(ir.Float64, 2, 2*3*2*2, out[0], out[1])
	mask := ir.NewTensor(ir.Float64, 2, 2*3*2, out[0], out[1])
	for i := range ir.Data[float64](mask) {
		ir.Data[float64](mask)[i] = 1
	}
	got, err := callKernel(t, "DeformConv", 19, []*ir.Tensor{x, w, offset, b, mask}, 1, append(attrs, ir.AttrI("offset_group", 2))...)
	require.NoError(t, err)
	assertClose(t, Float64s(conv[0]), Float64s(got[0]), 1e-12, 1e-12)

	// An offset of one row down on every tap is a Conv of the image
	// shifted up one row (zeros below). No padding on top, where the
	// offset would read row 0 and the shifted image's padding is zero.
	attrs[2] = ir.AttrIs("pads", 0, 0, 1, 1)
	shifted := make([]float64, x.Len())
	xv := Float64s(x)
	for i := range shifted {
		if row := i / 7 % 6; row < 5 {
			shifted[i] = xv[i+7]
		}
	}
	conv, err = callKernel(t, "Conv", 11, []*ir.Tensor{ir.FromSlice(ir.Float64, x.Dims, shifted), w}, 1, attrs...)
	require.NoError(t, err)
	out = conv[0].Dims[2:]
	offset = ir.NewTensor(ir.Float64, 2, 2*3*2*2, out[0], out[1])
	ov := ir.Data[float64](offset)
	points := int(out[0] * out[1])
	for k := range ov {
		if (k/points)%2 == 0 { // the row coordinate of each (group, tap)
			ov[k] = 1
		}
	}
	got, err = callKernel(t, "DeformConv", 22, []*ir.Tensor{x, w, offset}, 1, append(attrs, ir.AttrI("offset_group", 2))...)
	require.NoError(t, err)
	assertClose(t, Float64s(conv[0]), Float64s(got[0]), 1e-12, 1e-12)

	_, err = callKernel(t, "DeformConv", 22, []*ir.Tensor{x, w, offset}, 1, append(attrs, ir.AttrI("offset_group", 3))...)
	assert.Error(t, err, "4 channels do not split into 3 offset groups")
	outs, err := callInfer("DeformConv", 22, []ir.Type{sym(ir.Float32, "N", 4, "H", "W"), tt(ir.Float32, 6, 2, 3, 3), sym(ir.Float32, "N", 18, "H", "W")}, nil, 1, ir.AttrI("group", 2), ir.AttrIs("pads", 1, 1, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, "float[N,6,H,W]", outs[0].String())
}

// Malformed inputs and attributes give errors, never panics.
func TestVisionOpsRefuseMalformedInput(t *testing.T) {
	f := func(dims ...int64) *ir.Tensor {
		v := make([]float32, ir.Product(dims))
		for i := range v {
			v[i] = float32(i%7) - 3
		}
		return f32(dims, v...)
	}
	cases := []struct {
		op    string
		opset int64
		ins   []*ir.Tensor
		nOut  int
		attrs []*ir.Attribute
	}{
		{"GridSample", 20, []*ir.Tensor{f(1, 1, 0, 3), f(1, 2, 2, 2)}, 1, nil},
		{"GridSample", 20, []*ir.Tensor{f(2, 1, 3, 3), f(1, 2, 2, 2)}, 1, nil},
		{"GridSample", 20, []*ir.Tensor{f(1, 1, 3, 3), f(1, 2, 2)}, 1, nil},
		{"AffineGrid", 20, []*ir.Tensor{f(1, 2, 3), i64s(1, 1, 0, 4)}, 1, nil},
		{"AffineGrid", 20, []*ir.Tensor{f(1, 3, 4), i64s(1, 1, 4, 4)}, 1, nil},
		{"CenterCropPad", 18, []*ir.Tensor{f(3, 3), i64s(-1, 2)}, 1, nil},
		{"CenterCropPad", 18, []*ir.Tensor{f(3, 3), i64s(2)}, 1, []*ir.Attribute{ir.AttrIs("axes", 5)}},
		{"Col2Im", 18, []*ir.Tensor{f(1, 4, 4), i64s(3, 3), i64s(0, 2)}, 1, nil},
		{"Col2Im", 18, []*ir.Tensor{f(1, 4, 4), i64s(1, 1), i64s(2, 2)}, 1, nil},
		{"Col2Im", 18, []*ir.Tensor{f(1, 4, 4), i64s(3, 3), i64s(2, 2)}, 1, []*ir.Attribute{ir.AttrIs("strides", 0, 1)}},
		{"MaxUnpool", 11, []*ir.Tensor{f(1, 1, 2, 2), i64s(0, 1, 2, 3)}, 1, []*ir.Attribute{ir.AttrIs("kernel_shape", 2, 2)}},
		{"MaxUnpool", 11, []*ir.Tensor{f(1, 1, 2), ir.FromSlice(ir.Int64, []int64{1, 1, 2}, []int64{0, 1})}, 1, []*ir.Attribute{ir.AttrIs("kernel_shape", 2, 2)}},
		{"MaxUnpool", 11, []*ir.Tensor{f(1, 1, 2, 2), ir.FromSlice(ir.Int64, []int64{1, 1, 2, 2}, []int64{0, 1, -2, 3})}, 1, []*ir.Attribute{ir.AttrIs("kernel_shape", 2, 2)}},
		{"NonMaxSuppression", 11, []*ir.Tensor{f(1, 2, 4), f(2, 1, 2)}, 1, nil},
		{"NonMaxSuppression", 11, []*ir.Tensor{f(1, 2, 4), f(1, 1, 2), i64s(3), f32([]int64{1}, 2)}, 1, nil},
		{"RoiAlign", 16, []*ir.Tensor{f(1, 1, 0, 4), f(1, 4), i64s(0)}, 1, nil},
		{"RoiAlign", 16, []*ir.Tensor{f(1, 1, 4, 4), f(1, 3), i64s(0)}, 1, nil},
		{"RoiAlign", 16, []*ir.Tensor{f(1, 1, 4, 4), f(1, 4), i64s(0)}, 1, []*ir.Attribute{ir.AttrI("output_height", 0)}},
		{"RoiAlign", 16, []*ir.Tensor{f(1, 1, 4, 4), f(1, 4), i64s(0)}, 1, []*ir.Attribute{ir.AttrS("coordinate_transformation_mode", "asymmetric")}},
		{"Det", 22, []*ir.Tensor{f(3)}, 1, nil},
		{"Unique", 11, []*ir.Tensor{f(2, 3)}, 1, []*ir.Attribute{ir.AttrI("axis", -3)}},
		{"DeformConv", 19, []*ir.Tensor{f(1, 2, 4, 4), f(2, 2, 2, 2), f(1, 8, 3, 2)}, 1, nil},
		{"DeformConv", 19, []*ir.Tensor{f(1, 2, 4, 4), f(2, 2, 2, 2), f(1, 8, 3, 3), f(3)}, 1, nil},
		{"DeformConv", 19, []*ir.Tensor{f(1, 2, 4, 4), f(2, 2, 2, 2), f(1, 8, 3, 3)}, 1, []*ir.Attribute{ir.AttrIs("kernel_shape", 3, 3)}},
		{"DeformConv", 19, []*ir.Tensor{f(1, 2, 4, 4), f(2, 1, 2, 2), f(1, 8, 3, 3)}, 1, nil},
		{"DeformConv", 19, []*ir.Tensor{f(1, 2, 4, 4), f(2, 2, 2, 2), f(1, 8, 3, 3)}, 1, []*ir.Attribute{ir.AttrI("group", 0)}},
	}
	for _, c := range cases {
		s, err := Lookup("", c.op, c.opset)
		require.NoError(t, err)
		n := &ir.Node{OpType: c.op, Attrs: c.attrs}
		for range c.ins {
			n.Inputs = append(n.Inputs, &ir.Value{})
		}
		n.Outputs = make([]*ir.Value, c.nOut)
		for i := range n.Outputs {
			n.Outputs[i] = &ir.Value{}
		}
		err = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s %v panicked: %v", c.op, c.attrs, r)
				}
			}()
			return s.Run(NewKernelContext(s, n, c.opset, c.ins))
		}()
		assert.Error(t, err, "%s with inputs %v", c.op, c.ins)
	}
}
