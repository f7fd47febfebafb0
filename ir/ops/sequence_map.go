package ops

import "github.com/kiln-ml/kiln/ir"

// SequenceMap runs its body once per element of its first input, a
// sequence: each sequence input gives the body its element at that
// position, each tensor input is given whole; every body output becomes a
// sequence output.

var sequenceMapOps = []*Schema{
	{Name: "SequenceMap", Since: 17, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: -1,
		Attrs: []AttrDef{{Name: "body", Kind: ir.AttrGraph, Required: true}},
		Types: controlFlowTypes, Infer: inferSequenceMap, Run: runSequenceMap},
}

func init() { register(takingContainers(sequenceMapOps)) }

func inferSequenceMap(c *InferContext) error {
	body := c.Attr("body").G
	if len(body.Inputs) != len(c.Inputs) || len(body.Outputs) != len(c.Outputs) {
		return c.Errorf("body takes %d inputs and gives %d outputs; the node has %d and %d",
			len(body.Inputs), len(body.Outputs), len(c.Inputs), len(c.Outputs))
	}
	if k := c.In(0).Kind; k != ir.SequenceKind && k != ir.UnknownKind {
		return c.Errorf("input 0 is %s, want a sequence", c.In(0))
	}
	inputs := make([]ir.Type, len(c.Inputs))
	for i, t := range c.Inputs {
		switch {
		case t.Kind == ir.SequenceKind && t.Inner != nil:
			inputs[i] = *t.Inner
		case t.Kind == ir.SequenceKind:
			inputs[i] = ir.Type{}
		default:
			inputs[i] = t
		}
	}
	if _, err := inferBody(c, "body", body, inputs); err != nil {
		return err
	}
	for k, o := range body.Outputs {
		c.Set(k, SequenceType(o.Type))
	}
	return nil
}

func runSequenceMap(c *KernelContext) error {
	if err := needRunner(c); err != nil {
		return err
	}
	body := c.Attr("body").G
	first, err := inSequence(c, 0)
	if err != nil {
		return err
	}
	n := len(first.Elems)
	for i, t := range c.Inputs {
		if t == nil {
			return c.Errorf("input %d is missing", i)
		}
		if t.Kind == ir.SequenceKind && len(t.Elems) != n {
			return c.Errorf("input %d has %d elements, input 0 has %d", i, len(t.Elems), n)
		}
	}
	outs := make([][]*ir.Tensor, len(c.Outputs))
	for j := 0; j < n; j++ {
		in := make([]*ir.Tensor, len(c.Inputs))
		for i, t := range c.Inputs {
			if in[i] = t; t.Kind == ir.SequenceKind {
				in[i] = t.Elems[j]
			}
		}
		res, err := c.RunGraph(body, in)
		if err != nil {
			return err
		}
		for k := range outs {
			outs[k] = append(outs[k], res[k])
		}
	}
	for k := range outs {
		dtype := ir.Undefined
		if o := c.Node.Output(k); o != nil {
			dtype = innerDType(&o.Type)
		}
		if len(outs[k]) > 0 {
			dtype = outs[k][0].DType
		}
		if outs[k] == nil {
			outs[k] = []*ir.Tensor{}
		}
		c.Set(k, ir.NewSequence(dtype, outs[k]))
	}
	return nil
}
