// Package version is kiln's ONNX version converter: it moves a model's
// default-domain nodes from their form at one opset to their form at
// another (Upsample-9 becomes Resize, Slice-1's attributes become inputs,
// Softmax-1's flattening is spelled out), so that what reads the model
// after (cc quantize, the passes) sees one form. cc convert --opset N
// exposes it.
//
// Each step of the table names an op's version (the Since of kiln's row in
// ir/ops) and the version it moves to, and how a node changes on the way;
// TestTableCoversTheRegistry holds the table to the registry, so a row
// added to ir/ops fails until the table says what it changed.
package version

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Reason says why a model's opset is being changed, and what else its
// user can do, for the refusals: "per-channel weight scales need opset
// 13", "re-export the model at opset 13".
type Reason struct {
	Why, Hint string
}

// A step moves a node of op, at its version from (the Since of kiln's row
// in effect at the model's opset), to the form it has at opset to.
// rewrite nil means a node valid at from means the same at to: the
// versions between only added attributes or inputs whose defaults keep the
// old behaviour, or element types.
type step struct {
	op       string
	from, to int64
	rewrite  func(u *converter, n *ir.Node) error
}

// steps are the upgrades the converter takes, as ONNX's version converter
// (onnx/version_converter) takes them.
var steps = []step{
	{op: "ArgMax", from: 1, to: 12},
	{op: "ArgMin", from: 1, to: 12},
	{op: "Attention", from: 23, to: 24},
	{op: "AveragePool", from: 1, to: 7},
	{op: "AveragePool", from: 7, to: 10},
	{op: "AveragePool", from: 10, to: 19},
	{op: "AveragePool", from: 19, to: 22},
	{op: "BatchNormalization", from: 7, to: 9, rewrite: dropSpatial},
	{op: "BatchNormalization", from: 9, to: 14, rewrite: batchNormInference},
	{op: "Bernoulli", from: 15, to: 22},
	{op: "Cast", from: 6, to: 19},
	{op: "Cast", from: 19, to: 24},
	{op: "CastLike", from: 15, to: 19},
	{op: "CastLike", from: 19, to: 24},
	{op: "Clip", from: 6, to: 11, rewrite: clipAttrsToInputs},
	{op: "Compress", from: 9, to: 11},
	{op: "Constant", from: 1, to: 11},
	{op: "Constant", from: 11, to: 12},
	{op: "Conv", from: 1, to: 22},
	{op: "ConvTranspose", from: 1, to: 22},
	{op: "DFT", from: 17, to: 20, rewrite: dftAxisToInput},
	{op: "DeformConv", from: 19, to: 22},
	{op: "DepthToSpace", from: 1, to: 11},
	{op: "DequantizeLinear", from: 10, to: 13},
	{op: "DequantizeLinear", from: 13, to: 19},
	{op: "DequantizeLinear", from: 19, to: 21},
	{op: "DequantizeLinear", from: 21, to: 23},
	{op: "Det", from: 11, to: 22},
	{op: "Dropout", from: 7, to: 10, rewrite: dropoutMaskUnused},
	{op: "Dropout", from: 10, to: 12, rewrite: dropoutRatioToInput},
	{op: "GRU", from: 7, to: 14},
	{op: "GatherND", from: 11, to: 12},
	{op: "Gemm", from: 7, to: 9},
	{op: "Gemm", from: 9, to: 11},
	{op: "Gemm", from: 11, to: 13},
	{op: "GlobalAveragePool", from: 1, to: 22},
	{op: "GlobalMaxPool", from: 1, to: 22},
	{op: "GridSample", from: 16, to: 20, rewrite: gridSampleModes},
	{op: "GridSample", from: 20, to: 22},
	{op: "GroupNormalization", from: 18, to: 21, rewrite: groupNormPerChannel},
	{op: "Hardmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "If", from: 1, to: 11},
	{op: "If", from: 11, to: 13},
	{op: "If", from: 13, to: 16},
	{op: "If", from: 16, to: 19},
	{op: "If", from: 19, to: 21},
	{op: "If", from: 21, to: 23},
	{op: "LSTM", from: 7, to: 14},
	{op: "LogSoftmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "Loop", from: 1, to: 11},
	{op: "Loop", from: 11, to: 13},
	{op: "Loop", from: 13, to: 16},
	{op: "Loop", from: 16, to: 19},
	{op: "Loop", from: 19, to: 21},
	{op: "Loop", from: 21, to: 23},
	{op: "LpNormalization", from: 1, to: 22},
	{op: "LpPool", from: 11, to: 18},
	{op: "LpPool", from: 18, to: 22},
	{op: "MatMul", from: 1, to: 9},
	{op: "MatMul", from: 9, to: 13},
	{op: "MaxPool", from: 1, to: 8},
	{op: "MaxPool", from: 8, to: 10},
	{op: "MaxPool", from: 10, to: 12},
	{op: "MaxPool", from: 12, to: 22},
	{op: "MaxUnpool", from: 9, to: 11},
	{op: "MaxUnpool", from: 11, to: 22},
	{op: "Multinomial", from: 7, to: 22},
	{op: "NegativeLogLikelihoodLoss", from: 12, to: 13},
	{op: "NonMaxSuppression", from: 10, to: 11},
	{op: "NonZero", from: 9, to: 13},
	{op: "OptionalGetElement", from: 15, to: 18},
	{op: "OptionalHasElement", from: 15, to: 18},
	{op: "Pad", from: 2, to: 11, rewrite: padAttrsToInputs},
	{op: "Pad", from: 11, to: 18},
	{op: "Pad", from: 18, to: 19},
	{op: "Pow", from: 7, to: 12},
	{op: "QLinearMatMul", from: 10, to: 21},
	{op: "QuantizeLinear", from: 10, to: 13},
	{op: "QuantizeLinear", from: 13, to: 19},
	{op: "QuantizeLinear", from: 19, to: 21},
	{op: "QuantizeLinear", from: 21, to: 23},
	{op: "RNN", from: 7, to: 14},
	{op: "RandomNormal", from: 1, to: 22},
	{op: "RandomNormalLike", from: 1, to: 22},
	{op: "RandomUniform", from: 1, to: 22},
	{op: "RandomUniformLike", from: 1, to: 22},
	{op: "ReduceL1", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceL2", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceLogSum", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceLogSumExp", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceMax", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceMean", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceMin", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceProd", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceSum", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "ReduceSumSquare", from: 1, to: 18, rewrite: intsAttrToInput("axes", 1)},
	{op: "Reshape", from: 5, to: 14},
	{op: "Resize", from: 10, to: 11, rewrite: resize10To11},
	{op: "Resize", from: 11, to: 13},
	{op: "Resize", from: 13, to: 18},
	{op: "Resize", from: 18, to: 19},
	{op: "RoiAlign", from: 10, to: 16, rewrite: roiAlignOutputHalfPixel},
	{op: "RoiAlign", from: 16, to: 22},
	{op: "Scan", from: 8, to: 9, rewrite: scanWithoutBatch},
	{op: "Scan", from: 9, to: 11},
	{op: "Scan", from: 11, to: 16},
	{op: "Scan", from: 16, to: 19},
	{op: "Scan", from: 19, to: 21},
	{op: "Scan", from: 21, to: 23},
	{op: "Scatter", from: 9, to: 11, rewrite: scatterToScatterElements},
	{op: "ScatterElements", from: 11, to: 16},
	{op: "ScatterElements", from: 16, to: 18},
	{op: "ScatterND", from: 11, to: 16},
	{op: "ScatterND", from: 16, to: 18},
	{op: "Shape", from: 1, to: 15},
	{op: "Slice", from: 1, to: 10, rewrite: sliceAttrsToInputs},
	{op: "Softmax", from: 1, to: 13, rewrite: softmaxOnLastAxis},
	{op: "SoftmaxCrossEntropyLoss", from: 12, to: 13},
	{op: "Split", from: 2, to: 13, rewrite: intsAttrToInput("split", 1)},
	{op: "Split", from: 13, to: 18, rewrite: splitNumOutputs},
	{op: "Squeeze", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "TopK", from: 1, to: 10, rewrite: topKAttrToInput},
	{op: "TopK", from: 10, to: 11},
	{op: "Unsqueeze", from: 1, to: 13, rewrite: intsAttrToInput("axes", 1)},
	{op: "Upsample", from: 7, to: 9, rewrite: upsampleScalesToInput},
	{op: "Upsample", from: 9, to: 10, rewrite: upsampleToResize},
}

// minIRVersion is the IR version each opset needs, from ONNX's release
// table (onnx/helper.py VERSION_TABLE): a model raised to an opset is
// written at least at it.
var minIRVersion = map[int64]int64{
	7: 3, 8: 3, 9: 4, 10: 5, 11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8,
	19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13,
}

// converter changes one model's default-domain opset.
type converter struct {
	g        *ir.Graph
	names    *ir.Namer // g's
	from, to int64
	// why the opset is changed, and what else the user can do, for
	// refusals.
	why, hint string
	opsets    ops.Opsets // at the new opset, to type nodes as they are upgraded
	known     map[*ir.Value]*ir.Tensor
	// after are nodes a rewrite added after the node it rewrote, to type
	// once that node is.
	after []*ir.Node
	// upsampling are the Resize-10 nodes that were Upsample, whose scales
	// are at least 1 (Upsample's rule) even when they are not constant.
	upsampling map[*ir.Node]bool
}

// Convert moves m's default-domain opset import to `to`, rewriting each
// node whose op changed between the two to its form at `to`, or refuses
// naming the first node it cannot convert (m is then partly rewritten, its
// opset import unchanged). To an older opset it only relabels: every
// node's op must be the same at both. r words the refusals; its zero value
// says the opset was asked for.
func Convert(m *ir.Model, to int64, r Reason) error {
	from := m.Opset("")
	if from == 0 {
		return nil // no ONNX (default-domain) node to convert
	}
	newest, _ := ops.NewestOpset("")
	if to < 1 || to > newest {
		return fmt.Errorf("opset %d: kiln converts to opsets 1 to %d", to, newest)
	}
	u := &converter{from: from, to: to, why: r.Why, hint: r.Hint, opsets: ops.OpsetsOf(m), known: map[*ir.Value]*ir.Tensor{}, upsampling: map[*ir.Node]bool{}}
	if u.why == "" {
		u.why = fmt.Sprintf("opset %d was asked for", to)
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
	if v := minIRVersion[to]; m.IRVersion < v {
		m.IRVersion = v
	}
	return nil
}

// hinted appends the converter's hint, in parentheses, to a refusal.
func (u *converter) hinted(msg string) string {
	if u.hint == "" {
		return msg
	}
	return msg + " (" + u.hint + ")"
}

// graph upgrades g's nodes in order, and their subgraphs', typing each
// upgraded node so that later rewrites know their inputs' types.
func (u *converter) graph(g *ir.Graph) error {
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

// node takes n through the steps from its version at u.from to its
// version at u.to.
func (u *converter) node(n *ir.Node) error {
	orig, err := versionAt(n.OpType, u.from)
	if err != nil {
		return fmt.Errorf("%s at opset %d: %w", n, u.from, err)
	}
	cur := orig
	// A node must be valid at the model's opset for its meaning there to
	// carry over (an attribute of a later version would be dropped).
	if s, err := ops.Lookup("", n.OpType, u.from); err == nil {
		if err := s.CheckNode(n); err != nil {
			return errors.New(u.hinted(fmt.Sprintf("%v, at the model's opset %d: it must be valid there for its opset to change", err, u.from)))
		}
	}
	if u.to < u.from {
		target, err := versionAt(n.OpType, u.to)
		if err != nil || target != orig {
			return u.refusal(n, orig, target, err, "and kiln converts to an older opset only where the op did not change")
		}
		return nil
	}
	for {
		target, err := versionAt(n.OpType, u.to)
		if err == nil && cur == target {
			return nil
		}
		step, ok := findStep(n.OpType, cur)
		if !ok {
			return u.refusal(n, orig, target, err, "and kiln's version converter cannot rewrite this node to its new form")
		}
		op := n.OpType
		if step.rewrite != nil {
			if err := step.rewrite(u, n); err != nil {
				return errors.New(u.hinted(fmt.Sprintf("%s: the model imports opset %d and %s, but this node has no form at %d that means the same: %v", n, u.from, u.why, u.to, err)))
			}
		}
		next, err := versionAt(n.OpType, step.to)
		if err != nil || (n.OpType == op && next <= cur) {
			return fmt.Errorf("%s: version table error: %s-%d → opset %d", n, op, cur, step.to)
		}
		cur = next
	}
}

// refusal says that n's op differs between the model's opset and u.to in
// a way the converter cannot rewrite.
func (u *converter) refusal(n *ir.Node, orig, target int64, lookupErr error, why string) error {
	var what string
	if lookupErr != nil {
		what = fmt.Sprintf("opset %d has no %s (%v)", u.to, n.OpType, lookupErr)
	} else {
		what = fmt.Sprintf("%s-%d at opset %d is %s-%d at opset %d", n.OpType, orig, u.from, n.OpType, target, u.to)
	}
	return errors.New(u.hinted(fmt.Sprintf("%s: the model imports opset %d and %s; %s, %s", n, u.from, u.why, what, why)))
}

// versionAt is the Since of op's row in effect at opset.
func versionAt(op string, opset int64) (int64, error) {
	s, err := ops.Lookup("", op, opset)
	if err != nil {
		return 0, err
	}
	return s.Since, nil
}

func findStep(op string, from int64) (step, bool) {
	for _, s := range steps {
		if s.op == op && s.from == from {
			return s, true
		}
	}
	return step{}, false
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
func (u *converter) constant(n *ir.Node, what string, t *ir.Tensor) *ir.Value {
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
func intsAttrToInput(name string, i int) func(u *converter, n *ir.Node) error {
	return func(u *converter, n *ir.Node) error {
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
func clipAttrsToInputs(u *converter, n *ir.Node) error {
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
func padAttrsToInputs(u *converter, n *ir.Node) error {
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
func sliceAttrsToInputs(u *converter, n *ir.Node) error {
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
func topKAttrToInput(u *converter, n *ir.Node) error {
	k := takeAttr(n, "k")
	if k == nil {
		return errors.New("it has no k attribute")
	}
	setInput(n, 1, u.constant(n, "k", int64s([]int64{k.I})))
	return nil
}

// dropSpatial: BatchNormalization-9 is BatchNormalization-7 with
// spatial=1, its default.
func dropSpatial(u *converter, n *ir.Node) error {
	if a := takeAttr(n, "spatial"); a != nil && a.I != 1 {
		return errors.New("spatial=0 (statistics per element, not per channel) has no form at opset 9 or later")
	}
	return nil
}

// dropoutMaskUnused: Dropout-10's mask is bool where Dropout-7's has the
// data's type; the output is the same, so a node whose mask nothing
// reads means the same.
func dropoutMaskUnused(u *converter, n *ir.Node) error {
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
func dropoutRatioToInput(u *converter, n *ir.Node) error {
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
func softmaxOnLastAxis(u *converter, n *ir.Node) error {
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
func upsampleScalesToInput(u *converter, n *ir.Node) error {
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
func scatterToScatterElements(u *converter, n *ir.Node) error {
	n.OpType = "ScatterElements"
	return nil
}

func upsampleToResize(u *converter, n *ir.Node) error {
	n.OpType = "Resize"
	u.upsampling[n] = true
	return nil
}

// resize10To11: Resize-10 (X, scales) uses asymmetric coordinates and,
// for nearest, floor when upsampling and ceil when downsampling; Resize-11
// takes (X, roi, scales), roi empty unless cropping, and says both.
// Nearest with scales that are not constant, or that up- and downsample at
// once, has no one nearest_mode.
func resize10To11(u *converter, n *ir.Node) error {
	scales := n.Input(1)
	mode := "nearest"
	if a := n.Attr("mode"); a != nil {
		mode = a.S
	}
	roi := u.constant(n, "roi", ir.NewTensor(ir.Float32, 0))
	n.Inputs = []*ir.Value{n.Inputs[0], roi, scales}
	n.SetAttr(ir.AttrS("coordinate_transformation_mode", "asymmetric"))
	if mode != "nearest" {
		return nil
	}
	if u.upsampling[n] {
		n.SetAttr(ir.AttrS("nearest_mode", "floor"))
		return nil
	}
	c := u.known[scales]
	if c == nil {
		return errors.New("nearest with scales that are not constant: Resize-10 floors when upsampling and ceils when downsampling, which no one nearest_mode of Resize-11 says")
	}
	up, down := false, false
	for i := range c.Len() {
		s := c.Float64At(int(i))
		up = up || s > 1
		down = down || s < 1 && !math.IsNaN(s)
	}
	if up && down {
		return errors.New("nearest with scales that upsample one axis and downsample another: Resize-11 has no one nearest_mode for that")
	}
	nearest := "floor"
	if down {
		nearest = "ceil"
	}
	n.SetAttr(ir.AttrS("nearest_mode", nearest))
	return nil
}

// batchNormInference: BatchNormalization-9 computed its optional mean,
// var and saved statistics outputs in training; BatchNormalization-14 has
// a training_mode attribute and, off (its default), one output. A node
// whose extra outputs nothing reads means the same.
func batchNormInference(u *converter, n *ir.Node) error {
	uses := u.g.Uses()
	for _, o := range n.Outputs[1:] {
		if o != nil && (len(uses[o]) > 0 || slices.Contains(u.g.Outputs, o)) {
			return fmt.Errorf("its training output %q is read: BatchNormalization-14 computes the statistics only with training_mode=1, whose running mean and var outputs mean something else", o.Name)
		}
	}
	n.Outputs = n.Outputs[:1]
	return nil
}

// dftAxisToInput: DFT-17's axis attribute (default 1) becomes DFT-20's
// third input (whose default is -2).
func dftAxisToInput(u *converter, n *ir.Node) error {
	axis := int64(1)
	if a := takeAttr(n, "axis"); a != nil {
		axis = a.I
	}
	setInput(n, 2, u.constant(n, "axis", ir.Scalar(ir.Int64, axis)))
	return nil
}

// gridSampleModes: GridSample-20 renamed mode bilinear to linear and
// bicubic to cubic.
func gridSampleModes(u *converter, n *ir.Node) error {
	a := n.Attr("mode")
	if a == nil {
		n.SetAttr(ir.AttrS("mode", "linear")) // 16's default was bilinear, 20's is linear
		return nil
	}
	switch a.S {
	case "bilinear":
		n.SetAttr(ir.AttrS("mode", "linear"))
	case "bicubic":
		n.SetAttr(ir.AttrS("mode", "cubic"))
	}
	return nil
}

// groupNormPerChannel: GroupNormalization-18's scale and bias hold one
// value per group, 21's one per channel: each constant group value is
// repeated over the group's channels.
func groupNormPerChannel(u *converter, n *ir.Node) error {
	groups := int64(0)
	if a := n.Attr("num_groups"); a != nil {
		groups = a.I
	}
	x := n.Input(0)
	if x == nil || x.Type.Shape.Rank() < 2 || !x.Type.Shape.Dims[1].IsStatic() {
		return errors.New("its input's channel count is not known, which the per-channel scale and bias of opset 21 need")
	}
	channels := x.Type.Shape.Dims[1].Value
	if groups <= 0 || channels%groups != 0 {
		return fmt.Errorf("%d channels do not split into %d groups", channels, groups)
	}
	for i, what := range []string{"scale", "bias"} {
		c := u.known[n.Input(i+1)]
		if c == nil || c.Len() != groups {
			return fmt.Errorf("its %s is not a constant of %d values: only a constant's group values can be repeated per channel here", what, groups)
		}
		size := c.DType.Size()
		if size <= 0 {
			return fmt.Errorf("its %s is %s", what, c.DType)
		}
		per := int(channels / groups)
		raw := make([]byte, 0, int(channels)*size)
		for g := range int(groups) {
			for range per {
				raw = append(raw, c.Raw[g*size:(g+1)*size]...)
			}
		}
		n.Inputs[i+1] = u.constant(n, what, ir.FromRaw(c.DType, []int64{channels}, raw))
	}
	return nil
}

// roiAlignOutputHalfPixel: RoiAlign-10 sampled as opset 16's
// coordinate_transformation_mode output_half_pixel does; 16's default is
// half_pixel, so the old meaning is said.
func roiAlignOutputHalfPixel(u *converter, n *ir.Node) error {
	n.SetAttr(ir.AttrS("coordinate_transformation_mode", "output_half_pixel"))
	return nil
}

// splitNumOutputs: Split-13 with no split input splits into as many equal
// parts as it has outputs; Split-18 says so with num_outputs.
func splitNumOutputs(u *converter, n *ir.Node) error {
	if n.Input(1) == nil {
		n.SetAttr(ir.AttrI("num_outputs", int64(len(n.Outputs))))
	}
	return nil
}

// scanWithoutBatch: Scan-8's states and scan inputs and outputs carry a
// batch axis first (its body sees one batch element), and its optional
// first input is the sequence lengths; Scan-9 has neither. With a batch of
// one and no sequence lengths, the batch axis is squeezed off the node's
// inputs and put back on its outputs around a Scan-9 over axis 0.
func scanWithoutBatch(u *converter, n *ir.Node) error {
	if n.Input(0) != nil {
		return errors.New("it has sequence_lens, which Scan-9 has no form for")
	}
	for _, v := range n.Inputs[1:] {
		if v == nil || v.Type.Shape.Rank() < 1 || !v.Type.Shape.Dims[0].IsStatic() || v.Type.Shape.Dims[0].Value != 1 {
			return errors.New("its batch is not statically 1: Scan-9 runs one sequence, and the body sees one batch element")
		}
	}
	axis0 := u.constant(n, "batch_axis", int64s([]int64{0}))
	ins := []*ir.Value{}
	for _, v := range n.Inputs[1:] {
		sq := u.g.AddNode("Squeeze", []*ir.Value{v, axis0}, 1)
		sq.Name = u.names.Unique(n.Name + "_unbatch")
		u.names.Reserve(sq.Outputs[0].Name)
		_ = ops.InferNode(sq, u.opsets, u.known)
		ins = append(ins, sq.Outputs[0])
	}
	n.Inputs = ins
	if d := takeAttr(n, "directions"); d != nil {
		n.SetAttr(ir.AttrIs("scan_input_directions", d.Ints...))
	}
	for i, y := range n.Outputs {
		if y == nil {
			continue
		}
		inner := &ir.Value{Name: u.names.Unique(y.Name + "_unbatched"), Producer: n}
		n.Outputs[i] = inner
		un := &ir.Node{Name: u.names.Unique(n.Name + "_batch"), OpType: "Unsqueeze", Inputs: []*ir.Value{inner, axis0}, Outputs: []*ir.Value{y}}
		y.Producer = un
		u.g.Nodes = append(u.g.Nodes, un)
		u.after = append(u.after, un)
	}
	return nil
}
