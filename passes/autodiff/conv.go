package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Convolutions (ir/ops conv.go). A Conv's input gradient is the
// ConvTranspose of dy by the same weights; its weight gradient is a Conv
// of the input by dy with batch and channel axes swapped (the roles of
// stride and dilation swap too); its bias gradient sums dy over all but
// the channel axis. A ConvTranspose's are the mirror images.

func init() {
	define("", map[string]Rule{"Conv": convRule, "ConvTranspose": convTransposeRule})
}

// swap01 transposes the first two axes of a rank-r value.
func (c *Ctx) swap01(v *ir.Value, r int) *ir.Value {
	perm := []int64{1, 0}
	for a := 2; a < r; a++ {
		perm = append(perm, int64(a))
	}
	return c.Transpose(v, perm...)
}

// spatial returns the static spatial dims of a [N, C, ...] value.
func (c *Ctx) spatial(v *ir.Value) ([]int64, error) {
	s := v.Type.Shape
	if !s.Ranked || len(s.Dims) < 3 {
		return nil, c.Fail("%q must be ranked [N, C, ...]", v.Name)
	}
	var out []int64
	for _, d := range s.Dims[2:] {
		if !d.IsStatic() {
			return nil, c.Fail("the gradient needs %q's spatial dims static, it is %s", v.Name, s)
		}
		out = append(out, d.Value)
	}
	return out, nil
}

// channels is the static dim 1 of v.
func (c *Ctx) channels(v *ir.Value, axis int) (int64, error) {
	d := v.Type.Shape.Dims[axis]
	if !d.IsStatic() {
		return 0, c.Fail("%q's dim %d must be static", v.Name, axis)
	}
	return d.Value, nil
}

// correlate computes out[a, b, k...] = Σ_{n, i...} u[n, a, i...] ·
// v[n, b, k·kstep + i·istep - pad] for k < kernel: the weight gradient of
// both convolutions, as one Conv of u and v with their first two axes
// swapped, trimmed to kernel.
func (c *Ctx) correlate(u, v *ir.Value, kernel, kstep, istep, pad, vdims, udims []int64) *ir.Value {
	r := len(kernel) + 2
	n := len(kernel)
	pads := make([]int64, 2*n)
	trim := false
	for a := range kernel {
		pads[a] = pad[a]
		// The last tap k = kernel-1 reads up to (kernel-1)·kstep +
		// (udims-1)·istep - pad; pad the end to reach it exactly.
		end := (kernel[a]-1)*kstep[a] + (udims[a]-1)*istep[a] + 1 - vdims[a] - pad[a]
		if end < 0 {
			end, trim = 0, true
		}
		pads[n+a] = end
	}
	// Conv(input = vᵀ [B, N, ...], weight = uᵀ [A, N, ...]) gives [B, A, k...].
	out := c.Op("Conv", []*ir.Value{c.swap01(v, r), c.swap01(u, r)},
		ir.AttrIs("strides", kstep...), ir.AttrIs("dilations", istep...), ir.AttrIs("pads", pads...))
	if trim {
		for a := range kernel {
			out = c.sliceAxis(out, int64(2+a), 0, kernel[a])
		}
	}
	return c.swap01(out, r)
}

// convGroups splits the weight gradient by group: group g correlates
// input channels and output channels of its own.
func (c *Ctx) convGroups(group int64, u, v *ir.Value, uAxis, vAxis int, each func(u, v *ir.Value) *ir.Value) (*ir.Value, error) {
	if group == 1 {
		return each(u, v), nil
	}
	cu, err := c.channels(u, uAxis)
	if err != nil {
		return nil, err
	}
	cv, err := c.channels(v, vAxis)
	if err != nil {
		return nil, err
	}
	var parts []*ir.Value
	for g := int64(0); g < group; g++ {
		ug := c.sliceAxis(u, 1, g*cu/group, (g+1)*cu/group)
		vg := c.sliceAxis(v, 1, g*cv/group, (g+1)*cv/group)
		parts = append(parts, each(ug, vg))
	}
	return c.Op("Concat", parts, ir.AttrI("axis", 0)), nil
}

