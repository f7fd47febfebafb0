package lower

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
)

// Run evaluates the program in Go (kernel.RunKernelOn for each part), so
// the driver's lowering — inlining, epilogues, views and copies — is
// tested against the reference executor with no code generator: inputs
// by graph input name in, the graph's outputs by name out. Each value
// keeps a tensor of its own, a view sharing its input's bytes as Alias
// says (a Copy step copies them); a step's scratch is fresh per step and,
// like every value's tensor, starts unwritten (NaN, -1) so that a read
// of what no part wrote shows. A micro-kernel runs as the node's own
// kernel-layer kernels (Micro.Ctx), its epilogue then stored at each
// point of Micro.Out.
func (p *Program) Run(inputs map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	r := &run{p: p, vals: map[*ir.Value]*ir.Tensor{}}
	if err := r.feed(inputs); err != nil {
		return nil, err
	}
	if err := r.runSteps(p.Steps); err != nil {
		return nil, err
	}
	out := map[string]*ir.Tensor{}
	for _, s := range p.Outputs {
		t := r.vals[s.Value]
		if t == nil {
			return nil, fmt.Errorf("output %q: no step writes it", s.Value.Name)
		}
		out[s.Value.Name] = t
	}
	return out, nil
}

// run is one evaluation: the tensor of each program value fed or
// computed so far, and the current step's scratch.
type run struct {
	p       *Program
	vals    map[*ir.Value]*ir.Tensor
	scratch map[bufKey]*ir.Tensor
	// local binds buffers of the current part only (a micro-kernel's
	// value under its epilogue).
	local map[*kernel.Buffer]*ir.Tensor
}

// feed binds the graph's inputs, checked against their declared types.
func (r *run) feed(inputs map[string]*ir.Tensor) error {
	byName := map[string]bool{}
	for _, s := range r.p.Inputs {
		v := s.Value
		byName[v.Name] = true
		t := inputs[v.Name]
		if t == nil {
			return fmt.Errorf("input %q is not given", v.Name)
		}
		dims, _ := v.Type.Shape.Ints()
		if t.DType != v.Type.Elem || !slices.Equal(t.Dims, dims) || len(t.Raw) != ir.RawLen(t.DType, ir.Product(dims)) {
			return fmt.Errorf("input %q is %s%v with %d bytes; the program takes %s", v.Name, t.DType, t.Dims, len(t.Raw), v.Type)
		}
		r.vals[v] = t
	}
	for name := range inputs {
		if !byName[name] {
			return fmt.Errorf("%q is not an input of the program", name)
		}
	}
	return nil
}

