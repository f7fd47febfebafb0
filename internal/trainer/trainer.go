// Package trainer runs training-step engines (cc build --train): it keeps
// the engine's state (parameters and optimizer state) between steps,
// feeds mini-batches that a background worker shuffles and assembles while
// the engine computes, evaluates, publishes the parameters to serving
// contexts and exports the trained inference model. It is infer train's
// engine room; it needs no compiler.
package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Trainer steps one training engine. Its state lives in two sets of
// buffers: a step reads one and writes the other, and they trade places,
// so no state is copied between steps.
type Trainer struct {
	eng *runtime.Engine
	ctx *runtime.Context
	tr  *engine.Training
	// cur holds the state by input name, next the buffers the step writes,
	// by output name.
	cur, next map[string]*ir.Tensor
	outs      map[string]*ir.Tensor // next, plus the loss and output buffers
	lr, step  *ir.Tensor
	steps     int64
	classes   int // the output's class axis size (softmax-cross-entropy)

	// OnStep, when set, runs after each step with the steps taken (infer
	// train --publish-every publishes the parameters from it).
	OnStep func(steps int64)
}

// ErrNotTraining is returned for an engine built without --train.
var ErrNotTraining = errors.New("the engine is not a training step (build it with cc build --train)")

// New prepares a trainer over a training engine: the parameters start at
// the values of the inference model the engine records, the optimizer's
// state at zero. lr overrides the learning rate the engine was built with
// when above 0.
func New(eng *runtime.Engine, threads int, lr float64) (*Trainer, error) {
	tr := eng.Meta.Training
	if tr == nil {
		return nil, ErrNotTraining
	}
	m, err := onnx.Read(tr.Model, "")
	if err != nil {
		return nil, fmt.Errorf("the engine's inference model: %w", err)
	}
	ctx, err := eng.NewContext(runtime.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	t := &Trainer{eng: eng, ctx: ctx, tr: tr, cur: map[string]*ir.Tensor{}, next: map[string]*ir.Tensor{},
		outs: map[string]*ir.Tensor{}}
	inits := map[string]*ir.Tensor{}
	for _, v := range m.Graph.Initializers {
		inits[v.Name] = v.Const
	}
	for _, s := range tr.State {
		in, out := binding(eng.Inputs(), s.Input), binding(eng.Outputs(), s.Output)
		if in == nil || out == nil {
			return nil, fmt.Errorf("%w: the training record names state %q -> %q, which the engine lacks", runtime.ErrInconsistent, s.Input, s.Output)
		}
		d, err := ir.ParseDType(in.DType)
		if err != nil {
			return nil, err
		}
		t.cur[s.Input] = ir.NewTensor(d, in.Shape...)
		t.next[s.Output] = ir.NewTensor(d, in.Shape...)
		if s.Param != "" {
			init := inits[s.Param]
			if init == nil || init.Len() != ir.Product(in.Shape) {
				return nil, fmt.Errorf("%w: parameter %q of the training record is not in its model", runtime.ErrInconsistent, s.Param)
			}
			conv, err := convert(init, d)
			if err != nil {
				return nil, err
			}
			copy(t.cur[s.Input].Raw, conv.Raw)
		}
	}
	for k, v := range t.next {
		t.outs[k] = v
	}
	lrBinding := binding(eng.Inputs(), tr.LR)
	if lrBinding == nil || binding(eng.Inputs(), tr.Step) == nil {
		return nil, fmt.Errorf("%w: the engine lacks the lr or step input", runtime.ErrInconsistent)
	}
	if lr <= 0 {
		lr = tr.DefaultLR
	}
	d, _ := ir.ParseDType(lrBinding.DType)
	t.lr = ops.FromFloat64s(d, nil, []float64{lr})
	t.step = ir.Scalar(ir.Int64, int64(0))
	if tr.LossKind == "softmax-cross-entropy" {
		if o := binding(eng.Outputs(), tr.Output); o != nil && len(o.Shape) >= 2 {
			t.classes = int(o.Shape[1])
		}
	}
	return t, nil
}

func convert(t *ir.Tensor, d ir.DType) (*ir.Tensor, error) {
	if t.DType == d {
		return t, nil
	}
	if !t.DType.IsFloat() || !d.IsFloat() {
		return nil, fmt.Errorf("parameter %q is %s, the engine takes %s", t.Name, t.DType, d)
	}
	return ops.FromFloat64s(d, t.Dims, ops.Float64s(t)), nil
}

func binding(bs []engine.Binding, name string) *engine.Binding {
	for i := range bs {
		if bs[i].Name == name {
			return &bs[i]
		}
	}
	return nil
}

// Classes is the size of the output's class axis for a
// softmax-cross-entropy engine, else 0.
func (t *Trainer) Classes() int { return t.classes }

// Record is the engine's training record.
func (t *Trainer) Record() *engine.Training { return t.tr }

// Steps is the number of steps taken.
func (t *Trainer) Steps() int64 { return t.steps }

// Result is one step's loss and, for class scores, how many of the
// batch's samples the forward pass classified right.
type Result struct {
	Loss    float64
	Correct int
}

// Step runs one training step on a batch (the data inputs by name and
// the labels) and makes its updated state current.
func (t *Trainer) Step(b *Batch) (Result, error) {
	t.steps++
	ir.Data[int64](t.step)[0] = t.steps
	feeds := make(map[string]*ir.Tensor, len(t.cur)+len(b.Data)+3)
	for k, v := range t.cur {
		feeds[k] = v
	}
	for k, v := range b.Data {
		feeds[k] = v
	}
	feeds[t.tr.Label] = b.Labels
	feeds[t.tr.LR], feeds[t.tr.Step] = t.lr, t.step
	out, err := t.ctx.RunInto(feeds, t.outs)
	if err != nil {
		t.steps--
		return Result{}, err
	}
	t.outs = out
	// The written state becomes current; the read one takes the next write.
	for _, s := range t.tr.State {
		t.cur[s.Input], t.next[s.Output] = t.next[s.Output], t.cur[s.Input]
		t.outs[s.Output] = t.next[s.Output]
	}
	r := Result{Loss: out[t.tr.Loss].Float64At(0)}
	if t.classes > 0 {
		r.Correct = Correct(out[t.tr.Output], b.Labels, b.Valid)
	}
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		return r, fmt.Errorf("step %d: the loss is %v: training diverged (lower --lr)", t.steps, r.Loss)
	}
	if t.OnStep != nil {
		t.OnStep(t.steps)
	}
	return r, nil
}

