package passes

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// loopSequencesPass rewrites the sequence a Loop builds by appending one
// tensor per iteration, and that is read after the loop only by
// ConcatFromSequence, into a scan output of the Loop. It is how PyTorch
// exports a scripted list (`outs.append(f(x[t]))` then `torch.stack(outs)`
// or `torch.cat(outs, d)`): SequenceEmpty before the loop, a loop-carried
// sequence, SequenceInsert at its end in the body. A scan output is the
// Loop's own stacking of one value per iteration, which compiled backends
// run in the arena (they have no sequence values); ConcatFromSequence
// becomes the scan output itself (stacking on axis 0), a Transpose (on
// another axis), or those then a Reshape (concatenating).
//
// The appended value must have the same shape in every iteration, as a
// scan output's must: its dims are static or the graph's own symbols
// (a value whose shape inference could not fix, such as x[:t], stays a
// sequence, which the backends then report).
func loopSequencesPass(c *Context, m *ir.Model) error {
	for rewrote := false; ; rewrote = true {
		changed, err := rewriteLoopSequence(m.Graph)
		if err != nil {
			return err
		}
		if !changed {
			if rewrote { // type the new values
				_, err = ops.InferShapesWithin(m, c.Limits)
			}
			return err
		}
	}
}

// rewriteLoopSequence rewrites the first loop-built sequence it finds in
// g and reports whether it found one.
func rewriteLoopSequence(g *ir.Graph) (bool, error) {
	uses := g.Uses()
	symbols := graphSymbols(g)
	for _, n := range g.Nodes {
		if n.OpType != "Loop" || n.Domain != "" && n.Domain != "ai.onnx" {
			continue
		}
		a := n.Attr("body")
		if a == nil || a.G == nil {
			continue
		}
		body := a.G
		carried := len(n.Inputs) - 2
		if carried < 0 || len(body.Inputs) != carried+2 || len(body.Outputs) < carried+1 || len(n.Outputs) != len(body.Outputs)-1 {
			continue
		}
		for k := range carried {
			if appended, ok := appendedEachIteration(g, n, body, k, uses, symbols); ok {
				return true, toScanOutput(g, n, body, k, appended, uses)
			}
		}
	}
	return false, nil
}

// appendedEachIteration returns the value the body of Loop n appends to
// its carried sequence k, when that is all the loop does with it: it
// starts empty, the body reads it only to append one value at its end
// (SequenceInsert with no position) and carries the result on, and after
// the loop only ConcatFromSequence reads it.
func appendedEachIteration(g *ir.Graph, n *ir.Node, body *ir.Graph, k int, uses map[*ir.Value][]*ir.Node, symbols map[string]bool) (*ir.Value, bool) {
	init, final := n.Inputs[2+k], n.Outputs[k]
	if init == nil || init.Producer == nil || init.Producer.OpType != "SequenceEmpty" || len(uses[init]) != 1 || slices.Contains(g.Outputs, init) {
		return nil, false
	}
	if final == nil || slices.Contains(g.Outputs, final) {
		return nil, false
	}
	in, out := body.Inputs[2+k], body.Outputs[1+k]
	bodyUses := body.Uses()
	ins := out.Producer
	if ins == nil || ins.OpType != "SequenceInsert" || len(ins.Inputs) != 2 || ins.Input(0) != in {
		return nil, false
	}
	if len(bodyUses[in]) != 1 || len(bodyUses[out]) != 0 || slices.Index(body.Outputs, out) != 1+k || slices.Contains(body.Outputs, in) {
		return nil, false
	}
	v := ins.Input(1)
	if v == nil || !v.Type.IsTensor() || !v.Type.Shape.Ranked {
		return nil, false
	}
	for _, d := range v.Type.Shape.Dims {
		if !d.IsStatic() && !ofSymbols(d, symbols) {
			return nil, false
		}
	}
	for _, u := range uses[final] {
		if u.OpType != "ConcatFromSequence" || u.Input(0) != final {
			return nil, false
		}
		axis, newAxis, ok := concatAxis(u, v.Type.Shape.Rank())
		if !ok {
			return nil, false
		}
		if newAxis == 0 && slices.ContainsFunc(v.Type.Shape.Dims[axis+1:], func(d ir.Dim) bool { return !d.IsStatic() }) {
			return nil, false // the Reshape restates the dims after axis
		}
	}
	return v, true
}

// concatAxis is a ConcatFromSequence node's axis, normalized, and its
// new_axis, for elements of the given rank; false when out of range.
func concatAxis(n *ir.Node, rank int) (axis, newAxis int64, ok bool) {
	if at := n.Attr("axis"); at != nil {
		axis = at.I
	}
	if at := n.Attr("new_axis"); at != nil {
		newAxis = at.I
	}
	r := int64(rank) + newAxis
	if axis < 0 {
		axis += r
	}
	return axis, newAxis, newAxis >= 0 && newAxis <= 1 && axis >= 0 && axis < r
}

