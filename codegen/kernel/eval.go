package kernel

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The evaluator runs kernels over Go memory, with the numerics doc.go
// states, so that definitions and schedules are tested against the
// reference executor without a code generator (Glow's interpreter,
// tinygrad's null device). It is an oracle, not a backend: simple loops,
// every index checked.

// Run evaluates c's kernels in order: inputs holds one tensor per c.In
// (nil for an absent input, or for one whose compile-time value c.Consts
// holds), syms the values of the runtime dimensions (OpSym). It returns
// one tensor per c.Out (nil where the node does not produce it).
func Run(c *Ctx, inputs []*ir.Tensor, syms map[string]int64) ([]*ir.Tensor, error) {
	return RunScheduled(c, inputs, syms, nil)
}

// RunScheduled is Run with each kernel under schedule(k) (nil: none). A
// schedule changes only the order of a reduction: with its reduction axis
// in vector lanes, each lane sums its own elements and the lanes combine
// at the end, as the emitted code does; the rest of a schedule (lanes
// along the space, threads) changes nothing here.
func RunScheduled(c *Ctx, inputs []*ir.Tensor, syms map[string]int64, schedule func(*Kernel) Schedule) ([]*ir.Tensor, error) {
	if c == nil {
		return nil, fmt.Errorf("no kernels to run (a nil Ctx)")
	}
	name := "kernels"
	if c.Node != nil {
		name = c.Node.String()
	}
	bufs := map[*Buffer]*ir.Tensor{}
	for i, b := range c.In {
		if b == nil {
			continue
		}
		var t *ir.Tensor
		if i < len(inputs) {
			t = inputs[i]
		}
		if t == nil {
			t = c.Const(i)
		}
		if t == nil {
			return nil, fmt.Errorf("%s: input %d (%s) has no value", name, i, b.Name)
		}
		bufs[b] = t
	}
	syms = maps.Clone(syms)
	if syms == nil {
		syms = map[string]int64{}
	}
	outs := make([]*ir.Tensor, len(c.Out))
	// An output over a dim the data decides is allocated once the kernel
	// writing the dim (a DataDim buffer) has run.
	pending := map[*Buffer]int{}
	for i, b := range c.Out {
		if b == nil {
			continue
		}
		if _, err := evalDims(b, syms); err != nil && dataDimBuffer(c, b) {
			pending[b] = i
			continue
		}
		t, err := newUnwritten(b, syms)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		outs[i], bufs[b] = t, t
	}
	for _, b := range c.Temps {
		t, err := newUnwritten(b, syms)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		bufs[b] = t
	}
	byID := map[int]*ir.Tensor{}
	for _, b := range append(slices.Clone(c.In), c.Out...) {
		if b != nil && b.ID >= 0 {
			byID[b.ID] = bufs[b]
		}
	}
	for _, k := range c.Kernels {
		for _, b := range kernelBuffers(k) {
			if i, ok := pending[b]; ok {
				t, err := newUnwritten(b, syms)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				outs[i], bufs[b] = t, t
				delete(pending, b)
			}
			if b.Dim != "" && bufs[b] == nil {
				bufs[b] = ir.NewTensor(ir.Int64, 1)
			}
		}
		if err := bindViews(k, bufs, byID, syms); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s := Schedule{Axis: -1}
		if schedule != nil {
			s = schedule(k)
		}
		if err := RunKernel(k, bufs, syms, s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if b := k.Out; b.Dim != "" {
			syms[b.Dim] = bufs[b].Int64s()[0]
		}
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("%s: no kernel wrote the dims of %d outputs", name, len(pending))
	}
	return outs, nil
}

// dataDimBuffer reports whether one of c's kernels writes a dim of b (a
// DataDim buffer of a symbol b's dims read).
func dataDimBuffer(c *Ctx, b *Buffer) bool {
	for _, k := range c.Kernels {
		if k.Out.Dim == "" {
			continue
		}
		for _, d := range b.Dims {
			if d.Op == OpSym && d.Name == k.Out.Dim {
				return true
			}
		}
	}
	return false
}

// bindViews binds the views k reads or writes: buffers of a node input's
// or output's ID with other dims (a reduction's grouped axes) or another
// type of the same width (Reinterpret), which are its tensor's elements,
// row-major, under the view's shape and type.
func bindViews(k *Kernel, bufs map[*Buffer]*ir.Tensor, byID map[int]*ir.Tensor, syms map[string]int64) error {
	for _, b := range kernelBuffers(k) {
		base := byID[b.ID]
		if bufs[b] != nil || b.Data != nil || b.ID < 0 || base == nil {
			continue
		}
		t, err := viewOf(b, base, syms)
		if err != nil {
			return err
		}
		bufs[b] = t
	}
	return nil
}

// viewOf is tensor base under buffer b's shape and type: base itself when
// they agree, else its elements, row-major, sharing its bytes (a packed
// tensor's bytes for a ByteView).
func viewOf(b *Buffer, base *ir.Tensor, syms map[string]int64) (*ir.Tensor, error) {
	dims, err := evalDims(b, syms)
	if err != nil {
		return nil, err
	}
	if base.DType.PackedBits() > 0 && b.DType == ir.Uint8 && len(dims) == 1 && dims[0] == int64(len(base.Raw)) {
		return &ir.Tensor{Name: base.Name, DType: ir.Uint8, Dims: dims, Raw: base.Raw}, nil // ByteView
	}
	if !sameWidth(base.DType, b.DType) || base.Len() != ir.Product(dims) || len(base.Raw) != ir.RawLen(base.DType, base.Len()) {
		return nil, fmt.Errorf("buffer %s (%s%v) views a tensor of %s%v", b.Name, b.DType, dims, base.DType, base.Dims)
	}
	if base.DType == b.DType && slices.Equal(base.Dims, dims) {
		return base, nil
	}
	return &ir.Tensor{Name: base.Name, DType: b.DType, Dims: dims, Raw: base.Raw}, nil
}

// sameWidth reports whether elements of a and b have one width, so that a
// buffer of one views a tensor of the other (Reinterpret).
func sameWidth(a, b ir.DType) bool {
	return a == b || a.Size() == b.Size() && a.PackedBits() == b.PackedBits() && a.Size() != 0
}

// RunKernelOn is RunKernel with the tensor of each buffer k reads or
// writes given by tensor (a table's Data needs none), as a caller that
// keeps tensors by buffer ID binds them; a buffer whose dims differ from
// its tensor's views the tensor's elements, row-major.
func RunKernelOn(k *Kernel, tensor func(*Buffer) (*ir.Tensor, error), syms map[string]int64, s Schedule) error {
	if k == nil {
		return fmt.Errorf("a nil kernel")
	}
	bufs := map[*Buffer]*ir.Tensor{}
	for _, b := range kernelBuffers(k) {
		if b == nil || b.Data != nil || bufs[b] != nil {
			continue
		}
		base, err := tensor(b)
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k.Name, err)
		}
		t, err := viewOf(b, base, syms)
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k.Name, err)
		}
		bufs[b] = t
	}
	return RunKernel(k, bufs, syms, s)
}

