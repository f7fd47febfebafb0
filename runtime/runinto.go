package runtime

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// RunInto is Run writing each output into the tensor outputs holds under
// its name (of the output's dtype and shape), for loops that reuse their
// buffers: a training step writing its updated state into the buffers the
// next step reads. Outputs it does not hold are allocated. An output's
// tensor must not share memory with an input's. Engines with dynamic
// shapes take Run.
func (c *Context) RunInto(inputs, outputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	e := c.engine
	if len(e.Meta.Symbols) > 0 {
		return nil, fmt.Errorf("RunInto takes engines of static shapes; this one has dynamic dims")
	}
	inputs = e.withDefaults(inputs)
	for _, b := range e.inputs {
		t := inputs[b.Name]
		if t == nil {
			return nil, fmt.Errorf("missing input %q (%s)", b.Name, b.ShapeString())
		}
		if t.DType != b.dtype || !slices.Equal(t.Dims, b.Shape) || !b.host && int64(len(t.Raw)) != b.bytes {
			return nil, fmt.Errorf("input %q: got %s%v, the engine takes %s", b.Name, t.DType, t.Dims, b.ShapeString())
		}
		if err := checkData(b, t); err != nil {
			return nil, err
		}
		c.bindSlot(b, t)
	}
	if len(inputs) != len(e.inputs) {
		for name := range inputs {
			if err := e.foldedInput(name); err != nil {
				return nil, err
			}
			if findBinding(e.inputs, name) == nil {
				return nil, fmt.Errorf("unknown input %q; the engine's inputs are %s", name, names(e.inputs))
			}
		}
	}
	out := make(map[string]*ir.Tensor, len(e.outputs))
	for _, b := range e.outputs {
		if b.host {
			c.bindSlot(b, nil) // the host step's value (runHosted)
			continue
		}
		t := outputs[b.Name]
		if t == nil {
			t = ir.NewTensor(b.dtype, b.Shape...)
			t.Name = b.Name
		} else if t.DType != b.dtype || !slices.Equal(t.Dims, b.Shape) || int64(len(t.Raw)) != b.bytes {
			return nil, fmt.Errorf("output %q: the tensor given is %s%v, the engine writes %s", b.Name, t.DType, t.Dims, b.ShapeString())
		}
		out[b.Name] = t
		c.bindSlot(b, t)
	}
	if err := c.execute(inputs, out); err != nil {
		return nil, err
	}
	return out, nil
}
