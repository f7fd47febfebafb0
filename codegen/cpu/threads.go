package cpu

import "github.com/kiln-ml/kiln/ir"

// singleThreadMACs is the work per inference (multiply-adds) below which an
// engine runs on one thread whatever the caller asks: waking a second
// thread and meeting at a barrier after every layer then costs more than
// the split saves (measured on the digits models: 2 threads ran 2× slower).
const singleThreadMACs = 4 << 20

// maxThreads returns the most threads worth using for m, or 0 for no limit.
func maxThreads(m *ir.Model) int {
	var macs int64
	for _, n := range m.Graph.Nodes {
		macs += nodeMACs(n)
	}
	if macs < singleThreadMACs {
		return 1
	}
	return 0
}

// nodeMACs estimates a node's multiply-adds from its static shapes: the
// matrix ops and convolutions by their reduction length, recurrent ops by
// their gate matrices, everything else by its output size.
func nodeMACs(n *ir.Node) int64 {
	out := n.Output(0)
	if out == nil {
		return 0
	}
	outElems := out.Type.Shape.NumElements()
	if outElems < 0 {
		return 0
	}
	dims := func(i int) []int64 {
		if v := n.Input(i); v != nil {
			d, _ := v.Type.Shape.Ints()
			return d
		}
		return nil
	}
	switch n.OpType {
	case "Conv":
		if w := dims(1); len(w) > 1 {
			return outElems * ir.Product(w[1:])
		}
	case "MatMul", "Gemm":
		a := dims(0)
		if len(a) == 0 {
			break
		}
		k := a[len(a)-1]
		if t := n.Attr("transA"); n.OpType == "Gemm" && t != nil && t.I != 0 {
			k = a[0]
		}
		return outElems * k
	case "LSTM", "GRU", "RNN":
		x, w, r := dims(0), dims(1), dims(2)
		if len(x) == 3 && len(w) == 3 && len(r) == 3 {
			steps := x[0] * x[1] // sequence × batch (either layout)
			return steps * w[0] * w[1] * (w[2] + r[2])
		}
	}
	return outElems
}