// FillHole returns e with every Hole(name) replaced by v (of the hole's
// type): how an evaluator supplies what a host kernel would, such as a
// micro-kernel's value under its epilogue.
func FillHole(e *Expr, name string, v *Expr) *Expr {
	memo := map[*Expr]*Expr{}
	var fill func(e *Expr) *Expr
	fill = func(e *Expr) *Expr {
		if r, ok := memo[e]; ok {
			return r
		}
		r := e
		if e.Op == OpHole && e.Name == name {
			r = v
		} else if len(e.Args) > 0 {
			args := make([]*Expr, len(e.Args))
			changed := false
			for i, a := range e.Args {
				args[i] = fill(a)
				changed = changed || args[i] != a
			}
			if changed {
				r = rebuild(e, args)
			}
		}
		memo[e] = r
		return r
	}
	if e == nil {
		return nil
	}
	return fill(e)
}

// kernelBuffers lists the buffers k writes and loads from.
func kernelBuffers(k *Kernel) []*Buffer {
	var out []*Buffer
	seen := map[*Expr]bool{}
	var walk func(e *Expr)
	walk = func(e *Expr) {
		if e == nil || seen[e] {
			return
		}
		seen[e] = true
		if e.Buf != nil {
			out = append(out, e.Buf)
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	roots := append([]*Expr{k.Value, k.When}, k.Store...)
	if r := k.Reduce; r != nil {
		roots = append(append(roots, r.Post), r.Extents...)
	}
	if t := k.TopK; t != nil {
		roots = append(roots, t.N)
		out = append(out, t.Indices)
	}
	for _, e := range append(roots, k.Space...) {
		walk(e)
	}
	return append(out, k.Out)
}

// RunNode builds node n's kernels and evaluates them: its input buffers
// take the shapes of inputs (or, for an input known at compile time, of
// consts, which the definition folds), its outputs the static shapes
// shape inference gave n's output values.
func RunNode(n *ir.Node, opsets ops.Opsets, inputs, consts []*ir.Tensor, schedule func(*Kernel) Schedule) ([]*ir.Tensor, error) {
	at := func(ts []*ir.Tensor, i int) *ir.Tensor {
		if i < len(ts) {
			return ts[i]
		}
		return nil
	}
	in := make([]*Buffer, len(n.Inputs))
	known := make([]*ir.Tensor, len(n.Inputs))
	vals := make([]*ir.Tensor, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		known[i] = at(consts, i)
		t := at(inputs, i)
		if t == nil {
			t = known[i]
		}
		if t == nil {
			return nil, fmt.Errorf("%s: input %d (%s) has no value", n, i, v.Name)
		}
		vals[i] = t
		in[i] = &Buffer{Name: v.Name, DType: t.DType, Dims: Ints(t.Dims...), ID: i}
	}
	out := make([]*Buffer, len(n.Outputs))
	for i, v := range n.Outputs {
		if v == nil || v.Name == "" {
			continue
		}
		dims := make([]*Expr, v.Type.Shape.Rank())
		for j, d := range v.Type.Shape.Dims {
			switch {
			case d.IsStatic():
				dims[j] = C(d.Value)
			case ops.DataDimOf(n, d): // the node's kernels compute it
				dims[j] = Sym(d.Param)
			default:
				return nil, fmt.Errorf("%s: output %s has no static shape (%s)", n, v.Name, v.Type)
			}
		}
		if !v.Type.Shape.Ranked {
			return nil, fmt.Errorf("%s: output %s has no static shape (%s)", n, v.Name, v.Type)
		}
		out[i] = &Buffer{Name: v.Name, DType: v.Type.Elem, Dims: dims, ID: len(n.Inputs) + i}
	}
	c, err := NewCtx(n, opsets, in, out, known)
	if err != nil {
		return nil, err
	}
	if err := Build(c); err != nil {
		return nil, err
	}
	return RunScheduled(c, vals, nil, schedule)
}

// unwrittenByte fills outputs and temporaries before the kernels run (NaN,
// -1, true), so that an element no kernel writes shows in a comparison
// instead of passing as a zero: the emitted code's arena is not cleared
// either.
const unwrittenByte = 0xff

// newUnwritten allocates buffer b's tensor at the symbols' values.
func newUnwritten(b *Buffer, syms map[string]int64) (*ir.Tensor, error) {
	dims, err := evalDims(b, syms)
	if err != nil {
		return nil, err
	}
	if _, err := ir.ByteSize(b.DType, dims); err != nil {
		return nil, fmt.Errorf("buffer %s: %v", b.Name, err)
	}
	t := ir.NewTensor(b.DType, dims...)
	for i := range t.Raw {
		t.Raw[i] = unwrittenByte
	}
	return t, nil
}

// evalDims is buffer b's shape at the symbols' values.
func evalDims(b *Buffer, syms map[string]int64) ([]int64, error) {
	dims := make([]int64, len(b.Dims))
	for i, e := range b.Dims {
		v, ok := EvalInt(e, syms)
		if !ok {
			return nil, fmt.Errorf("buffer %s: dim %d (%s) is not known from the runtime dimensions given", b.Name, i, e)
		}
		if v < 0 {
			return nil, fmt.Errorf("buffer %s: dim %d is %d", b.Name, i, v)
		}
		dims[i] = v
	}
	return dims, nil
}

// RunKernel evaluates one kernel under schedule s on the tensors bufs binds
// to its buffers (a table's Data needs no binding), writing its output in
// place.
func RunKernel(k *Kernel, bufs map[*Buffer]*ir.Tensor, syms map[string]int64, s Schedule) error {
	if k == nil {
		return fmt.Errorf("a nil kernel")
	}
	if err := k.Check(); err != nil {
		return err
	}
	ev := &evaluation{tensors: bufs, syms: syms, bound: map[*Buffer]*binding{}}
	m := &evalPoint{k: k}
	space, err := ev.ints(k, scope{}, m, k.Space)
	if err != nil {
		return err
	}
	out, err := ev.bind(k.Out)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", k.Name, err)
	}
	switch {
	case k.TopK != nil:
		err = ev.topK(k, m, space, out)
	case k.Scan != nil:
		err = ev.scan(k, m, space, out)
	default:
		err = ev.points(k, m, space, out, s)
	}
	if err == nil {
		err = m.err
	}
	return err
}

// evaluation is one kernel's run: the tensors behind its buffers.
type evaluation struct {
	tensors map[*Buffer]*ir.Tensor
	syms    map[string]int64
	bound   map[*Buffer]*binding
}

// binding is a buffer's tensor with its element accessors.
type binding struct {
	b       *Buffer
	dims    []int64
	strides []int
	get     func(off int) scalar
	set     func(off int, v scalar)
}

// bind returns buffer b's tensor, checked against b's type and shape.
func (ev *evaluation) bind(b *Buffer) (*binding, error) {
	if bd, ok := ev.bound[b]; ok {
		return bd, nil
	}
	dims, err := evalDims(b, ev.syms)
	if err != nil {
		return nil, err
	}
	t := ev.tensors[b]
	if t == nil {
		t = b.Data
	}
	if t == nil {
		return nil, fmt.Errorf("buffer %s has no tensor", b.Name)
	}
	if t.DType != b.DType || !slices.Equal(t.Dims, dims) {
		return nil, fmt.Errorf("buffer %s is %s%v, its tensor %s%v", b.Name, b.DType, dims, t.DType, t.Dims)
	}
	if !evaluable(ComputeType(b.DType)) {
		return nil, fmt.Errorf("buffer %s: the evaluator has no %s", b.Name, b.DType)
	}
	bd := &binding{b: b, dims: dims, strides: make([]int, len(dims))}
	stride := 1
	for i := len(dims) - 1; i >= 0; i-- {
		bd.strides[i] = stride
		stride *= int(dims[i])
	}
	bd.get, bd.set = accessors(t)
	ev.bound[b] = bd
	return bd, nil
}

// accessors read and write t's elements as computed values: Float16 and
// BFloat16 widen to float32 on load and round to nearest even on store,
// integers extend by their signedness, bools load as x != 0.
func accessors(t *ir.Tensor) (func(int) scalar, func(int, scalar)) {
	switch t.DType {
	case ir.Float32:
		s := ir.Data[float32](t)
		return func(i int) scalar { return scalar{f: widen32(s[i])} }, func(i int, v scalar) { s[i] = narrow32(v.f) }
	case ir.Float64:
		s := ir.Data[float64](t)
		return func(i int) scalar { return scalar{f: s[i]} }, func(i int, v scalar) { s[i] = v.f }
	case ir.Float16:
		s := ir.Data[uint16](t)
		return func(i int) scalar { return scalar{f: float64(ir.HalfToFloat32(s[i]))} },
			func(i int, v scalar) { s[i] = ir.Float32ToHalf(float32(v.f)) }
	case ir.BFloat16:
		s := ir.Data[uint16](t)
		return func(i int) scalar { return scalar{f: float64(ir.BFloat16ToFloat32(s[i]))} },
			func(i int, v scalar) { s[i] = ir.Float32ToBFloat16(float32(v.f)) }
	case ir.Bool:
		s := ir.Data[uint8](t)
		return func(i int) scalar { return boolScalar(s[i] != 0) }, func(i int, v scalar) { s[i] = uint8(v.i & 1) }
	case ir.Int8:
		return intAccessors(ir.Data[int8](t))
	case ir.Uint8:
		return intAccessors(ir.Data[uint8](t))
	case ir.Int16:
		return intAccessors(ir.Data[int16](t))
	case ir.Uint16:
		return intAccessors(ir.Data[uint16](t))
	case ir.Int32:
		return intAccessors(ir.Data[int32](t))
	case ir.Uint32:
		return intAccessors(ir.Data[uint32](t))
	case ir.Int64:
		return intAccessors(ir.Data[int64](t))
	}
	return intAccessors(ir.Data[uint64](t)) // bind admits no other type
}

func intAccessors[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64](s []T) (func(int) scalar, func(int, scalar)) {
	return func(i int) scalar { return scalar{i: int64(s[i])} }, func(i int, v scalar) { s[i] = T(v.i) }
}

// evalPoint is where expressions are evaluated: the coordinates, the
// reduced value in a Post, and the first error met.
type evalPoint struct {
	k     *Kernel
	vars  []int64
	rvars []int64
	acc   scalar
	err   error
}

func (m *evalPoint) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// ints evaluates int64 expressions at m in scope sc.
func (ev *evaluation) ints(k *Kernel, sc scope, m *evalPoint, es []*Expr) ([]int64, error) {
	p, err := ev.compile(k, sc, es...)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if !e.Type.IsInt() {
			return nil, fmt.Errorf("kernel %s: %s is %s, not an integer", k.Name, e, e.Type)
		}
	}
	regs := make([]scalar, len(p.code))
	p.run(m, regs, 0)
	out := make([]int64, len(es))
	for i, r := range p.roots {
		out[i] = regs[r].i
	}
	return out, m.err
}

