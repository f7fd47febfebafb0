// Package training builds training graphs from inference models: the
// loss and the parameters' gradients (`cc grad`), and a whole training
// step with its optimizer (`cc build --train`), whose parameters and
// optimizer state are the engine's inputs and come back updated as its
// outputs.
package training

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/passes/autodiff"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// The losses.
const (
	SoftmaxCrossEntropy = "softmax-cross-entropy"
	MSE                 = "mse"
)

// The optimizers.
const (
	SGD      = "sgd"
	Momentum = "momentum"
	Adam     = "adam"
)

// Losses and Optimizers list the accepted names, for flags' help.
var (
	Losses     = []string{SoftmaxCrossEntropy, MSE}
	Optimizers = []string{SGD, Momentum, Adam}
)

// LossName is the training graph's loss output; GradPrefix starts each
// parameter's gradient output (grad.W for parameter W).
const (
	LossName   = "loss"
	GradPrefix = "grad."
)

// GradOptions say how to turn an inference model into a loss.
type GradOptions struct {
	// Loss is SoftmaxCrossEntropy (the model's first output holds class
	// scores [N, C], the label is int64 [N]) or MSE (the label has the
	// output's shape and type).
	Loss string
	// Label names the new input holding the targets.
	Label string
	// Batch, when above 0, sets the leading dim of every input.
	Batch int64
}

// Param is one trained parameter: an initializer of the model with a
// gradient.
type Param struct {
	Name  string
	Value *ir.Value
	Grad  *ir.Value
}

// Graph is a model extended with its loss and gradients.
type Graph struct {
	Model  *ir.Model
	Loss   *ir.Value
	Output *ir.Value // the model's first output (class scores or prediction)
	Label  *ir.Value
	Params []Param
}

// Grad appends the loss and the gradient of every float initializer the
// loss depends on to m (which it changes), and makes the graph's outputs
// the loss and grad.<param> per parameter, in initializer order. Running
// statistics (BatchNormalization's mean and variance) get no gradient and
// are not parameters.
func Grad(m *ir.Model, o GradOptions) (*Graph, error) {
	if len(m.Graph.Outputs) == 0 {
		return nil, fmt.Errorf("the model has no outputs")
	}
	if o.Label == "" {
		return nil, fmt.Errorf("no label input named (--label)")
	}
	for _, v := range append(append([]*ir.Value{}, m.Graph.Inputs...), m.Graph.Initializers...) {
		if v.Name == o.Label {
			return nil, fmt.Errorf("the label %q is already a value of the model", o.Label)
		}
	}
	if o.Batch > 0 {
		if err := SetBatch(m, o.Batch); err != nil {
			return nil, err
		}
	}
	known, err := ops.InferShapes(m)
	if err != nil {
		return nil, err
	}
	out := m.Graph.Outputs[0]
	if !out.Type.Elem.IsFloat() || !out.Type.Shape.Ranked {
		return nil, fmt.Errorf("the first output %q is %s: a loss needs a ranked float output", out.Name, out.Type)
	}
	b := autodiff.NewBuilder(m, known, "loss/")
	var label, loss *ir.Value
	switch o.Loss {
	case SoftmaxCrossEntropy:
		if out.Type.Shape.Rank() < 2 {
			return nil, fmt.Errorf("softmax-cross-entropy needs class scores [N, C, ...]; the output %q is %s", out.Name, out.Type)
		}
		label = m.Graph.AddInput(o.Label, ir.TensorType(ir.Int64, ir.ShapeOf(slices.Delete(slices.Clone(out.Type.Shape.Dims), 1, 2)...)))
		if m.Opset("") < 12 {
			return nil, fmt.Errorf("softmax-cross-entropy needs ONNX opset 12 (SoftmaxCrossEntropyLoss); the model imports %d", m.Opset(""))
		}
		loss = b.Op("SoftmaxCrossEntropyLoss", []*ir.Value{out, label}, ir.AttrS("reduction", "mean"))
	case MSE:
		label = m.Graph.AddInput(o.Label, out.Type.Clone())
		d := b.Sub(out, label)
		loss = b.Reduce("ReduceMean", b.Mul(d, d), nil, false)
	default:
		return nil, fmt.Errorf("unknown loss %q (losses: %s)", o.Loss, strings.Join(Losses, ", "))
	}
	if b.Err() != nil {
		return nil, b.Err()
	}
	var candidates []*ir.Value
	for _, v := range m.Graph.Initializers {
		if v.Type.Elem.IsFloat() && !isInput(m.Graph, v) {
			candidates = append(candidates, v)
		}
	}
	seed := b.Scalar(out.Type.Elem, 1)
	grads, err := autodiff.Backward(m, known, []*ir.Value{loss}, []*ir.Value{seed}, candidates)
	if err != nil {
		return nil, err
	}
	g := &Graph{Model: m, Loss: loss, Output: out, Label: label}
	loss.Name = LossName
	outputs := []*ir.Value{loss}
	for i, v := range candidates {
		if grads[i] == nil {
			continue
		}
		d := grads[i]
		if d.Producer == nil || d.IsConst() || slices.Contains(outputs, d) {
			d = b.Op("Identity", []*ir.Value{d})
		}
		d.Name = GradPrefix + v.Name
		g.Params = append(g.Params, Param{Name: v.Name, Value: v, Grad: d})
		outputs = append(outputs, d)
	}
	if len(g.Params) == 0 {
		if n, why := blockingNode(loss, candidates); n != nil {
			return nil, fmt.Errorf("the loss reaches the weights only through %s, which kiln does not differentiate (%s): nothing to train", n, why)
		}
		return nil, fmt.Errorf("the loss depends on no float initializer: nothing to train")
	}
	m.Graph.SetOutputs(outputs...)
	m.Graph.ValueInfo = nil
	if _, err := ops.InferShapes(m); err != nil {
		return nil, err
	}
	return g, m.Verify()
}

