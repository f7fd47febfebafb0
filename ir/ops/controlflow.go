package ops

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Control flow: If, Loop and Scan. Their bodies are subgraphs that read
// values of the enclosing graphs directly; inference types the bodies in
// place (inferBody) and the kernels run them through KernelContext.RunGraph,
// which the executor provides. Versions after the first of each op only
// widen the element types (sequences and optionals from 13 and 16, which
// kiln does not compute with, then float8, int4, float4): the rows share
// one implementation.

// controlFlowTypes is every element type: the ops move tensors without
// reading them, and the bodies' own nodes are checked on their own.
var controlFlowTypes = concatTypes(allTypes, []ir.DType{ir.Complex64, ir.Complex128, ir.Float8E4M3FN, ir.Float8E4M3FNUZ,
	ir.Float8E5M2, ir.Float8E5M2FNUZ, ir.Uint4, ir.Int4, ir.Float4E2M1, ir.Float8E8M0})

var controlFlowOps = concatRows(
	versions([]int64{1, 11, 13, 16, 19, 21, 23}, func(v int64) *Schema {
		return &Schema{Name: "If", Since: v, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: -1,
			Attrs: []AttrDef{{Name: "then_branch", Kind: ir.AttrGraph, Required: true}, {Name: "else_branch", Kind: ir.AttrGraph, Required: true}},
			Types: controlFlowTypes, Infer: inferIf, Run: runIf}
	}),
	versions([]int64{1, 11, 13, 16, 19, 21, 23}, func(v int64) *Schema {
		return &Schema{Name: "Loop", Since: v, MinInputs: 0, MaxInputs: -1, MinOutputs: 0, MaxOutputs: -1,
			Attrs: []AttrDef{{Name: "body", Kind: ir.AttrGraph, Required: true}},
			Types: controlFlowTypes, Infer: inferLoop, Run: runLoop}
	}),
	[]*Schema{{Name: "Scan", Since: 8, MinInputs: 0, MaxInputs: -1, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "body", Kind: ir.AttrGraph, Required: true}, {Name: "num_scan_inputs", Kind: ir.AttrInt, Required: true},
			defInts("directions")},
		Types: controlFlowTypes, Infer: inferScan8, Run: runScan8}},
	versions([]int64{9, 11, 16, 19, 21, 23}, func(v int64) *Schema {
		return &Schema{Name: "Scan", Since: v, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: -1,
			Attrs: []AttrDef{{Name: "body", Kind: ir.AttrGraph, Required: true}, {Name: "num_scan_inputs", Kind: ir.AttrInt, Required: true},
				defInts("scan_input_axes"), defInts("scan_input_directions"), defInts("scan_output_axes"), defInts("scan_output_directions")},
			Types: controlFlowTypes, Infer: inferScan, Run: runScan}
	}),
)

func init() { register(takingContainers(controlFlowOps)) }

// versions builds one row per opset version from a template.
func versions(since []int64, row func(v int64) *Schema) []*Schema {
	rows := make([]*Schema, len(since))
	for i, v := range since {
		rows[i] = row(v)
	}
	return rows
}

// unionTypes is the type that holds a value of either a or b: an If's
// output over its two branches, a loop-carried value over the iterations.
// A dim equal in both stays, others become unknown; different ranks give
// an unknown rank. Different element types are an error.
func unionTypes(a, b ir.Type) (ir.Type, error) {
	if a.Kind == ir.UnknownKind || b.Kind == ir.UnknownKind {
		return ir.Type{}, nil
	}
	if a.Kind != b.Kind || a.Kind != ir.TensorKind {
		if a.Equal(b) {
			return a.Clone(), nil
		}
		if a.Kind == b.Kind && (a.Kind == ir.SequenceKind || a.Kind == ir.OptionalKind) && a.Inner != nil && b.Inner != nil {
			inner, err := unionTypes(*a.Inner, *b.Inner)
			return ir.Type{Kind: a.Kind, Inner: &inner}, err
		}
		return ir.Type{}, fmt.Errorf("%s and %s are different kinds of value", a, b)
	}
	if a.Elem != ir.Undefined && b.Elem != ir.Undefined && a.Elem != b.Elem {
		return ir.Type{}, fmt.Errorf("element types %s and %s differ", a.Elem, b.Elem)
	}
	elem := a.Elem
	if elem == ir.Undefined {
		elem = b.Elem
	}
	if !a.Shape.Ranked || !b.Shape.Ranked || len(a.Shape.Dims) != len(b.Shape.Dims) {
		return ir.TensorType(elem, ir.Shape{}), nil
	}
	dims := make([]ir.Dim, len(a.Shape.Dims))
	for i, d := range a.Shape.Dims {
		if ir.DimEqual(d, b.Shape.Dims[i]) {
			dims[i] = d
		} else {
			dims[i] = ir.UnknownDim()
		}
	}
	return ir.TensorType(elem, ir.ShapeOf(dims...)), nil
}