// convAttrsOf is the node's window as explicit attributes (auto_pad
// resolved).
func convAttrsOf(w ops.Window, group int64) []*ir.Attribute {
	return []*ir.Attribute{ir.AttrIs("strides", w.Strides...), ir.AttrIs("dilations", w.Dilations...),
		ir.AttrIs("pads", append(append([]int64{}, w.PadBegin...), w.PadEnd...)...), ir.AttrI("group", group)}
}

// convGeometry is a Conv's (or, transposed, a ConvTranspose's) spatial
// input and kernel dims and its window, as ir/ops resolves them.
func (c *Ctx) convGeometry(transposed bool) (in, kernel []int64, win ops.Window, err error) {
	if in, err = c.spatial(c.X(0)); err != nil {
		return
	}
	if kernel, err = c.spatial(c.X(1)); err != nil {
		return
	}
	if transposed {
		win, err = c.TransposeWindow(kernel, in)
	} else {
		win, err = c.Window(kernel, in)
	}
	return
}

func convRule(c *Ctx) ([]*ir.Value, error) {
	x, w, dy := c.X(0), c.X(1), c.DY[0]
	in, kernel, win, err := c.convGeometry(false)
	if err != nil {
		return nil, err
	}
	group := c.Int("group")
	out := make([]*ir.Value, len(c.Node.Inputs))
	if c.Need[0] {
		// ConvTranspose's output is (O-1)·s + (K-1)·d + 1 - pads +
		// output_padding: output_padding restores the rows the stride
		// skipped.
		opad := make([]int64, len(in))
		for a := range in {
			opad[a] = in[a] - ((win.Out[a]-1)*win.Strides[a] + (kernel[a]-1)*win.Dilations[a] + 1 - win.PadBegin[a] - win.PadEnd[a])
		}
		attrs := append(convAttrsOf(win, group), ir.AttrIs("output_padding", opad...))
		out[0] = c.Op("ConvTranspose", []*ir.Value{dy, w}, attrs...)
	}
	if c.Need[1] {
		d, err := c.convGroups(group, dy, x, 1, 1, func(u, v *ir.Value) *ir.Value {
			return c.correlate(u, v, kernel, win.Dilations, win.Strides, win.PadBegin, in, win.Out)
		})
		if err != nil {
			return nil, err
		}
		out[1] = d
	}
	if len(c.Need) > 2 && c.Need[2] {
		out[2] = c.ReduceSum(dy, allBut(x.Type.Shape.Rank(), 1), false)
	}
	return out, nil
}

// allBut lists the axes of a rank-r tensor except keep.
func allBut(r, keep int) []int64 {
	var axes []int64
	for a := 0; a < r; a++ {
		if a != keep {
			axes = append(axes, int64(a))
		}
	}
	return axes
}

func convTransposeRule(c *Ctx) ([]*ir.Value, error) {
	x, w, dy := c.X(0), c.X(1), c.DY[0]
	in, kernel, win, err := c.convGeometry(true)
	if err != nil {
		return nil, err
	}
	group := c.Int("group")
	out := make([]*ir.Value, len(c.Node.Inputs))
	if c.Need[0] {
		out[0] = c.Op("Conv", []*ir.Value{dy, w}, convAttrsOf(win, group)...)
	}
	if c.Need[1] {
		// dW[c, m, k] = Σ x[n, c, i]·dy[n, m, i·s + k·d - pad].
		d, err := c.convGroups(group, x, dy, 1, 1, func(u, v *ir.Value) *ir.Value {
			return c.correlate(u, v, kernel, win.Dilations, win.Strides, win.PadBegin, win.Out, in)
		})
		if err != nil {
			return nil, err
		}
		out[1] = d
	}
	if len(c.Need) > 2 && c.Need[2] {
		out[2] = c.ReduceSum(dy, allBut(x.Type.Shape.Rank(), 1), false)
	}
	return out, nil
}
