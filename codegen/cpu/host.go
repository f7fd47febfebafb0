package cpu

import (
	"fmt"

	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
)

// HostSteps: the runtime computes the nodes ops.OnHost names (strings,
// image decoding) between runs of this backend's code (lower.HostRunner).
func (lowerTarget) HostSteps() {}

// addHostStep records host step st for the ABI and marks its place among
// the steps: the run ends there (emitParts) and the runtime computes the
// node before it runs the code on.
func (g *gen) addHostStep(st *lower.Step) error {
	n := st.Node
	node, err := cpuabi.NewHostNode(n, g.opsets[n.Domain])
	if err != nil {
		return fmt.Errorf("codegen/cpu: %s: %w", n, err)
	}
	h := cpuabi.HostStep{Node: node, Resume: -1}
	for _, v := range n.Inputs {
		hv, err := g.hostValue(v, true)
		if err != nil {
			return fmt.Errorf("codegen/cpu: %s: input %q: %w", n, v.Name, err)
		}
		h.In = append(h.In, hv)
	}
	for _, v := range n.Outputs {
		hv, err := g.hostValue(v, false)
		if err != nil {
			return fmt.Errorf("codegen/cpu: %s: output %q: %w", n, v.Name, err)
		}
		h.Out = append(h.Out, hv)
	}
	g.host = append(g.host, h)
	g.curNode = n
	g.addMark(&mark{kind: markHost, host: len(g.host) - 1})
	return nil
}

// hostValue is where a host step finds input v or puts output v: its
// constant value, the runtime's table, or the bytes the code reads.
func (g *gen) hostValue(v *ir.Value, input bool) (cpuabi.HostValue, error) {
	if v == nil {
		return cpuabi.HostValue{}, nil
	}
	kinds, dtype := cpuabi.Kinds(v.Type)
	hv := cpuabi.HostValue{Name: v.Name, DType: int(dtype), Kinds: kinds}
	if t := g.prog.ConstOf(v); input && t != nil {
		ht, err := cpuabi.NewHostTensor(t)
		hv.Where, hv.Const = cpuabi.AsConst, ht
		return hv, err
	}
	if g.prog.OnHost(v) {
		hv.Where = cpuabi.InHostTable
		return hv, nil
	}
	hv.Dims, hv.DimNames = dimsOf(v), g.dimNames(v)
	pl, err := g.prog.PlaceOf(v)
	if err != nil {
		return hv, err
	}
	switch pl.Space {
	case lower.InArena:
		hv.Where, hv.Off = cpuabi.InArenaAt, pl.Off
	case lower.InIO:
		hv.Where, hv.Slot, hv.Off = cpuabi.InSlot, pl.Slot, pl.Off
	default:
		return hv, fmt.Errorf("a value in the weights that is not a constant")
	}
	return hv, nil
}
