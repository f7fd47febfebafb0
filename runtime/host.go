package runtime

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// hostStep is a node the engine computes on the host (cpuabi.HostStep):
// strings and image decoding, which native code does not compute. It runs
// the node's kernel, the reference executor's (ir/ops), over a one-node
// model of it, between runs of the code.
type hostStep struct {
	rec  cpuabi.HostStep
	exec *reference.Executor
}

// hostSteps prepares an engine's host steps from its code's record.
func hostSteps(recs []cpuabi.HostStep) ([]hostStep, error) {
	var out []hostStep
	last := int64(0)
	for i, r := range recs {
		if r.Resume <= last {
			return nil, fmt.Errorf("%w: host step %d (%s) resumes the code at part %d, after part %d", ErrInconsistent, i, r.Node.Op, r.Resume, last)
		}
		last = r.Resume
		m, err := hostModel(r)
		if err != nil {
			return nil, fmt.Errorf("%w: host step %d (%s): %v", ErrInconsistent, i, r.Node.Op, err)
		}
		exec, err := reference.New(m)
		if err != nil {
			return nil, fmt.Errorf("%w: host step %d (%s): %v", ErrInconsistent, i, r.Node.Op, err)
		}
		out = append(out, hostStep{rec: r, exec: exec})
	}
	return out, nil
}

// hostModel is step r's node as a model of its own: its inputs of
// unknown shape (a run gives them at any), its constants initializers.
func hostModel(r cpuabi.HostStep) (*ir.Model, error) {
	attrs, err := r.Node.Attributes()
	if err != nil {
		return nil, err
	}
	g := ir.NewGraph(r.Node.Op)
	vals := map[string]*ir.Value{}
	n := &ir.Node{Name: r.Node.Name, Domain: r.Node.Domain, OpType: r.Node.Op, Attrs: attrs}
	for _, in := range r.In {
		if in.Name == "" {
			n.Inputs = append(n.Inputs, nil)
			continue
		}
		v := vals[in.Name]
		switch {
		case v != nil:
		case in.Where == cpuabi.AsConst:
			if in.Const == nil {
				return nil, fmt.Errorf("constant input %q has no value", in.Name)
			}
			t, err := in.Const.Tensor()
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", in.Name, err)
			}
			v = g.AddInitializer(in.Name, t)
		default:
			v = g.AddInput(in.Name, cpuabi.TypeOf(in.Kinds, ir.DType(in.DType), ir.Shape{}))
		}
		vals[in.Name] = v
		n.Inputs = append(n.Inputs, v)
	}
	for _, o := range r.Out {
		if o.Name == "" || vals[o.Name] != nil {
			return nil, fmt.Errorf("output %q is unnamed or named twice", o.Name)
		}
		v := &ir.Value{Name: o.Name, Producer: n}
		vals[o.Name] = v
		n.Outputs = append(n.Outputs, v)
	}
	g.Nodes = []*ir.Node{n}
	g.SetOutputs(n.Outputs...)
	m := ir.NewModel(g, r.Node.Opset)
	m.IRVersion = 10
	if r.Node.Domain != "" {
		m.OpsetImports = []ir.OpsetImport{{Domain: r.Node.Domain, Version: r.Node.Opset}, {Domain: "", Version: 21}}
	}
	return m, nil
}

