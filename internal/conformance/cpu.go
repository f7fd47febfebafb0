package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// CPU runs models as native engines, as a deployment would: Build compiles
// a model with static shapes into an engine file, which runs through
// runtime.LoadBytes. Each test's graph inputs are pinned to the shapes of
// its data before compiling (one engine per set of input shapes).
//
// cmd/cc registers it with the compiler (internal/build), which this
// package cannot import: the compiler's tests import this package. Ops the
// CPU backend lacks come back from Build as *ops.UnsupportedErrors, which
// RunTest reports as UNSUPPORTED.
type CPU struct {
	Build   func(m *ir.Model, src []byte) ([]byte, error)
	Threads int // per inference; 0 means 1
	// Limits bound the runtime's arena and bindings and the files read;
	// Build applies its own.
	Limits ir.Limits
	// Exec, when set, runs the engine instead of this process's runtime:
	// engines built for another machine (crossrun's emulator).
	Exec func(eng []byte, feeds map[string]*ir.Tensor, threads int) (map[string]*ir.Tensor, error)
}

// ReadLimits are the limits RunTest reads the test's files under.
func (b CPU) ReadLimits() ir.Limits { return b.Limits }

// Prepare compiles the model when its inputs' shapes are static; a model
// with symbolic dims, or with inputs whose values set shapes (shape
// tensors, ops.ShapeTensorInputs: a compiler takes their values as
// constants, as cc build --value does), waits for the first inputs.
func (b CPU) Prepare(m *ir.Model) (Runner, error) {
	if b.Build == nil {
		return nil, fmt.Errorf("the cpu backend needs the compiler (cc test --backend cpu)")
	}
	if err := tensorsOnly(m); err != nil {
		return nil, err
	}
	src, err := onnx.Write(m)
	if err != nil {
		return nil, err
	}
	r := &cpuRunner{backend: b, src: src, model: m}
	for v := range ops.ShapeTensorInputs(m.Graph) {
		r.pinned = append(r.pinned, v.Name)
	}
	if len(r.pinned) > 0 {
		return r, nil
	}
	static := map[string]*ir.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.Const != nil {
			continue // fed from the initializer
		}
		dims, ok := v.Type.Shape.Ints()
		if !ok {
			return r, nil
		}
		static[v.Name] = &ir.Tensor{DType: v.Type.Elem, Dims: dims}
	}
	if err := r.compile(static); err != nil {
		return nil, err
	}
	r.shapes = r.shapeKey(static)
	return r, nil
}

// tensorsOnly refuses a model whose inputs or outputs are neither
// tensors nor sequences or optionals of them (maps, sparse tensors):
// engines bind those only.
func tensorsOnly(m *ir.Model) error {
	for _, v := range append(append([]*ir.Value{}, m.Graph.Inputs...), m.Graph.Outputs...) {
		if _, inner := v.Type.Layers(); inner.Kind != ir.TensorKind && inner.Kind != ir.UnknownKind {
			return &ops.UnsupportedError{Op: "value " + v.Name, Reason: "engines bind tensors, and sequences and optionals of them, not " + v.Type.String()}
		}
	}
	return nil
}

type cpuRunner struct {
	backend CPU
	src     []byte
	model   *ir.Model // as read, before the passes
	pinned  []string  // inputs compiled as constants: their values set shapes
	shapes  string    // the input shapes eng was compiled for
	eng     *runtime.Engine
	ctx     *runtime.Context
	// buf and meta are the engine Exec runs.
	buf  []byte
	meta *engine.Metadata
}

// bindings are the engine's inputs and outputs.
func (r *cpuRunner) bindings() (ins, outs []engine.Binding) {
	if r.meta != nil {
		return r.meta.Inputs, r.meta.Outputs
	}
	return r.eng.Inputs(), r.eng.Outputs()
}

// Run compiles the model for the inputs' shapes unless the last
// compilation had them, then runs one inference. Outputs are named as the
// model's (the passes may rename the values that produce them).
func (r *cpuRunner) Run(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	if shapes := r.shapeKey(inputs); r.eng == nil && r.meta == nil || shapes != r.shapes {
		if err := r.compile(inputs); err != nil {
			return nil, err
		}
		r.shapes = shapes
	}
	ins, outs := r.bindings()
	feeds := map[string]*ir.Tensor{}
	for _, b := range ins {
		t := inputs[b.Name]
		if t == nil {
			t = initializer(r.model, b.Name) // an input with a default
		}
		if t == nil {
			return nil, fmt.Errorf("no data for input %q", b.Name)
		}
		feeds[b.Name] = t
	}
	var got map[string]*ir.Tensor
	var err error
	if r.meta != nil {
		got, err = r.backend.Exec(r.buf, feeds, max(r.backend.Threads, 1))
	} else {
		got, err = r.ctx.Run(feeds)
	}
	if err != nil {
		return nil, err
	}
	out := map[string]*ir.Tensor{}
	for i, b := range outs {
		if i < len(r.model.Graph.Outputs) {
			out[r.model.Graph.Outputs[i].Name] = got[b.Name]
		}
	}
	return out, nil
}

func (r *cpuRunner) compile(inputs map[string]*ir.Tensor) error {
	r.Close()
	m, err := onnx.ReadWithin(r.src, "", r.backend.Limits)
	if err != nil {
		return err
	}
	for _, v := range m.Graph.Inputs {
		if t := inputs[v.Name]; t != nil && v.Type.Elem == t.DType {
			v.Type.Shape = ir.S(t.Dims...)
		}
	}
	for _, name := range r.pinned {
		if t := inputs[name]; t != nil {
			if err := m.Graph.PinInput(name, t.Clone()); err != nil {
				return err
			}
		}
	}
	buf, err := r.backend.Build(m, r.src)
	if err != nil {
		return err
	}
	if r.backend.Exec != nil {
		e, err := engine.Decode(buf)
		if err != nil {
			return err
		}
		r.buf, r.meta = buf, &e.Meta
		return nil
	}
	if r.eng, err = runtime.LoadBytes(buf); err != nil {
		return err
	}
	r.ctx, err = r.eng.NewContext(runtime.Options{Threads: max(r.backend.Threads, 1), Limits: r.backend.Limits})
	return err
}

// Close unloads the engine.
func (r *cpuRunner) Close() error {
	r.buf, r.meta = nil, nil
	if r.eng == nil {
		return nil
	}
	err := r.eng.Close()
	r.eng, r.ctx = nil, nil
	return err
}

// shapeKey names what an engine was compiled for: the inputs' shapes and
// the pinned inputs' values.
func (r *cpuRunner) shapeKey(inputs map[string]*ir.Tensor) string {
	var b strings.Builder
	for _, v := range r.model.Graph.Inputs {
		if t := inputs[v.Name]; t != nil {
			fmt.Fprintf(&b, "%s%v;", v.Name, t.Dims)
			if slices.Contains(r.pinned, v.Name) {
				fmt.Fprintf(&b, "=%x;", t.Raw)
			}
		}
	}
	return b.String()
}

func initializer(m *ir.Model, name string) *ir.Tensor {
	for _, v := range m.Graph.Inputs {
		if v.Name == name && v.Const != nil {
			return v.Const
		}
	}
	return nil
}
