package quantize

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// qdqOpset is the default-domain opset a per-channel QDQ model needs:
// QuantizeLinear and DequantizeLinear take an axis from 13.
const qdqOpset = 13

// An opUpgrade moves a node of op, at its version from (the Since of
// kiln's row in effect at the model's opset), to the form it has at opset
// to. rewrite nil means a node valid at from means the same at to: the
// versions between only added attributes or inputs whose defaults keep the
// old behaviour, or element types.
type opUpgrade struct {
	op       string
	from, to int64
	rewrite  func(u *upgrader, n *ir.Node) error
}

// upgrades are the steps cc quantize can take, as ONNX Runtime's
// quantizer takes them through ONNX's version converter.
var upgrades = []opUpgrade{
	{op: "ArgMax", from: 1, to: 12},
	{op: "ArgMin", from: 1, to: 12},
	{op: "AveragePool", from: 1, to: 7},
	{op: "AveragePool", from: 7, to: 10},
	{op: "BatchNormalization", from: 7, to: 9, rewrite: dropSpatial},
	{op: "Clip", from: 6, to: 11, rewrite: clipAttrsToInputs},
	{op: "Compress", from: 9, to: 11},
	{op: "Constant", from: 1, to: 11},
	{op: "Constant", from: 11, to: 12},
	{op: "DepthToSpace", from: 1, to: 11},
	{op: "Dropout", from: 7, to: 10, rewrite: dropoutMaskUnused},
	{op: "Dropout", from: 10, to: 12, rewrite: dropoutRatioToInput},
	{op: "GatherND", from: 11, to: 12},
	{op: "Gemm", from: 7, to: 9},
	{op: "Gemm", from: 9, to: 11},
	{op: "Gemm", from: 11, to: 13},
	{op: "Hardmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "If", from: 1, to: 11},
	{op: "If", from: 11, to: 13},
	{op: "LogSoftmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "Loop", from: 1, to: 11},
	{op: "Loop", from: 11, to: 13},
	{op: "MatMul", from: 1, to: 9},
	{op: "MatMul", from: 9, to: 13},
	{op: "MaxPool", from: 1, to: 8},
	{op: "MaxPool", from: 8, to: 10},
	{op: "MaxPool", from: 10, to: 12},
	{op: "MaxUnpool", from: 9, to: 11},
	{op: "NegativeLogLikelihoodLoss", from: 12, to: 13},
	{op: "NonMaxSuppression", from: 10, to: 11},
	{op: "NonZero", from: 9, to: 13},
	{op: "Pad", from: 2, to: 11, rewrite: padAttrsToInputs},
	{op: "Pow", from: 7, to: 12},
	{op: "ReduceSum", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "Resize", from: 10, to: 13, rewrite: resize10To13},
	{op: "Resize", from: 11, to: 13},
	{op: "Scan", from: 9, to: 11},
	{op: "Scatter", from: 9, to: 11, rewrite: scatterToScatterElements},
	{op: "Slice", from: 1, to: 10, rewrite: sliceAttrsToInputs},
	{op: "Softmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "SoftmaxCrossEntropyLoss", from: 12, to: 13},
	{op: "Split", from: 2, to: 13, rewrite: intsAttrToInput("split", 1)},
	{op: "Squeeze", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "TopK", from: 1, to: 10, rewrite: topKAttrToInput},
	{op: "TopK", from: 10, to: 11},
	{op: "Unsqueeze", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "Upsample", from: 7, to: 9, rewrite: upsampleScalesToInput},
	{op: "Upsample", from: 9, to: 10, rewrite: upsampleToResize},
}

// upgrader raises one model's default-domain opset.
type upgrader struct {
	g        *ir.Graph
	names    *ir.Namer // g's
	from, to int64
	// why the opset is raised, and what else the user can do, for
	// refusals.
	why, hint string
	opsets    ops.Opsets // at the new opset, to type nodes as they are upgraded
	known     map[*ir.Value]*ir.Tensor
	// after are nodes a rewrite added after the node it rewrote, to type
	// once that node is.
	after []*ir.Node
}

// upgradeOpset raises m's default-domain opset import to `to`, rewriting
// each node whose op changed between the two to its form at `to`, or
// refuses naming the first node it cannot upgrade (m is then partly
// rewritten, its opset import unchanged). perTensor says why the opset is
// raised: QuantizeLinear, rather than its per-channel axis, is missing.
func upgradeOpset(m *ir.Model, to int64, perTensor bool) error {
	from := m.Opset("")
	u := &upgrader{from: from, to: to, opsets: ops.OpsetsOf(m), known: map[*ir.Value]*ir.Tensor{}}
	u.why = fmt.Sprintf("per-channel weight scales need opset %d", qdqOpset)
	if perTensor {
		u.why = fmt.Sprintf("QuantizeLinear needs opset 10 (cc quantize raises it to %d)", to)
	}
	u.hint = fmt.Sprintf("re-export the model at opset %d", to)
	if from >= 10 {
		u.hint += fmt.Sprintf(", or quantize --per-tensor, which keeps opset %d", from)
	}
	u.opsets[""] = to
	if err := u.graph(m.Graph); err != nil {
		return err
	}
	for i, o := range m.OpsetImports {
		if o.Domain == "" || o.Domain == "ai.onnx" {
			m.OpsetImports[i].Version = to
		}
	}
	return nil
}

// graph upgrades g's nodes in order, and their subgraphs', typing each
// upgraded node so that later rewrites know their inputs' types.
func (u *upgrader) graph(g *ir.Graph) error {
	outer, outerNames := u.g, u.names
	u.g, u.names = g, g.Namer()
	defer func() { u.g, u.names = outer, outerNames }()
	for _, v := range g.Initializers {
		u.known[v] = v.Const
	}
	for _, n := range slices.Clone(g.Nodes) {
		for _, sub := range n.Subgraphs() {
			if err := u.graph(sub); err != nil {
				return err
			}
		}
		if n.Domain != "" && n.Domain != "ai.onnx" {
			continue
		}
		if err := u.node(n); err != nil {
			return err
		}
		// Best effort: a node inference cannot type yet leaves its
		// outputs untyped, and a rewrite that needs them says so.
		_ = ops.InferNode(n, u.opsets, u.known)
		for _, m := range u.after {
			_ = ops.InferNode(m, u.opsets, u.known)
		}
		u.after = nil
	}
	return g.TopoSort()
}

// node takes n through the upgrade steps from its version at u.from to
// its version at u.to.
func (u *upgrader) node(n *ir.Node) error {
	orig, err := versionAt(n.OpType, u.from)
	if err != nil {
		return fmt.Errorf("%s at opset %d: %w", n, u.from, err)
	}
	cur := orig
	// A node must be valid at the model's opset for its meaning there to
	// carry over (an attribute of a later version would be dropped).
	if s, err := ops.Lookup("", n.OpType, u.from); err == nil {
		if err := s.CheckNode(n); err != nil {
			return fmt.Errorf("%w, at the model's opset %d: it must be valid there for cc quantize to raise the opset (%s)", err, u.from, u.hint)
		}
	}
	for {
		target, err := versionAt(n.OpType, u.to)
		if err == nil && cur == target {
			return nil
		}
		step, ok := findUpgrade(n.OpType, cur)
		if !ok {
			return u.refusal(n, orig, target, err)
		}
		op := n.OpType
		if step.rewrite != nil {
			if err := step.rewrite(u, n); err != nil {
				return fmt.Errorf("%s: the model imports opset %d and %s, but this node has no form at %d that means the same: %w (%s)", n, u.from, u.why, u.to, err, u.hint)
			}
		}
		next, err := versionAt(n.OpType, step.to)
		if err != nil || (n.OpType == op && next <= cur) {
			return fmt.Errorf("%s: upgrade table error: %s-%d → opset %d", n, op, cur, step.to)
		}
		cur = next
	}
}

// refusal says that n's op changed between the model's opset and u.to in
// a way cc quantize cannot rewrite.
func (u *upgrader) refusal(n *ir.Node, orig, target int64, lookupErr error) error {
	var what string
	if lookupErr != nil {
		what = fmt.Sprintf("opset %d has no %s (%v)", u.to, n.OpType, lookupErr)
	} else {
		what = fmt.Sprintf("%s-%d at opset %d is %s-%d at opset %d", n.OpType, orig, u.from, n.OpType, target, u.to)
	}
	return fmt.Errorf("%s: the model imports opset %d and %s; %s, and cc quantize cannot rewrite this node to its new form (%s)",
		n, u.from, u.why, what, u.hint)
}

// versionAt is the Since of op's row in effect at opset.
func versionAt(op string, opset int64) (int64, error) {
	s, err := ops.Lookup("", op, opset)
	if err != nil {
		return 0, err
	}
	return s.Since, nil
}

func findUpgrade(op string, from int64) (opUpgrade, bool) {
	for _, s := range upgrades {
		if s.op == op && s.from == from {
			return s, true
		}
	}
	return opUpgrade{}, false
}

// takeAttr removes and returns n's attribute name (nil when absent).
func takeAttr(n *ir.Node, name string) *ir.Attribute {
	for i, a := range n.Attrs {
		if a.Name == name {
			n.Attrs = slices.Delete(n.Attrs, i, i+1)
			return a
		}
	}
	return nil
}

// setInput sets n's input i, omitting (nil) any missing before it.
func setInput(n *ir.Node, i int, v *ir.Value) {
	for len(n.Inputs) <= i {
		n.Inputs = append(n.Inputs, nil)
	}
	n.Inputs[i] = v
}

// constant adds initializer t named after n and what, and returns it.
func (u *upgrader) constant(n *ir.Node, what string, t *ir.Tensor) *ir.Value {
	base := n.Name
	if base == "" {
		base = n.OpType
	}
	v := u.g.AddInitializer(u.names.Unique(base+"_"+what), t)
	u.known[v] = t
	return v
}

// int64s is a 1-D int64 tensor.
func int64s(xs []int64) *ir.Tensor {
	return ir.FromSlice(ir.Int64, []int64{int64(len(xs))}, slices.Clone(xs))
}

// intsAttrToInput moves the ints attribute name to input i (Squeeze's and
// Unsqueeze's axes, ReduceSum's axes, Split's split at 13); absent, the
// input is omitted, which means what the absent attribute meant.
func intsAttrToInput(name string, i int) func(u *upgrader, n *ir.Node) error {
	return func(u *upgrader, n *ir.Node) error {
		a := takeAttr(n, name)
		if a == nil {
			return nil
		}
		if len(n.Inputs) > i {
			return fmt.Errorf("it has both the %s attribute and input %d", name, i)
		}
		setInput(n, i, u.constant(n, name, int64s(a.Ints)))
		return nil
	}
}

// clipAttrsToInputs: Clip-6's min and max attributes (defaulting to the
// type's whole range) become Clip-11's optional inputs, of X's type.
func clipAttrsToInputs(u *upgrader, n *ir.Node) error {
	lo, hi := takeAttr(n, "min"), takeAttr(n, "max")
	if lo == nil && hi == nil {
		return nil
	}
	x := n.Input(0)
	if x == nil || x.Type.Elem == ir.Undefined {
		return errors.New("its input's element type is unknown, which Clip-11's min and max inputs must have")
	}
	bound := func(a *ir.Attribute, what string) (*ir.Value, error) {
		if a == nil {
			return nil, nil
		}
		t, err := scalarOf(x.Type.Elem, float64(a.F))
		if err != nil {
			return nil, err
		}
		return u.constant(n, what, t), nil
	}
	minV, err := bound(lo, "min")
	if err != nil {
		return err
	}
	maxV, err := bound(hi, "max")
	if err != nil {
		return err
	}
	setInput(n, 1, minV)
	if maxV != nil {
		setInput(n, 2, maxV)
	}
	return nil
}

// scalarOf is a scalar of a float type holding f.
func scalarOf(dt ir.DType, f float64) (*ir.Tensor, error) {
	switch dt {
	case ir.Float32:
		return ir.Scalar(ir.Float32, float32(f)), nil
	case ir.Float64:
		return ir.Scalar(ir.Float64, f), nil
	case ir.Float16:
		return ir.Scalar(ir.Float16, ir.Float32ToHalf(float32(f))), nil
	}
	return nil, fmt.Errorf("element type %v is not one of Clip-6's (float16, float, double)", dt)
}

// padAttrsToInputs: Pad-2's pads and value attributes become Pad-11's
// pads and constant_value inputs.
func padAttrsToInputs(u *upgrader, n *ir.Node) error {
	pads, value := takeAttr(n, "pads"), takeAttr(n, "value")
	if pads == nil {
		return errors.New("it has no pads attribute")
	}
	setInput(n, 1, u.constant(n, "pads", int64s(pads.Ints)))
	if value == nil || value.F == 0 {
		return nil
	}
	x := n.Input(0)
	if x == nil || x.Type.Elem == ir.Undefined {
		return errors.New("its input's element type is unknown, which Pad-11's constant_value input must have")
	}
	t, err := scalarOf(x.Type.Elem, float64(value.F))
	if err != nil {
		return err
	}
	setInput(n, 2, u.constant(n, "constant_value", t))
	return nil
}

// sliceAttrsToInputs: Slice-1's starts, ends and axes attributes become
// Slice-10's inputs.
func sliceAttrsToInputs(u *upgrader, n *ir.Node) error {
	starts, ends, axes := takeAttr(n, "starts"), takeAttr(n, "ends"), takeAttr(n, "axes")
	if starts == nil || ends == nil {
		return errors.New("it lacks its starts or ends attribute")
	}
	setInput(n, 1, u.constant(n, "starts", int64s(starts.Ints)))
	setInput(n, 2, u.constant(n, "ends", int64s(ends.Ints)))
	if axes != nil {
		setInput(n, 3, u.constant(n, "axes", int64s(axes.Ints)))
	}
	return nil
}

// topKAttrToInput: TopK-1's k attribute becomes TopK-10's [1] input.
func topKAttrToInput(u *upgrader, n *ir.Node) error {
	k := takeAttr(n, "k")
	if k == nil {
		return errors.New("it has no k attribute")
	}
	setInput(n, 1, u.constant(n, "k", int64s([]int64{k.I})))
	return nil
}

// dropSpatial: BatchNormalization-9 is BatchNormalization-7 with
// spatial=1, its default.
func dropSpatial(u *upgrader, n *ir.Node) error {
	if a := takeAttr(n, "spatial"); a != nil && a.I != 1 {
		return errors.New("spatial=0 (statistics per element, not per channel) has no form at opset 9 or later")
	}
	return nil
}

// dropoutMaskUnused: Dropout-10's mask is bool where Dropout-7's has the
// data's type; the output is the same, so a node whose mask nothing
// reads means the same.
func dropoutMaskUnused(u *upgrader, n *ir.Node) error {
	mask := n.Output(1)
	if mask == nil {
		return nil
	}
	if len(u.g.Uses()[mask]) > 0 || slices.Contains(u.g.Outputs, mask) {
		return errors.New("its mask output is read, and its type changes from the data's to bool at opset 10")
	}
	n.Outputs = n.Outputs[:1]
	return nil
}

// dropoutRatioToInput: Dropout-10's ratio attribute becomes Dropout-12's
// ratio input (a float scalar).
func dropoutRatioToInput(u *upgrader, n *ir.Node) error {
	r := takeAttr(n, "ratio")
	if r == nil {
		return nil
	}
	setInput(n, 1, u.constant(n, "ratio", ir.Scalar(ir.Float32, r.F)))
	return nil
}

// softmaxOnLastAxis: Softmax-1 (and LogSoftmax-1, Hardmax-1) flattens its
// input to 2-D at axis and normalizes each row; Softmax-13 normalizes
// along axis alone. The two agree when axis is the last; otherwise the
// node becomes Flatten(axis) → Softmax-13(axis 1) → Reshape(Shape(X)).
func softmaxOnLastAxis(u *upgrader, n *ir.Node) error {
	axis := int64(1)
	if a := n.Attr("axis"); a != nil {
		axis = a.I
	}
	x := n.Input(0)
	if x == nil {
		return errors.New("it has no input")
	}
	if rank := int64(x.Type.Shape.Rank()); rank > 0 && (axis == rank-1 || axis == -1) {
		return nil
	}
	g := u.g
	names := u.names
	flat := g.AddNode("Flatten", []*ir.Value{x}, 1, ir.AttrI("axis", axis))
	flat.Name = names.Unique(n.Name + "_flatten")
	shape := g.AddNode("Shape", []*ir.Value{x}, 1)
	shape.Name = names.Unique(n.Name + "_shape")
	names.Reserve(flat.Outputs[0].Name) // AddNode named them
	names.Reserve(shape.Outputs[0].Name)
	y := n.Outputs[0]
	rows := &ir.Value{Name: names.Unique(y.Name + "_rows"), Producer: n}
	n.Inputs[0] = flat.Outputs[0]
	n.Outputs[0] = rows
	n.SetAttr(ir.AttrI("axis", 1))
	reshape := &ir.Node{Name: names.Unique(n.Name + "_reshape"), OpType: "Reshape", Inputs: []*ir.Value{rows, shape.Outputs[0]}, Outputs: []*ir.Value{y}}
	y.Producer = reshape
	g.Nodes = append(g.Nodes, reshape)
	for _, m := range []*ir.Node{flat, shape} {
		_ = ops.InferNode(m, u.opsets, u.known)
	}
	u.after = append(u.after, reshape) // typed once n is
	return nil
}

// upsampleScalesToInput: Upsample-7's scales attribute becomes
// Upsample-9's input.
func upsampleScalesToInput(u *upgrader, n *ir.Node) error {
	s := takeAttr(n, "scales")
	if s == nil {
		return errors.New("it has no scales attribute")
	}
	setInput(n, 1, u.constant(n, "scales", ir.FromSlice(ir.Float32, []int64{int64(len(s.Floats))}, slices.Clone(s.Floats))))
	return nil
}

// upsampleToResize: Upsample-9 is Resize-10 under another name.
// scatterToScatterElements: ONNX deprecated Scatter-9 at 11 for
// ScatterElements-11, the same op by its new name.
func scatterToScatterElements(u *upgrader, n *ir.Node) error {
	n.OpType = "ScatterElements"
	return nil
}

func upsampleToResize(u *upgrader, n *ir.Node) error {
	n.OpType = "Resize"
	return nil
}

// resize10To13: Resize-10 (X, scales) uses asymmetric coordinates and,
// for nearest, floor when upsampling and ceil when downsampling; Resize-13
// takes (X, roi, scales) and says both. Nearest with scales that are not
// constant, or that up- and downsample at once, has no one nearest_mode.
func resize10To13(u *upgrader, n *ir.Node) error {
	scales := n.Input(1)
	mode := "nearest"
	if a := n.Attr("mode"); a != nil {
		mode = a.S
	}
	n.Inputs = []*ir.Value{n.Inputs[0], nil, scales}
	n.SetAttr(ir.AttrS("coordinate_transformation_mode", "asymmetric"))
	if mode != "nearest" {
		return nil
	}
	c := u.known[scales]
	if c == nil {
		return errors.New("nearest with scales that are not constant: Resize-10 floors when upsampling and ceils when downsampling, which no one nearest_mode of Resize-13 says")
	}
	up, down := false, false
	for i := range c.Len() {
		s := c.Float64At(int(i))
		up = up || s > 1
		down = down || s < 1 && !math.IsNaN(s)
	}
	if up && down {
		return errors.New("nearest with scales that upsample one axis and downsample another: Resize-13 has no one nearest_mode for that")
	}
	nearest := "floor"
	if down {
		nearest = "ceil"
	}
	n.SetAttr(ir.AttrS("nearest_mode", nearest))
	return nil
}
