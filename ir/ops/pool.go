package ops

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
)

// The pooling ops. Their windows are sized and padded by conv.go's
// windowSpec, like the convolutions'.

var (
	maxPoolTypes12 = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.Int8, ir.Uint8}
	maxPoolTypes22 = []ir.DType{ir.Float16, ir.Float32, ir.Float64, ir.Int8, ir.Uint8, ir.BFloat16}
)

// poolAttrs lists a pooling row's attributes: the common four, then the
// ones the version adds.
func poolAttrs(extra ...AttrDef) []AttrDef {
	return append([]AttrDef{
		defString("auto_pad", "NOTSET"),
		{Name: "kernel_shape", Kind: ir.AttrInts, Required: true},
		defInts("pads"),
		defInts("strides"),
	}, extra...)
}

func poolRow(name string, since int64, outs int, types []ir.DType, attrs []AttrDef, infer func(*InferContext) error, run func(*KernelContext) error) *Schema {
	return &Schema{Name: name, Since: since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: outs,
		Attrs: attrs, Types: types, Infer: infer, Run: run}
}

var poolOps = []*Schema{
	// AveragePool: v7 added count_include_pad, v10 ceil_mode, v19
	// dilations, v22 bfloat16 (v11 only reworded the padding rules).
	poolRow("AveragePool", 1, 1, convTypes, poolAttrs(), inferPool, runAveragePool),
	poolRow("AveragePool", 7, 1, convTypes, poolAttrs(defInt("count_include_pad", 0)), inferPool, runAveragePool),
	poolRow("AveragePool", 10, 1, convTypes, poolAttrs(defInt("count_include_pad", 0), defInt("ceil_mode", 0)), inferPool, runAveragePool),
	poolRow("AveragePool", 19, 1, convTypes, poolAttrs(defInt("count_include_pad", 0), defInt("ceil_mode", 0), defInts("dilations")), inferPool, runAveragePool),
	poolRow("AveragePool", 22, 1, convTypes22, poolAttrs(defInt("count_include_pad", 0), defInt("ceil_mode", 0), defInts("dilations")), inferPool, runAveragePool),
	// MaxPool: v8 added the Indices output and storage_order, v10 ceil_mode
	// and dilations, v12 int8/uint8, v22 bfloat16.
	poolRow("MaxPool", 1, 1, convTypes, poolAttrs(), inferPool, runMaxPool),
	poolRow("MaxPool", 8, 2, convTypes, poolAttrs(defInt("storage_order", 0)), inferPool, runMaxPool),
	poolRow("MaxPool", 10, 2, convTypes, poolAttrs(defInt("storage_order", 0), defInt("ceil_mode", 0), defInts("dilations")), inferPool, runMaxPool),
	poolRow("MaxPool", 12, 2, maxPoolTypes12, poolAttrs(defInt("storage_order", 0), defInt("ceil_mode", 0), defInts("dilations")), inferPool, runMaxPool),
	poolRow("MaxPool", 22, 2, maxPoolTypes22, poolAttrs(defInt("storage_order", 0), defInt("ceil_mode", 0), defInts("dilations")), inferPool, runMaxPool),
	poolRow("GlobalAveragePool", 1, 1, convTypes, nil, inferGlobalPool, runGlobalPool),
	poolRow("GlobalAveragePool", 22, 1, convTypes22, nil, inferGlobalPool, runGlobalPool),
	poolRow("GlobalMaxPool", 1, 1, convTypes, nil, inferGlobalPool, runGlobalPool),
	poolRow("GlobalMaxPool", 22, 1, convTypes22, nil, inferGlobalPool, runGlobalPool),
}

func init() { register(poolOps) }

// poolShape infers a pool's output [N, C, out...] from x [N, C, in...].
func poolShape(a attrs, x ir.Shape) (*windowSpec, ir.Shape, error) {
	kernel := a.Ints("kernel_shape")
	rank := len(kernel) + 2
	if x.Ranked && x.Rank() != rank {
		return nil, ir.Shape{}, fmt.Errorf("input has shape %s, want [N, C, %d spatial dims] for kernel_shape %v", x, len(kernel), ir.FormatList(kernel))
	}
	if len(kernel) == 0 {
		return nil, ir.Shape{}, fmt.Errorf("kernel_shape is empty")
	}
	spec, err := readWindow(a, kernel)
	if err != nil {
		return nil, ir.Shape{}, err
	}
	xdims := dimsOf(x, rank)
	out, err := spec.shape(xdims[0], xdims[1], xdims[2:])
	return spec, out, err
}