// elemOnly is t without its shape: a loop-carried value's type in the body,
// whose shape may change from one iteration to the next.
func elemOnly(t ir.Type) ir.Type {
	if t.Kind != ir.TensorKind {
		return t
	}
	return ir.TensorType(t.Elem, ir.Shape{})
}

func scalarType(d ir.DType) ir.Type { return ir.TensorType(d, ir.S()) }

// checkScalarInput refuses a cond or trip count that is not one element of
// the wanted type, where inference can tell.
func checkScalarInput(c *InferContext, i int, what string, want ir.DType) error {
	if !c.HasInput(i) {
		return nil
	}
	t := c.In(i)
	if t.Kind == ir.TensorKind && t.Elem != ir.Undefined && t.Elem != want {
		return c.Errorf("%s is %s, want %s", what, t, want)
	}
	if n := t.Shape.NumElements(); n >= 0 && n != 1 {
		return c.Errorf("%s is %s, want a single element", what, t)
	}
	return nil
}

func inferIf(c *InferContext) error {
	if err := checkScalarInput(c, 0, "cond", ir.Bool); err != nil {
		return err
	}
	taken := -1 // which branch runs, when cond is known
	if t := c.Const(0); t != nil && t.DType == ir.Bool && t.Len() == 1 {
		taken = 1
		if t.Int64At(0) != 0 {
			taken = 0
		}
	}
	branches := []string{"then_branch", "else_branch"}
	outs := make([][]ir.Type, 2)
	for b, name := range branches {
		g := c.Attr(name).G
		if len(g.Inputs) != 0 {
			return c.Errorf("%s has %d inputs, want none", name, len(g.Inputs))
		}
		if len(g.Outputs) != len(c.Node.Outputs) {
			return c.Errorf("%s has %d outputs but the node has %d", name, len(g.Outputs), len(c.Node.Outputs))
		}
		// A branch that cannot run is not inferred: exporters write both
		// ranks' code under an If on the rank (AffineGrid's 2-D and 3-D
		// bodies), and the untaken one does not type on the other's shapes.
		if taken >= 0 && b != taken {
			continue
		}
		known, err := inferBody(c, name, g, nil)
		if err != nil {
			return err
		}
		keepBody(c, known) // a branch runs once, on what its graph holds
		for _, o := range g.Outputs {
			outs[b] = append(outs[b], o.Type)
		}
	}
	for i := range c.Node.Outputs {
		if taken >= 0 {
			c.Set(i, outs[taken][i])
			continue
		}
		u, err := unionTypes(outs[0][i], outs[1][i])
		if err != nil {
			return c.Errorf("output %d: the branches disagree: %v", i, err)
		}
		c.Set(i, branchDims(c, i, u, outs[0][i], outs[1][i]))
	}
	return nil
}

// branchDims gives each dim of output i that the branches know but not
// alike (a front-end's 31 frames or 63) a symbol of its own: the branch
// that runs decides it (datadims.go).
func branchDims(c *InferContext, i int, u, a, b ir.Type) ir.Type {
	if u.Kind != ir.TensorKind || !u.Shape.Ranked || c.Node.Outputs[i] == nil || !a.Shape.Ranked || !b.Shape.Ranked {
		return u
	}
	for j, d := range u.Shape.Dims {
		_, okA := ir.DimExpr(a.Shape.Dims[j])
		_, okB := ir.DimExpr(b.Shape.Dims[j])
		if d == ir.UnknownDim() && okA && okB {
			u.Shape.Dims[j] = branchDim(c.Node.Outputs[i], j)
		}
	}
	return u
}

