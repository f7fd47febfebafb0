package cpu

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
)

// Engine is a compiled model loaded into this process, for the tests: they
// compile and run in one go without the engine file (codegen itself must
// not know how engines are loaded).
type Engine struct {
	Result  *Result
	lib     *rcpu.Library
	weights []byte
}

// Load loads a compiled result.
func Load(r *Result) (*Engine, error) {
	lib, err := rcpu.Open(r.SharedObject)
	if err != nil {
		return nil, err
	}
	w := rcpu.AlignedBytes(int64(len(r.Weights)) + 64)
	copy(w, r.Weights)
	return &Engine{Result: r, lib: lib, weights: w}, nil
}

// Close unloads the engine.
func (e *Engine) Close() error { return e.lib.Close() }

// NewArena returns a scratch arena for one concurrent caller.
func (e *Engine) NewArena() []byte { return rcpu.AlignedBytes(e.Result.ArenaBytes + 64) }

// Run runs one inference on named inputs with the given thread count and
// arena (nil allocates one).
func (e *Engine) Run(inputs map[string]*ir.Tensor, threads int, arena []byte) (map[string]*ir.Tensor, error) {
	r := e.Result
	io := make([]unsafe.Pointer, len(r.Inputs)+len(r.Outputs))
	keep := make([]*ir.Tensor, 0, len(io))
	for _, in := range r.Inputs {
		t := inputs[in.Name]
		if t == nil {
			return nil, fmt.Errorf("missing input %q", in.Name)
		}
		if t.DType != in.DType || !slices.Equal(t.Dims, in.Dims) {
			return nil, fmt.Errorf("input %q: got %s%v, the engine expects %s%v", in.Name, t.DType, t.Dims, in.DType, in.Dims)
		}
		if len(t.Raw) > 0 {
			io[in.Index] = unsafe.Pointer(&t.Raw[0])
		}
		keep = append(keep, t)
	}
	outs := map[string]*ir.Tensor{}
	for _, o := range r.Outputs {
		t := ir.NewTensor(o.DType, o.Dims...)
		if len(t.Raw) > 0 {
			io[o.Index] = unsafe.Pointer(&t.Raw[0])
		}
		outs[o.Name] = t
		keep = append(keep, t)
	}
	if arena == nil {
		arena = e.NewArena()
	}
	e.lib.Run(threads, unsafe.Pointer(&e.weights[0]), unsafe.Pointer(&arena[0]), io)
	_ = keep
	return outs, nil
}
