package lower

import (
	"errors"
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// A fusion group (kiln.FusionGroup, formed by the passes) runs as one
// step whatever its kind: its body nodes' kernels in order, the values
// between them in scratch. Fusion then removes what it can of that
// scratch: a map whose result stays inside the group is inlined into
// the kernels that read it (kernel.Inline), and the last map, when it
// reads the result of a reduction or a micro-kernel only at its own
// point, moves into that producer's store (an epilogue), so a Conv with
// its bias, residual Add and Relu stores once. What cannot be fused stays
// a kernel of the step: a group is never refused for its shape.

// buildBody builds the parts of group n's body nodes: values inside the
// body are scratch buffers, and the last node writes the group's output.
func (d *driver) buildBody(n *ir.Node, opsets ops.Opsets) ([]*Step, error) {
	body := n.Attr("body")
	if body == nil || body.G == nil || len(body.G.Nodes) == 0 || len(n.Outputs) != 1 {
		return nil, errors.New("a fusion group without a body or with other than one output")
	}
	nodes := body.G.Nodes
	last := nodes[len(nodes)-1]
	if len(body.G.Outputs) != 1 || len(last.Outputs) == 0 || last.Outputs[0] != body.G.Outputs[0] {
		return nil, errors.New("the body's last node does not compute its output")
	}
	// A value inside the body has a buffer of the program's (an ID, which
	// a kernel viewing it with other dims keeps) placed in the step's
	// scratch.
	buf := func(v *ir.Value) *kernel.Buffer {
		if v == last.Outputs[0] {
			return d.p.Buffer(n.Outputs[0])
		}
		return d.p.Buffer(v)
	}
	for _, b := range nodes {
		for _, o := range b.Outputs {
			if o != nil && o != last.Outputs[0] {
				if !o.Type.Shape.IsStatic() {
					return nil, errors.New("a value inside the group has no static shape")
				}
				d.p.scratch[o] = true
			}
		}
	}
	var steps []*Step
	for _, b := range nodes {
		in := make([]*kernel.Buffer, len(b.Inputs))
		for i, v := range b.Inputs {
			in[i] = buf(v)
		}
		out := make([]*kernel.Buffer, len(b.Outputs))
		for i, v := range b.Outputs {
			out[i] = buf(v)
		}
		st, err := d.buildNode(b, opsets, in, out)
		if err != nil {
			return nil, err
		}
		for i, o := range out {
			if o != nil && d.p.scratch[b.Outputs[i]] {
				st.Temps = append(st.Temps, o)
			}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// fuseGroup joins the body's steps into group n's one step writing out.
func fuseGroup(n *ir.Node, body []*Step, out *kernel.Buffer) (*Step, error) {
	scratch := bufSet{}
	var parts []Part
	var temps []*kernel.Buffer
	for _, st := range body {
		for _, t := range st.Temps {
			scratch[keyOf(t)] = true
		}
		temps = append(temps, st.Temps...)
		parts = append(parts, st.Parts...)
	}
	// Inline maps into later parts, keeping each def for the parts that
	// still read its buffer.
	defs := map[*kernel.Buffer]*kernel.Kernel{}
	for i, pt := range parts {
		if k := pt.Kernel; k != nil {
			parts[i].Kernel = inlineInto(k, defs)
			k = parts[i].Kernel
			if scratch[keyOf(k.Out)] && kernel.Inlinable(k) && writers(parts, k.Out) == 1 {
				defs[k.Out] = k
			}
		}
	}
	parts, _ = prune(parts, scratch)
	parts, reads := prune(fuseEpilogue(parts, scratch), scratch)
	st := &Step{Node: n, Parts: parts}
	for _, t := range temps {
		if reads[keyOf(t)] || writers(st.Parts, t) > 0 {
			st.Temps = append(st.Temps, t)
		}
	}
	if len(st.Parts) == 0 {
		return nil, errors.New("a fusion group whose body computes nothing")
	}
	return st, nil
}

// prune drops the parts whose results nothing reads: kept are the parts
// that write outside the group's scratch, or what a kept later part
// reads. It returns the kept parts and the buffers they read.
func prune(parts []Part, scratch bufSet) ([]Part, bufSet) {
	kept := make([]bool, len(parts))
	reads := bufSet{}
	for i := len(parts) - 1; i >= 0; i-- {
		outs := partOutputs(parts[i])
		keep := false
		for _, o := range outs {
			keep = keep || !scratch[keyOf(o)] || reads[keyOf(o)]
		}
		if !keep {
			continue
		}
		kept[i] = true
		for _, b := range (&Step{Parts: parts[i : i+1]}).buffers() {
			if b != nil && !containsBuf(outs, b) {
				reads[keyOf(b)] = true
			}
		}
		if k := parts[i].Kernel; k != nil && k.Combine != kernel.None {
			reads[keyOf(k.Out)] = true // a scatter combines with what is there
		}
	}
	var out []Part
	for i, pt := range parts {
		if kept[i] {
			out = append(out, pt)
		}
	}
	return out, reads
}

// inlineInto returns k with loads of defs' buffers replaced by their
// values, in its value, reduction post, store index and condition.
func inlineInto(k *kernel.Kernel, defs map[*kernel.Buffer]*kernel.Kernel) *kernel.Kernel {
	if len(defs) == 0 {
		return k
	}
	c := *k
	c.Value = kernel.Inline(k.Value, defs)
	if k.Reduce != nil && k.Reduce.Post != nil {
		r := *k.Reduce
		r.Post = kernel.Inline(r.Post, defs)
		c.Reduce = &r
	}
	if k.Store != nil {
		c.Store = make([]*kernel.Expr, len(k.Store))
		for i, e := range k.Store {
			c.Store[i] = kernel.Inline(e, defs)
		}
	}
	if k.When != nil {
		c.When = kernel.Inline(k.When, defs)
	}
	if k.TopK != nil {
		t := *k.TopK
		t.N = kernel.Inline(t.N, defs)
		c.TopK = &t
	}
	return &c
}

// fuseEpilogue moves the last part, a map reading the scratch result of
// the part before it only at its own point, into that part's store: a
// micro-kernel's epilogue, or a plain reduction's Post.
func fuseEpilogue(parts []Part, scratch bufSet) []Part {
	if len(parts) < 2 {
		return parts
	}
	e, prev := parts[len(parts)-1].Kernel, parts[len(parts)-2]
	if e == nil || !kernel.Inlinable(e) {
		return parts
	}
	var src *kernel.Buffer
	switch {
	case prev.Micro != nil && prev.Micro.Epilogue == nil:
		src = prev.Micro.Out
	case prev.Kernel != nil && plainReduction(prev.Kernel):
		src = prev.Kernel.Out
	default:
		return parts
	}
	if !scratch[keyOf(src)] || !sameDims(src.Dims, e.Out.Dims) || !readsOnlyAtPoint(e.Value, src, len(e.Space)) || readByOthers(parts[:len(parts)-2], src) {
		return parts
	}
	if prev.Micro != nil {
		m := *prev.Micro
		m.Epilogue = kernel.Replace(e.Value, src, kernel.Hole(AccHole, kernel.ComputeType(src.DType)))
		m.Out = e.Out
		return append(parts[:len(parts)-2], Part{Micro: &m})
	}
	r := prev.Kernel
	acc := kernel.Acc(r.Value.Type)
	if r.Reduce.Post != nil {
		acc = r.Reduce.Post
	}
	red := *r.Reduce
	red.Post = kernel.Replace(e.Value, src, acc)
	k := *r
	k.Reduce, k.Out, k.Name = &red, e.Out, r.Name+"+"+e.Name
	return append(parts[:len(parts)-2], Part{Kernel: &k})
}

// plainReduction reports whether k reduces at each point of its output
// and stores there, once.
func plainReduction(k *kernel.Kernel) bool {
	return k.Reduce != nil && k.Store == nil && k.When == nil && k.Combine == kernel.None && !k.Serial &&
		k.Reduce.Op != kernel.ArgMaxOp && k.Reduce.Op != kernel.ArgMinOp && sameDims(k.Space, k.Out.Dims)
}

// readsOnlyAtPoint reports whether every load of b in e reads b at the
// point (Var(0), ..., Var(rank-1)) of a space of that rank; along a dim of
// 1 the index may be the constant 0, as broadcasting writes it.
func readsOnlyAtPoint(e *kernel.Expr, b *kernel.Buffer, rank int) bool {
	ok := b.Rank() == rank
	dims, static := b.Static()
	ok = ok && static
	kernel.Walk(e, func(x *kernel.Expr) {
		switch {
		case x.Buf == nil || keyOf(x.Buf) != keyOf(b):
		case x.Buf != b || x.Op != kernel.OpLoad:
			ok = false
		default:
			for i, a := range x.Args {
				c, isConst := a.IntValue()
				atPoint := a.Op == kernel.OpVar && a.Int == int64(i) || isConst && c == 0 && dims[i] == 1
				ok = ok && atPoint
			}
		}
	})
	return ok
}

func readByOthers(parts []Part, b *kernel.Buffer) bool {
	for _, pt := range parts {
		st := &Step{Parts: []Part{pt}}
		for _, x := range st.buffers() {
			if keyOf(x) == keyOf(b) && !containsBuf(partOutputs(pt), b) {
				return true
			}
		}
	}
	return false
}

func sameDims(a, b []*kernel.Expr) bool {
	x, ok1 := kernel.StaticInts(a)
	y, ok2 := kernel.StaticInts(b)
	return ok1 && ok2 && slices.Equal(x, y)
}

// partOutputs lists the buffers a part writes.
func partOutputs(pt Part) []*kernel.Buffer {
	if pt.Micro != nil {
		return []*kernel.Buffer{pt.Micro.Out}
	}
	out := []*kernel.Buffer{pt.Kernel.Out}
	if pt.Kernel.TopK != nil {
		out = append(out, pt.Kernel.TopK.Indices)
	}
	return out
}

// writers is how many of parts write b.
func writers(parts []Part, b *kernel.Buffer) int {
	n := 0
	for _, pt := range parts {
		if containsBuf(partOutputs(pt), b) {
			n++
		}
	}
	return n
}

// bufKey identifies a buffer's bytes: a program buffer by its ID (a
// kernel that views one with other dims makes a Buffer of the same ID),
// a definition's scratch by its pointer.
type bufKey struct {
	id  int
	ptr *kernel.Buffer
}

func keyOf(b *kernel.Buffer) bufKey {
	if b.ID >= 0 && b.Data == nil {
		return bufKey{id: b.ID}
	}
	return bufKey{id: -1, ptr: b}
}

type bufSet map[bufKey]bool

func containsBuf(list []*kernel.Buffer, b *kernel.Buffer) bool {
	for _, x := range list {
		if x != nil && keyOf(x) == keyOf(b) {
			return true
		}
	}
	return false
}