func isInput(g *ir.Graph, v *ir.Value) bool { return slices.Contains(g.Inputs, v) }

// blockingNode is the first node, walking back from the loss, that has
// no gradient rule and reads (maybe through its subgraphs) a value that
// depends on one of the weights, with the reason it has none.
func blockingNode(loss *ir.Value, weights []*ir.Value) (*ir.Node, string) {
	isWeight := map[*ir.Value]bool{}
	for _, w := range weights {
		isWeight[w] = true
	}
	depends := map[*ir.Value]bool{}
	var reaches func(v *ir.Value) bool
	reaches = func(v *ir.Value) bool {
		if v == nil {
			return false
		}
		if d, ok := depends[v]; ok {
			return d
		}
		depends[v] = isWeight[v]
		if p := v.Producer; p != nil && !isWeight[v] {
			for _, in := range readsOf(p) {
				if reaches(in) {
					depends[v] = true
					break
				}
			}
		}
		return depends[v]
	}
	seen := map[*ir.Node]bool{}
	var walk func(v *ir.Value) (*ir.Node, string)
	walk = func(v *ir.Value) (*ir.Node, string) {
		p := v.Producer
		if p == nil || seen[p] || !reaches(v) {
			return nil, ""
		}
		seen[p] = true
		if rule, why, _ := autodiff.Lookup(p.Domain, p.OpType); rule == nil && why != "" {
			return p, why
		}
		for _, in := range p.Inputs {
			if in != nil {
				if n, why := walk(in); n != nil {
					return n, why
				}
			}
		}
		return nil, ""
	}
	return walk(loss)
}

// readsOf lists what node n reads: its inputs and what its subgraphs
// read of the graphs around them.
func readsOf(n *ir.Node) []*ir.Value {
	vs := slices.Clone(n.Inputs)
	for _, sg := range n.Subgraphs() {
		vs = append(vs, sg.FreeValues()...)
	}
	return vs
}

// SetBatch gives every input a leading dim of b and re-types the graph
// (the inference model's batch is usually 1).
func SetBatch(m *ir.Model, b int64) error {
	for _, v := range m.Graph.Inputs {
		if v.IsConst() {
			continue
		}
		if !v.Type.Shape.Ranked || len(v.Type.Shape.Dims) == 0 {
			return fmt.Errorf("input %q has no leading (batch) dim: %s", v.Name, v.Type)
		}
		v.Type.Shape.Dims[0] = ir.D(b)
	}
	forgetTypes(m.Graph)
	_, err := ops.InferShapes(m)
	return err
}

// forgetTypes drops what g and its subgraphs declare or inferred of
// their values' types, so that inference recomputes them: declarations of
// the old batch would conflict. A subgraph's inputs (a Loop body's
// iteration, condition and carried values) keep their element types.
func forgetTypes(g *ir.Graph) {
	g.ValueInfo = nil
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != nil {
				o.Type = ir.Type{}
			}
		}
		for _, sg := range n.Subgraphs() {
			for _, v := range sg.Inputs {
				v.Type = ir.TensorType(v.Type.Elem, ir.Shape{})
			}
			forgetTypes(sg)
		}
	}
}