func inferPool(c *InferContext) error {
	x := c.In(0)
	_, shape, err := poolShape(c.attrs, x.Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, shape))
	c.Set(1, ir.TensorType(ir.Int64, shape.Clone()))
	return nil
}

// poolGrid resolves a pool's window over a static input.
func poolGrid(a attrs, xd []int64) (grid, []int64, error) {
	spec, shape, err := poolShape(a, ir.S(xd...))
	if err != nil {
		return grid{}, nil, err
	}
	g, err := spec.grid(xd[2:], spec.axis)
	dims, _ := shape.Ints()
	return g, dims, err
}

// tap is the input coordinate (possibly outside [0, in)) that kernel tap k
// of the window at output position o reads on axis a.
func (g *grid) tap(a, o, k int) int { return o*g.s[a] + k*g.d[a] - g.pb[a] }

func runAveragePool(c *KernelContext) error {
	x := c.In(0)
	g, dims, err := poolGrid(c.attrs, x.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	includePad := c.attrs.declares("count_include_pad") && c.Int("count_include_pad") != 0
	in, inPlane, outPlane := Float64s(x), g.inSize(), g.outSize()
	y := make([]float64, ir.Product(dims))
	var count [3][]int64
	for a := range 3 {
		w := Window{Kernel: []int64{int64(g.k[a])}, Strides: []int64{int64(g.s[a])}, Dilations: []int64{int64(g.d[a])},
			PadBegin: []int64{int64(g.pb[a])}, PadEnd: []int64{int64(g.pe[a])}, Out: []int64{int64(g.out[a])}}
		count[a] = AveragePoolCounts(w, []int64{int64(g.in[a])}, includePad)[0]
	}
	parallelFor(int(dims[0]*dims[1]), func(p int) {
		xp, yp := in[p*inPlane:][:inPlane], y[p*outPlane:][:outPlane]
		for od := range g.out[0] {
			for oh := range g.out[1] {
				for ow := range g.out[2] {
					var sum float64
					g.eachTap(od, oh, ow, func(i int) { sum += xp[i] })
					yp[(od*g.out[1]+oh)*g.out[2]+ow] = sum / float64(count[0][od]*count[1][oh]*count[2][ow])
				}
			}
		}
	})
	c.Set(0, FromFloat64s(x.DType, dims, y))
	return nil
}

// AveragePoolCounts returns AveragePool's divisor, which factorizes over
// the spatial axes: per axis and output position, the taps inside the
// input (of spatial sizes in), or with includePad (count_include_pad)
// inside the padded input; a window that ceil_mode extends past the end
// padding does not count the overhang. An output is its window's sum
// divided by the product of its positions' counts.
func AveragePoolCounts(w Window, in []int64, includePad bool) [][]int64 {
	counts := make([][]int64, len(in))
	for a := range in {
		counts[a] = make([]int64, w.Out[a])
		for o := range w.Out[a] {
			for k := range w.Kernel[a] {
				i := o*w.Strides[a] + k*w.Dilations[a] - w.PadBegin[a]
				if includePad && i >= -w.PadBegin[a] && i < in[a]+w.PadEnd[a] || i >= 0 && i < in[a] {
					counts[a][o]++
				}
			}
		}
	}
	return counts
}

// PoolIndexStrides returns, for MaxPool's Indices output, each spatial
// axis' stride in the numbering of an input plane of spatial sizes in:
// row-major, or with storage_order=1 column-major (the first spatial axis
// fastest), as ONNX Runtime numbers them. An index is the plane's offset
// (n*C + c times the plane's size) plus the strides times the coordinates.
func PoolIndexStrides(in []int64, colMajor bool) []int64 {
	st := make([]int64, len(in))
	s := int64(1)
	for i := range in {
		a := len(in) - 1 - i
		if colMajor {
			a = i
		}
		st[a] = s
		s *= in[a]
	}
	return st
}

// eachTap calls f with the in-plane flat index of every tap of the window
// at output position (od, oh, ow) that lands inside the input.
func (g *grid) eachTap(od, oh, ow int, f func(i int)) {
	for kd := range g.k[0] {
		id := g.tap(0, od, kd)
		if id < 0 || id >= g.in[0] {
			continue
		}
		for kh := range g.k[1] {
			ih := g.tap(1, oh, kh)
			if ih < 0 || ih >= g.in[1] {
				continue
			}
			row := (id*g.in[1] + ih) * g.in[2]
			for kw := range g.k[2] {
				if iw := g.tap(2, ow, kw); iw >= 0 && iw < g.in[2] {
					f(row + iw)
				}
			}
		}
	}
}

func runMaxPool(c *KernelContext) error {
	x := c.In(0)
	g, dims, err := poolGrid(c.attrs, x.Dims)
	if err != nil {
		return c.Errorf("%v", err)
	}
	colMajor := c.attrs.declares("storage_order") && c.Int("storage_order") != 0
	st := PoolIndexStrides([]int64{int64(g.in[0]), int64(g.in[1]), int64(g.in[2])}, colMajor)
	in, inPlane, outPlane := Float64s(x), g.inSize(), g.outSize()
	y := make([]float64, ir.Product(dims))
	idx := make([]int64, len(y))
	parallelFor(int(dims[0]*dims[1]), func(p int) {
		xp := in[p*inPlane:][:inPlane]
		for od := range g.out[0] {
			for oh := range g.out[1] {
				for ow := range g.out[2] {
					// A window with no tap inside the input (possible only
					// with pads as wide as the kernel) yields -Inf, index -1.
					// A NaN in the window wins and stays (PyTorch's and
					// numpy.maximum's propagation), at its first position.
					best, at := math.Inf(-1), -1
					g.eachTap(od, oh, ow, func(i int) {
						if at < 0 || xp[i] > best || math.IsNaN(xp[i]) && !math.IsNaN(best) {
							best, at = xp[i], i
						}
					})
					o := p*outPlane + (od*g.out[1]+oh)*g.out[2] + ow
					y[o], idx[o] = best, -1
					if at >= 0 {
						idx[o] = int64(p*inPlane + g.storageIndex(at, st))
					}
				}
			}
		}
	})
	c.Set(0, FromFloat64s(x.DType, dims, y))
	c.Set(1, FromInt64s(ir.Int64, dims, idx))
	return nil
}

// storageIndex converts a row-major in-plane index to the Indices output's
// numbering, given the strides PoolIndexStrides returns for g.in.
func (g *grid) storageIndex(i int, st []int64) int {
	iw, ih, id := i%g.in[2], i/g.in[2]%g.in[1], i/(g.in[2]*g.in[1])
	return int(int64(id)*st[0] + int64(ih)*st[1] + int64(iw)*st[2])
}

func inferGlobalPool(c *InferContext) error {
	x := c.In(0)
	if !x.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	if x.Shape.Rank() < 2 {
		return c.Errorf("input has shape %s, want [N, C, spatial...]", x.Shape)
	}
	out := x.Shape.Clone()
	for i := 2; i < len(out.Dims); i++ {
		out.Dims[i] = ir.D(1)
	}
	c.Set(0, ir.TensorType(x.Elem, out))
	return nil
}

// runGlobalPool averages (GlobalAveragePool) or takes the maximum
// (GlobalMaxPool) of each [N, C] plane.
func runGlobalPool(c *KernelContext) error {
	x := c.In(0)
	if len(x.Dims) < 2 {
		return c.Errorf("input has shape %v, want [N, C, spatial...]", ir.FormatList(x.Dims))
	}
	dims := append([]int64{}, x.Dims...)
	for i := 2; i < len(dims); i++ {
		dims[i] = 1
	}
	in, plane := Float64s(x), int(ir.Product(x.Dims[2:]))
	y := make([]float64, dims[0]*dims[1])
	for p := range y {
		xp := in[p*plane:][:plane]
		if c.Node.OpType == "GlobalMaxPool" {
			y[p] = math.Inf(-1)
			for _, v := range xp {
				y[p] = math.Max(y[p], v)
			}
			continue
		}
		for _, v := range xp {
			y[p] += v
		}
		y[p] /= float64(plane)
	}
	c.Set(0, FromFloat64s(x.DType, dims, y))
	return nil
}
