package ops

import (
	"fmt"

	"github.com/kiln-ml/kiln/ir"
)

// Reference kernels of If, Loop and Scan (controlflow.go).

// needRunner returns the error for a kernel called where no subgraph can
// run.
func needRunner(c *KernelContext) error {
	if c.RunGraph == nil {
		return c.Errorf("the executor cannot run subgraphs")
	}
	return nil
}

// scalarBool reads a cond: one bool element.
func scalarBool(c *KernelContext, what string, t *ir.Tensor) (bool, error) {
	if t == nil || t.DType != ir.Bool || t.Len() != 1 {
		return false, c.Errorf("%s must be one bool, got %s", what, describe(t))
	}
	return t.Int64At(0) != 0, nil
}

func describe(t *ir.Tensor) string {
	if t == nil {
		return "nothing"
	}
	return t.Type().String()
}

func runIf(c *KernelContext) error {
	if err := needRunner(c); err != nil {
		return err
	}
	cond, err := scalarBool(c, "cond", c.In(0))
	if err != nil {
		return err
	}
	name := "else_branch"
	if cond {
		name = "then_branch"
	}
	g := c.Attr(name).G
	if len(g.Outputs) != len(c.Node.Outputs) {
		return c.Errorf("%s has %d outputs but the node has %d", name, len(g.Outputs), len(c.Node.Outputs))
	}
	outs, err := c.RunGraph(g, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Node, name, err)
	}
	for i, t := range outs {
		c.Set(i, t)
	}
	return nil
}

func runLoop(c *KernelContext) error {
	if err := needRunner(c); err != nil {
		return err
	}
	body := c.Attr("body").G
	carried, scans, err := loopShape(c.Node, body)
	if err != nil {
		return err
	}
	trips := int64(-1) // no trip count
	if c.HasInput(0) {
		m := c.In(0)
		if m == nil || m.DType != ir.Int64 || m.Len() != 1 {
			return c.Errorf("trip count M must be one int64, got %s", describe(m))
		}
		trips = m.Int64At(0)
	}
	cond := true
	if c.HasInput(1) {
		if cond, err = scalarBool(c, "cond", c.In(1)); err != nil {
			return err
		}
	}
	state := append([]*ir.Tensor{}, c.Inputs[2:]...)
	steps := make([][]*ir.Tensor, scans)
	limit := c.Limits.OrDefaults().MaxLoopIterations
	for i := int64(0); cond && (trips < 0 || i < trips); i++ {
		if i >= limit {
			return c.Limits.LoopError(c.Node.String())
		}
		in := append([]*ir.Tensor{ir.Scalar(ir.Int64, i), ir.Scalar(ir.Bool, cond)}, state...)
		outs, err := c.RunGraph(body, in)
		if err == nil {
			cond, err = scalarBool(c, "the body's cond output", outs[0])
		}
		if err == nil {
			err = appendSteps(c, steps, outs[1+carried:], i)
		}
		if err != nil {
			return fmt.Errorf("%s iteration %d: %w", c.Node, i, err)
		}
		state = outs[1 : 1+carried]
	}
	for i, t := range state {
		c.Set(i, t)
	}
	for k, parts := range steps {
		t, err := stack(c, c.Node.Outputs[carried+k], parts, 0, body.Outputs[1+carried+k].Type)
		if err != nil {
			return err
		}
		c.Set(carried+k, t)
	}
	return nil
}

// appendSteps adds one iteration's scan outputs, checking that each has the
// shape of the first iteration's and that the stacked output stays within
// the tensor limit (a long loop must not grow one without bound).
func appendSteps(c *KernelContext, steps [][]*ir.Tensor, outs []*ir.Tensor, iter int64) error {
	for k, t := range outs {
		if t == nil {
			return c.Errorf("scan output %d was not computed", k)
		}
		if len(steps[k]) > 0 && !sameShape(steps[k][0], t) {
			return c.Errorf("scan output %d is %s, but %s in the first iteration", k, describe(t), describe(steps[k][0]))
		}
		dims := append([]int64{iter + 1}, t.Dims...)
		if _, err := c.Limits.CheckTensor(fmt.Sprintf("%s: scan output %d", c.Node, k), t.DType, dims); err != nil {
			return err
		}
		steps[k] = append(steps[k], t)
	}
	return nil
}

func sameShape(a, b *ir.Tensor) bool {
	if a.DType != b.DType || len(a.Dims) != len(b.Dims) {
		return false
	}
	for i, d := range a.Dims {
		if b.Dims[i] != d {
			return false
		}
	}
	return true
}

// elemBytes is the byte size of one element for slicing and stacking;
// strings are moved as Strings, sub-byte types are refused.
func elemBytes(c *KernelContext, d ir.DType) (int, error) {
	if d == ir.String {
		return 0, nil
	}
	if d.Size() <= 0 {
		return 0, c.Unsupported(d)
	}
	return d.Size(), nil
}