// loopShape is a Loop node's arity: N loop-carried values and K scan
// outputs; the body takes (iteration_num, cond, v_1..v_N) and returns
// (cond, v_1..v_N, scan_1..scan_K).
func loopShape(n *ir.Node, body *ir.Graph) (carried, scans int, err error) {
	carried = len(n.Inputs) - 2
	if carried < 0 {
		return 0, 0, fmt.Errorf("%s: has %d inputs, want at least 2 (M and cond, either may be empty)", n, len(n.Inputs))
	}
	if len(body.Inputs) != carried+2 {
		return 0, 0, fmt.Errorf("%s: body has %d inputs, want %d (iteration_num, cond and the %d loop-carried values)", n, len(body.Inputs), carried+2, carried)
	}
	scans = len(body.Outputs) - 1 - carried
	if scans < 0 {
		return 0, 0, fmt.Errorf("%s: body has %d outputs, want at least %d (cond and the %d loop-carried values)", n, len(body.Outputs), carried+1, carried)
	}
	if len(n.Outputs) != carried+scans {
		return 0, 0, fmt.Errorf("%s: has %d outputs but its body gives %d loop-carried values and %d scan outputs", n, len(n.Outputs), carried, scans)
	}
	for i := 2; i < len(n.Inputs); i++ {
		if n.Inputs[i] == nil {
			return 0, 0, fmt.Errorf("%s: loop-carried input %d is missing", n, i-2)
		}
	}
	return carried, scans, nil
}

func inferLoop(c *InferContext) error {
	body := c.Attr("body").G
	carried, scans, err := loopShape(c.Node, body)
	if err != nil {
		return err
	}
	if err := checkScalarInput(c, 0, "trip count M", ir.Int64); err != nil {
		return err
	}
	if err := checkScalarInput(c, 1, "cond", ir.Bool); err != nil {
		return err
	}
	known, err := inferLoopBody(c, body, carried)
	if err != nil {
		return err
	}
	keepBody(c, known)
	if t := body.Outputs[0].Type; t.Kind == ir.TensorKind && t.Elem != ir.Undefined && t.Elem != ir.Bool {
		return c.Errorf("body's cond output %q is %s, want bool", body.Outputs[0].Name, t)
	}
	for i := 0; i < carried; i++ {
		u, err := unionTypes(c.In(2+i), body.Outputs[1+i].Type)
		if err != nil {
			return c.Errorf("loop-carried value %d: the initial value and the body's output disagree: %v", i, err)
		}
		c.Set(i, u)
	}
	trips := loopTrips(c, body, known)
	for k := 0; k < scans; k++ {
		t := body.Outputs[1+carried+k].Type
		if t.Kind != ir.TensorKind || !t.Shape.Ranked {
			c.Set(carried+k, ir.TensorType(t.Elem, ir.Shape{}))
			continue
		}
		c.Set(carried+k, ir.TensorType(t.Elem, ir.ShapeOf(append([]ir.Dim{trips}, t.Shape.Dims...)...)))
	}
	return nil
}

// inferLoopBody types a Loop's body. It first gives the loop-carried
// inputs their initial types: when the body returns each with that same
// type, the type holds in every iteration. Otherwise (a carried value that
// grows, or a body that does not infer on the initial shapes) it types the
// body again from the carried values' element types alone, as ONNX does.
// The values known in the pass that stays hold in every iteration; the
// first pass's, when it does not stay, are forgotten with its types.
func inferLoopBody(c *InferContext, body *ir.Graph, carried int) (map[*ir.Value]*ir.Tensor, error) {
	inputs := func(carriedType func(ir.Type) ir.Type) []ir.Type {
		types := []ir.Type{loopScalar(body.Inputs[0].Type, ir.Int64), loopScalar(body.Inputs[1].Type, ir.Bool)}
		for i := 0; i < carried; i++ {
			types = append(types, carriedType(c.In(2+i)))
		}
		return types
	}
	declared := map[*ir.Value]ir.Type{}
	saveTypes(body, declared)
	known, err := inferBody(c, "body", body, inputs(func(t ir.Type) ir.Type { return t }))
	if err == nil && sameTypes(body.Inputs[2:], body.Outputs[1:1+carried]) {
		return known, nil
	}
	for v, t := range declared {
		v.Type = t
	}
	return inferBody(c, "body", body, inputs(elemOnly))
}

