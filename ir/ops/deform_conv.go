package ops

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// DeformConv: a convolution whose every kernel tap reads the input at a
// learned fractional offset (bilinear, zero outside the image), optionally
// scaled by a mask. Any number of spatial axes; v22 only added bfloat16.

var deformConvOps = []*Schema{
	{Name: "DeformConv", Since: 19, MinInputs: 3, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Attrs: deformConvAttrs, Types: convTypes, Infer: inferDeformConv, Run: runDeformConv},
	{Name: "DeformConv", Since: 22, MinInputs: 3, MaxInputs: 5, MinOutputs: 1, MaxOutputs: 1,
		Attrs: deformConvAttrs, Types: convTypes22, Infer: inferDeformConv, Run: runDeformConv},
}

func init() { register(deformConvOps) }

var deformConvAttrs = []AttrDef{defInts("dilations"), defInt("group", 1), defInts("kernel_shape"),
	defInt("offset_group", 1), defInts("pads"), defInts("strides")}

// deformWindow is DeformConv's window for the weights' spatial dims
// (kernel_shape when given, which must agree).
func deformWindow(a attrs, weights []int64) (*windowSpec, error) {
	kernel := weights
	if a.Has("kernel_shape") {
		kernel = a.Ints("kernel_shape")
		if len(kernel) != len(weights) {
			return nil, fmt.Errorf("kernel_shape %v has %d entries for %d spatial axes", ir.FormatList(kernel), len(kernel), len(weights))
		}
		for i, k := range kernel {
			if weights[i] >= 0 && k != weights[i] {
				return nil, fmt.Errorf("kernel_shape %v differs from the weights' spatial dims %v", ir.FormatList(kernel), ir.FormatList(weights))
			}
		}
	}
	dilations, strides, pads, err := windowAttrs(a, len(kernel))
	if err != nil {
		return nil, err
	}
	if a.Int("group") < 1 || a.Int("offset_group") < 1 {
		return nil, fmt.Errorf("group %d and offset_group %d must be positive", a.Int("group"), a.Int("offset_group"))
	}
	return &windowSpec{kernel: kernel, strides: strides, dilations: dilations, pads: pads, autoPad: "NOTSET"}, nil
}

func inferDeformConv(c *InferContext) error {
	x, w := c.In(0), c.In(1)
	elem, err := sameElem(c, 0, 1, 2)
	if err != nil {
		return err
	}
	if !x.Shape.Ranked || !w.Shape.Ranked {
		c.Set(0, ir.TensorType(elem, ir.Shape{}))
		return nil
	}
	r := x.Shape.Rank()
	if r < 3 || w.Shape.Rank() != r {
		return c.Errorf("input has rank %d and weights %d, want one rank of at least 3", r, w.Shape.Rank())
	}
	kernel := make([]int64, r-2)
	for i, d := range w.Shape.Dims[2:] {
		kernel[i] = dimValue(d)
	}
	win, err := deformWindow(c.attrs, kernel)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := []ir.Dim{x.Shape.Dims[0], w.Shape.Dims[0]}
	for i, d := range x.Shape.Dims[2:] {
		dims = append(dims, win.axisDim(i, d))
	}
	c.Set(0, ir.TensorType(elem, ir.ShapeOf(dims...)))
	return nil
}

// deformShapes is DeformConv's operands' geometry, checked.
type deformShapes struct {
	n, inC, outC, groups, offsetGroups int64
	in, out, kernel                    []int64
	win                                *windowSpec
}