// Reinit draws every convolution and matrix weight anew from He (Kaiming)
// normal initialization, N(0, 2/fan_in), and zeroes their biases, with the
// seeded generator: the model's architecture, trained from scratch.
// BatchNormalization's scale and bias become 1 and 0.
func Reinit(m *ir.Model, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	byValue := map[*ir.Value]bool{}
	for _, v := range m.Graph.Initializers {
		byValue[v] = true
	}
	done := map[*ir.Value]bool{}
	fill := func(v *ir.Value, f func(i int) float64) {
		if v == nil || !byValue[v] || done[v] || !v.Type.Elem.IsFloat() {
			return
		}
		done[v] = true
		vals := make([]float64, v.Const.Len())
		for i := range vals {
			vals[i] = f(i)
		}
		t := ops.FromFloat64s(v.Const.DType, v.Const.Dims, vals)
		t.Name = v.Const.Name
		v.Const = t
	}
	he := func(fanIn int64) func(int) float64 {
		std := math.Sqrt(2 / float64(max(fanIn, 1)))
		return func(int) float64 { return rng.NormFloat64() * std }
	}
	zero := func(int) float64 { return 0 }
	for _, n := range m.Graph.Nodes {
		if n.Domain != "" && n.Domain != "ai.onnx" {
			continue
		}
		w := n.Input(1)
		switch n.OpType {
		case "Conv", "ConvTranspose":
			if w != nil && w.IsConst() && len(w.Const.Dims) >= 3 {
				fanIn := ir.Product(w.Const.Dims[1:])
				if n.OpType == "ConvTranspose" {
					fanIn = w.Const.Dims[0] * ir.Product(w.Const.Dims[2:])
				}
				fill(w, he(fanIn))
			}
			fill(n.Input(2), zero)
		case "Gemm", "MatMul":
			if w != nil && w.IsConst() && len(w.Const.Dims) == 2 {
				fanIn := w.Const.Dims[0]
				if n.OpType == "Gemm" && n.Attr("transB") != nil && n.Attr("transB").I != 0 {
					fanIn = w.Const.Dims[1]
				}
				fill(w, he(fanIn))
			}
			if n.OpType == "Gemm" {
				fill(n.Input(2), zero)
			}
		case "BatchNormalization", "LayerNormalization":
			fill(n.Input(1), func(int) float64 { return 1 })
			fill(n.Input(2), zero)
		}
	}
	return nil
}

// StepOptions add the optimizer to GradOptions.
type StepOptions struct {
	GradOptions
	Optimizer string
	LR        float64
}

// The step graph's extra inputs.
const (
	LRName   = "lr"
	StepName = "step"
)