// loopScalar is the type of a Loop body's iteration number or condition:
// a scalar of elem, or the body's declared type when it is one element of
// elem (PyTorch declares int64[1]; ONNX Runtime runs it so).
func loopScalar(declared ir.Type, elem ir.DType) ir.Type {
	if declared.Kind == ir.TensorKind && declared.Elem == elem && declared.Shape.IsStatic() && declared.Shape.NumElements() == 1 {
		return declared.Clone()
	}
	return scalarType(elem)
}

// saveTypes records the types of g's inputs and node outputs, nested
// subgraphs included.
func saveTypes(g *ir.Graph, types map[*ir.Value]ir.Type) {
	for _, v := range g.Inputs {
		types[v] = v.Type.Clone()
	}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != nil {
				types[o] = o.Type.Clone()
			}
		}
		for _, sg := range n.Subgraphs() {
			saveTypes(sg, types)
		}
	}
}

// sameTypes reports whether a body returns each of its carried values
// (ins: the body's inputs holding them, outs: its outputs giving their
// next values) with the type it was given, so that the type holds in
// every iteration.
func sameTypes(ins, outs []*ir.Value) bool {
	for i, v := range ins {
		in := v.Type
		if u, err := unionTypes(in, outs[i].Type); err != nil || !u.Equal(in) || in.Kind == ir.UnknownKind {
			return false
		}
	}
	return true
}

// loopTrips is the number of iterations when inference can tell: a trip
// count that is a constant or an expression over the model's symbols (a
// scripted `for t in range(x.size(0))`), and a body whose cond output is
// always true.
func loopTrips(c *InferContext, body *ir.Graph, known map[*ir.Value]*ir.Tensor) ir.Dim {
	trips := ir.UnknownDim()
	if m := c.Const(0); m != nil && m.Len() == 1 && m.DType == ir.Int64 {
		trips = ir.D(max(m.Int64At(0), 0))
	} else if e := c.SymInts(0); len(e) == 1 && e[0] != nil {
		trips = ir.DimMax(ir.DimOf(e[0]), ir.D(0)) // a negative count runs no iteration
	}
	if trips == ir.UnknownDim() {
		return trips
	}
	if cond := c.Const(1); cond != nil && cond.Len() == 1 && cond.Int64At(0) == 0 {
		return ir.D(0)
	}
	if c.HasInput(1) && c.Const(1) == nil {
		return ir.UnknownDim()
	}
	out := body.Outputs[0]
	for out.Producer != nil && out.Producer.OpType == "Identity" && len(out.Producer.Inputs) == 1 {
		out = out.Producer.Inputs[0]
	}
	if t := known[out]; out != body.Inputs[1] && (t == nil || t.Len() != 1 || t.Int64At(0) == 0) {
		return ir.UnknownDim()
	}
	return trips
}

// scanAxes reads one of Scan's per-input or per-output ints attributes:
// n values, each defaulting to 0.
func scanAxes(c attrs, node *ir.Node, name string, n int) ([]int64, error) {
	v := c.Ints(name)
	if v == nil {
		return make([]int64, n), nil
	}
	if len(v) != n {
		return nil, fmt.Errorf("%s: %s has %d values, want %d", node, name, len(v), n)
	}
	return v, nil
}

// scanSpec is a Scan node's arity and attributes, checked.
type scanSpec struct {
	states, scanIns, scanOuts int
	inAxes, inDirs            []int64
	outAxes, outDirs          []int64
}

