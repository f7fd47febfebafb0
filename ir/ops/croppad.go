package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// CenterCropPad crops or zero-pads each listed axis to the target length,
// keeping the input centred: the crop starts, and the pad puts the input,
// at floor(|dim - target| / 2).

var cropPadOps = []*Schema{
	{Name: "CenterCropPad", Since: 18, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("axes")}, Types: allTypes, Infer: inferCenterCropPad, Run: runCenterCropPad},
}

func init() { register(cropPadOps) }

// cropPadAxes returns the axes the shape input's entries apply to, in
// order: the axes attribute resolved against rank, or every axis.
func cropPadAxes(a attrs, rank, n int) ([]int, error) {
	axes := a.Ints("axes")
	if !a.Has("axes") {
		axes = make([]int64, rank)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	norm, err := normAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	if len(norm) != n {
		return nil, fmt.Errorf("shape has %d entries, want %d (one per axis)", n, len(norm))
	}
	return norm, nil
}

func inferCenterCropPad(c *InferContext) error {
	x := c.In(0)
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	rank := x.Shape.Rank()
	if target := c.SymIn(1); target != nil && len(target.Dims) == 1 && constInts(c, 1) == nil {
		// Target lengths known as expressions (from a Shape): each is
		// the output's dim where it is known not to be negative.
		axes, err := cropPadAxes(c.attrs, rank, target.Len())
		if err != nil {
			return c.Errorf("%v", err)
		}
		out := x.Shape.Clone()
		for i, a := range axes {
			out.Dims[a] = symDim(target.Elems[i])
		}
		c.Set(0, ir.TensorType(x.Elem, out))
		return nil
	}
	target := constInts(c, 1)
	if target == nil {
		out := x.Shape.Clone()
		if c.Node.Attr("axes") == nil {
			out = unknownDims(rank)
		} else if axes, err := normAxes(c.Ints("axes"), rank); err == nil {
			for _, a := range axes {
				out.Dims[a] = ir.UnknownDim()
			}
		} else {
			return c.Errorf("%v", err)
		}
		c.Set(0, ir.TensorType(x.Elem, out))
		return nil
	}
	axes, err := cropPadAxes(c.attrs, rank, len(target))
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := x.Shape.Clone()
	for i, a := range axes {
		if target[i] < 0 {
			return c.Errorf("shape %v has a negative length", ir.FormatList(target))
		}
		out.Dims[a] = ir.D(target[i])
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

func runCenterCropPad(c *KernelContext) error {
	x := c.In(0)
	if err := checkMovable(c, x); err != nil {
		return err
	}
	target, err := indexValues(c.In(1), "shape")
	if err != nil {
		return c.Errorf("%v", err)
	}
	axes, err := cropPadAxes(c.attrs, len(x.Dims), len(target))
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := append([]int64{}, x.Dims...)
	for i, a := range axes {
		if target[i] < 0 {
			return c.Errorf("shape %v has a negative length", ir.FormatList(target))
		}
		dims[a] = target[i]
	}
	strides := Strides(x.Dims)
	maps := make([][]int, len(dims))
	for a, n := range dims {
		// Output position i reads input position i + shift: a crop
		// shifts forward, a pad backward (reading -1 outside the input).
		shift := CenterCropPadShift(x.Dims[a], n)
		m := make([]int, n)
		for i := range m {
			j := int64(i) + shift
			if j < 0 || j >= x.Dims[a] {
				m[i] = -1
			} else {
				m[i] = int(j * strides[a])
			}
		}
		maps[a] = m
	}
	c.Set(0, takeElems(x, dims, axisIndex(dims, maps), nil))
	return nil
}
