package quantize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Which tensors get a QuantizeLinear → DequantizeLinear pair, following
// int8-contract.md §1 (what the fuse-qdq pass groups for the integer
// kernels):
//
// Which op is which is ops.Int8Of's: the ops with an integer kernel are the
// units, the ops that pass 8-bit data through take their input's
// parameters.
//
//   - Conv, Gemm and MatMul with constant weights are quantized units: their
//     activation input gets a pair, the weights and bias become int8 and
//     int32 initializers behind a DequantizeLinear. A unit's output is not
//     quantized where the group takes it further: into a residual Add whose
//     other input gets the pair (Conv → Add(·, DQ r)), then into a Relu or
//     Clip, which the Q after it absorbs; the Q goes after the chain.
//   - Add and Mul of two activations, Concat, AveragePool,
//     GlobalAveragePool, MaxPool, Sigmoid and HardSwish: pairs on their
//     activation inputs and on their output; an Add's Relu or Clip is
//     absorbed the same way, and x·Sigmoid(x) (SiLU) is one unit.
//   - The output of an op that passes 8-bit data through from one input
//     (MaxPool, the layout ops Reshape, Flatten, Transpose, (Un)Squeeze,
//     and Slice, Gather, Split, Expand, Tile, nearest Resize, a Pad
//     filling with 0) takes that input's scale and zero point: the values
//     are the same, so qdq-cleanup removes the pair between them. A Concat
//     input that only the Concat reads takes the Concat's, so the Concat
//     only moves bytes.
//   - Everything else stays float, reading the DequantizeLinear's output.
//     Graph outputs stay float: a DequantizeLinear gives them their value.

// linearUnit reports whether n is a Conv, Gemm or MatMul: an op whose
// integer kernel takes constant weights (ops.Int8Of).
func linearUnit(n *ir.Node) bool {
	switch ops.Int8Of(n).Kind {
	case ops.GroupQConv, ops.GroupQGemm, ops.GroupQMatMul:
		return true
	}
	return false
}

// isLayout reports whether n's outputs take its input 0's quantization
// parameters: n passes 8-bit data through (ops.Int8Of) from that one
// input, and a Pad fills with 0, which every activation's parameters hold
// exactly (actParams).
func isLayout(n *ir.Node) bool {
	if !ops.PassesInt8(n) || !slices.Equal(ops.MovedInputs(n), []int{0}) {
		return false
	}
	if n.OpType == "Pad" {
		fill, ok := ops.PadFill(n, func(v *ir.Value) *ir.Tensor { return v.Const })
		return ok && fill == 0
	}
	return true
}

type plan struct {
	g *ir.Graph
	// names names what rewrite adds to g (made when it starts).
	names *ir.Namer
	// units are the quantized nodes, in graph order; absorbed the nodes
	// that joined another's unit (a residual Add, a Relu, SiLU's Mul).
	units    []*ir.Node
	absorbed map[*ir.Node]*ir.Node
	// weightAxis is a unit's weight input's per-channel axis (-1: per
	// tensor); units without weights are absent.
	weightAxis map[*ir.Node]int
	// acts are the tensors that get a Q → DQ pair, in the order they were
	// found; share maps one to the tensor whose parameters it takes.
	acts  []*ir.Value
	isAct map[*ir.Value]bool
	share map[*ir.Value]*ir.Value
	// ins and out are each unit's activation inputs given a pair and the
	// tensor its QuantizeLinear quantizes.
	ins map[*ir.Node][]*ir.Value
	out map[*ir.Node]*ir.Value
	// keptFloat describes the islands left float because INT8 would be
	// slower there (guard.go).
	keptFloat []string
}