func readScanSpec(c attrs, n *ir.Node, body *ir.Graph, firstInput int) (*scanSpec, error) {
	s := &scanSpec{scanIns: int(c.Int("num_scan_inputs"))}
	total := len(n.Inputs) - firstInput
	if c.Int("num_scan_inputs") < 1 || c.Int("num_scan_inputs") > int64(total) {
		return nil, fmt.Errorf("%s: num_scan_inputs is %d, want 1 to %d (its inputs)", n, c.Int("num_scan_inputs"), total)
	}
	s.states = total - s.scanIns
	s.scanOuts = len(n.Outputs) - s.states
	switch {
	case s.scanOuts < 0:
		return nil, fmt.Errorf("%s: has %d outputs, fewer than its %d state variables", n, len(n.Outputs), s.states)
	case len(body.Inputs) != total:
		return nil, fmt.Errorf("%s: body has %d inputs, want %d (%d states and %d scan inputs)", n, len(body.Inputs), total, s.states, s.scanIns)
	case len(body.Outputs) != len(n.Outputs):
		return nil, fmt.Errorf("%s: body has %d outputs but the node has %d", n, len(body.Outputs), len(n.Outputs))
	}
	for i := firstInput; i < len(n.Inputs); i++ {
		if n.Inputs[i] == nil {
			return nil, fmt.Errorf("%s: input %d is missing", n, i)
		}
	}
	var err error
	dirs := func(name string, count int) []int64 {
		if err != nil {
			return nil
		}
		var v []int64
		if v, err = scanAxes(c, n, name, count); err == nil {
			for _, d := range v {
				if d != 0 && d != 1 {
					err = fmt.Errorf("%s: %s holds %d, want 0 (forward) or 1 (reverse)", n, name, d)
				}
			}
		}
		return v
	}
	if c.schema.Since == 8 {
		s.inDirs = dirs("directions", s.scanIns)
		s.inAxes, s.outAxes, s.outDirs = make([]int64, s.scanIns), make([]int64, s.scanOuts), make([]int64, s.scanOuts)
		return s, err
	}
	s.inDirs = dirs("scan_input_directions", s.scanIns)
	s.outDirs = dirs("scan_output_directions", s.scanOuts)
	if err != nil {
		return nil, err
	}
	if s.inAxes, err = scanAxes(c, n, "scan_input_axes", s.scanIns); err != nil {
		return nil, err
	}
	s.outAxes, err = scanAxes(c, n, "scan_output_axes", s.scanOuts)
	return s, err
}

// ScanSpec is a Scan node's arity and attributes, checked, for a compiler:
// the axes are those of the node's inputs and outputs (a batch axis
// counted), non-negative where the value's rank is known.
type ScanSpec struct {
	States, ScanInputs, ScanOutputs int
	// First is the index of the first state in the node's inputs: 1 in
	// Scan 8, whose input 0 is sequence_lens and whose inputs and outputs
	// all have a batch axis 0 (Batched).
	First   int
	Batched bool
	// InputAxes and InputDirections are per scan input, OutputAxes and
	// OutputDirections per scan output; direction 1 is reverse (from the
	// last slice to the first).
	InputAxes, InputDirections   []int64
	OutputAxes, OutputDirections []int64
}

// ScanSpecOf reads Scan node n's spec.
func ScanSpecOf(n *ir.Node, opsets Opsets) (*ScanSpec, error) {
	schema, err := opsets.Schema(n)
	if err != nil {
		return nil, err
	}
	body := n.Attr("body")
	if n.OpType != "Scan" || body == nil || body.G == nil {
		return nil, fmt.Errorf("%s is not a Scan with a body", n)
	}
	first := 0
	if schema.Since == 8 {
		first = 1
	}
	s, err := readScanSpec(attrs{n, schema}, n, body.G, first)
	if err != nil {
		return nil, err
	}
	spec := &ScanSpec{States: s.states, ScanInputs: s.scanIns, ScanOutputs: s.scanOuts, First: first, Batched: first == 1,
		InputAxes: slices.Clone(s.inAxes), InputDirections: s.inDirs, OutputAxes: slices.Clone(s.outAxes), OutputDirections: s.outDirs}
	resolve := func(axes []int64, values []*ir.Value, what string) error {
		for i, v := range values {
			if axes[i] >= 0 {
				axes[i] += int64(first) // past the batch axis
			}
			if v == nil || !v.Type.Shape.Ranked {
				continue
			}
			a, err := normAxis(n, what, axes[i], len(v.Type.Shape.Dims))
			if err != nil {
				return err
			}
			axes[i] = int64(a)
		}
		return nil
	}
	if err := resolve(spec.InputAxes, n.Inputs[first+s.states:], "scan input axis"); err != nil {
		return nil, err
	}
	return spec, resolve(spec.OutputAxes, n.Outputs[s.states:], "scan output axis")
}