// eachPoint calls fn at every point of space in row-major order (the last
// axis fastest), with vars holding the coordinates, skipping axis skip
// (-1: none); it stops when fn returns false.
func eachPoint(space []int64, skip int, vars []int64, fn func() bool) {
	for i, n := range space {
		if n <= 0 && i != skip {
			return
		}
		vars[i] = 0
	}
	for {
		if !fn() {
			return
		}
		d := len(space) - 1
		for ; d >= 0; d-- {
			if d == skip {
				continue
			}
			vars[d]++
			if vars[d] < space[d] {
				break
			}
			vars[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// storeOffset is the element offset of idx in b, or an error outside it.
func (k *Kernel) storeOffset(b *binding, idx []int64) (int, error) {
	off := 0
	for d, x := range idx {
		if x < 0 || x >= b.dims[d] {
			return 0, fmt.Errorf("kernel %s writes %s%v at %v", k.Name, b.b.Name, b.dims, idx)
		}
		off += int(x) * b.strides[d]
	}
	return off, nil
}

// storedType is the compute type of the values k writes to Out.
func storedType(k *Kernel) ir.DType {
	if r := k.Reduce; r != nil {
		switch {
		case r.Post != nil:
			return r.Post.Type
		case r.Op == ArgMaxOp || r.Op == ArgMinOp:
			return ir.Int64
		}
	}
	return k.Value.Type
}

// points runs a map or a reduction: at every point, When, then the value
// (reduced under schedule s), stored at Store's index, combined with what
// Out holds when Combine says so.
func (ev *evaluation) points(k *Kernel, m *evalPoint, space []int64, out *binding, s Schedule) error {
	t := storedType(k)
	if t != ComputeType(k.Out.DType) {
		return fmt.Errorf("kernel %s stores %s values in %s %s", k.Name, t, k.Out.DType, k.Out.Name)
	}
	sc := scope{vars: len(space)}
	store := k.Store
	if store == nil {
		store = Vars(len(space))
	}
	at, err := ev.compile(k, sc, store...)
	if err != nil {
		return err
	}
	var when *program
	if k.When != nil {
		if when, err = ev.compile(k, sc, k.When); err != nil {
			return err
		}
	}
	var red *reduction
	value, valueScope := k.Value, sc
	if r := k.Reduce; r != nil {
		if red, err = ev.reduction(k, sc, s); err != nil {
			return err
		}
		valueScope.rvars = len(r.Extents)
	}
	vp, err := ev.compile(k, valueScope, value)
	if err != nil {
		return err
	}
	regs := make([]scalar, max(len(at.code), len(vp.code)))
	if when != nil {
		regs = make([]scalar, max(len(regs), len(when.code)))
	}
	idx := make([]int64, len(store))
	m.vars = make([]int64, len(space))
	eachPoint(space, -1, m.vars, func() bool {
		if when != nil {
			when.run(m, regs, 0)
			if regs[when.roots[0]].i == 0 {
				return m.err == nil
			}
		}
		var v scalar
		if red != nil {
			v = red.at(m, vp)
		} else {
			vp.run(m, regs, 0)
			v = regs[vp.roots[0]]
		}
		at.run(m, regs, 0)
		for i, r := range at.roots {
			idx[i] = regs[r].i
		}
		if m.err != nil {
			return false
		}
		off, err := k.storeOffset(out, idx)
		if err != nil {
			m.fail(err)
			return false
		}
		if k.Combine != None {
			v = combineScalar(k.Combine, t, out.get(off), v)
		}
		out.set(off, v)
		return true
	})
	return m.err
}

// reduction is a Reduce's loops at one point: its extents, the order the
// schedule implies, and Post.
type reduction struct {
	k          *Kernel
	extProgram *program
	post       *program
	// lanes is the number of lanes the reduction axis axis is in (0: the
	// reduction runs in order).
	lanes int
	axis  int
	// Scratch, reused from point to point.
	eregs, regs, pregs, accs []scalar
	extents                  []int64
}

func (ev *evaluation) reduction(k *Kernel, sc scope, s Schedule) (*reduction, error) {
	r := k.Reduce
	red := &reduction{k: k, axis: -1}
	var err error
	if r.Op == None || r.Op > ArgMinOp {
		return nil, fmt.Errorf("kernel %s: reduction %s", k.Name, r.Op)
	}
	if red.extProgram, err = ev.compile(k, sc, r.Extents...); err != nil {
		return nil, err
	}
	for _, e := range r.Extents {
		if !e.Type.IsInt() {
			return nil, fmt.Errorf("kernel %s: extent %s is %s", k.Name, e, e.Type)
		}
	}
	if r.Post != nil {
		if red.post, err = ev.compile(k, scope{vars: sc.vars, acc: true}, r.Post); err != nil {
			return nil, err
		}
	}
	arg := r.Op == ArgMaxOp || r.Op == ArgMinOp
	if s.Reduction && s.VL > 0 && !arg {
		if s.Axis < 0 || s.Axis >= len(r.Extents) {
			return nil, fmt.Errorf("kernel %s: a schedule's reduction axis %d of %d", k.Name, s.Axis, len(r.Extents))
		}
		red.lanes, red.axis = s.VL, s.Axis
	}
	red.eregs = make([]scalar, len(red.extProgram.code))
	red.extents = make([]int64, len(r.Extents))
	if red.post != nil {
		red.pregs = make([]scalar, len(red.post.code))
	}
	return red, nil
}

// at reduces the value (program vp) over the reduction axes at m's point
// and returns what is stored: Post's value, or the reduced one.
func (red *reduction) at(m *evalPoint, vp *program) scalar {
	if len(red.regs) < len(vp.code) {
		red.regs = make([]scalar, len(vp.code))
	}
	ext := red.extents
	red.extProgram.run(m, red.eregs, 0)
	for i, r := range red.extProgram.roots {
		ext[i] = red.eregs[r].i
	}
	if len(m.rvars) != len(ext) {
		m.rvars = make([]int64, len(ext))
	}
	fresh := true
	value := func() scalar {
		from := vp.invariant
		if fresh {
			from, fresh = 0, false
		}
		vp.run(m, red.regs, from)
		return red.regs[vp.roots[0]]
	}
	var acc scalar
	r := red.k.Reduce
	if r.Op == ArgMaxOp || r.Op == ArgMinOp {
		acc = red.arg(ext[0], m, value)
	} else {
		acc = red.combined(ext, m, value)
	}
	if red.post == nil {
		return acc
	}
	m.acc = acc
	red.post.run(m, red.pregs, 0)
	return red.pregs[red.post.roots[0]]
}

// combined reduces in the order the schedule's code does: in order, or,
// with an axis in lanes, element i of that axis into lane i mod lanes (a
// tail's missing lanes combine the identity), then the lanes halving as
// a tree while their number is even, then the rest in order.
func (red *reduction) combined(ext []int64, m *evalPoint, value func() scalar) scalar {
	r := red.k.Reduce
	t := red.k.Value.Type
	id := constScalar(Identity(r.Op, t))
	n := max(red.lanes, 1)
	if cap(red.accs) < n {
		red.accs = make([]scalar, n)
	}
	accs := red.accs[:n]
	for i := range accs {
		accs[i] = id
	}
	var nest func(d int)
	nest = func(d int) {
		if d == len(ext) {
			lane := 0
			if red.lanes > 0 {
				lane = int(m.rvars[red.axis] % int64(red.lanes))
			}
			accs[lane] = combineScalar(r.Op, t, accs[lane], value())
			return
		}
		for i := int64(0); i < ext[d] && m.err == nil; i++ {
			m.rvars[d] = i
			nest(d + 1)
		}
		if d == red.axis {
			if tail := int(ext[d] % int64(red.lanes)); tail > 0 {
				for j := tail; j < n; j++ {
					accs[j] = combineScalar(r.Op, t, accs[j], id)
				}
			}
		}
	}
	nest(0)
	for w := n / 2; w >= 1 && len(accs) == 2*w; w /= 2 {
		for i := 0; i < w; i++ {
			accs[i] = combineScalar(r.Op, t, accs[i], accs[w+i])
		}
		accs = accs[:w]
	}
	acc := accs[0]
	for _, a := range accs[1:] {
		acc = combineScalar(r.Op, t, acc, a)
	}
	return acc
}

// arg finds the index of the best value along the single reduction axis
// of extent n: the first of equals (the last with Last); a NaN wins and
// stays. An empty axis gives 0.
func (red *reduction) arg(n int64, m *evalPoint, value func() scalar) scalar {
	r := red.k.Reduce
	t := red.k.Value.Type
	if n <= 0 {
		return scalar{}
	}
	m.rvars[0] = 0
	best, idx := value(), int64(0)
	gt := OpGt
	if r.Op == ArgMinOp {
		gt = OpLt
	}
	for i := int64(1); i < n && m.err == nil; i++ {
		m.rvars[0] = i
		x := value()
		better := binaryScalar(gt, t, x, best).i != 0
		if r.Last {
			better = better || binaryScalar(OpEq, t, x, best).i != 0
		}
		if t.IsFloat() {
			better = (better || math.IsNaN(x.f)) && !math.IsNaN(best.f)
		}
		if better {
			best, idx = x, i
		}
	}
	return scalar{i: idx}
}

// scan runs a running combination along the scan axis of every row, in
// order (from the end when Reverse), storing at each point what was
// combined up to it (before it when Exclusive).
func (ev *evaluation) scan(k *Kernel, m *evalPoint, space []int64, out *binding) error {
	sc := k.Scan
	t := k.Value.Type
	if t != ComputeType(k.Out.DType) || k.Store != nil || k.When != nil || k.Combine != None {
		return fmt.Errorf("kernel %s: a scan of %s into %s %s stores at its points, always", k.Name, t, k.Out.DType, k.Out.Name)
	}
	if sc.Op != SumOp && sc.Op != ProdOp && sc.Op != MaxOp && sc.Op != MinOp {
		return fmt.Errorf("kernel %s: scan %s", k.Name, sc.Op)
	}
	vp, err := ev.compile(k, scope{vars: len(space)}, k.Value)
	if err != nil {
		return err
	}
	id := constScalar(Identity(sc.Op, t))
	regs := make([]scalar, len(vp.code))
	n := space[sc.Axis]
	m.vars = make([]int64, len(space))
	eachPoint(space, sc.Axis, m.vars, func() bool {
		acc := id
		for i := int64(0); i < n; i++ {
			j := i
			if sc.Reverse {
				j = n - 1 - i
			}
			m.vars[sc.Axis] = j
			vp.run(m, regs, 0)
			next := combineScalar(sc.Op, t, acc, regs[vp.roots[0]])
			stored := next
			if sc.Exclusive {
				stored = acc
			}
			off, err := k.storeOffset(out, m.vars)
			if err != nil {
				m.fail(err)
			}
			if m.err != nil {
				return false
			}
			out.set(off, stored)
			acc = next
		}
		return true
	})
	return m.err
}

// topK selects, in every row, the K best of the N candidates along the
// axis, best first: by value (NaN below every number), equal values in
// index order. Picks past the candidates are 0 at index 0.
func (ev *evaluation) topK(k *Kernel, m *evalPoint, space []int64, out *binding) error {
	tk := k.TopK
	t := k.Value.Type
	if t != ComputeType(k.Out.DType) || tk.Indices.DType != ir.Int64 || k.Store != nil || k.When != nil || k.Combine != None {
		return fmt.Errorf("kernel %s: a selection of %s into %s %s and %s %s", k.Name, t, k.Out.DType, k.Out.Name, tk.Indices.DType, tk.Indices.Name)
	}
	indices, err := ev.bind(tk.Indices)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", k.Name, err)
	}
	sc := scope{vars: len(space)}
	vp, err := ev.compile(k, sc, k.Value)
	if err != nil {
		return err
	}
	np, err := ev.compile(k, sc, tk.N)
	if err != nil {
		return err
	}
	if !tk.N.Type.IsInt() {
		return fmt.Errorf("kernel %s: N is %s", k.Name, tk.N.Type)
	}
	type candidate struct {
		v scalar
		j int64
	}
	order := func(a, b candidate) int {
		an, bn := t.IsFloat() && math.IsNaN(a.v.f), t.IsFloat() && math.IsNaN(b.v.f)
		switch {
		case an || bn:
			if an == bn {
				return 0
			}
			if an == tk.Largest { // NaN ranks last when largest, first when not
				return 1
			}
			return -1
		case binaryScalar(OpEq, t, a.v, b.v).i != 0:
			return 0
		case (binaryScalar(OpGt, t, a.v, b.v).i != 0) == tk.Largest:
			return -1
		}
		return 1
	}
	regs := make([]scalar, max(len(vp.code), len(np.code)))
	kOut := space[tk.Axis]
	m.vars = make([]int64, len(space))
	var cands []candidate
	eachPoint(space, tk.Axis, m.vars, func() bool {
		m.vars[tk.Axis] = 0
		np.run(m, regs, 0)
		n := regs[np.roots[0]].i
		cands = cands[:0]
		for j := int64(0); j < n && m.err == nil; j++ {
			m.vars[tk.Axis] = j
			vp.run(m, regs, 0)
			cands = append(cands, candidate{regs[vp.roots[0]], j})
		}
		slices.SortStableFunc(cands, order)
		for r := int64(0); r < kOut && m.err == nil; r++ {
			m.vars[tk.Axis] = r
			var c candidate
			if r < int64(len(cands)) {
				c = cands[r]
			}
			off, err := k.storeOffset(out, m.vars)
			if err != nil {
				m.fail(err)
				break
			}
			ioff, err := k.storeOffset(indices, m.vars)
			if err != nil {
				m.fail(err)
				break
			}
			out.set(off, c.v)
			indices.set(ioff, scalar{i: c.j})
		}
		return m.err == nil
	})
	return m.err
}
