package trainer

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// Inference is the training engine's inference engine (the forward pass
// at the step's batch, the parameters as inputs), for evaluation and
// serving.
func (t *Trainer) Inference() (*runtime.Engine, error) {
	if len(t.tr.Inference) == 0 {
		return nil, fmt.Errorf("the engine carries no inference engine (rebuild it with this kiln's cc build --train)")
	}
	return runtime.LoadBytes(t.tr.Inference)
}

// CurrentParams returns the current parameters by name without copying:
// valid until the next Step.
func (t *Trainer) CurrentParams() map[string]*ir.Tensor {
	ps := map[string]*ir.Tensor{}
	for _, s := range t.tr.State {
		if s.Param != "" {
			ps[s.Param] = t.cur[s.Input]
		}
	}
	return ps
}

// Evaluator classifies samples with an inference engine and a set of
// parameters.
type Evaluator struct {
	ctx    *runtime.Context
	output string
}

// NewEvaluator prepares a context of the inference engine.
func NewEvaluator(eng *runtime.Engine, output string, threads int) (*Evaluator, error) {
	ctx, err := eng.NewContext(runtime.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	return &Evaluator{ctx: ctx, output: output}, nil
}

// Accuracy is the share of the samples whose largest class score is their
// label, under params.
func (ev *Evaluator) Accuracy(params map[string]*ir.Tensor, s *Samples, batch int) (float64, error) {
	right := 0
	err := s.Sequential(batch, func(b *Batch) error {
		feeds := make(map[string]*ir.Tensor, len(params)+len(b.Data))
		for k, v := range params {
			feeds[k] = v
		}
		for k, v := range b.Data {
			feeds[k] = v
		}
		out, err := ev.ctx.Run(feeds)
		if err != nil {
			return err
		}
		right += Correct(out[ev.output], b.Labels, b.Valid)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(right) / float64(max(s.N, 1)), nil
}