// ofSymbols reports whether d is an expression over the given symbols
// only.
func ofSymbols(d ir.Dim, symbols map[string]bool) bool {
	e, ok := ir.DimExpr(d)
	if !ok {
		return false
	}
	for _, s := range e.Symbols() {
		if !symbols[s] {
			return false
		}
	}
	return true
}

// toScanOutput makes the value the body appends to carried sequence k a
// scan output of n, drops the sequence, and replaces each
// ConcatFromSequence of it by the scan output's stacking or concatenation.
func toScanOutput(g *ir.Graph, n *ir.Node, body *ir.Graph, k int, v *ir.Value, uses map[*ir.Value][]*ir.Node) error {
	final := n.Outputs[k]
	concats := uses[final]
	insert := body.Outputs[1+k].Producer
	body.Nodes = slices.DeleteFunc(body.Nodes, func(b *ir.Node) bool { return b == insert })
	body.Inputs = slices.Delete(body.Inputs, 2+k, 3+k)
	body.Outputs = append(slices.Delete(body.Outputs, 1+k, 2+k), v)
	empty := n.Inputs[2+k].Producer
	g.Nodes = slices.DeleteFunc(g.Nodes, func(b *ir.Node) bool { return b == empty })
	n.Inputs = slices.Delete(n.Inputs, 2+k, 3+k)
	names := g.Namer()
	stacked := &ir.Value{Name: names.Unique(final.Name + "_stacked"), Producer: n}
	n.Outputs = append(slices.Delete(n.Outputs, k, k+1), stacked)

	rank := int64(v.Type.Shape.Rank())
	for _, cat := range concats {
		axis, newAxis, _ := concatAxis(cat, int(rank))
		out := cat.Outputs[0]
		base := cat.Name
		if base == "" {
			base = out.Name
		}
		var nodes []*ir.Node
		// The iterations go to axis; the scan output has them at 0.
		src := stacked
		if axis != 0 {
			perm := make([]int64, 0, rank+1)
			for i := int64(1); i <= axis; i++ {
				perm = append(perm, i)
			}
			perm = append(perm, 0)
			for i := axis + 1; i <= rank; i++ {
				perm = append(perm, i)
			}
			t := &ir.Node{Name: names.Unique(base + "_transpose"), OpType: "Transpose", Inputs: []*ir.Value{src}, Attrs: []*ir.Attribute{ir.AttrIs("perm", perm...)}}
			src = &ir.Value{Name: names.Unique(out.Name + "_transposed"), Producer: t}
			t.Outputs = []*ir.Value{src}
			nodes = append(nodes, t)
		}
		if newAxis == 0 {
			// Concatenating merges the iterations (now at axis) with the
			// element's dim at axis: Reshape keeps the dims before (0),
			// merges the pair (-1) and restates those after, which must
			// be static for that.
			target := make([]int64, 0, rank)
			for i := int64(0); i < axis; i++ {
				target = append(target, 0)
			}
			target = append(target, -1)
			for _, d := range v.Type.Shape.Dims[axis+1:] {
				target = append(target, d.Value) // static: appendedEachIteration checked
			}
			shape := g.AddInitializer(names.Unique(out.Name+"_shape"), ir.FromSlice(ir.Int64, []int64{int64(len(target))}, target))
			rs := &ir.Node{Name: names.Unique(base + "_reshape"), OpType: "Reshape", Inputs: []*ir.Value{src, shape}}
			src = &ir.Value{Name: names.Unique(out.Name + "_merged"), Producer: rs}
			rs.Outputs = []*ir.Value{src}
			nodes = append(nodes, rs)
		}
		id := &ir.Node{Name: cat.Name, OpType: "Identity", Inputs: []*ir.Value{src}, Outputs: []*ir.Value{out}}
		out.Producer = id
		nodes = append(nodes, id)
		i := slices.Index(g.Nodes, cat)
		g.Nodes = slices.Insert(slices.Delete(g.Nodes, i, i+1), i, nodes...)
	}
	return g.TopoSort()
}

// graphSymbols are the dim symbols of g's inputs: sizes fixed for a run,
// so a value shaped by them has one shape in every iteration.
func graphSymbols(g *ir.Graph) map[string]bool {
	syms := map[string]bool{}
	for _, v := range g.Inputs {
		for _, d := range v.Type.Shape.Dims {
			if e, ok := ir.DimExpr(d); ok {
				for _, s := range e.Symbols() {
					syms[s] = true
				}
			}
		}
	}
	return syms
}