// planOf decides what m's graph quantizes. keep names nodes to leave
// float (--keep-fp32), keepNodes are more (planAvoiding's); guard leaves
// float where INT8 would be slower.
func planOf(m *ir.Model, keep []string, keepNodes map[*ir.Node]bool, perTensor, guard bool) (*plan, error) {
	g := m.Graph
	if err := checkKeep(g, keep); err != nil {
		return nil, err
	}
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	p := &plan{g: g, absorbed: map[*ir.Node]*ir.Node{}, weightAxis: map[*ir.Node]int{},
		isAct: map[*ir.Value]bool{}, share: map[*ir.Value]*ir.Value{},
		ins: map[*ir.Node][]*ir.Value{}, out: map[*ir.Node]*ir.Value{}}
	uses := g.Uses()
	isOutput := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		isOutput[v] = true
	}
	inputs := map[*ir.Value]bool{}
	for _, v := range g.Inputs {
		inputs[v] = true
	}
	// act: a float32 tensor computed at run time; weight: a float32
	// initializer no caller can override.
	act := func(v *ir.Value) bool { return v != nil && v.Const == nil && v.Type.Elem == ir.Float32 }
	weight := func(v *ir.Value) bool { return v != nil && v.Const != nil && !inputs[v] && v.Const.DType == ir.Float32 }
	// free: n may join a unit (an ONNX op nobody asked to keep float).
	free := func(n *ir.Node) bool { return n.Domain == "" && !kept[n.Name] && !keepNodes[n] }
	// only returns v's single reader when v has one and is no graph output.
	only := func(v *ir.Value) *ir.Node {
		if us := uses[v]; len(us) == 1 && !isOutput[v] {
			return us[0]
		}
		return nil
	}
	weightAxis := func(n *ir.Node) (int, bool) {
		x, w := n.Input(0), n.Input(1)
		if !act(x) || !weight(w) || len(n.Outputs) != 1 || n.Outputs[0].Type.Elem != ir.Float32 {
			return 0, false
		}
		axis := 0
		switch ops.Int8Of(n).Kind {
		case ops.GroupQConv:
			if len(w.Const.Dims) < 3 {
				return 0, false
			}
		case ops.GroupQGemm:
			if len(w.Const.Dims) != 2 {
				return 0, false
			}
			if a := n.Attr("transB"); a == nil || a.I == 0 {
				axis = 1
			}
		case ops.GroupQMatMul:
			if len(w.Const.Dims) != 2 {
				return 0, false
			}
			axis = 1
		default:
			return 0, false
		}
		if perTensor {
			axis = -1
		}
		return axis, true
	}

	// Residual Adds first, claimed by the later of their two producers
	// (the other's result is then ready when the group runs).
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		if _, ok := weightAxis(n); !ok || !free(n) || !linearUnit(n) {
			continue
		}
		add := only(n.Outputs[0])
		if add == nil || add.OpType != "Add" || !free(add) || p.absorbed[add] != nil || len(add.Inputs) != 2 {
			continue
		}
		other := add.Inputs[0]
		if other == n.Outputs[0] {
			other = add.Inputs[1]
		}
		y := n.Outputs[0].Type.Shape
		if other == n.Outputs[0] || !act(other) || !y.IsStatic() || !y.Equal(other.Type.Shape) {
			continue
		}
		p.absorbed[add] = n
	}
	// SiLU: x·Sigmoid(x) is one unit, a lookup table.
	for _, n := range g.Nodes {
		if n.OpType != "Sigmoid" || !free(n) || !act(n.Input(0)) {
			continue
		}
		if mul := only(n.Outputs[0]); mul != nil && mul.OpType == "Mul" && free(mul) && len(mul.Inputs) == 2 &&
			slices.Contains(mul.Inputs, n.Inputs[0]) && mul.Inputs[0] != mul.Inputs[1] {
			p.absorbed[mul] = n
		}
	}

	// tail absorbs the Relu or Clip after v into unit u and returns the
	// tensor the unit's Q quantizes.
	tail := func(u *ir.Node, v *ir.Value) *ir.Value {
		if a := only(v); a != nil && free(a) && isActivation(a) && act(a.Outputs[0]) {
			p.absorbed[a] = u
			return a.Outputs[0]
		}
		return v
	}
	for _, n := range g.Nodes {
		if !free(n) || p.absorbed[n] != nil {
			continue
		}
		var ins []*ir.Value // activation inputs that get a pair
		var out *ir.Value   // the quantized output
		// Units: the ops with an integer kernel, and the two that pass
		// 8-bit data through that are worth a pair of their own: MaxPool
		// (a quantized convolution's output pooled in 8 bits) and Concat
		// (whose inputs then share its parameters).
		switch kind := ops.Int8Of(n).Kind; {
		case linearUnit(n):
			axis, ok := weightAxis(n)
			if !ok {
				continue
			}
			p.weightAxis[n] = axis
			ins, out = []*ir.Value{n.Inputs[0]}, n.Outputs[0]
			if add := only(out); add != nil && p.absorbed[add] == n {
				other := add.Inputs[0]
				if other == out {
					other = add.Inputs[1]
				}
				ins, out = append(ins, other), add.Outputs[0]
			}
			out = tail(n, out)
		case kind == ops.GroupQAdd || kind == ops.GroupQMul || n.OpType == "Concat":
			if len(n.Outputs) != 1 || !act(n.Outputs[0]) || !allAct(n.Inputs, act) {
				continue
			}
			ins, out = slices.Clone(n.Inputs), n.Outputs[0]
			if n.OpType == "Add" {
				out = tail(n, out)
			}
		case kind == ops.GroupQPool || kind == ops.GroupQLut || n.OpType == "MaxPool":
			if len(n.Outputs) != 1 || !act(n.Inputs[0]) || !act(n.Outputs[0]) {
				continue
			}
			ins, out = []*ir.Value{n.Inputs[0]}, n.Outputs[0]
			if mul := only(out); n.OpType == "Sigmoid" && mul != nil && p.absorbed[mul] == n {
				out = mul.Outputs[0]
			}
		default:
			continue
		}
		p.units = append(p.units, n)
		p.ins[n], p.out[n] = ins, out
	}
	if guard {
		p.keepFloatIslands(uses, isOutput)
	}
	for _, n := range p.units {
		for _, v := range p.ins[n] {
			p.addAct(v)
		}
		p.addAct(p.out[n])
	}
	// Layout ops (MaxPool among them) between quantized tensors pass
	// their parameters on.
	for _, v := range p.acts {
		if n := v.Producer; n != nil && isLayout(n) && p.isAct[n.Input(0)] {
			p.share[v] = n.Inputs[0]
		}
	}
	// Concat inputs only the Concat reads take its parameters.
	for _, n := range p.units {
		if n.OpType != "Concat" {
			continue
		}
		for _, v := range n.Inputs {
			if only(v) == n && v.Producer != nil && p.share[v] == nil {
				p.share[v] = n.Outputs[0]
			}
		}
	}
	return p, nil
}