// Correct counts the first valid rows of scores [N, C, ...] whose largest
// class is the label.
func Correct(scores, labels *ir.Tensor, valid int) int {
	if len(scores.Dims) != 2 {
		return 0
	}
	n, c := int(scores.Dims[0]), int(scores.Dims[1])
	right := 0
	for i := 0; i < min(n, valid); i++ {
		best := 0
		for k := 1; k < c; k++ {
			if scores.Float64At(i*c+k) > scores.Float64At(i*c+best) {
				best = k
			}
		}
		if int64(best) == labels.Int64At(i) {
			right++
		}
	}
	return right
}

// Params returns a copy of the current parameters, by the inference
// model's initializer names.
func (t *Trainer) Params() map[string]*ir.Tensor {
	ps := map[string]*ir.Tensor{}
	for _, s := range t.tr.State {
		if s.Param != "" {
			c := t.cur[s.Input].Clone()
			c.Name = s.Param
			ps[s.Param] = c
		}
	}
	return ps
}

// Model returns the inference model with the current parameters.
func (t *Trainer) Model() (*ir.Model, error) {
	m, err := onnx.Read(t.tr.Model, "")
	if err != nil {
		return nil, err
	}
	ps := t.Params()
	for _, v := range m.Graph.Initializers {
		if p := ps[v.Name]; p != nil {
			conv, err := convert(p, v.Const.DType)
			if err != nil {
				return nil, err
			}
			conv = conv.Clone()
			conv.Name = v.Name
			conv.Dims = slices.Clone(v.Const.Dims)
			v.Const = conv
		}
	}
	return m, nil
}
