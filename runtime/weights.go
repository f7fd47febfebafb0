package runtime

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/kiln-ml/kiln/ir"
)

// WeightSet holds the weights of an engine that takes them as inputs (the
// inference engine of cc build --train, whose parameters are inputs named
// as the model's initializers) and lets them be replaced while other
// goroutines run the engine: SwapWeights publishes a new set with one
// atomic pointer store, and each run reads the pointer once, so a run
// never waits on a swap and computes with one set from start to end —
// never a mix of old and new — and a run in flight when a set is replaced
// keeps it alive until it ends.
type WeightSet struct {
	eng *Engine
	cur atomic.Pointer[map[string]*ir.Tensor]
}

// NewWeightSet checks the weights against the engine's inputs (every name
// an input, dtypes and shapes equal) and holds them.
func (e *Engine) NewWeightSet(ws map[string]*ir.Tensor) (*WeightSet, error) {
	s := &WeightSet{eng: e}
	if err := s.SwapWeights(ws); err != nil {
		return nil, err
	}
	return s, nil
}

// SwapWeights makes ws the set later runs use, after checking it as
// NewWeightSet does (a set that fails leaves the current one in place).
// The map is copied; the tensors are not, and must not change afterwards:
// publish new tensors instead.
func (s *WeightSet) SwapWeights(ws map[string]*ir.Tensor) error {
	for _, name := range slices.Sorted(maps.Keys(ws)) {
		t := ws[name]
		b := findBinding(s.eng.inputs, name)
		if b == nil {
			return fmt.Errorf("weight %q is not an input of the engine (its inputs are %s)", name, names(s.eng.inputs))
		}
		if t == nil || t.DType != b.dtype || !slices.Equal(t.Dims, b.Shape) || int64(len(t.Raw)) != b.bytes {
			return fmt.Errorf("weight %q: the engine takes %s", name, b.ShapeString())
		}
	}
	c := maps.Clone(ws)
	s.cur.Store(&c)
	return nil
}

// Weights returns the current set (shared: do not change it).
func (s *WeightSet) Weights() map[string]*ir.Tensor { return *s.cur.Load() }

// RunWith runs an inference with the weight set's current weights and the
// other inputs.
func (c *Context) RunWith(s *WeightSet, inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	if s.eng != c.engine {
		return nil, fmt.Errorf("RunWith: the weight set belongs to another engine")
	}
	ws := *s.cur.Load() // the one read of the set: this run's weights
	feeds := make(map[string]*ir.Tensor, len(ws)+len(inputs))
	for k, v := range inputs {
		if _, clash := ws[k]; clash {
			return nil, fmt.Errorf("input %q is one of the weight set's", k)
		}
		feeds[k] = v
	}
	for k, v := range ws {
		feeds[k] = v
	}
	return c.Run(feeds)
}