// Step builds one training step from an inference model: the forward pass
// at the batch size, the loss, the gradients and the optimizer's update.
// The parameters become inputs (named as in the model) and their new
// values outputs (new.<name>), as do the optimizer's state (momentum.<p>,
// adam.m.<p>, adam.v.<p>); lr (float, scalar) and step (int64, scalar: the
// steps taken before, counting from 1) are inputs too. It returns the
// graph and the engine's training record, whose Model is the inference
// model as given (with its initial weights): what --export writes back
// with the trained ones.
func Step(m *ir.Model, o StepOptions) (*ir.Model, *engine.Training, error) {
	if !slices.Contains(Optimizers, o.Optimizer) {
		return nil, nil, fmt.Errorf("unknown optimizer %q (optimizers: %s)", o.Optimizer, strings.Join(Optimizers, ", "))
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		return nil, nil, fmt.Errorf("learning rate %v: want a positive number", o.LR)
	}
	if o.Batch <= 0 {
		return nil, nil, fmt.Errorf("batch %d: want a positive number", o.Batch)
	}
	inference, err := onnx.Write(m)
	if err != nil {
		return nil, nil, err
	}
	var data []string
	for _, v := range m.Graph.Inputs {
		if !v.IsConst() {
			data = append(data, v.Name)
		}
	}
	outName := ""
	if len(m.Graph.Outputs) > 0 {
		outName = m.Graph.Outputs[0].Name
	}
	g, err := Grad(m, o.GradOptions)
	if err != nil {
		return nil, nil, err
	}
	tr := &engine.Training{Loss: LossName, LossKind: o.Loss, Output: outName, Data: data, Label: o.Label,
		LR: LRName, Step: StepName, DefaultLR: o.LR, Optimizer: o.Optimizer, Batch: o.Batch, Model: inference}
	gr := m.Graph
	if m.Opset(ops.TrainingDomain) == 0 && o.Optimizer != SGD {
		m.OpsetImports = append(m.OpsetImports, ir.OpsetImport{Domain: ops.TrainingDomain, Version: 1})
	}
	known, err := ops.InferShapes(m)
	if err != nil {
		return nil, nil, err
	}
	b := autodiff.NewBuilder(m, known, "step/")
	elem := g.Params[0].Value.Type.Elem
	lr := gr.AddInput(LRName, ir.TensorType(elem, ir.S()))
	step := gr.AddInput(StepName, ir.TensorType(ir.Int64, ir.S()))
	// Parameters become inputs: the engine's state, not its constants.
	var xs, gs []*ir.Value
	for _, p := range g.Params {
		gr.Initializers = slices.DeleteFunc(gr.Initializers, func(v *ir.Value) bool { return v == p.Value })
		p.Value.Const = nil
		gr.Inputs = append(gr.Inputs, p.Value)
		xs, gs = append(xs, p.Value), append(gs, p.Grad)
		tr.State = append(tr.State, engine.TrainState{Input: p.Name, Output: "new." + p.Name, Param: p.Name})
	}
	stateInput := func(prefix string, p Param) *ir.Value {
		name := prefix + p.Name
		tr.State = append(tr.State, engine.TrainState{Input: name, Output: "new." + name})
		return gr.AddInput(name, p.Value.Type.Clone())
	}
	var news []*ir.Value
	switch o.Optimizer {
	case SGD:
		for i, x := range xs {
			news = append(news, b.Sub(x, b.Mul(lr, gs[i])))
		}
	case Momentum:
		var vs []*ir.Value
		for _, p := range g.Params {
			vs = append(vs, stateInput("momentum.", p))
		}
		// v = 0.9·v + g; x -= lr·v (PyTorch's SGD with momentum 0.9).
		n := b.DomainNode(ops.TrainingDomain, "Momentum", concat([]*ir.Value{lr, step}, xs, gs, vs), 2*len(xs),
			ir.AttrF("alpha", 0.9), ir.AttrF("beta", 1), ir.AttrS("mode", "standard"), ir.AttrF("norm_coefficient", 0))
		news = n.Outputs
	case Adam:
		var ms, vs []*ir.Value
		for _, p := range g.Params {
			ms = append(ms, stateInput("adam.m.", p))
		}
		for _, p := range g.Params {
			vs = append(vs, stateInput("adam.v.", p))
		}
		n := b.DomainNode(ops.TrainingDomain, "Adam", concat([]*ir.Value{lr, step}, xs, gs, ms, vs), 3*len(xs),
			ir.AttrF("alpha", 0.9), ir.AttrF("beta", 0.999), ir.AttrF("epsilon", 1e-8))
		news = n.Outputs
	}
	if b.Err() != nil {
		return nil, nil, b.Err()
	}
	outputs := []*ir.Value{g.Loss, g.Output}
	for i, v := range news {
		v.Name = tr.State[i].Output
		outputs = append(outputs, v)
	}
	gr.SetOutputs(outputs...)
	if _, err := ops.InferShapes(m); err != nil {
		return nil, nil, err
	}
	return m, tr, m.Verify()
}

// Inference returns the training record's inference model at the step's
// batch with the trained parameters as inputs, named as the model's
// initializers: compiled, it evaluates and serves the parameters without
// the backward pass.
func Inference(tr *engine.Training) (*ir.Model, error) {
	m, err := onnx.Read(tr.Model, "")
	if err != nil {
		return nil, err
	}
	if err := SetBatch(m, tr.Batch); err != nil {
		return nil, err
	}
	params := map[string]bool{}
	for _, s := range tr.State {
		if s.Param != "" {
			params[s.Param] = true
		}
	}
	g := m.Graph
	for _, v := range slices.Clone(g.Initializers) {
		if params[v.Name] {
			g.Initializers = slices.DeleteFunc(g.Initializers, func(w *ir.Value) bool { return w == v })
			v.Const = nil
			g.Inputs = append(g.Inputs, v)
		}
	}
	_, err = ops.InferShapes(m)
	return m, err
}

func concat(lists ...[]*ir.Value) []*ir.Value {
	var out []*ir.Value
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
