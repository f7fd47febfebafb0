package lower

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// HostRunner is a target whose engines run host steps: the nodes
// ops.OnHost names (strings, image decoding) are computed by the runtime,
// in Go, between runs of the target's code. A host step is a Step with
// Host set and no parts. The values only host steps read and write
// (Program.OnHost) have no bytes in the arena or the weights: the
// runtime keeps them, and their slots are marked Host.
type HostRunner interface {
	HostSteps()
}

// OnHost reports whether value v lives with the runtime, not in the
// target's memory: a string, a sequence or an optional (ops.HostValue),
// or what a host step computes at a shape only the data gives. Only host
// steps read such values.
func (p *Program) OnHost(v *ir.Value) bool {
	if v == nil {
		return false
	}
	if ops.HostValue(v.Type) {
		return true
	}
	return v.Producer != nil && ops.OnHost(v.Producer) && !v.Type.Shape.IsStatic()
}

// hostSlot reports whether graph input or output v is a host slot: its
// value lives with the runtime (OnHost) and the target can run host
// steps.
func (d *driver) hostSlot(v *ir.Value) bool {
	_, ok := d.t.(HostRunner)
	return ok && d.p.OnHost(v)
}

// supportHost makes node n, which ops.OnHost names, a host step, or says
// why it cannot be one: the target runs no host steps, or n is inside a
// subgraph (host steps run between runs of the code, at the graph's top
// level).
func (d *driver) supportHost(n *ir.Node, opsets ops.Opsets) error {
	ue := &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain]}
	if _, ok := d.t.(HostRunner); !ok {
		ue.Reason = "it reads or writes strings or decodes images, which engines compute on the host, and this target runs no host steps (the CPU targets do)"
		return ue
	}
	if !d.top[n] {
		ue.Reason = "it reads or writes strings or decodes images, which engines compute on the host between runs of the code, and it is inside an If, Loop or Scan"
		return ue
	}
	for _, a := range n.Attrs {
		if a.G != nil || len(a.Graphs) > 0 {
			ue.Reason = fmt.Sprintf("a host step with a subgraph (attribute %q)", a.Name)
			return ue
		}
	}
	d.built[n] = &Step{Node: n, Host: true}
	return nil
}

// readsHostValue says which value a native node n reads that lives with
// the runtime (OnHost), or returns nil.
func (d *driver) readsHostValue(n *ir.Node, opsets ops.Opsets) error {
	for _, v := range n.Inputs {
		if v == nil || !d.p.OnHost(v) {
			continue
		}
		ue := &ops.UnsupportedError{Domain: n.Domain, Op: n.OpType, Opset: opsets[n.Domain]}
		if ops.HostValue(v.Type) {
			ue.Reason = fmt.Sprintf("it reads %q, a %s, which engines keep on the host, where only the nodes that compute on strings, sequences and optionals run (not control flow)", v.Name, v.Type)
		} else {
			ue.Reason = fmt.Sprintf("it reads %q, which %s computes on the host at a shape only the data gives (%s): native code reads values of shapes it can bound", v.Name, v.Producer.OpType, v.Type)
		}
		return ue
	}
	return nil
}
