package passes

import (
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The QDQ passes work on models in ONNX's QDQ form (what `cc quantize`
// and ONNX Runtime's quantizer write): QuantizeLinear → DequantizeLinear
// pairs around the float ops that compute in int8. qdq-propagate moves the
// pairs through the ops that only move data, qdq-cleanup removes the
// DequantizeLinear → QuantizeLinear round trips that leaves, and fuse-qdq
// (fuse_qdq.go) groups each quantized op with its pairs for the integer
// kernels.

// qparams are a per-tensor QuantizeLinear's or DequantizeLinear's
// parameters, known at compile time.
type qparams struct {
	scale float32
	zp    int64
	elem  ir.DType // the quantized type: uint8 or int8
}

// quantLo and quantHi are the range of the quantized types kiln computes
// in.
func quantRange(d ir.DType) (lo, hi int64) {
	if d == ir.Int8 {
		return math.MinInt8, math.MaxInt8
	}
	return 0, math.MaxUint8
}

// quantize is QuantizeLinear of one value (float32 division, rounding half
// to even, saturation).
func (p qparams) quantize(x float32) int64 {
	lo, hi := quantRange(p.elem)
	return min(hi, max(lo, int64(math.RoundToEven(float64(x/p.scale)))+p.zp))
}

// dequantize is DequantizeLinear of one value.
func (p qparams) dequantize(q int64) float32 { return float32(q-p.zp) * p.scale }

// exact reports whether x is on p's grid: it survives quantizing and
// dequantizing unchanged (as a padding value must).
func (p qparams) exact(x float32) bool { return p.dequantize(p.quantize(x)) == x }

// tensor returns q as a scalar of p's quantized type.
func (p qparams) tensor(q int64) *ir.Tensor {
	if p.elem == ir.Int8 {
		return ir.Scalar(ir.Int8, int8(q))
	}
	return ir.Scalar(ir.Uint8, uint8(q))
}

// dequantizer returns n's parameters when n is an ungrouped per-tensor
// DequantizeLinear from uint8 or int8 to float32 with constant parameters
// and a positive scale (so that it is increasing and commutes with max).
func (f *fuser) dequantizer(n *ir.Node) (qparams, bool) {
	if n == nil || n.OpType != "DequantizeLinear" || n.Domain != "" || f.taken[n] || n.Outputs[0].Type.Elem != ir.Float32 {
		return qparams{}, false
	}
	return f.qparamsOf(n, n.Inputs[0].Type.Elem)
}

// quantizer is dequantizer for a QuantizeLinear from float32.
func (f *fuser) quantizer(n *ir.Node) (qparams, bool) {
	if n == nil || n.OpType != "QuantizeLinear" || n.Domain != "" || f.taken[n] || n.Inputs[0].Type.Elem != ir.Float32 {
		return qparams{}, false
	}
	return f.qparamsOf(n, n.Outputs[0].Type.Elem)
}

func (f *fuser) qparamsOf(n *ir.Node, elem ir.DType) (qparams, bool) {
	if elem != ir.Uint8 && elem != ir.Int8 || attrInt(n, "block_size", 0) != 0 {
		return qparams{}, false
	}
	s := f.constOf(n.Inputs[1])
	if s == nil || s.DType != ir.Float32 || s.Len() != 1 {
		return qparams{}, false
	}
	p := qparams{scale: s.Float32s()[0], elem: elem}
	if !(p.scale > 0 && p.scale <= math.MaxFloat32) || p.scale < math.SmallestNonzeroFloat32*(1<<23) {
		return qparams{}, false // zero, negative, subnormal, infinite or NaN
	}
	if zv := n.Input(2); zv != nil {
		z := f.constOf(zv)
		if z == nil || z.DType != elem || z.Len() != 1 {
			return qparams{}, false
		}
		p.zp = z.Int64At(0)
	}
	return p, true
}

// dataInputs returns the inputs that carry the data of an op that passes
// 8-bit data through (ops.Int8Of, ops.MovedInputs), or nil for any other
// node: a per-tensor (de)quantization with a positive scale commutes with
// these. A node with an output that is not data (MaxPool's indices) moves
// only when nothing reads that output.
func (f *fuser) dataInputs(n *ir.Node) []int {
	if f.taken[n] || !ops.PassesInt8(n) {
		return nil
	}
	data := ops.MovedOutputs(n)
	for i, o := range n.Outputs {
		if o != nil && !slices.Contains(data, i) && (len(f.uses[o]) > 0 || f.outSet[o]) {
			return nil
		}
	}
	return ops.MovedInputs(n)
}

// dataOutputs returns n's outputs that carry data (ops.MovedOutputs).
func dataOutputs(n *ir.Node) []*ir.Value {
	var outs []*ir.Value
	for _, i := range ops.MovedOutputs(n) {
		outs = append(outs, n.Outputs[i])
	}
	return outs
}

// acceptsType reports whether n's op at the model's opset computes on
// elem.
func (f *fuser) acceptsType(n *ir.Node, elem ir.DType) bool {
	s, err := f.opsets.Schema(n)
	return err == nil && (s.Types == nil || slices.Contains(s.Types, elem))
}

// padValue returns Pad n's constant fill value (0 when none), and whether
// it is known.
func (f *fuser) padValue(n *ir.Node) (float32, bool) {
	if n.OpType != "Pad" {
		return 0, true
	}
	fill, ok := ops.PadFill(n, f.constOf)
	return float32(fill), ok
}

// setPadFill makes a constant-mode Pad n fill with fill quantized by p
// (its zero point for 0, which the missing input would not give).
func (f *fuser) setPadFill(n *ir.Node, p qparams, fill float32) {
	if a := n.Attr("mode"); a != nil && a.S != "constant" {
		return
	}
	if s, err := f.opsets.Schema(n); err == nil && s.MaxInputs == 1 { // before v11: an attribute
		n.SetAttr(ir.AttrF("value", float32(p.quantize(fill))))
		return
	}
	for len(n.Inputs) < 3 {
		n.Inputs = append(n.Inputs, nil)
	}
	n.Inputs[2] = f.g.AddInitializer(f.names().Unique("pad_fill"), p.tensor(p.quantize(fill)))
}

// qdqPropagatePass moves each per-tensor DequantizeLinear forward past the
// data-movement ops that read it, and each QuantizeLinear backward past the
// one that feeds it: the op then moves int8 bytes instead of floats, and
// the quantization meets the integer op it belongs to (a DequantizeLinear
// → MaxPool → Conv becomes MaxPool on uint8 → DequantizeLinear → Conv, which
// fuse-qdq groups). Exact: these ops copy elements, and a positive scale
// keeps order for MaxPool. A Pad's fill value moves only when it is on the
// quantization grid.
func qdqPropagatePass(c *Context, m *ir.Model) error {
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	for limit := 4 * len(m.Graph.Nodes); limit > 0; limit-- {
		f.uses = m.Graph.Uses()
		if !f.propagateOne() {
			break
		}
	}
	// The dequantizations moves leave unread go now, so that the next
	// passes see each value's real readers.
	m.Graph.Nodes = slices.DeleteFunc(m.Graph.Nodes, func(n *ir.Node) bool {
		return n.OpType == "DequantizeLinear" && n.Domain == "" && len(f.uses[n.Outputs[0]]) == 0 && !f.outSet[n.Outputs[0]]
	})
	return nil
}

// propagateOne makes the first possible move and reports whether there was
// one.
func (f *fuser) propagateOne() bool {
	for i, n := range f.g.Nodes {
		if ins := f.dataInputs(n); ins != nil && (f.dequantizeAfter(i, n, ins) || f.quantizeBefore(i, n, ins)) {
			return true
		}
	}
	return false
}

// dequantizeAfter rewrites DequantizeLinear(x) → n into n(x) →
// DequantizeLinear when every data input of n (node i) is dequantized with
// the same parameters.
func (f *fuser) dequantizeAfter(i int, n *ir.Node, ins []int) bool {
	var p qparams
	for k, in := range ins {
		q, ok := f.dequantizer(n.Inputs[in].Producer)
		if !ok || k > 0 && q != p {
			return false
		}
		p = q
	}
	outs := dataOutputs(n)
	for _, o := range outs {
		if o == nil || o.Type.Elem != ir.Float32 {
			return false
		}
	}
	fill, ok := f.padValue(n)
	if n.OpType == "Pad" && (!ok || !p.exact(fill)) || !f.acceptsType(n, p.elem) {
		return false
	}
	dq := n.Inputs[ins[0]].Producer
	for _, in := range ins {
		n.Inputs[in] = n.Inputs[in].Producer.Inputs[0]
	}
	if n.OpType == "Pad" {
		f.setPadFill(n, p, fill)
	}
	var added []*ir.Node
	for k, w := range outs {
		wq := &ir.Value{Name: f.names().Unique(w.Name + "_quantized"), Type: ir.TensorType(p.elem, w.Type.Shape.Clone()), Producer: n}
		n.Outputs[k] = wq
		d := &ir.Node{Name: f.names().Unique(w.Name + "_dequantize"), OpType: "DequantizeLinear",
			Inputs: append([]*ir.Value{wq}, dq.Inputs[1:]...), Outputs: []*ir.Value{w}}
		w.Producer = d
		added = append(added, d)
	}
	f.g.Nodes = slices.Insert(f.g.Nodes, i+1, added...)
	// Moving weights' dequantization past their transposes and reshapes
	// (fold leaves those for this) makes the latter constant.
	isInput := map[*ir.Value]bool{}
	for _, v := range f.g.Inputs {
		isInput[v] = true
	}
	if outs, err := tryFold(n, f.opsets, isInput); err == nil && outs != nil {
		setFolded(f.g, n, outs)
		f.g.Nodes = slices.Delete(f.g.Nodes, i, i+1)
	}
	return true
}

// quantizeBefore rewrites n → QuantizeLinear into QuantizeLinear → n on
// each data input of n (node i), when n's one output is read only by that
// QuantizeLinear and each data input only by n.
func (f *fuser) quantizeBefore(i int, n *ir.Node, ins []int) bool {
	if len(n.Outputs) != 1 || n.Outputs[0].Type.Elem != ir.Float32 {
		return false
	}
	q := f.single(n.Outputs[0])
	p, ok := f.quantizer(q)
	if !ok || !f.acceptsType(n, p.elem) {
		return false
	}
	for _, in := range ins {
		v := n.Inputs[in]
		if _, dq := f.dequantizer(v.Producer); dq || f.single(v) != n {
			return false // dequantizeAfter's case, or v read elsewhere
		}
	}
	fill, ok := f.padValue(n)
	if !ok {
		return false
	}
	if n.OpType == "Pad" {
		f.setPadFill(n, p, fill)
	}
	var added []*ir.Node
	for _, in := range ins {
		v := n.Inputs[in]
		vq := &ir.Value{Name: f.names().Unique(v.Name + "_quantized"), Type: ir.TensorType(p.elem, v.Type.Shape.Clone())}
		qn := &ir.Node{Name: f.names().Unique(v.Name + "_quantize"), OpType: "QuantizeLinear",
			Inputs: append([]*ir.Value{v}, q.Inputs[1:]...), Outputs: []*ir.Value{vq}, Attrs: q.Attrs}
		vq.Producer = qn
		n.Inputs[in] = vq
		added = append(added, qn)
	}
	y := q.Outputs[0]
	n.Outputs[0], y.Producer = y, n
	f.g.Nodes = slices.Insert(slices.DeleteFunc(f.g.Nodes, func(x *ir.Node) bool { return x == q }), i, added...)
	return true
}

// qdqCleanupPass removes each DequantizeLinear → QuantizeLinear round trip
// with the same parameters and types (what propagation leaves between two
// quantized ops): its readers read the integer tensor the
// DequantizeLinear reads. Exact: (q−zp)·s divided by s rounds back to q for
// every 8-bit q.
func qdqCleanupPass(c *Context, m *ir.Model) error {
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	dead := map[*ir.Node]bool{}
	for _, q := range m.Graph.Nodes {
		if q.OpType != "QuantizeLinear" || q.Domain != "" || f.outSet[q.Outputs[0]] {
			continue
		}
		dq := q.Inputs[0].Producer
		if dq == nil || dq.OpType != "DequantizeLinear" || dq.Domain != "" || !f.sameQuantization(dq, q) {
			continue
		}
		m.Graph.ReplaceUses(q.Outputs[0], dq.Inputs[0])
		dead[q] = true
	}
	m.Graph.Nodes = slices.DeleteFunc(m.Graph.Nodes, func(n *ir.Node) bool { return dead[n] })
	return nil
}

// sameQuantization reports whether DequantizeLinear dq and QuantizeLinear
// q use the same constant scale, zero point and axis, and q produces dq's
// input type: q(dq(x)) = x.
func (f *fuser) sameQuantization(dq, q *ir.Node) bool {
	elem := dq.Inputs[0].Type.Elem
	if elem != ir.Uint8 && elem != ir.Int8 || q.Outputs[0].Type.Elem != elem || dq.Outputs[0].Type.Elem != ir.Float32 {
		return false
	}
	if _, ok := f.dequantizer(dq); ok {
		p, _ := f.quantizer(q)
		pd, _ := f.dequantizer(dq)
		return p == pd
	}
	// Per-axis: the same scale and zero point tensors along the same axis.
	s1, s2 := f.constOf(dq.Inputs[1]), f.constOf(q.Inputs[1])
	if s1 == nil || s2 == nil || s1.DType != ir.Float32 || !sameData(s1, s2) || attrInt(dq, "axis", 1) != attrInt(q, "axis", 1) ||
		attrInt(dq, "block_size", 0) != 0 || attrInt(q, "block_size", 0) != 0 {
		return false
	}
	for _, s := range s1.Float32s() {
		if !(s > 0 && s <= math.MaxFloat32) || s < math.SmallestNonzeroFloat32*(1<<23) {
			return false
		}
	}
	z1, z2 := dq.Input(2), q.Input(2)
	if z1 == nil || z2 == nil {
		return z1 == nil && z2 == nil
	}
	t1, t2 := f.constOf(z1), f.constOf(z2)
	return t1 != nil && t2 != nil && sameData(t1, t2)
}

// sameData compares two tensors' types, dims and bytes (not their names).
func sameData(a, b *ir.Tensor) bool {
	return a.DType == b.DType && slices.Equal(a.Dims, b.Dims) && string(a.Raw) == string(b.Raw)
}