func deformShapesOf(c *KernelContext) (deformShapes, error) {
	x, w, off := c.In(0), c.In(1), c.In(2)
	r := len(x.Dims)
	var s deformShapes
	if r < 3 || len(w.Dims) != r || len(off.Dims) != r {
		return s, fmt.Errorf("input %v, weights %v and offset %v must have one rank of at least 3", ir.FormatList(x.Dims), ir.FormatList(w.Dims), ir.FormatList(off.Dims))
	}
	win, err := deformWindow(c.attrs, w.Dims[2:])
	if err != nil {
		return s, err
	}
	s = deformShapes{n: x.Dims[0], inC: x.Dims[1], outC: w.Dims[0], groups: c.Int("group"), offsetGroups: c.Int("offset_group"),
		in: x.Dims[2:], kernel: win.kernel, win: win, out: make([]int64, r-2)}
	for i := range s.out {
		if s.out[i], _, _, err = win.axis(i, s.in[i]); err != nil {
			return s, err
		}
	}
	taps := ir.Product(s.kernel)
	k := int64(r - 2)
	switch {
	case s.inC != w.Dims[1]*s.groups || s.outC%s.groups != 0:
		return s, fmt.Errorf("input's %d channels and weights %v do not fit group %d", s.inC, ir.FormatList(w.Dims), s.groups)
	case s.inC%s.offsetGroups != 0:
		return s, fmt.Errorf("input's %d channels are not a multiple of offset_group %d", s.inC, s.offsetGroups)
	case !slices.Equal(off.Dims, append([]int64{s.n, s.offsetGroups * taps * k}, s.out...)):
		return s, fmt.Errorf("offset has shape %v, want %v", ir.FormatList(off.Dims), ir.FormatList(append([]int64{s.n, s.offsetGroups * taps * k}, s.out...)))
	}
	if b := c.In(3); b != nil && !slices.Equal(b.Dims, []int64{s.outC}) {
		return s, fmt.Errorf("bias has shape %v, want (%d)", ir.FormatList(b.Dims), s.outC)
	}
	if m := c.In(4); m != nil && !slices.Equal(m.Dims, append([]int64{s.n, s.offsetGroups * taps}, s.out...)) {
		return s, fmt.Errorf("mask has shape %v, want %v", ir.FormatList(m.Dims), ir.FormatList(append([]int64{s.n, s.offsetGroups * taps}, s.out...)))
	}
	return s, nil
}

func runDeformConv(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	for i := 1; i < 5; i++ {
		if t := c.In(i); t != nil && t.DType != x.DType {
			return c.Errorf("input %d is %s, input 0 %s: want one type", i, t.DType, x.DType)
		}
	}
	s, err := deformShapesOf(c)
	if err != nil {
		return c.Errorf("%v", err)
	}
	xs, ws, offs := Float64s(x), Float64s(c.In(1)), Float64s(c.In(2))
	bias, mask := optFloat64s(c.In(3)), optFloat64s(c.In(4))
	k := len(s.in)
	taps, points, plane := ir.Product(s.kernel), ir.Product(s.out), ir.Product(s.in)
	perGroupIn, perGroupOut := s.inC/s.groups, s.outC/s.groups
	perOffsetGroup := s.inC / s.offsetGroups
	sampler := gridSampleSpec{mode: sampleLinear, padding: "zeros", alignCorners: true}
	out := make([]float64, s.n*s.outC*points)
	outPos, tapPos := make([]int64, k), make([]int64, k)
	coord := make([]float64, k)
	for b := int64(0); b < s.n; b++ {
		for i := range outPos {
			outPos[i] = 0
		}
		for p := int64(0); p < points; p++ {
			for g := int64(0); g < s.offsetGroups; g++ {
				for i := range tapPos {
					tapPos[i] = 0
				}
				for t := int64(0); t < taps; t++ {
					// The tap's position: its place in the dilated window
					// plus the learned offset, one per spatial axis.
					base := ((b*s.offsetGroups+g)*taps + t) * int64(k)
					for i := range k {
						start := outPos[i]*s.win.strides[i] - s.win.pads[i] + tapPos[i]*s.win.dilations[i]
						coord[i] = float64(start) + offs[(base+int64(i))*points+p]
					}
					weight := 1.0
					if mask != nil {
						weight = mask[((b*s.offsetGroups+g)*taps+t)*points+p]
					}
					samples := sampler.pixelTapsND(coord, s.in)
					for ic := g * perOffsetGroup; ic < (g+1)*perOffsetGroup; ic++ {
						img := xs[(b*s.inC+ic)*plane:]
						var v float64
						for _, sm := range samples {
							v += sm.weight * img[sm.offset]
						}
						v *= weight
						grp := ic / perGroupIn
						for oc := grp * perGroupOut; oc < (grp+1)*perGroupOut; oc++ {
							out[(b*s.outC+oc)*points+p] += v * ws[(oc*perGroupIn+ic%perGroupIn)*taps+t]
						}
					}
					nextCoord(tapPos, s.kernel)
				}
			}
			nextCoord(outPos, s.out)
		}
	}
	if bias != nil {
		for b := int64(0); b < s.n; b++ {
			for oc := int64(0); oc < s.outC; oc++ {
				for p := int64(0); p < points; p++ {
					out[(b*s.outC+oc)*points+p] += bias[oc]
				}
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, append([]int64{s.n, s.outC}, s.out...), out))
	return nil
}
