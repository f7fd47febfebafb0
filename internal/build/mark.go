package build

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// MarkAll is the --mark-outputs value that marks every tensor the engine
// stores.
const MarkAll = "all"

// markOutputs makes values of the optimized graph extra graph outputs,
// TensorRT's markOutput (cc build --mark-outputs), and describes each for
// the engine's metadata. It runs after the passes, so the engine computes
// exactly what it would without them and only also stores the marked
// tensors: "all" marks every float or 8-bit integer tensor the optimized
// graph stores (shape arithmetic is left out); a name must be such a
// tensor, and a value that fusion keeps in registers (inside a group's
// body) is refused, naming the group's output to mark instead.
func markOutputs(g *ir.Graph, names []string) (map[string]*engine.Debug, error) {
	if len(names) == 0 {
		return nil, nil
	}
	stored := map[string]*ir.Value{}
	var order []*ir.Value
	for _, n := range g.Nodes {
		for _, v := range n.Outputs {
			if v != nil {
				stored[v.Name] = v
				order = append(order, v)
			}
		}
	}
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	var marked []*ir.Value
	if slices.Contains(names, MarkAll) {
		if len(names) > 1 {
			return nil, fmt.Errorf("--mark-outputs: %q marks every tensor; give it alone or list names", MarkAll)
		}
		for _, v := range order {
			if !outputs[v] && markable(v) {
				marked = append(marked, v)
			}
		}
	} else {
		for _, name := range names {
			v, err := markValue(g, stored, name)
			if err != nil {
				return nil, fmt.Errorf("--mark-outputs: %w", err)
			}
			if outputs[v] {
				return nil, fmt.Errorf("--mark-outputs: %q is already an output of the model", name)
			}
			if !slices.Contains(marked, v) {
				marked = append(marked, v)
			}
		}
	}
	debug := map[string]*engine.Debug{}
	for _, v := range marked {
		g.Outputs = append(g.Outputs, v)
		debug[v.Name] = describe(v)
	}
	return debug, nil
}

// markable is a tensor "all" marks: floats (activations) and 8-bit
// integers (quantized activations), with a known shape.
func markable(v *ir.Value) bool {
	t := v.Type
	if t.Kind != ir.TensorKind || !t.Shape.Ranked {
		return false
	}
	return t.Elem.IsFloat() || t.Elem == ir.Int8 || t.Elem == ir.Uint8
}

// markValue finds a named value the optimized graph stores, or says why
// it cannot be marked.
func markValue(g *ir.Graph, stored map[string]*ir.Value, name string) (*ir.Value, error) {
	if v := stored[name]; v != nil {
		if v.Type.Kind != ir.TensorKind || v.Type.Elem.Size() <= 0 {
			return nil, fmt.Errorf("%q is not a tensor of numbers (%s)", name, v.Type)
		}
		return v, nil
	}
	for _, v := range g.Inputs {
		if v.Name == name {
			return nil, fmt.Errorf("%q is an input of the model, not a value it computes", name)
		}
	}
	for _, v := range g.Initializers {
		if v.Name == name {
			return nil, fmt.Errorf("%q is a constant of the model, not a value it computes", name)
		}
	}
	for _, n := range g.Nodes {
		if n.Domain != ir.KilnDomain || n.OpType != ops.FusionGroup {
			continue
		}
		for _, b := range n.Attr("body").G.Nodes {
			for _, v := range b.Outputs {
				if v != nil && v.Name == name {
					return nil, fmt.Errorf("%q is computed inside the fused node %q (kind %s) and never stored: mark its output %q instead",
						name, n.Name, n.Attr("kind").S, n.Outputs[0].Name)
				}
			}
		}
	}
	return nil, fmt.Errorf("the optimized graph has no value %q (not in the model, or optimized away: cc build --emit ir shows the graph)", name)
}

