package autodiff

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Pooling (ir/ops pool.go). MaxPool sends dy to where each maximum was,
// by its Indices output and ScatterElements; AveragePool spreads dy over
// each window as a ConvTranspose with a kernel of ones per channel.

func init() {
	define("", map[string]Rule{
		"MaxPool":     maxPoolRule,
		"AveragePool": averagePoolRule,
		"GlobalAveragePool": func(c *Ctx) ([]*ir.Value, error) {
			x := c.X(0)
			in, err := c.spatial(x)
			if err != nil {
				return nil, err
			}
			return []*ir.Value{c.ExpandTo(c.Mul(c.DY[0], c.k(x, 1/float64(ir.Product(in)))), x)}, nil
		},
		"GlobalMaxPool": func(c *Ctx) ([]*ir.Value, error) {
			return []*ir.Value{extremum(c, c.X(0), c.Y(0), c.DY[0])}, nil
		},
	})
}

// poolWindow resolves a pooling node's window.
func (c *Ctx) poolWindow() (ops.Window, []int64, error) {
	in, err := c.spatial(c.X(0))
	if err != nil {
		return ops.Window{}, nil, err
	}
	win, err := c.Window(c.KernelContext.Ints("kernel_shape"), in)
	return win, in, err
}

func maxPoolRule(c *Ctx) ([]*ir.Value, error) {
	x, y, dy := c.X(0), c.Y(0), c.DY[0]
	if c.Opset < 8 {
		return nil, c.Fail("the gradient of MaxPool takes its Indices output, from opset 8 (the model imports %d)", c.Opset)
	}
	if c.Node.Attr("storage_order") != nil && c.Int("storage_order") != 0 {
		return nil, c.Fail("the gradient of MaxPool with storage_order=1 is not implemented")
	}
	win, _, err := c.poolWindow()
	if err != nil {
		return nil, err
	}
	overlap := false
	for a, k := range win.Kernel {
		overlap = overlap || win.Strides[a] < (k-1)*win.Dilations[a]+1
	}
	var attrs []*ir.Attribute
	if overlap {
		if c.Opset < 16 {
			return nil, c.Fail("overlapping MaxPool windows need ScatterElements(reduction=add) for the gradient, from opset 16 (the model imports %d)", c.Opset)
		}
		attrs = append(attrs, ir.AttrS("reduction", "add"))
	}
	// The forward node computes the indices too.
	idx := c.Node.Output(1)
	if idx == nil {
		idx = &ir.Value{Name: c.Name(y.Name + "_indices"), Producer: c.Node, Type: ir.TensorType(ir.Int64, y.Type.Shape.Clone())}
		c.Node.Outputs = append(c.Node.Outputs[:1], idx)
	}
	flat := func(v *ir.Value) *ir.Value { return c.Op("Reshape", []*ir.Value{v, c.Int64s(-1)}) }
	zeros := flat(c.ZerosLike(x))
	d := c.Op("ScatterElements", []*ir.Value{zeros, flat(idx), flat(dy)}, attrs...)
	return []*ir.Value{c.ReshapeTo(d, x)}, nil
}

// averagePoolRule: dy divided by each window's count, then summed into the
// input positions each window covered (a depthwise ConvTranspose of ones).
func averagePoolRule(c *Ctx) ([]*ir.Value, error) {
	x, dy := c.X(0), c.DY[0]
	win, in, err := c.poolWindow()
	if err != nil {
		return nil, err
	}
	ch, err := c.channels(x, 1)
	if err != nil {
		return nil, err
	}
	includePad := c.Int("count_include_pad") != 0
	counts := ops.AveragePoolCounts(win, in, includePad)
	n := int(ir.Product(win.Out))
	vals := make([]float64, n)
	for i := range vals {
		rest, cnt := i, int64(1)
		for a := len(win.Out) - 1; a >= 0; a-- {
			cnt *= counts[a][rest%int(win.Out[a])]
			rest /= int(win.Out[a])
		}
		vals[i] = 1 / float64(cnt)
	}
	inv := ops.FromFloat64s(x.Type.Elem, win.Out, vals)
	scaled := c.Mul(dy, c.Const("pool_inv_count", inv))
	ones := make([]float64, ch*ir.Product(win.Kernel))
	for i := range ones {
		ones[i] = 1
	}
	kdims := append([]int64{ch, 1}, win.Kernel...)
	opad := make([]int64, len(in))
	for a := range in {
		opad[a] = in[a] - ((win.Out[a]-1)*win.Strides[a] + (win.Kernel[a]-1)*win.Dilations[a] + 1 - win.PadBegin[a] - win.PadEnd[a])
	}
	// ceil_mode windows can run past the padded end: the transpose then
	// covers more than the input, and the extra is cut off.
	trim := false
	for a := range opad {
		if opad[a] < 0 {
			trim, opad[a] = true, 0
		}
	}
	attrs := append(convAttrsOf(win, ch), ir.AttrIs("output_padding", opad...))
	d := c.Op("ConvTranspose", []*ir.Value{scaled, c.Const("pool_ones", ops.FromFloat64s(x.Type.Elem, kdims, ones))}, attrs...)
	if trim {
		for a := range in {
			d = c.sliceAxis(d, int64(2+a), 0, in[a])
		}
	}
	return []*ir.Value{d}, nil
}
