package autodiff

import "github.com/kiln-ml/kiln/ir"

// The indexing ops (ir/ops index.go): Slice, Pad, Trilu and
// GatherElements move dy back to where each element came from; the
// gathers, scatters and interpolations have no rule yet.

func init() {
	define("", map[string]Rule{
		"Slice": sliceRule,
		"Pad":   padRule,
		"Trilu": func(c *Ctx) ([]*ir.Value, error) {
			return []*ir.Value{c.Op("Trilu", append([]*ir.Value{c.DY[0]}, c.Node.Inputs[1:]...), c.Node.Attrs...)}, nil
		},
		"GatherElements": func(c *Ctx) ([]*ir.Value, error) {
			if c.Opset < 16 {
				return nil, c.Fail("the gradient of GatherElements adds into repeated indices with ScatterElements(reduction=add), which needs opset 16 (the model imports %d)", c.Opset)
			}
			x := c.X(0)
			return []*ir.Value{c.Op("ScatterElements", []*ir.Value{c.ZerosLike(x), c.X(1), c.DY[0]},
				ir.AttrI("axis", c.Int("axis")), ir.AttrS("reduction", "add"))}, nil
		},
	})
	notDifferentiable("", valueIndependent, "OneHot")
	notDifferentiable("", "not implemented: scattering dy to repeated indices needs ScatterND with reduction=add over the gathered axis moved first; embeddings are the use", "Gather")
	notDifferentiable("", "not implemented: its gradient is a GatherND-shaped scatter", "GatherND")
	notDifferentiable("", "not implemented: the updates' gradient gathers dy at the indices and the data's masks them out", "Scatter", "ScatterElements", "ScatterND")
	notDifferentiable("", "not implemented: the gradient of an interpolation is its transpose, a scatter of each output's taps", "Resize", "Upsample")
}

// sliceRule pads dy back to the input's shape with zeros (unit steps).
func sliceRule(c *Ctx) ([]*ir.Value, error) {
	dims, err := c.staticDims(c.X(0))
	if err != nil {
		return nil, err
	}
	first, steps, counts, err := c.SliceWindow(dims)
	if err != nil {
		return nil, err
	}
	begin, end := make([]int64, len(dims)), make([]int64, len(dims))
	for a := range dims {
		if steps[a] != 1 && counts[a] > 1 {
			return nil, c.Fail("the gradient of a Slice with step %d is not implemented (unit steps are)", steps[a])
		}
		begin[a], end[a] = first[a], dims[a]-first[a]-counts[a]
		if counts[a] == 0 {
			begin[a], end[a] = 0, dims[a]
		}
	}
	return []*ir.Value{c.padZeros(c.DY[0], begin, end)}, nil
}

// padRule slices the padding off dy (constant mode, no cropping).
func padRule(c *Ctx) ([]*ir.Value, error) {
	x := c.X(0)
	dims, err := c.staticDims(x)
	if err != nil {
		return nil, err
	}
	p, err := c.PadSpec(x.Type.Elem, dims)
	if err != nil {
		return nil, err
	}
	if p.Mode != "constant" {
		return nil, c.Fail("the gradient of Pad in %s mode is not implemented (constant is)", p.Mode)
	}
	d := c.DY[0]
	for a := range dims {
		if p.Begin[a] < 0 || p.End[a] < 0 {
			return nil, c.Fail("the gradient of a cropping Pad is not implemented")
		}
		if p.Begin[a] != 0 || p.End[a] != 0 {
			d = c.sliceAxis(d, int64(a), p.Begin[a], p.Begin[a]+dims[a])
		}
	}
	return []*ir.Value{d}, nil
}