// describe says which source-model value a marked tensor holds, which node
// computed it, and how to dequantize it when it is quantized: the output
// of a QuantizeLinear (alone or a fused group's q-output) holds its
// input's value, quantized; an 8-bit tensor that a layout op (MaxPool,
// Reshape, ...) made from a quantized one keeps that one's parameters, and
// its name says the value (P_quantized holds P: floatName).
func describe(v *ir.Value) *engine.Debug {
	d := &engine.Debug{Value: v.Name}
	p := v.Producer
	if p == nil {
		return d
	}
	d.Node = nodeOf(p)
	last := p
	if isGroup(p) {
		if body := p.Attr("body").G; len(body.Outputs) == 1 && body.Outputs[0].Producer != nil {
			last = body.Outputs[0].Producer
		}
	}
	if last.Domain == "" && last.OpType == "QuantizeLinear" {
		quantParams(d, last)
		if x := last.Input(0); x != nil {
			d.Value = x.Name
			if !isGroup(p) { // an unfused Q: the node that computed x (none for a model input)
				d.Node = ""
				if x.Producer != nil {
					d.Node = nodeOf(x.Producer)
				}
			}
		}
		return d
	}
	if (v.Type.Elem == ir.Int8 || v.Type.Elem == ir.Uint8) && preservesQuantization(p) && p.Input(0) != nil && p.Input(0).Type.Elem == v.Type.Elem {
		in := describe(p.Input(0))
		d.Scale, d.ZeroPoint, d.Axis = in.Scale, in.ZeroPoint, in.Axis
		d.Value, d.Layout = floatName(v.Name), len(d.Scale) > 0
	}
	return d
}

func isGroup(n *ir.Node) bool { return n.Domain == ir.KilnDomain && n.OpType == ops.FusionGroup }

// nodeOf names the model node that computed n's output, as cc quantize
// --keep-fp32 names it: a fused group's base op, and for a Relu or Clip
// after a Conv, Gemm, MatMul or Add (an activation the quantizer absorbs
// into that op) the op.
func nodeOf(n *ir.Node) string {
	if n.Domain == "" && (n.OpType == "Relu" || n.OpType == "Clip") && n.Input(0) != nil {
		if x := n.Input(0).Producer; x != nil && (isGroup(x) || x.Domain == "" && slices.Contains([]string{"Conv", "Gemm", "MatMul", "Add"}, x.OpType)) {
			n = x
		}
	}
	if isGroup(n) {
		body := n.Attr("body").G
		if roles := n.Attr("roles"); roles != nil && len(roles.Strings) == len(body.Nodes) {
			if i := slices.Index(roles.Strings, string(ops.RoleBase)); i >= 0 {
				return body.Nodes[i].Name
			}
		}
	}
	return n.Name
}

// quantizedSuffixes end the names of quantized values made from a float
// value of the model: kiln's (cc quantize's QuantizeLinear outputs, and
// the layout ops qdq-propagate moves to 8 bits, which keep that name) and
// ONNX Runtime's quantizer's.
var quantizedSuffixes = []string{"_quantized", "_QuantizeLinear_Output"}

// floatName is the float value a quantized value's name says it holds: the
// name less a quantizedSuffixes suffix (and a UniqueName "_N" after it),
// or the name itself.
func floatName(name string) string {
	base := name
	if i := strings.LastIndexByte(base, '_'); i > 0 && isDigits(base[i+1:]) {
		base = base[:i]
	}
	for _, suffix := range quantizedSuffixes {
		if f, ok := strings.CutSuffix(base, suffix); ok && f != "" {
			return f
		}
	}
	return name
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// preservesQuantization is an op that passes 8-bit data through
// (ops.Int8Of): its 8-bit output has its first input's scale and zero
// point (what qdq-propagate moves QDQ through).
func preservesQuantization(n *ir.Node) bool { return ops.PassesInt8(n) }

// quantParams reads a QuantizeLinear's constant scale and zero point into
// d; non-constant parameters leave d without them (the tensor then is not
// compared as a quantized one).
func quantParams(d *engine.Debug, q *ir.Node) {
	scale := q.Input(1)
	if !scale.IsConst() || scale.Const.Len() == 0 {
		return
	}
	for i := range int(scale.Const.Len()) {
		d.Scale = append(d.Scale, float32(scale.Const.Float64At(i)))
	}
	if zp := q.Input(2); zp.IsConst() && zp.Const.DType.IsInt() {
		for i := range int(zp.Const.Len()) {
			d.ZeroPoint = append(d.ZeroPoint, int32(zp.Const.Int64At(i)))
		}
	}
	if len(d.Scale) > 1 {
		axis := int64(1)
		if a := q.Attr("axis"); a != nil {
			axis = a.I
		}
		if rank := int64(len(q.Outputs[0].Type.Shape.Dims)); axis < 0 {
			axis += rank
		}
		d.Axis = int(axis)
	}
}