// stack joins parts of one shape along a new axis. With no parts, the
// output is empty along that axis and takes its other dims from the
// body's declared type (1-D when the type has no static shape).
func stack(c *KernelContext, out *ir.Value, parts []*ir.Tensor, axis int, elem ir.Type) (*ir.Tensor, error) {
	if len(parts) == 0 {
		d := elem.Elem
		if d == ir.Undefined && out != nil {
			d = out.Type.Elem
		}
		dims, ok := elem.Shape.Ints()
		if !ok {
			dims = nil
		}
		return ir.NewTensor(d, insertInt(dims, axis, 0)...), nil
	}
	first := parts[0]
	for i, p := range parts {
		if !sameShape(first, p) {
			return nil, c.Errorf("output %q: part %d is %s but part 0 is %s", nameOf(out), i, describe(p), describe(first))
		}
	}
	dims := insertInt(first.Dims, axis, int64(len(parts)))
	if _, err := c.Limits.CheckTensor(fmt.Sprintf("%s: output %q", c.Node, nameOf(out)), first.DType, dims); err != nil {
		return nil, err
	}
	es, err := elemBytes(c, first.DType)
	if err != nil {
		return nil, err
	}
	t := ir.NewTensor(first.DType, dims...)
	outer := ir.Product(first.Dims[:axis])
	inner := ir.Product(first.Dims[axis:])
	for o := int64(0); o < outer; o++ {
		for p, part := range parts {
			dst := (o*int64(len(parts)) + int64(p)) * inner
			src := o * inner
			if first.DType == ir.String {
				copy(t.Strings[dst:dst+inner], part.Strings[src:src+inner])
				continue
			}
			n := inner * int64(es)
			copy(t.Raw[dst*int64(es):dst*int64(es)+n], part.Raw[src*int64(es):src*int64(es)+n])
		}
	}
	return t, nil
}

// take returns t's slice at index i of axis, without that axis.
func take(c *KernelContext, t *ir.Tensor, axis int, i int64) (*ir.Tensor, error) {
	es, err := elemBytes(c, t.DType)
	if err != nil {
		return nil, err
	}
	dims := append(append([]int64{}, t.Dims[:axis]...), t.Dims[axis+1:]...)
	out := ir.NewTensor(t.DType, dims...)
	outer, n := ir.Product(t.Dims[:axis]), t.Dims[axis]
	inner := ir.Product(t.Dims[axis+1:])
	for o := int64(0); o < outer; o++ {
		src, dst := (o*n+i)*inner, o*inner
		if t.DType == ir.String {
			copy(out.Strings[dst:dst+inner], t.Strings[src:src+inner])
			continue
		}
		k := inner * int64(es)
		copy(out.Raw[dst*int64(es):dst*int64(es)+k], t.Raw[src*int64(es):src*int64(es)+k])
	}
	return out, nil
}

func insertInt(dims []int64, i int, v int64) []int64 {
	if i > len(dims) {
		i = len(dims)
	}
	out := append(append([]int64{}, dims[:i]...), v)
	return append(out, dims[i:]...)
}

func nameOf(v *ir.Value) string {
	if v == nil {
		return ""
	}
	return v.Name
}

func runScan(c *KernelContext) error {
	if err := needRunner(c); err != nil {
		return err
	}
	body := c.Attr("body").G
	s, err := readScanSpec(c.attrs, c.Node, body, 0)
	if err != nil {
		return err
	}
	outs, err := scanOnce(c, body, s, c.Inputs, -1)
	if err != nil {
		return err
	}
	for i, t := range outs {
		c.Set(i, t)
	}
	return nil
}