// step runs st: a view shares or copies its input's bytes; other steps
// run their parts in order over fresh scratch.
func (r *run) step(st *Step) error {
	if st.Control != nil {
		return r.control(st.Control)
	}
	r.scratch = map[bufKey]*ir.Tensor{}
	for _, b := range st.Temps {
		t, err := unwritten(b)
		if err != nil {
			return err
		}
		r.scratch[keyOf(b)] = t
	}
	if len(st.Parts) == 0 {
		return r.view(st)
	}
	for _, pt := range st.Parts {
		var err error
		switch {
		case pt.Kernel != nil && pt.Micro == nil:
			err = r.kernel(pt.Kernel)
		case pt.Micro != nil && pt.Kernel == nil:
			err = r.micro(pt.Micro)
		default:
			err = fmt.Errorf("a part that is neither a kernel nor a micro-kernel")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// view gives a view node's output its input's bytes under its own shape:
// shared where Alias says so, else (a Copy step) copied.
func (r *run) view(st *Step) error {
	n := st.Node
	if n == nil || !isView(n) {
		return fmt.Errorf("a step with no parts that is not a view")
	}
	in, out := n.Inputs[0], n.Outputs[0]
	src, err := r.value(in)
	if err != nil {
		return err
	}
	dims, _ := out.Type.Shape.Ints()
	if src.Len() != ir.Product(dims) {
		return fmt.Errorf("a view of %v elements as %v", src.Dims, dims)
	}
	raw := src.Raw
	if st.Copy || r.p.Alias[out] == nil {
		raw = slices.Clone(raw)
	}
	r.vals[out] = &ir.Tensor{Name: out.Name, DType: src.DType, Dims: dims, Raw: raw}
	return nil
}

// kernel runs one kernel, allocating the values it writes first.
func (r *run) kernel(k *kernel.Kernel) error {
	outs := []*kernel.Buffer{k.Out}
	if k.TopK != nil {
		outs = append(outs, k.TopK.Indices)
	}
	for _, b := range outs {
		if err := r.allocate(b); err != nil {
			return err
		}
	}
	return kernel.RunKernelOn(k, r.tensor, nil, kernel.Schedule{Axis: -1})
}

// micro runs a micro-kernel as its node's kernel-layer kernels, then
// stores its epilogue (or the node's value itself) into m.Out.
func (r *run) micro(m *Micro) error {
	c := m.Ctx
	if c == nil || len(c.Out) != 1 || c.Out[0] == nil || m.Out == nil {
		return fmt.Errorf("a micro-kernel without a kernel-layer context of one output, or without its own output")
	}
	ins := make([]*ir.Tensor, len(c.In))
	for i, b := range c.In {
		if b == nil || c.Const(i) != nil {
			continue
		}
		t, err := r.tensor(b)
		if err != nil {
			return err
		}
		ins[i] = t
	}
	outs, err := kernel.Run(c, ins, nil)
	if err != nil {
		return err
	}
	if err := r.allocate(m.Out); err != nil {
		return err
	}
	src := c.Out[0]
	acc := &kernel.Buffer{Name: src.Name + ".acc", DType: src.DType, Dims: src.Dims, ID: -1}
	value := kernel.Load(acc, kernel.Vars(len(acc.Dims))...)
	if m.Epilogue != nil {
		value = kernel.FillHole(m.Epilogue, AccHole, value)
	}
	store := &kernel.Kernel{Name: SymbolName(m.Out.Name) + "_store", Out: m.Out, Space: m.Out.Dims, Value: value}
	r.local = map[*kernel.Buffer]*ir.Tensor{acc: outs[0]}
	defer func() { r.local = nil }()
	return r.kernel(store)
}

// allocate gives program value b an unwritten tensor where it has none
// (scratch and tables have theirs).
func (r *run) allocate(b *kernel.Buffer) error {
	if b == nil || b.Data != nil || r.scratch[keyOf(b)] != nil || r.local[b] != nil {
		return nil
	}
	v := r.p.ValueOf(b)
	if v == nil {
		return fmt.Errorf("%s is written but is neither a program value nor the step's scratch", b.Name)
	}
	if r.vals[v] != nil {
		return nil
	}
	dims, _ := v.Type.Shape.Ints()
	t, err := unwritten(&kernel.Buffer{Name: v.Name, DType: v.Type.Elem, Dims: kernel.Ints(dims...)})
	if err != nil {
		return err
	}
	t.Name = v.Name
	r.vals[v] = t
	return nil
}

// tensor is the tensor behind buffer b: the part's own, the step's
// scratch, a computed or fed value, or a value known at compile time.
func (r *run) tensor(b *kernel.Buffer) (*ir.Tensor, error) {
	if t := r.local[b]; t != nil {
		return t, nil
	}
	if t := r.scratch[keyOf(b)]; t != nil {
		return t, nil
	}
	v := r.p.ValueOf(b)
	if v == nil {
		return nil, fmt.Errorf("%s is neither a program value nor the step's scratch", b.Name)
	}
	return r.value(v)
}

// value is v's tensor: fed or computed, or known at compile time.
func (r *run) value(v *ir.Value) (*ir.Tensor, error) {
	if t := r.vals[v]; t != nil {
		return t, nil
	}
	if t := r.p.ConstOf(v); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%s is read before any step writes it", v.Name)
}

// unwritten is a tensor for buffer b (static dims) filled with 0xff
// bytes: NaN, -1, true.
func unwritten(b *kernel.Buffer) (*ir.Tensor, error) {
	dims, ok := kernel.StaticInts(b.Dims)
	if !ok {
		return nil, fmt.Errorf("buffer %s has no static shape", b.Name)
	}
	if _, err := ir.ByteSize(b.DType, dims); err != nil {
		return nil, fmt.Errorf("buffer %s: %v", b.Name, err)
	}
	t := ir.NewTensor(b.DType, dims...)
	for i := range t.Raw {
		t.Raw[i] = 0xff
	}
	return t, nil
}
