package cpu

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Engine is a compiled model loaded into this process, for the tests: they
// compile and run in one go without the engine file (codegen itself must
// not know how engines are loaded).
type Engine struct {
	Result  *Result
	lib     *rcpu.Library
	live    *rcpu.Buffer
	weights []byte
}

// Load loads a compiled result.
func Load(r *Result) (*Engine, error) {
	lib, err := rcpu.Open(r.SharedObject)
	if err != nil {
		return nil, err
	}
	w, err := rcpu.ExpandWeights(lib, r.Weights, r.Derived)
	if err != nil {
		lib.Close()
		return nil, err
	}
	return &Engine{Result: r, lib: lib, live: w, weights: w.Bytes}, nil
}

// compileLoad compiles m and loads the engine, closed when the test ends.
func compileLoad(t testing.TB, m *ir.Model, o Options) *Engine {
	t.Helper()
	res, err := Compile(m, o)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Load(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// weightsPtr is the live weights' address (nil: an engine without any).
func (e *Engine) weightsPtr() unsafe.Pointer {
	if len(e.weights) == 0 {
		return nil
	}
	return unsafe.Pointer(&e.weights[0])
}

// Close unloads the engine.
func (e *Engine) Close() error {
	e.live.Free()
	return e.lib.Close()
}

// NewArena returns a scratch arena for one concurrent caller.
func (e *Engine) NewArena() []byte { return rcpu.AlignedBytes(e.Result.ArenaBytes + 64) }

// Run runs one inference on named inputs with the given thread count and
// arena (nil allocates one).
func (e *Engine) Run(inputs map[string]*ir.Tensor, threads int, arena []byte) (map[string]*ir.Tensor, error) {
	return e.run(inputs, threads, arena, false)
}

// RunProfiled is Run through the profiling entry point.
func (e *Engine) RunProfiled(inputs map[string]*ir.Tensor, threads int) (map[string]*ir.Tensor, error) {
	return e.run(inputs, threads, nil, true)
}

func (e *Engine) run(inputs map[string]*ir.Tensor, threads int, arena []byte, profiled bool) (map[string]*ir.Tensor, error) {
	r := e.Result
	io := make([]unsafe.Pointer, len(r.Inputs)+len(r.Outputs))
	keep := make([]*ir.Tensor, 0, len(io))
	// The dynamic dims' values, found in the inputs' shapes as the runtime
	// finds them.
	var syms []engine.Symbol
	for _, s := range r.Symbols {
		syms = append(syms, engine.Symbol{Name: s.Name, Min: s.Min, Opt: s.Opt, Max: s.Max, Data: s.Data})
	}
	binding := func(io IO) engine.Binding {
		return engine.Binding{Name: io.Name, DType: io.DType.String(), Shape: io.Dims, Dims: io.DimNames, Index: io.Index}
	}
	var ins []engine.Binding
	var shapes [][]int64
	for _, in := range r.Inputs {
		t := inputs[in.Name]
		if t == nil {
			return nil, fmt.Errorf("missing input %q", in.Name)
		}
		if t.DType != in.DType {
			return nil, fmt.Errorf("input %q: got %s%v, the engine expects %s%v", in.Name, t.DType, t.Dims, in.DType, in.Dims)
		}
		ins, shapes = append(ins, binding(in)), append(shapes, t.Dims)
		if len(t.Raw) > 0 {
			io[in.Index] = unsafe.Pointer(&t.Raw[0])
		}
		keep = append(keep, t)
	}
	vals, err := engine.Resolve(syms, ins, shapes)
	if err != nil {
		return nil, err
	}
	outs := map[string]*ir.Tensor{}
	for _, o := range r.Outputs {
		dims, err := binding(o).DimsAt(syms, vals)
		if err != nil {
			return nil, err
		}
		t := ir.NewTensor(o.DType, dims...)
		if len(t.Raw) > 0 {
			io[o.Index] = unsafe.Pointer(&t.Raw[0])
		}
		outs[o.Name] = t
		keep = append(keep, t)
	}
	if len(vals) > 0 {
		io = append(io, unsafe.Pointer(&vals[0]))
	}
	if arena == nil {
		arena = e.NewArena()
	}
	if profiled {
		times := make([]uint64, threads*(len(r.Kernels)+1))
		if err := e.lib.RunProfile(threads, e.weightsPtr(), unsafe.Pointer(&arena[0]), io, times); err != nil {
			return nil, err
		}
	} else {
		e.lib.Run(threads, e.weightsPtr(), unsafe.Pointer(&arena[0]), io)
	}
	runtime.KeepAlive(keep)
	runtime.KeepAlive(vals)
	// Outputs over dims the data decides take the values the run wrote.
	for _, o := range r.Outputs {
		dims, err := binding(o).DimsAt(syms, vals)
		if err != nil {
			return nil, err
		}
		t := outs[o.Name]
		t.Dims, t.Raw = dims, t.Raw[:ir.RawLen(o.DType, ir.Product(dims))]
	}
	return outs, nil
}
