package lower

import (
	"errors"
	"fmt"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// A Scan runs as a Loop whose trip count is its scan inputs' length
// along their axes (static): its region's slots hold the iteration
// number, a condition that stays true, the trip count, the states and
// one slice of each scan input. Each iteration loads the slices (from
// the end for a reverse direction), runs the body, stores each scan
// output's value along its axis of the node's output (from the end for
// a reverse direction) and copies the states for the next one, as a
// Loop does its carried values. Scan 8 compiles for a batch of one
// without sequence_lens (its batch axis is then only a leading 1).

func (d *driver) buildScan(n *ir.Node, opsets ops.Opsets) (*Step, error) {
	spec, err := ops.ScanSpecOf(n, opsets)
	if err != nil {
		return nil, err
	}
	body := n.Attr("body").G
	if spec.Batched {
		if err := batchOfOne(n, spec); err != nil {
			return nil, err
		}
	}
	for _, v := range body.Inputs {
		if v.Type.Kind != ir.TensorKind || !v.Type.Shape.IsStatic() {
			return nil, fmt.Errorf("body input %q is %s: compiled scans take tensors of static shapes", v.Name, v.Type)
		}
	}
	trip, err := scanLength(n, spec)
	if err != nil {
		return nil, err
	}
	name := n.Outputs[0].Name + ".scan"
	slot := func(suffix string, dt ir.DType) *ir.Value {
		return &ir.Value{Name: name + "_" + suffix, Type: ir.TensorType(dt, ir.S())}
	}
	iter, cond, tripV := slot("iter", ir.Int64), slot("cond", ir.Bool), slot("trip", ir.Int64)
	c := &Control{Kind: ControlLoop, Iter: d.p.Buffer(iter), CondIn: d.p.Buffer(cond), Trip: d.p.Buffer(tripV),
		in: append([]*ir.Value{iter, cond, tripV}, body.Inputs...), graphs: []*ir.Graph{body}}
	c.Init = []*Step{setStep(c.Iter, kernel.IntConst(ir.Int64, 0)), setStep(c.CondIn, kernel.IntConst(ir.Bool, 1)),
		setStep(c.Trip, kernel.IntConst(ir.Int64, trip))}
	states := body.Inputs[:spec.States]
	for i, v := range states {
		cp, err := d.copyStep(n.Inputs[spec.First+i], v, opsets)
		if err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
		c.Init = append(c.Init, cp...)
	}
	// position is the slice an iteration reads or writes.
	position := func(reverse int64) *kernel.Expr {
		if reverse == 1 {
			return kernel.Sub(kernel.C(trip-1), kernel.Load(c.Iter))
		}
		return kernel.Load(c.Iter)
	}
	var steps []*Step
	for i := 0; i < spec.ScanInputs; i++ {
		in, slice := d.p.Buffer(n.Inputs[spec.First+spec.States+i]), d.p.Buffer(body.Inputs[spec.States+i])
		idx := sliceIndex(len(in.Dims), int(spec.InputAxes[i]), position(spec.InputDirections[i]), spec.Batched)
		k := &kernel.Kernel{Name: SymbolName(slice.Name) + "_slice", Out: slice, Space: slice.Dims, Value: kernel.Load(in, idx...)}
		steps = append(steps, &Step{Parts: []Part{{Kernel: k}}})
	}
	bodySteps, err := d.buildSteps(body.Nodes, opsets)
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	steps = append(steps, bodySteps...)
	for k := 0; k < spec.ScanOutputs; k++ {
		so, out := body.Outputs[spec.States+k], n.Outputs[spec.States+k]
		if ir.Product(dimsOf(so))*trip != ir.Product(dimsOf(out)) {
			return nil, fmt.Errorf("scan output %q is %s, its body's value %s: want %d of them", out.Name, out.Type, so.Type, trip)
		}
		idx := sliceIndex(len(dimsOf(out)), int(spec.OutputAxes[k]), position(spec.OutputDirections[k]), spec.Batched)
		steps = append(steps, d.storeSlice(d.p.Buffer(so), d.p.Buffer(out), c.Iter, idx, nil))
	}
	next, err := d.nextSteps(body, states, body.Outputs[:spec.States], opsets)
	if err != nil {
		return nil, err
	}
	steps = append(append(steps, next...), setStep(c.Iter, kernel.Add(kernel.Load(c.Iter), kernel.IntConst(ir.Int64, 1))))
	c.Bodies = [][]*Step{steps}
	for i, v := range states {
		cp, err := d.copyStep(v, n.Outputs[i], opsets)
		if err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
		c.Final = append(c.Final, cp...)
	}
	return &Step{Node: n, Control: c}, nil
}

// scanLength is the number of iterations: the scan inputs' common length
// along their axes.
func scanLength(n *ir.Node, spec *ops.ScanSpec) (int64, error) {
	trip := int64(-1)
	for i := 0; i < spec.ScanInputs; i++ {
		v := n.Inputs[spec.First+spec.States+i]
		dims := dimsOf(v)
		axis := spec.InputAxes[i]
		if axis < 0 || axis >= int64(len(dims)) {
			return 0, fmt.Errorf("scan input %q is %s, without its axis %d", v.Name, v.Type, axis)
		}
		if trip >= 0 && dims[axis] != trip {
			return 0, fmt.Errorf("the scan inputs' lengths differ: %d and %d (%q along axis %d)", trip, dims[axis], v.Name, axis)
		}
		trip = dims[axis]
	}
	if trip < 0 {
		return 0, errors.New("a Scan without scan inputs")
	}
	return trip, nil
}

// batchOfOne refuses a Scan 8 that does not run as a Scan 9: one with
// sequence_lens (each batch entry's own length) or a batch of more than
// one.
func batchOfOne(n *ir.Node, spec *ops.ScanSpec) error {
	if n.Input(0) != nil {
		return fmt.Errorf("Scan 8 with sequence_lens %q is not compiled (each batch entry's own length); without it, or Scan 9, is", n.Input(0).Name)
	}
	for _, v := range n.Inputs[spec.First:] {
		if d := dimsOf(v); len(d) == 0 || d[0] != 1 {
			return fmt.Errorf("Scan 8 input %q is %s: a batch of other than one is not compiled (Scan 9 is)", v.Name, v.Type)
		}
	}
	return nil
}
