package ops

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Col2Im and MaxUnpool: ops that scatter values back into an image, the
// inverses of Im2Col (a convolution's unfolding) and of MaxPool with
// indices.

var imageOps = []*Schema{
	{Name: "Col2Im", Since: 18, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("dilations"), defInts("pads"), defInts("strides")},
		Types: numericTypes, Infer: inferCol2Im, Run: runCol2Im},
	{Name: "MaxUnpool", Since: 9, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: maxUnpoolAttrs, Types: numericTypes, Infer: inferMaxUnpool, Run: runMaxUnpool},
	{Name: "MaxUnpool", Since: 11, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: maxUnpoolAttrs, Types: numericTypes, Infer: inferMaxUnpool, Run: runMaxUnpool},
	{Name: "MaxUnpool", Since: 22, MinInputs: 2, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Attrs: maxUnpoolAttrs, Types: numericTypes, Infer: inferMaxUnpool, Run: runMaxUnpool},
}

func init() { register(imageOps) }

var maxUnpoolAttrs = []AttrDef{{Name: "kernel_shape", Kind: ir.AttrInts, Required: true}, defInts("pads"), defInts("strides")}

// windowAttrs returns per-axis dilations, strides and begin/end pads for k
// spatial axes, filling the defaults (1, 1, 0) and checking lengths.
func windowAttrs(a attrs, k int) (dilations, strides, pads []int64, err error) {
	get := func(name string, n int, def int64) ([]int64, error) {
		v := a.Ints(name)
		if !a.Has(name) {
			v = make([]int64, n)
			for i := range v {
				v[i] = def
			}
		}
		if len(v) != n {
			return nil, fmt.Errorf("%s %v has %d entries, want %d", name, ir.FormatList(v), len(v), n)
		}
		for _, x := range v {
			if x < 0 || x == 0 && def == 1 {
				return nil, fmt.Errorf("%s %v must be %s", name, ir.FormatList(v), map[bool]string{true: "positive", false: "non-negative"}[def == 1])
			}
		}
		return v, nil
	}
	if a.declares("dilations") {
		if dilations, err = get("dilations", k, 1); err != nil {
			return
		}
	}
	if strides, err = get("strides", k, 1); err != nil {
		return
	}
	pads, err = get("pads", 2*k, 0)
	return
}

// --- Col2Im ----------------------------------------------------------------

// col2imGeometry is Col2Im's shapes: the image's spatial dims, the block's,
// and the number of block positions along each axis.
type col2imGeometry struct {
	image, block, blocks     []int64
	dilations, strides, pads []int64
}

func col2imOf(a attrs, image, block []int64) (col2imGeometry, error) {
	g := col2imGeometry{image: image, block: block}
	if len(image) != len(block) || len(image) == 0 {
		return g, fmt.Errorf("image_shape %v and block_shape %v must have one entry per spatial axis", ir.FormatList(image), ir.FormatList(block))
	}
	var err error
	if g.dilations, g.strides, g.pads, err = windowAttrs(a, len(image)); err != nil {
		return g, err
	}
	k := len(image)
	g.blocks = make([]int64, k)
	for i := range image {
		span := g.dilations[i]*(block[i]-1) + 1
		if block[i] < 1 || image[i] < 1 {
			return g, fmt.Errorf("image_shape %v and block_shape %v must be positive", ir.FormatList(image), ir.FormatList(block))
		}
		n := image[i] + g.pads[i] + g.pads[k+i] - span
		if n < 0 {
			return g, fmt.Errorf("block of %d spans more than the padded image axis %d", span, i)
		}
		g.blocks[i] = n/g.strides[i] + 1
	}
	return g, nil
}

