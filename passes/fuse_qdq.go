package passes

import (
	"fmt"
	"slices"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// maxTableBody bounds the elementwise chain a lookup-table group absorbs.
const maxTableBody = 16

// fuseQDQPass groups each quantized op with the DequantizeLinear nodes
// feeding it and the QuantizeLinear taking its result into a FusionGroup
// whose body is the float simulation (the semantics, run by the reference)
// and whose roles say what each body node is, so that a backend computes
// the group with integer kernels (the contract: ir/ops/kiln_groups.go;
// which ops have one: ops.Int8Of):
//
//   - "qconv", "qgemm", "qmatmul": dq-input, dq-weight, optional dq-bias,
//     base, optional dq-residual + residual, optional activation (Relu or
//     Clip with constant bounds), q-output. Weights are constant int8 with
//     zero point 0, per tensor or per output channel; a bias is an int32
//     constant's dequantization or a float constant the base reads.
//   - "qadd", "qmul": dq-input, dq-input, base, optional activation,
//     q-output.
//   - "qpool": dq-input, base (AveragePool, GlobalAveragePool), q-output.
//   - "qlut": dq-input, base…, q-output: an elementwise DAG of one
//     quantized input and single-element constants, which a backend
//     computes as a 256-entry table.
//
// Activations are per-tensor uint8 or int8 with constant parameters. A
// DequantizeLinear read also outside the group is copied into it. The
// target may refuse a group it has no kernel for (Target.QuantizedKernel).
func fuseQDQPass(c *Context, m *ir.Model) error {
	f, err := newFuser(c, m)
	if err != nil {
		return err
	}
	var groups []group
	add := func(q *qgroup) {
		if q == nil || !c.target().QuantizedKernel(q.kind, q.nodes, q.roles) {
			return
		}
		groups = append(groups, f.take(q))
	}
	for _, n := range m.Graph.Nodes {
		if n.Domain != "" || f.taken[n] {
			continue
		}
		switch kind := ops.Int8Of(n).Kind; kind {
		case ops.GroupQConv, ops.GroupQGemm, ops.GroupQMatMul:
			add(f.quantizedLinear(n, kind))
		case ops.GroupQAdd, ops.GroupQMul:
			add(f.quantizedBinary(n, kind))
		case ops.GroupQPool:
			add(f.quantizedPool(n))
		}
	}
	for _, n := range m.Graph.Nodes {
		if _, ok := f.quantizer(n); ok {
			add(f.lookupTable(n))
		}
	}
	f.apply(groups)
	return nil
}

// qgroup is a quantized group being matched: its nodes, their roles and,
// for each dequantization, the body node reading it (nil: all that do).
type qgroup struct {
	f       *fuser
	kind    ops.GroupKind
	nodes   []*ir.Node
	roles   []ops.Role
	readers []*ir.Node
}

func (q *qgroup) add(n *ir.Node, role ops.Role) { q.addRead(n, role, nil) }

func (q *qgroup) addRead(n *ir.Node, role ops.Role, reader *ir.Node) {
	q.nodes, q.roles, q.readers = append(q.nodes, n), append(q.roles, role), append(q.readers, reader)
}

// take marks a matched group's nodes taken. A dequantization read also
// outside its role (elsewhere in the graph, or by a second role: the same
// input as Conv operand and residual) gets a copy for the role.
func (f *fuser) take(q *qgroup) group {
	for i, n := range q.nodes {
		if !q.roles[i].Dequantizes() {
			continue
		}
		readers := q.nodes
		if r := q.readers[i]; r != nil {
			readers = []*ir.Node{r}
		}
		if f.onlyUsedBy(n.Outputs[0], readers) && !slices.Contains(q.nodes[:i], n) {
			continue
		}
		c := f.copyNode(n)
		for _, r := range readers {
			for k, v := range r.Inputs {
				if v == n.Outputs[0] {
					r.Inputs[k] = c.Outputs[0]
				}
			}
		}
		q.nodes[i] = c
	}
	for _, n := range q.nodes {
		f.taken[n] = true
	}
	return group{kind: q.kind, nodes: q.nodes, roles: q.roles}
}

// copyNode returns a copy of single-output n writing a fresh value: the
// first copy of X is named X_copy, the k-th X_copyk (each made unique).
func (f *fuser) copyNode(n *ir.Node) *ir.Node {
	if f.copies == nil {
		f.copies = map[string]int{}
	}
	x := n.Outputs[0].Name
	base := x + "_copy"
	if k := f.copies[x]; k > 0 {
		base = fmt.Sprintf("%s_copy%d", x, k)
	}
	f.copies[x]++
	name := f.names().Unique(base)
	c := &ir.Node{Name: n.Name, OpType: n.OpType, Domain: n.Domain, Inputs: slices.Clone(n.Inputs), Attrs: n.Attrs}
	c.Outputs = []*ir.Value{{Name: name, Type: n.Outputs[0].Type, Producer: c}}
	return c
}

// quantizedLinear matches a qconv, qgemm or qmatmul group around p.
func (f *fuser) quantizedLinear(p *ir.Node, kind ops.GroupKind) *qgroup {
	if len(p.Outputs) != 1 || p.Outputs[0].Type.Elem != ir.Float32 || len(p.Inputs) < 2 {
		return nil
	}
	q := &qgroup{f: f, kind: kind}
	dx := p.Inputs[0].Producer
	if _, ok := f.dequantizer(dx); !ok {
		return nil
	}
	q.addRead(dx, ops.RoleDQInput, p)
	axis, ok := f.outputChannelAxis(p)
	dw := p.Inputs[1].Producer
	if !ok || !f.weightDequantizer(dw, ir.Int8, axis) {
		return nil
	}
	q.addRead(dw, ops.RoleDQWeight, p)
	if b := p.Input(2); b != nil {
		switch db := b.Producer; {
		case f.weightDequantizer(db, ir.Int32, 0):
			q.addRead(db, ops.RoleDQBias, p)
		case f.constOf(b) == nil || b.Type.Elem != ir.Float32:
			return nil
		}
	}
	q.add(p, ops.RoleBase)
	if !q.epilogue(p.Outputs[0], true) {
		return nil
	}
	return q
}

// epilogue adds what follows the base computing v: a residual Add of a
// dequantized tensor of v's shape (when residual is allowed), a clamp
// (Relu, or Clip with constant bounds) and the QuantizeLinear every group
// ends with. It reports whether that QuantizeLinear is there.
func (q *qgroup) epilogue(v *ir.Value, residual bool) bool {
	f := q.f
	if u := f.single(v); residual && f.is(u, "Add") {
		r := other(u, v)
		if _, ok := f.dequantizer(r.Producer); ok && r.Type.Shape.IsStatic() && r.Type.Shape.Equal(v.Type.Shape) {
			q.addRead(r.Producer, ops.RoleDQResidual, u)
			q.add(u, ops.RoleResidual)
			v = u.Outputs[0]
		}
	}
	if u := f.single(v); f.is(u, "Relu") || f.is(u, "Clip") && f.constClip(u) {
		q.add(u, ops.RoleActivation)
		v = u.Outputs[0]
	}
	u := f.single(v)
	if _, ok := f.quantizer(u); !ok {
		return false
	}
	q.add(u, ops.RoleQOutput)
	return true
}

// outputChannelAxis returns the axis of linear op p's weights that runs
// over its output channels.
func (f *fuser) outputChannelAxis(p *ir.Node) (int64, bool) {
	w, ok := staticDims(p.Inputs[1])
	switch {
	case !ok:
		return 0, false
	case p.OpType == "Conv":
		return 0, len(w) >= 3
	case p.OpType == "MatMul":
		return 1, len(w) == 2
	case attrInt(p, "transB", 0) != 0:
		return 0, len(w) == 2
	}
	return 1, len(w) == 2
}

// weightDequantizer reports whether n dequantizes a constant of type elem
// with zero points 0 (or none) and a float32 scale per tensor or one per
// element of axis.
func (f *fuser) weightDequantizer(n *ir.Node, elem ir.DType, axis int64) bool {
	if n == nil || n.OpType != "DequantizeLinear" || n.Domain != "" || f.taken[n] || n.Outputs[0].Type.Elem != ir.Float32 {
		return false
	}
	w, s := f.constOf(n.Inputs[0]), f.constOf(n.Inputs[1])
	if w == nil || w.DType != elem || s == nil || s.DType != ir.Float32 || attrInt(n, "block_size", 0) != 0 {
		return false
	}
	if s.Len() != 1 {
		a := attrInt(n, "axis", 1)
		if a < 0 {
			a += int64(len(w.Dims))
		}
		if len(s.Dims) != 1 || a != axis || a >= int64(len(w.Dims)) || s.Dims[0] != w.Dims[a] {
			return false
		}
	}
	for _, x := range s.Float32s() {
		if !(x > 0) {
			return false
		}
	}
	if zv := n.Input(2); zv != nil {
		z := f.constOf(zv)
		if z == nil || z.DType != elem {
			return false
		}
		for i := range int(z.Len()) {
			if z.Int64At(i) != 0 {
				return false
			}
		}
	}
	return true
}

// quantizedBinary matches a qadd or qmul group around p: both operands
// dequantized (per tensor), the result clamped at most and quantized.
func (f *fuser) quantizedBinary(p *ir.Node, kind ops.GroupKind) *qgroup {
	if len(p.Inputs) != 2 || p.Inputs[0] == p.Inputs[1] || p.Outputs[0].Type.Elem != ir.Float32 {
		return nil
	}
	q := &qgroup{f: f, kind: kind}
	for _, v := range p.Inputs {
		if _, ok := f.dequantizer(v.Producer); !ok {
			return nil
		}
		q.addRead(v.Producer, ops.RoleDQInput, p)
	}
	q.add(p, ops.RoleBase)
	if !q.epilogue(p.Outputs[0], false) {
		return nil
	}
	return q
}

// quantizedPool matches a qpool group around average pooling p.
func (f *fuser) quantizedPool(p *ir.Node) *qgroup {
	if len(p.Outputs) != 1 || p.Outputs[0].Type.Elem != ir.Float32 {
		return nil
	}
	q := &qgroup{f: f, kind: ops.GroupQPool}
	if _, ok := f.dequantizer(p.Inputs[0].Producer); !ok {
		return nil
	}
	q.addRead(p.Inputs[0].Producer, ops.RoleDQInput, p)
	q.add(p, ops.RoleBase)
	u := f.single(p.Outputs[0])
	if _, ok := f.quantizer(u); !ok {
		return nil
	}
	q.add(u, ops.RoleQOutput)
	return q
}

// lookupTable matches a qlut group ending in QuantizeLinear qn: the
// elementwise nodes computing its input from one per-tensor
// DequantizeLinear and single-element constants, each read only inside.
func (f *fuser) lookupTable(qn *ir.Node) *qgroup {
	var src *ir.Node
	var body []*ir.Node
	seen := map[*ir.Node]bool{}
	var visit func(v *ir.Value) bool
	visit = func(v *ir.Value) bool {
		n := v.Producer
		if _, ok := f.dequantizer(n); ok {
			if src == nil {
				src = n
			}
			return src == n
		}
		if n == nil || seen[n] {
			return n != nil
		}
		if n.Domain != "" || f.taken[n] || len(n.Outputs) != 1 || !f.opsets.Elementwise(n) || len(body) == maxTableBody {
			return false
		}
		seen[n] = true
		for _, in := range n.Inputs {
			if t := f.constOf(in); in == nil || t != nil && t.Len() == 1 {
				continue
			}
			if !visit(in) {
				return false
			}
		}
		body = append(body, n) // after its operands: an evaluation order
		return true
	}
	if !visit(qn.Inputs[0]) || len(body) == 0 {
		return nil
	}
	for _, n := range body {
		if f.outSet[n.Outputs[0]] || !f.onlyUsedBy(n.Outputs[0], append(body, qn)) {
			return nil
		}
	}
	q := &qgroup{f: f, kind: ops.GroupQLut}
	q.add(src, ops.RoleDQInput)
	for _, n := range body {
		q.add(n, ops.RoleBase)
	}
	q.add(qn, ops.RoleQOutput)
	return q
}
