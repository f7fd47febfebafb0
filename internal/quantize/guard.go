package quantize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The never-slower guard: INT8 is kept only where it pays. An island is a
// set of quantized units joined by quantized tensors (through layout ops);
// the integer kernels save time on its multiply-adds and on the bytes its
// elementwise units do not move, and it pays for a QuantizeLinear on each
// tensor entering it from float code and a DequantizeLinear on each leaving
// it. An island whose boundary costs more than it saves stays float: a
// classifier Gemm after an LSTM, an Add between float ops.
//
// The costs are the kernels' on x86-64 with AVX512-VNNI at one thread
// (codegen/cpu's qgroup benchmarks, infer bench --per-layer): FP32 GEMM
// and convolution run about 85 G multiply-adds a second, the int8 ones
// about 190 G; a weight read once per inference (a batch-1 Gemm) costs
// about 10 ps a byte from cache, and int8 weights are a quarter of the
// bytes; QuantizeLinear streams about 7 G elements a second,
// DequantizeLinear about 12 G; each extra kernel step costs about 50 ns.
const (
	macSaving      = 1/85e9 - 1/190e9 // seconds per multiply-add
	weightSaving   = 3 * 10e-12       // seconds per weight: 3 bytes fewer to read
	elemSaving     = 0.1e-9           // seconds per output element of an int8 elementwise or pooling unit
	quantizeCost   = 0.15e-9          // seconds per element quantized on the way in
	dequantizeCost = 0.08e-9          // seconds per element dequantized on the way out
	stepCost       = 50e-9            // seconds per quantize or dequantize step
)

// keepFloatIslands drops from the plan the units of every island that
// would run slower in INT8, and records why.
func (p *plan) keepFloatIslands(uses map[*ir.Value][]*ir.Node, isOutput map[*ir.Value]bool) {
	producer := map[*ir.Value]*ir.Node{} // a unit's quantized tensor → the unit
	for _, n := range p.units {
		producer[p.out[n]] = n
	}
	// source follows v back through layout ops to the tensor they move.
	source := func(v *ir.Value) *ir.Value {
		for v.Producer != nil && isLayout(v.Producer) && producer[v] == nil {
			v = v.Producer.Inputs[0]
		}
		return v
	}
	parent := map[*ir.Node]*ir.Node{}
	var find func(n *ir.Node) *ir.Node
	find = func(n *ir.Node) *ir.Node {
		if parent[n] == nil || parent[n] == n {
			return n
		}
		parent[n] = find(parent[n])
		return parent[n]
	}
	for _, n := range p.units {
		for _, v := range p.ins[n] {
			if u := producer[source(v)]; u != nil {
				parent[find(n)] = find(u)
			}
		}
	}
	type island struct {
		units        []*ir.Node
		saving, cost float64
		entries      map[*ir.Value]bool
	}
	islands := map[*ir.Node]*island{}
	var order []*ir.Node
	for _, n := range p.units {
		root := find(n)
		is := islands[root]
		if is == nil {
			is = &island{entries: map[*ir.Value]bool{}}
			islands[root] = is
			order = append(order, root)
		}
		is.units = append(is.units, n)
		is.saving += p.unitSaving(n)
		for _, v := range p.ins[n] {
			if src := source(v); producer[src] == nil && !is.entries[src] {
				is.entries[src] = true
				is.cost += float64(elements(src))*quantizeCost + stepCost
			}
		}
		if out := p.out[n]; p.readInFloat(out, uses, isOutput) {
			is.cost += float64(elements(out))*dequantizeCost + stepCost
		}
	}
	drop := map[*ir.Node]bool{}
	for _, root := range order {
		is := islands[root]
		if is.saving > is.cost {
			continue
		}
		var names []string
		for _, n := range is.units {
			drop[n] = true
			names = append(names, n.OpType+" "+n.Name)
		}
		p.keptFloat = append(p.keptFloat, fmt.Sprintf("%s: INT8 would save %.2g µs and spend %.2g µs quantizing its inputs and dequantizing its outputs",
			strings.Join(names, ", "), is.saving*1e6, is.cost*1e6))
	}
	if len(drop) == 0 {
		return
	}
	p.units = slices.DeleteFunc(p.units, func(n *ir.Node) bool { return drop[n] })
	for n, u := range p.absorbed {
		if drop[u] {
			delete(p.absorbed, n)
		}
	}
	for n := range drop {
		delete(p.weightAxis, n)
	}
}

// readInFloat reports whether a float node or a graph output reads v
// (through layout ops): v then needs a DequantizeLinear.
func (p *plan) readInFloat(v *ir.Value, uses map[*ir.Value][]*ir.Node, isOutput map[*ir.Value]bool) bool {
	if isOutput[v] {
		return true
	}
	for _, r := range uses[v] {
		switch {
		case slices.Contains(p.ins[r], v):
		case isLayout(r):
			for _, i := range ops.MovedOutputs(r) {
				if p.readInFloat(r.Outputs[i], uses, isOutput) {
					return true
				}
			}
		case p.absorbed[r] == nil:
			return true
		}
	}
	return false
}

// unitSaving is what computing unit n in INT8 saves, in seconds.
func (p *plan) unitSaving(n *ir.Node) float64 {
	out := float64(elements(n.Outputs[0]))
	var k int64 // multiply-adds per output element
	switch w := n.Input(1); n.OpType {
	case "Conv":
		k = w.Const.Len() / w.Const.Dims[0]
	case "Gemm":
		k = w.Const.Dims[0]
		if a := n.Attr("transB"); a != nil && a.I != 0 {
			k = w.Const.Dims[1]
		}
	case "MatMul":
		k = w.Const.Dims[0]
	default:
		return float64(elements(p.out[n])) * elemSaving
	}
	return out*float64(k)*macSaving + float64(n.Inputs[1].Const.Len())*weightSaving
}

// elements is v's element count, a symbolic dim counting 1.
func elements(v *ir.Value) int64 {
	n := int64(1)
	for _, d := range v.Type.Shape.Dims {
		if d.Value > 0 {
			n *= d.Value
		}
	}
	return n
}