func (p *plan) addAct(v *ir.Value) {
	if !p.isAct[v] {
		p.isAct[v] = true
		p.acts = append(p.acts, v)
	}
}

// root is the tensor whose calibrated range v's parameters come from.
func (p *plan) root(v *ir.Value) *ir.Value {
	for i := 0; p.share[v] != nil && i <= len(p.share); i++ {
		v = p.share[v]
	}
	return v
}

// isActivation reports whether n is a Relu, or a Clip whose bounds are
// constants, which a following QuantizeLinear can absorb.
func isActivation(n *ir.Node) bool {
	if n.Domain != "" || len(n.Outputs) != 1 {
		return false
	}
	switch n.OpType {
	case "Relu":
		return true
	case "Clip":
		for _, b := range n.Inputs[1:] {
			if b != nil && b.Const == nil {
				return false
			}
		}
		return true
	}
	return false
}

func allAct(vs []*ir.Value, act func(*ir.Value) bool) bool {
	for _, v := range vs {
		if !act(v) {
			return false
		}
	}
	return len(vs) > 0
}

// checkKeep fails on --keep-fp32 names no node of g has.
func checkKeep(g *ir.Graph, keep []string) error {
	names := map[string]bool{}
	for _, n := range g.Nodes {
		names[n.Name] = true
	}
	var missing []string
	for _, k := range keep {
		if !names[k] {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--keep-fp32: no node named %s in the model (after its clean-up, which folds each BatchNormalization into the Conv before it and removes Identity and Dropout nodes)",
			strings.Join(missing, ", "))
	}
	return nil
}