// scanOnce runs a Scan over inputs (states, then scan inputs) and returns
// the final states and the stacked scan outputs. length < 0 scans the whole
// sequence; Scan 8 passes each batch entry's sequence_lens.
func scanOnce(c *KernelContext, body *ir.Graph, s *scanSpec, inputs []*ir.Tensor, length int64) ([]*ir.Tensor, error) {
	axes := make([]int, s.scanIns)
	seq := int64(-1)
	for j := range axes {
		t := inputs[s.states+j]
		axis, err := normAxis(c.Node, "scan input axis", s.inAxes[j], len(t.Dims))
		if err != nil {
			return nil, err
		}
		axes[j] = axis
		if seq >= 0 && t.Dims[axis] != seq {
			return nil, c.Errorf("scan inputs have sequence lengths %d and %d", seq, t.Dims[axis])
		}
		seq = t.Dims[axis]
	}
	steps := seq
	if length >= 0 {
		if length > seq {
			return nil, c.Errorf("sequence length %d is longer than the inputs' %d", length, seq)
		}
		steps = length
	}
	state := append([]*ir.Tensor{}, inputs[:s.states]...)
	parts := make([][]*ir.Tensor, s.scanOuts)
	for it := int64(0); it < steps; it++ {
		in := append([]*ir.Tensor{}, state...)
		for j, axis := range axes {
			at := it
			if s.inDirs[j] == 1 {
				at = steps - 1 - it
			}
			x, err := take(c, inputs[s.states+j], axis, at)
			if err != nil {
				return nil, err
			}
			in = append(in, x)
		}
		outs, err := c.RunGraph(body, in)
		if err == nil {
			err = appendSteps(c, parts, outs[s.states:], it)
		}
		if err != nil {
			return nil, fmt.Errorf("%s iteration %d: %w", c.Node, it, err)
		}
		state = outs[:s.states]
	}
	result := state
	for k, p := range parts {
		if s.outDirs[k] == 1 {
			p = reversed(p)
		}
		elem := body.Outputs[s.states+k].Type
		axis := 0
		if len(p) > 0 {
			var err error
			if axis, err = normAxis(c.Node, "scan output axis", s.outAxes[k], len(p[0].Dims)+1); err != nil {
				return nil, err
			}
		}
		t, err := stack(c, c.Node.Outputs[s.states+k], p, axis, elem)
		if err != nil {
			return nil, err
		}
		result = append(result, t)
	}
	return result, nil
}

func reversed(ts []*ir.Tensor) []*ir.Tensor {
	out := make([]*ir.Tensor, len(ts))
	for i, t := range ts {
		out[len(ts)-1-i] = t
	}
	return out
}

// runScan8 runs Scan 8: each batch entry is scanned on its own (axis 0 of
// every input and output), its scan outputs zero-padded to the longest
// sequence.
func runScan8(c *KernelContext) error {
	if err := needRunner(c); err != nil {
		return err
	}
	body := c.Attr("body").G
	s, err := readScanSpec(c.attrs, c.Node, body, 1)
	if err != nil {
		return err
	}
	inputs := c.Inputs[1:]
	first := inputs[s.states]
	if len(first.Dims) < 2 {
		return c.Errorf("scan input is %s, want a batch and a sequence axis", describe(first))
	}
	batch, seq := first.Dims[0], first.Dims[1]
	for i, t := range inputs {
		if len(t.Dims) < 1+boolInt(i >= s.states) || t.Dims[0] != batch {
			return c.Errorf("input %d is %s, want batch size %d on axis 0", i+1, describe(t), batch)
		}
	}
	lens, err := scan8Lengths(c, batch, seq)
	if err != nil {
		return err
	}
	s.inAxes = make([]int64, s.scanIns) // axis 1 of the input is 0 of its batch entry
	perBatch := make([][]*ir.Tensor, len(c.Node.Outputs))
	for b := int64(0); b < batch; b++ {
		entry := make([]*ir.Tensor, len(inputs))
		for i, t := range inputs {
			if entry[i], err = take(c, t, 0, b); err != nil {
				return err
			}
		}
		outs, err := scanOnce(c, body, s, entry, lens[b])
		if err != nil {
			return fmt.Errorf("batch %d: %w", b, err)
		}
		for k, t := range outs {
			if k >= s.states {
				t = padSequence(t, seq)
			}
			perBatch[k] = append(perBatch[k], t)
		}
	}
	for k, parts := range perBatch {
		t, err := stack(c, c.Node.Outputs[k], parts, 0, ir.Type{Elem: body.Outputs[k].Type.Elem})
		if err != nil {
			return err
		}
		c.Set(k, t)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scan8Lengths reads Scan 8's optional sequence_lens: one length per batch
// entry, each at most the inputs' sequence length; -1 means all of it.
func scan8Lengths(c *KernelContext, batch, seq int64) ([]int64, error) {
	lens := make([]int64, batch)
	for i := range lens {
		lens[i] = -1
	}
	t := c.In(0)
	if t == nil {
		return lens, nil
	}
	if t.DType != ir.Int64 || t.Len() != batch {
		return nil, c.Errorf("sequence_lens is %s, want int64[%d]", describe(t), batch)
	}
	for i := range lens {
		l := t.Int64At(i)
		if l < 0 || l > seq {
			return nil, c.Errorf("sequence_lens[%d] is %d, want 0 to %d", i, l, seq)
		}
		lens[i] = l
	}
	return lens, nil
}

// padSequence extends a scan output along axis 0 to seq entries with zeros.
func padSequence(t *ir.Tensor, seq int64) *ir.Tensor {
	if len(t.Dims) == 0 || t.Dims[0] >= seq {
		return t
	}
	dims := append([]int64{seq}, t.Dims[1:]...)
	out := ir.NewTensor(t.DType, dims...)
	if t.DType == ir.String {
		copy(out.Strings, t.Strings)
	} else {
		copy(out.Raw, t.Raw)
	}
	return out
}