// normAxis resolves a possibly negative axis against rank.
func normAxis(n *ir.Node, what string, axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, fmt.Errorf("%s: %s %d is out of range for rank %d", n, what, axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

func removeDim(dims []ir.Dim, i int) []ir.Dim {
	return append(append([]ir.Dim{}, dims[:i]...), dims[i+1:]...)
}

func insertDim(dims []ir.Dim, i int, d ir.Dim) []ir.Dim {
	out := append(append([]ir.Dim{}, dims[:i]...), d)
	return append(out, dims[i:]...)
}

func inferScan(c *InferContext) error  { return inferScanWith(c, 0) }
func inferScan8(c *InferContext) error { return inferScanWith(c, 1) }

// inferScanWith infers Scan; Scan 8 has its sequence_lens first (first = 1)
// and a batch axis 0 on every input and output, its sequences on axis 1.
func inferScanWith(c *InferContext, first int) error {
	body := c.Attr("body").G
	s, err := readScanSpec(c.attrs, c.Node, body, first)
	if err != nil {
		return err
	}
	batch := first // dims the body does not see: the batch dim in Scan 8
	seqLen := ir.UnknownDim()
	seqKnown := false
	bodyIn := make([]ir.Type, 0, s.states+s.scanIns)
	for i := 0; i < s.states+s.scanIns; i++ {
		t := c.In(first + i)
		if t.Kind != ir.TensorKind || !t.Shape.Ranked {
			bodyIn = append(bodyIn, elemOnly(t))
			continue
		}
		dims := t.Shape.Dims
		drop := []int{}
		if batch == 1 {
			drop = append(drop, 0)
		}
		if i >= s.states {
			axis, err := normAxis(c.Node, "scan input axis", s.inAxes[i-s.states]+int64(batch), len(dims))
			if err != nil {
				return err
			}
			if !seqKnown {
				seqLen, seqKnown = dims[axis], true
			} else if !ir.DimEqual(seqLen, dims[axis]) {
				seqLen = ir.UnknownDim()
			}
			drop = append(drop, axis)
		}
		if len(drop) > len(dims) {
			return c.Errorf("input %d is %s, which has no batch and sequence axes", first+i, t)
		}
		for k := len(drop) - 1; k >= 0; k-- {
			dims = removeDim(dims, drop[k])
		}
		bodyIn = append(bodyIn, ir.TensorType(t.Elem, ir.ShapeOf(dims...)))
	}
	known, err := inferBody(c, "body", body, bodyIn)
	if err != nil {
		return err
	}
	// The body was typed on the initial states: what it knows holds in
	// every iteration when it returns each state with the same type.
	if sameTypes(body.Inputs[:s.states], body.Outputs[:s.states]) {
		keepBody(c, known)
	}
	for i, o := range body.Outputs {
		t := o.Type
		if t.Kind != ir.TensorKind || !t.Shape.Ranked {
			c.Set(i, ir.TensorType(t.Elem, ir.Shape{}))
			continue
		}
		dims := t.Shape.Dims
		if i >= s.states {
			axis, err := normAxis(c.Node, "scan output axis", s.outAxes[i-s.states], len(dims)+1)
			if err != nil {
				return err
			}
			dims = insertDim(dims, axis, seqLen)
		}
		if batch == 1 {
			dims = insertDim(dims, 0, batchDim(c, first, s))
		}
		out := ir.TensorType(t.Elem, ir.ShapeOf(dims...))
		if i < s.states {
			if out, err = unionTypes(c.In(first+i), out); err != nil {
				return c.Errorf("state variable %d: the initial value and the body's output disagree: %v", i, err)
			}
		}
		c.Set(i, out)
	}
	return nil
}

// batchDim is Scan 8's batch size, from its first scan input.
func batchDim(c *InferContext, first int, s *scanSpec) ir.Dim {
	if t := c.In(first + s.states); t.Shape.Ranked && len(t.Shape.Dims) > 0 {
		return t.Shape.Dims[0]
	}
	return ir.UnknownDim()
}
