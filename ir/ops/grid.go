package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// GridSample and AffineGrid: sampling an N-D image at normalized
// coordinates in [-1, 1], and making such coordinates from affine maps.
// GridSample-16 samples 2-D images only and names its modes bilinear and
// bicubic; 20 samples any number of spatial axes and renames them linear
// and cubic.

var gridOps = []*Schema{
	{Name: "GridSample", Since: 16, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gridSampleAttrs("bilinear"), Types: numericTypes, Infer: inferGridSample, Run: runGridSample},
	{Name: "GridSample", Since: 20, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gridSampleAttrs("linear"), Types: numericTypes, Infer: inferGridSample, Run: runGridSample},
	{Name: "GridSample", Since: 22, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: gridSampleAttrs("linear"), Types: numericTypes, Infer: inferGridSample, Run: runGridSample},
	{Name: "AffineGrid", Since: 20, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInt("align_corners", 0)}, Types: floatTypes, Infer: inferAffineGrid, Run: runAffineGrid},
}

func init() { register(gridOps) }

func gridSampleAttrs(mode string) []AttrDef {
	return []AttrDef{defInt("align_corners", 0), defString("mode", mode), defString("padding_mode", "zeros")}
}

// sampleMode is GridSample's interpolation.
type sampleMode int

const (
	sampleNearest sampleMode = iota
	sampleLinear
	sampleCubic
)

// gridSampleSpec is GridSample's attributes, validated.
type gridSampleSpec struct {
	mode         sampleMode
	padding      string
	alignCorners bool
}

func gridSampleOf(a attrs, opset int64) (gridSampleSpec, error) {
	s := gridSampleSpec{padding: a.String("padding_mode"), alignCorners: a.Int("align_corners") != 0}
	linear, cubic := "linear", "cubic"
	if opset < 20 {
		linear, cubic = "bilinear", "bicubic"
	}
	switch m := a.String("mode"); m {
	case "nearest":
		s.mode = sampleNearest
	case linear:
		s.mode = sampleLinear
	case cubic:
		s.mode = sampleCubic
	default:
		return s, fmt.Errorf("mode is %q, want nearest, %s or %s", m, linear, cubic)
	}
	switch s.padding {
	case "zeros", "border", "reflection":
	default:
		return s, fmt.Errorf("padding_mode is %q, want zeros, border or reflection", s.padding)
	}
	return s, nil
}

func inferGridSample(c *InferContext) error {
	if _, err := gridSampleOf(c.attrs, c.Opset); err != nil {
		return c.Errorf("%v", err)
	}
	x, grid := c.In(0), c.In(1)
	if e := grid.Elem; e != ir.Undefined && !e.IsFloat() {
		return c.Errorf("grid is %s, want a float type", e)
	}
	if !x.Shape.Ranked || !grid.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	r := x.Shape.Rank()
	if r < 3 || c.Opset < 20 && r != 4 {
		return c.Errorf("input has rank %d, want %s", r, map[bool]string{true: "4", false: "at least 3"}[c.Opset < 20])
	}
	if grid.Shape.Rank() != r {
		return c.Errorf("grid has rank %d, input %d: want equal", grid.Shape.Rank(), r)
	}
	if last := grid.Shape.Dims[r-1]; last.IsStatic() && last.Value != int64(r-2) {
		return c.Errorf("grid's last axis has %d entries, want %d (one per spatial axis)", last.Value, r-2)
	}
	dims := append([]ir.Dim{pickDim(x.Shape.Dims[0], grid.Shape.Dims[0]), x.Shape.Dims[1]}, grid.Shape.Dims[1:r-1]...)
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(dims...)))
	return nil
}

// pickDim returns the better known of two dims that must be equal.
func pickDim(a, b ir.Dim) ir.Dim {
	if a.IsStatic() || !b.IsStatic() {
		return a
	}
	return b
}