func inferCol2Im(c *InferContext) error {
	x := c.In(0)
	image, block := constInts(c, 1), constInts(c, 2)
	k := vectorLen(c.In(1))
	if x.Shape.Ranked && x.Shape.Rank() != 3 {
		return c.Errorf("input has rank %d, want 3 (N, C*prod(block_shape), L)", x.Shape.Rank())
	}
	if k < 0 {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	out := unknownDims(k + 2)
	if x.Shape.Ranked {
		out.Dims[0] = x.Shape.Dims[0]
	}
	if image != nil {
		for i, d := range image {
			out.Dims[2+i] = ir.D(d)
		}
	}
	if image != nil && block != nil {
		g, err := col2imOf(c.attrs, image, block)
		if err != nil {
			return c.Errorf("%v", err)
		}
		if x.Shape.Ranked {
			cols, l := x.Shape.Dims[1], x.Shape.Dims[2]
			if cols.IsStatic() {
				per := ir.Product(block)
				if cols.Value%per != 0 {
					return c.Errorf("input has %d columns, not a multiple of prod(block_shape) = %d", cols.Value, per)
				}
				out.Dims[1] = ir.D(cols.Value / per)
			}
			if l.IsStatic() && l.Value != ir.Product(g.blocks) {
				return c.Errorf("input has %d blocks, the geometry gives %d", l.Value, ir.Product(g.blocks))
			}
		}
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

func runCol2Im(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	image, err := indexValues(c.In(1), "image_shape")
	if err != nil {
		return c.Errorf("%v", err)
	}
	block, err := indexValues(c.In(2), "block_shape")
	if err != nil {
		return c.Errorf("%v", err)
	}
	g, err := col2imOf(c.attrs, image, block)
	if err != nil {
		return c.Errorf("%v", err)
	}
	per, nblocks := ir.Product(block), ir.Product(g.blocks)
	if len(x.Dims) != 3 || x.Dims[1]%per != 0 || x.Dims[2] != nblocks {
		return c.Errorf("input has shape %v, want (N, C*%d, %d)", ir.FormatList(x.Dims), per, nblocks)
	}
	n, ch := x.Dims[0], x.Dims[1]/per
	plane := ir.Product(image)
	xs := Float64s(x)
	out := make([]float64, n*ch*plane)
	k := len(image)
	imgStrides := Strides(image)
	offsets := make([]int64, per) // each block element's image offset from the block's corner, or -1 when padded away
	b := make([]int64, k)
	l := make([]int64, k)
	for li := int64(0); li < nblocks; li++ {
		for i := range b {
			b[i] = 0
		}
		for bi := int64(0); bi < per; bi++ {
			off := int64(0)
			for i := range k {
				p := l[i]*g.strides[i] - g.pads[i] + b[i]*g.dilations[i]
				if p < 0 || p >= image[i] {
					off = -1
					break
				}
				off += p * imgStrides[i]
			}
			offsets[bi] = off
			nextCoord(b, block)
		}
		for nc := int64(0); nc < n*ch; nc++ {
			col := xs[nc*per*nblocks:]
			img := out[nc*plane:]
			for bi, off := range offsets {
				if off >= 0 {
					img[off] += col[int64(bi)*nblocks+li]
				}
			}
		}
		nextCoord(l, g.blocks)
	}
	c.Set(0, FromFloat64s(x.DType, append([]int64{n, ch}, image...), out))
	return nil
}

// --- MaxUnpool -------------------------------------------------------------

// unpoolShape is the output shape MaxUnpool infers from the input's:
// (in - 1) * stride - pads + kernel per spatial axis.
func unpoolShape(a attrs, in []int64) ([]int64, error) {
	kernel := a.Ints("kernel_shape")
	k := len(kernel)
	if len(in) != k+2 {
		return nil, fmt.Errorf("input has rank %d, want %d (N, C and one axis per kernel_shape entry)", len(in), k+2)
	}
	_, strides, pads, err := windowAttrs(a, k)
	if err != nil {
		return nil, err
	}
	out := append([]int64{}, in...)
	for i, kd := range kernel {
		out[2+i] = (in[2+i]-1)*strides[i] - pads[i] - pads[k+i] + kd
		if kd < 1 || out[2+i] < 0 {
			return nil, fmt.Errorf("kernel_shape %v with input %v gives no output", ir.FormatList(kernel), ir.FormatList(in))
		}
	}
	return out, nil
}

func inferMaxUnpool(c *InferContext) error {
	x, ind := c.In(0), c.In(1)
	if e := ind.Elem; e != ir.Undefined && e != ir.Int64 {
		return c.Errorf("indices are %s, want int64", e)
	}
	k := len(c.Ints("kernel_shape"))
	if c.HasInput(2) {
		if shape := constInts(c, 2); shape != nil {
			if len(shape) != k+2 {
				return c.Errorf("output_shape %v has %d entries, want %d", ir.FormatList(shape), len(shape), k+2)
			}
			c.Set(0, ir.TensorType(x.Elem, ir.S(shape...)))
			return nil
		}
		c.Set(0, ir.TensorType(x.Elem, unknownDims(k+2)))
		return nil
	}
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, unknownDims(k+2)))
		return nil
	}
	if x.Shape.Rank() != k+2 {
		return c.Errorf("input has rank %d, want %d", x.Shape.Rank(), k+2)
	}
	out := x.Shape.Clone()
	if in := knownDims(x.Shape); in != nil {
		dims, err := unpoolShape(c.attrs, in)
		if err != nil {
			return c.Errorf("%v", err)
		}
		c.Set(0, ir.TensorType(x.Elem, ir.S(dims...)))
		return nil
	}
	for i := 2; i < k+2; i++ {
		out.Dims[i] = ir.UnknownDim()
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// runMaxUnpool scatters each input element to its flat index in the
// inferred output, zero elsewhere; a larger output_shape keeps that
// result in its leading corner, as ONNX's reference does.
func runMaxUnpool(c *KernelContext) error {
	x, ind := c.In(0), c.In(1)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if ind.DType != ir.Int64 || !slices.Equal(ind.Dims, x.Dims) {
		return c.Errorf("indices are %s%v, want int64 of the input's shape %v", ind.DType, ir.FormatList(ind.Dims), ir.FormatList(x.Dims))
	}
	inferred, err := unpoolShape(c.attrs, x.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims := inferred
	if t := c.In(2); t != nil {
		if dims, err = indexValues(t, "output_shape"); err != nil {
			return c.Errorf("%v", err)
		}
		if len(dims) != len(inferred) {
			return c.Errorf("output_shape %v has %d entries, want %d", ir.FormatList(dims), len(dims), len(inferred))
		}
		for i, d := range dims {
			if d < inferred[i] {
				return c.Errorf("output_shape %v is smaller than the inferred %v", ir.FormatList(dims), ir.FormatList(inferred))
			}
		}
	}
	total := ir.Product(inferred)
	idx := make([]int, total)
	for i := range idx {
		idx[i] = -1
	}
	for k, j := range ind.Int64s() {
		if j < 0 || j >= total {
			return c.Errorf("index %d is outside the output's %d elements", j, total)
		}
		idx[j] = k
	}
	y := takeElems(x, inferred, idx, nil)
	// Embed y in the output's corner: each output axis reads y's positions
	// below y's length and zero beyond.
	st := Strides(inferred)
	maps := make([][]int, len(dims))
	for a, d := range dims {
		m := make([]int, d)
		for i := range m {
			if int64(i) < inferred[a] {
				m[i] = i * int(st[a])
			} else {
				m[i] = -1
			}
		}
		maps[a] = m
	}
	c.Set(0, takeElems(y, dims, axisIndex(dims, maps), nil))
	return nil
}