// runHosted runs one inference of an engine with host steps: the code up
// to the first host step, that step, the code on from its Resume, and so
// on. The values only host steps read and write (strings; what a step
// computes at a shape only the data gives) stay in a table by name, from
// the inputs to the outputs.
func (c *Context) runHosted(inputs, out map[string]*ir.Tensor, run func(part int64) error) error {
	e := c.engine
	table := map[string]*ir.Tensor{}
	for _, b := range e.inputs {
		if b.host {
			table[b.Name] = inputs[b.Name]
		}
	}
	part := int64(0)
	for i := range e.host {
		h := &e.host[i]
		if err := run(part); err != nil {
			return err
		}
		if err := c.runHostStep(h, table); err != nil {
			name := h.rec.Node.Op
			if h.rec.Node.Name != "" {
				name = h.rec.Node.Name + " (" + name + ")"
			}
			return fmt.Errorf("host step %s: %w", name, err)
		}
		part = h.rec.Resume
	}
	if err := run(part); err != nil {
		return err
	}
	for _, b := range e.outputs {
		if b.host {
			t := table[b.Name]
			if t == nil {
				return fmt.Errorf("%w: no host step computed output %q", ErrInconsistent, b.Name)
			}
			out[b.Name] = t
		}
	}
	return nil
}

// runHostStep computes step h: its inputs from the table, the arena or
// the io slots, its outputs to the same.
func (c *Context) runHostStep(h *hostStep, table map[string]*ir.Tensor) error {
	feeds := map[string]*ir.Tensor{}
	for _, v := range h.rec.In {
		switch v.Where {
		case "", cpuabi.AsConst:
			continue
		case cpuabi.InHostTable:
			t := table[v.Name]
			if t == nil {
				return fmt.Errorf("%w: input %q was not computed", ErrInconsistent, v.Name)
			}
			feeds[v.Name] = t
		default:
			dims, raw, err := c.hostBytes(v)
			if err != nil {
				return err
			}
			feeds[v.Name] = ir.FromRaw(ir.DType(v.DType), dims, slices.Clone(raw))
		}
	}
	res, err := h.exec.Run(feeds)
	if err != nil {
		return err
	}
	for _, v := range h.rec.Out {
		t := res[v.Name]
		if v.Where == cpuabi.InHostTable {
			table[v.Name] = t
			continue
		}
		dims, raw, err := c.hostBytes(v)
		if err != nil {
			return err
		}
		if t.DType != ir.DType(v.DType) || !slices.Equal(t.Dims, dims) || len(t.Raw) != len(raw) {
			return fmt.Errorf("%w: output %q is %s%v, the code reads %s%v", ErrInconsistent, v.Name, t.DType, t.Dims, ir.DType(v.DType), dims)
		}
		copy(raw, t.Raw)
	}
	return nil
}

// hostBytes are the bytes of value v of the code, at the dims this run
// gives it.
func (c *Context) hostBytes(v cpuabi.HostValue) ([]int64, []byte, error) {
	e := c.engine
	b := binding{}
	b.Name, b.Shape, b.Dims = v.Name, v.Dims, v.DimNames
	dims, err := b.DimsAt(e.Meta.Symbols, c.dims)
	if err != nil {
		return nil, nil, err
	}
	n, err := byteSize(ir.DType(v.DType), dims)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: value %q: %v", ErrInconsistent, v.Name, err)
	}
	var base unsafe.Pointer
	size := int64(0)
	switch v.Where {
	case cpuabi.InArenaAt:
		base, size = rawPointer(c.arena), int64(len(c.arena))
	case cpuabi.InSlot:
		if v.Slot < 0 || v.Slot >= len(e.inputs)+len(e.outputs) {
			return nil, nil, fmt.Errorf("%w: value %q is in io slot %d", ErrInconsistent, v.Name, v.Slot)
		}
		base, size = c.io[v.Slot], c.slotBytes[v.Slot]
	default:
		return nil, nil, fmt.Errorf("%w: value %q is in %q", ErrInconsistent, v.Name, v.Where)
	}
	if v.Off < 0 || n > size-v.Off || n > 0 && base == nil {
		return nil, nil, fmt.Errorf("%w: value %q: %d bytes at %d, past the %d of its buffer", ErrInconsistent, v.Name, n, v.Off, size)
	}
	if n == 0 {
		return dims, nil, nil
	}
	return dims, unsafe.Slice((*byte)(unsafe.Add(base, v.Off)), n), nil
}
