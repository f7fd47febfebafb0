package passes

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes/autodiff"
)

// convMatMulPass rewrites a Conv whose output plane is tiny and whose
// windows are large into one MatMul of its windows by its weights. Such a
// Conv is a convolution's weight gradient (autodiff's Conv over swapped
// axes: the output plane is the kernel grid, the window the whole dy) or
// a "fully connected" Conv; as a convolution it runs one small GEMM per
// image on a handful of output pixels, as a MatMul one GEMM whose rows are
// every window of every image: digits_cnn's 8×8-window weight gradients
// run 3× faster. The windows are Slices of the padded input, one per
// output pixel, so the rewrite costs a copy of P·B windows.
func convMatMulPass(c *Context, m *ir.Model) error {
	var todo []*ir.Node
	for _, n := range m.Graph.Nodes {
		if n.OpType == "Conv" && (n.Domain == "" || n.Domain == "ai.onnx") {
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	known, err := ops.InferShapesWithin(m, c.Limits)
	if err != nil {
		return err
	}
	b := autodiff.NewBuilder(m, known, "conv-matmul/")
	opsets := ops.OpsetsOf(m)
	changed := false
	for _, n := range todo {
		y, err := convAsMatMul(b, opsets, n)
		if err != nil {
			return err
		}
		if y == nil {
			continue
		}
		if err := b.Err(); err != nil {
			return err
		}
		removeNodes(m.Graph, n)
		m.Graph.ReplaceUses(n.Outputs[0], y)
		y.Name = n.Outputs[0].Name
		changed = true
	}
	if !changed {
		return nil
	}
	return m.Graph.TopoSort()
}

// Which Conv nodes become MatMuls: at most matMulMaxPixels output pixels
// per image, windows of at least matMulMinWindow taps.
const (
	matMulMaxPixels = 16
	matMulMinWindow = 16
)

// convAsMatMul builds the MatMul form of n and returns its output, or nil
// when n is not a tiny-output, large-window 2-D Conv of static shapes.
func convAsMatMul(b *autodiff.Builder, opsets ops.Opsets, n *ir.Node) (*ir.Value, error) {
	x, w, y := n.Input(0), n.Input(1), n.Output(0)
	xd, ok1 := x.Type.Shape.Ints()
	wd, ok2 := w.Type.Shape.Ints()
	yd, ok3 := y.Type.Shape.Ints()
	if !ok1 || !ok2 || !ok3 || len(xd) != 4 || len(wd) != 4 || len(n.Outputs) != 1 || x.Type.Elem != ir.Float32 {
		return nil, nil
	}
	for _, v := range n.Inputs {
		if v != nil && v.Producer != nil && v.Producer.OpType == "DequantizeLinear" {
			return nil, nil // a quantized Conv: fuse-qdq's
		}
	}
	s, err := opsets.Schema(n)
	if err != nil {
		return nil, nil
	}
	kc := ops.NewKernelContext(s, n, opsets[n.Domain], nil)
	if kc.Int("group") != 1 || yd[2]*yd[3] > matMulMaxPixels || wd[2]*wd[3] < matMulMinWindow {
		return nil, nil
	}
	win, err := kc.Window(wd[2:], xd[2:])
	if err != nil {
		return nil, err
	}
	if b.Opset() < 13 {
		return nil, nil // the input forms of Slice, Pad, Unsqueeze below
	}
	batch, ch, m := xd[0], xd[1], wd[0]
	taps := ch * wd[2] * wd[3]
	xp := x
	if win.PadBegin[0]+win.PadBegin[1]+win.PadEnd[0]+win.PadEnd[1] > 0 {
		xp = b.Op("Pad", []*ir.Value{x, b.Int64s(0, 0, win.PadBegin[0], win.PadBegin[1], 0, 0, win.PadEnd[0], win.PadEnd[1])})
	}
	// One [1, B, C·KH·KW] row block per output pixel, pixels in row-major
	// order.
	var windows []*ir.Value
	for oh := int64(0); oh < yd[2]; oh++ {
		for ow := int64(0); ow < yd[3]; ow++ {
			h0, w0 := oh*win.Strides[0], ow*win.Strides[1]
			h1, w1 := h0+(wd[2]-1)*win.Dilations[0]+1, w0+(wd[3]-1)*win.Dilations[1]+1
			sl := b.Op("Slice", []*ir.Value{xp, b.Int64s(h0, w0), b.Int64s(h1, w1), b.Int64s(2, 3), b.Int64s(win.Dilations...)})
			windows = append(windows, b.Op("Reshape", []*ir.Value{sl, b.Int64s(1, batch, taps)}))
		}
	}
	cols := windows[0]
	if len(windows) > 1 {
		cols = b.Op("Concat", windows, ir.AttrI("axis", 0))
	}
	cols = b.Op("Reshape", []*ir.Value{cols, b.Int64s(int64(len(windows))*batch, taps)})
	// The weights as [C·KH·KW, M]: transposed here when constant.
	var wt *ir.Value
	if w.Const != nil {
		src := ir.Data[float32](w.Const)
		t := ir.NewTensor(ir.Float32, taps, m)
		dst := ir.Data[float32](t)
		for i := int64(0); i < m; i++ {
			for k := int64(0); k < taps; k++ {
				dst[k*m+i] = src[i*taps+k]
			}
		}
		wt = b.Const(w.Name+"_matmul", t)
	} else {
		wt = b.Transpose(b.Op("Reshape", []*ir.Value{w, b.Int64s(m, taps)}), 1, 0)
	}
	out := b.Op("MatMul", []*ir.Value{cols, wt})                              // [P·B, M]
	out = b.Op("Reshape", []*ir.Value{out, b.Int64s(yd[2], yd[3], batch, m)}) // [OH, OW, B, M]
	out = b.Transpose(out, 2, 3, 0, 1)
	if bias := n.Input(2); bias != nil {
		out = b.Add(out, b.Op("Reshape", []*ir.Value{bias, b.Int64s(1, m, 1, 1)}))
	}
	return out, nil
}
