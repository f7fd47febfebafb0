package passes

import (
	"strconv"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// LoopTarget is a Target that compiles control flow (a Loop's or Scan's
// body as a function called per iteration); unroll-scans leaves its
// graphs as they are.
type LoopTarget interface {
	Target
	CompilesLoops()
}

// maxUnrolledNodes bounds the nodes one Scan unrolls into: past it the
// Scan stays, for the backend to report.
const maxUnrolledNodes = 4096

// unrollScansPass replaces, for a target without control flow (the CUDA
// targets compile static graphs), each Scan of the main graph whose
// sequence length inference knows by its body's nodes once per
// iteration: each scan input's slice is a Gather at the iteration's
// index, the states flow from one copy to the next, and each scan
// output is the Concat of its per-iteration values. A Scan whose body
// holds subgraphs, of opset 8 (batched), or too long to unroll stays.
func unrollScansPass(c *Context, m *ir.Model) error {
	if _, ok := c.target().(LoopTarget); ok || c.Target == nil {
		return nil
	}
	opset := ops.OpsetsOf(m)[""]
	changed := false
	var nodes []*ir.Node
	names := ir.NewNamer()
	used := map[string]bool{}
	addNames(used, m.Graph)
	for name := range used {
		names.Reserve(name)
	}
	for _, n := range m.Graph.Nodes {
		if un, ok := unrollScan(m.Graph, n, opset, names); ok {
			nodes = append(nodes, un...)
			changed = true
			continue
		}
		nodes = append(nodes, n)
	}
	if !changed {
		return nil
	}
	m.Graph.Nodes = nodes
	_, err := ops.InferShapesWithin(m, c.Limits)
	return err
}

// unrollScan returns the nodes replacing Scan node n, or false.
func unrollScan(g *ir.Graph, n *ir.Node, opset int64, names *ir.Namer) ([]*ir.Node, bool) {
	if n.OpType != "Scan" || n.Domain != "" && n.Domain != "ai.onnx" || opset < 9 {
		return nil, false
	}
	a := n.Attr("body")
	if a == nil || a.G == nil {
		return nil, false
	}
	body := a.G
	m := int(attrInt(n, "num_scan_inputs", 0))
	states := len(n.Inputs) - m
	if m < 1 || states < 0 || len(body.Inputs) != len(n.Inputs) || len(body.Outputs) != len(n.Outputs) || len(body.SparseInitializers) != 0 {
		return nil, false
	}
	for _, bn := range body.Nodes {
		if len(bn.Subgraphs()) > 0 {
			return nil, false
		}
	}
	k := len(n.Outputs) - states
	inAxes, ok1 := scanInts(n, "scan_input_axes", m)
	inDirs, ok2 := scanInts(n, "scan_input_directions", m)
	outAxes, ok3 := scanInts(n, "scan_output_axes", k)
	outDirs, ok4 := scanInts(n, "scan_output_directions", k)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, false // the backend reports the malformed Scan
	}
	// The sequence length: every scan input's along its axis.
	steps := int64(-1)
	for j := range m {
		x := n.Inputs[states+j]
		if x == nil || !x.Type.Shape.Ranked {
			return nil, false
		}
		ax, err := ops.NormAxis(inAxes[j], x.Type.Shape.Rank())
		if err != nil {
			return nil, false
		}
		inAxes[j] = int64(ax)
		d := x.Type.Shape.Dims[ax]
		if !d.IsStatic() || steps >= 0 && d.Value != steps {
			return nil, false
		}
		steps = d.Value
	}
	if steps < 1 || steps*int64(len(body.Nodes)+m+k) > maxUnrolledNodes {
		return nil, false
	}
	// A scan output's axis counts in its rank, one more than the body's.
	for j := range k {
		if outAxes[j] >= 0 {
			continue
		}
		bo := body.Outputs[states+j]
		if bo == nil || !bo.Type.Shape.Ranked {
			return nil, false
		}
		outAxes[j] += int64(bo.Type.Shape.Rank() + 1)
	}
	base := n.Name
	if base == "" {
		base = "Scan"
	}
	fresh := func(what string) *ir.Value { return &ir.Value{Name: names.Unique(base + "_" + what)} }
	var out []*ir.Node
	add := func(op string, ins []*ir.Value, attrs ...*ir.Attribute) *ir.Value {
		v := fresh(op)
		nd := &ir.Node{Name: names.Unique(base + "_" + op), OpType: op, Inputs: ins, Outputs: []*ir.Value{v}, Attrs: attrs}
		v.Producer = nd
		out = append(out, nd)
		return v
	}
	konst := func(t *ir.Tensor) *ir.Value {
		v := &ir.Value{Name: names.Unique(base + "_const"), Type: ir.TensorType(t.DType, ir.S(t.Dims...)), Const: t}
		t.Name = v.Name
		g.Initializers = append(g.Initializers, v)
		return v
	}
	// The body's constants, once for every iteration.
	shared := map[*ir.Value]*ir.Value{}
	for _, v := range body.Initializers {
		shared[v] = konst(v.Const.Clone())
	}
	cur := append([]*ir.Value(nil), n.Inputs[:states]...)
	perStep := make([][]*ir.Value, k)
	for t := range steps {
		env := map[*ir.Value]*ir.Value{}
		for v, c := range shared {
			env[v] = c
		}
		for i := range states {
			env[body.Inputs[i]] = cur[i]
		}
		for j := range m {
			at := t
			if inDirs[j] != 0 {
				at = steps - 1 - t
			}
			idx := konst(ir.Scalar(ir.Int64, at))
			env[body.Inputs[states+j]] = add("Gather", []*ir.Value{n.Inputs[states+j], idx}, ir.AttrI("axis", inAxes[j]))
		}
		for _, bn := range body.Nodes {
			cl := &ir.Node{Name: names.Unique(base + "_" + strconv.FormatInt(t, 10) + "_" + bn.OpType), OpType: bn.OpType, Domain: bn.Domain,
				Overload: bn.Overload, Attrs: append([]*ir.Attribute(nil), bn.Attrs...)}
			for _, in := range bn.Inputs {
				if v, ok := env[in]; ok {
					in = v
				}
				cl.Inputs = append(cl.Inputs, in) // an outer value, or nil
			}
			for _, o := range bn.Outputs {
				if o == nil {
					cl.Outputs = append(cl.Outputs, nil)
					continue
				}
				v := &ir.Value{Name: names.Unique(o.Name), Producer: cl}
				env[o] = v
				cl.Outputs = append(cl.Outputs, v)
			}
			out = append(out, cl)
		}
		at := func(v *ir.Value) *ir.Value {
			if w, ok := env[v]; ok {
				return w
			}
			return v // an outer value passed through
		}
		for i := range states {
			cur[i] = at(body.Outputs[i])
		}
		for j := range k {
			perStep[j] = append(perStep[j], at(body.Outputs[states+j]))
		}
	}
	bind := func(v, to *ir.Value) {
		if to == nil {
			return
		}
		id := &ir.Node{Name: names.Unique(base + "_out"), OpType: "Identity", Inputs: []*ir.Value{v}, Outputs: []*ir.Value{to}}
		to.Producer = id
		out = append(out, id)
	}
	for i := range states {
		bind(cur[i], n.Outputs[i])
	}
	for j := range k {
		o := n.Outputs[states+j]
		if o == nil {
			continue
		}
		ax := outAxes[j]
		var parts []*ir.Value
		for t := range steps {
			v := perStep[j][t]
			if outDirs[j] != 0 {
				v = perStep[j][steps-1-t]
			}
			if opset >= 13 {
				parts = append(parts, add("Unsqueeze", []*ir.Value{v, konst(ir.FromSlice(ir.Int64, []int64{1}, []int64{ax}))}))
			} else {
				parts = append(parts, add("Unsqueeze", []*ir.Value{v}, ir.AttrIs("axes", ax)))
			}
		}
		bind(add("Concat", parts, ir.AttrI("axis", ax)), o)
	}
	return out, true
}

// scanInts is an ints attribute of n holding k entries (zeros when
// absent), or false when it holds another number.
func scanInts(n *ir.Node, name string, k int) ([]int64, bool) {
	out := make([]int64, k)
	a := n.Attr(name)
	if a == nil {
		return out, true
	}
	if len(a.Ints) != k {
		return nil, false
	}
	copy(out, a.Ints)
	return out, true
}