func runGridSample(c *KernelContext) error {
	x, grid := c.In(0), c.In(1)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := gridSampleOf(c.attrs, c.Opset)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if !grid.DType.IsFloat() {
		return c.Errorf("grid is %s, want a float type", grid.DType)
	}
	r := len(x.Dims)
	if c.Opset < 20 && r != 4 {
		return c.Errorf("input has rank %d, want 4: GridSample-%d samples 2-D images", r, c.Opset)
	}
	if r < 3 || len(grid.Dims) != r || grid.Dims[r-1] != int64(r-2) || grid.Dims[0] != x.Dims[0] {
		return c.Errorf("input of shape %v and grid of shape %v: want (N, C, D1..Dk) and (N, d1..dk, k)", ir.FormatList(x.Dims), ir.FormatList(grid.Dims))
	}
	n, ch, space := x.Dims[0], x.Dims[1], x.Dims[2:]
	outSpace := grid.Dims[1 : r-1]
	points := ir.Product(outSpace)
	if ir.Product(space) == 0 && n*ch*points > 0 {
		return c.Errorf("input of shape %v has no pixels to sample", ir.FormatList(x.Dims))
	}
	dims := append([]int64{n, ch}, outSpace...)
	xs, gs := Float64s(x), Float64s(grid)
	out := make([]float64, ir.Product(dims))
	plane := ir.Product(space)
	k := len(space)
	for b := int64(0); b < n; b++ {
		for p := int64(0); p < points; p++ {
			// The grid lists coordinates innermost axis first.
			at := gs[(b*points+p)*int64(k):]
			coord := make([]float64, k)
			for i := range coord {
				coord[i] = at[k-1-i]
			}
			taps := spec.taps(coord, space)
			for ch0 := int64(0); ch0 < ch; ch0++ {
				img := xs[(b*ch+ch0)*plane:]
				var sum float64
				for _, t := range taps {
					sum += t.weight * img[t.offset]
				}
				out[(b*ch+ch0)*points+p] = sum
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, dims, out))
	return nil
}

// tap is one input element an output element reads, and its weight.
type tap struct {
	offset int
	weight float64
}

// taps returns the weighted input elements that make the sample at
// normalized coordinate coord (one per spatial axis, outermost first) of
// an image of shape space. Elements outside the image under zeros padding
// are left out.
func (s gridSampleSpec) taps(coord []float64, space []int64) []tap {
	pixel := make([]float64, len(coord))
	for i, d := range space {
		pixel[i] = s.clampCoord(s.denormalize(coord[i], d), d)
	}
	return s.pixelTapsND(pixel, space)
}

// pixelTapsND is taps at pixel coordinates (outermost axis first).
func (s gridSampleSpec) pixelTapsND(coord []float64, space []int64) []tap {
	strides := Strides(space)
	all := []tap{{0, 1}}
	for i, d := range space {
		var next []tap
		for _, t1 := range s.pixelTaps(coord[i], d) {
			for _, t := range all {
				next = append(next, tap{t.offset + t1.offset*int(strides[i]), t.weight * t1.weight})
			}
		}
		all = next
	}
	return all
}

// clampCoord rounds a pixel coordinate for nearest sampling and brings
// one outside the image back in under border and reflection padding.
func (s gridSampleSpec) clampCoord(x float64, d int64) float64 {
	lo, hi := s.bounds(d)
	if s.mode == sampleNearest {
		// Half to even on every rank: ONNX's test data for 3-D once
		// followed PyTorch's std::round, and no longer does.
		x = math.RoundToEven(x)
	}
	if x < lo || x > hi {
		switch s.padding {
		case "border":
			x = math.Max(0, math.Min(x, float64(d-1)))
		case "reflection":
			x = reflect(x, lo, hi)
		}
	}
	return x
}

// pixelTaps returns one axis' input positions (not yet multiplied by the
// stride) and weights at pixel coordinate x on an axis of length d.
func (s gridSampleSpec) pixelTaps(x float64, d int64) []tap {
	lo, hi := s.bounds(d)
	var pos []int64
	var w []float64
	switch s.mode {
	case sampleNearest:
		pos, w = []int64{int64(x)}, []float64{1}
	case sampleLinear:
		x0 := math.Floor(x)
		f := x - x0
		pos, w = []int64{int64(x0), int64(x0) + 1}, []float64{1 - f, f}
	case sampleCubic:
		x0 := math.Floor(x)
		c := cubicCoeffs(x - x0)
		i := int64(x0)
		pos, w = []int64{i - 1, i, i + 1, i + 2}, c[:]
	}
	taps := make([]tap, 0, len(pos))
	for k, p := range pos {
		if j, ok := s.pixel(p, d, lo, hi); ok {
			taps = append(taps, tap{int(j), w[k]})
		}
	}
	return taps
}

// denormalize maps [-1, 1] to pixel coordinates: to the centres of the
// corner pixels with align_corners, else to their outer edges.
func (s gridSampleSpec) denormalize(v float64, d int64) float64 {
	if s.alignCorners {
		return (v + 1) / 2 * float64(d-1)
	}
	return ((v+1)*float64(d) - 1) / 2
}

// bounds is the coordinate range reflection mirrors at.
func (s gridSampleSpec) bounds(d int64) (lo, hi float64) {
	if s.alignCorners {
		return 0, float64(d - 1)
	}
	return -0.5, float64(d) - 0.5
}

// pixel resolves integer position p on an axis of length d under the
// padding mode; ok is false for a zero (outside, zeros padding).
func (s gridSampleSpec) pixel(p, d int64, lo, hi float64) (int64, bool) {
	switch s.padding {
	case "zeros":
		return p, p >= 0 && p < d
	case "reflection":
		p = int64(reflect(float64(p), lo, hi))
	}
	return max(0, min(p, d-1)), true
}

// reflect mirrors x at lo and hi until it lies between them.
func reflect(x, lo, hi float64) float64 {
	span := hi - lo
	if span <= 0 {
		return lo
	}
	switch {
	case x < lo:
		dx := lo - x
		n := math.Floor(dx / span)
		r := dx - n*span
		if int64(n)%2 == 0 {
			return lo + r
		}
		return hi - r
	case x > hi:
		dx := x - hi
		n := math.Floor(dx / span)
		r := dx - n*span
		if int64(n)%2 == 0 {
			return hi - r
		}
		return lo + r
	}
	return x
}

// cubicCoeffs are Keys' cubic convolution weights (a = -0.75) of the four
// taps at -1, 0, 1, 2 for a fractional position t in [0, 1).
func cubicCoeffs(t float64) [4]float64 {
	const a = GridSampleCubicA
	near := func(x float64) float64 { return ((a+2)*x-(a+3))*x*x + 1 }
	far := func(x float64) float64 { return ((a*x-5*a)*x+8*a)*x - 4*a }
	return [4]float64{far(t + 1), near(t), near(1 - t), far(2 - t)}
}

// --- AffineGrid ----------------------------------------------------------------

func inferAffineGrid(c *InferContext) error {
	theta, size := c.In(0), c.In(1)
	k := -1
	if n := vectorLen(size); n >= 0 {
		if n != 4 && n != 5 {
			return c.Errorf("size has %d entries, want 4 (N, C, H, W) or 5 (N, C, D, H, W)", n)
		}
		k = n - 2
	}
	if theta.Shape.Ranked && theta.Shape.Rank() != 3 {
		return c.Errorf("theta has rank %d, want 3", theta.Shape.Rank())
	}
	if v := constInts(c, 1); v != nil {
		dims := []ir.Dim{ir.D(v[0])}
		for _, d := range v[2:] {
			dims = append(dims, ir.D(d))
		}
		c.Set(0, ir.TensorType(theta.Elem, ir.ShapeOf(append(dims, ir.D(int64(k)))...)))
		return nil
	}
	if k < 0 {
		c.Set(0, ir.TensorType(theta.Elem, ir.Shape{}))
		return nil
	}
	s := unknownDims(k + 2)
	if theta.Shape.Ranked {
		s.Dims[0] = theta.Shape.Dims[0]
	}
	s.Dims[k+1] = ir.D(int64(k))
	c.Set(0, ir.TensorType(theta.Elem, s))
	return nil
}

func runAffineGrid(c *KernelContext) error {
	theta := c.In(0)
	if err := checkType(c, theta.DType); err != nil {
		return err
	}
	size, err := indexValues(c.In(1), "size")
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(size) != 4 && len(size) != 5 {
		return c.Errorf("size has %d entries, want 4 or 5", len(size))
	}
	k := len(size) - 2
	n, space := size[0], size[2:]
	if len(theta.Dims) != 3 || theta.Dims[0] != n || theta.Dims[1] != int64(k) || theta.Dims[2] != int64(k+1) {
		return c.Errorf("theta has shape %v, want (%d, %d, %d)", ir.FormatList(theta.Dims), n, k, k+1)
	}
	for _, d := range space {
		if d <= 0 {
			return c.Errorf("size %v has a spatial length below 1", ir.FormatList(size))
		}
	}
	align := c.Int("align_corners") != 0
	th := Float64s(theta)
	points := ir.Product(space)
	out := make([]float64, n*points*int64(k))
	coord := make([]int64, k)
	base := make([]float64, k+1) // x (innermost axis) first, then 1
	for p := int64(0); p < points; p++ {
		for i := range k {
			base[i] = gridCoord(coord[k-1-i], space[k-1-i], align)
		}
		base[k] = 1
		for b := int64(0); b < n; b++ {
			m := th[b*int64(k*(k+1)):]
			for i := range k {
				var s float64
				for j, v := range base {
					s += m[i*(k+1)+j] * v
				}
				out[(b*points+p)*int64(k)+int64(i)] = s
			}
		}
		nextCoord(coord, space)
	}
	dims := append(append([]int64{n}, space...), int64(k))
	c.Set(0, FromFloat64s(theta.DType, dims, out))
	return nil
}

// gridCoord is the normalized coordinate of position i on an axis of
// length d: corner centres at -1 and 1 with align_corners, else pixel
// centres with the edges at -1 and 1.
func gridCoord(i, d int64, align bool) float64 {
	if align {
		if d == 1 {
			return -1
		}
		return -1 + 2*float64(i)/float64(d-1)
	}
	return (2*float64(i)+1)/float64(d) - 1
}
