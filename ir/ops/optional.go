package ops

import "github.com/kiln-ml/kiln/ir"

// Optional ops: a value that holds a tensor or a sequence, or nothing. The
// reference executor holds one as an ir.Tensor of Kind OptionalKind whose
// Elems is the value or empty (ir.NewOptional).

var optionalOps = []*Schema{
	{Name: "Optional", Since: 15, MinInputs: 0, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "type", Kind: ir.AttrTypeProto}},
		Types: controlFlowTypes, Infer: inferOptional, Run: runOptional},
	{Name: "OptionalHasElement", Since: 15, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferOptionalHasElement, Run: runOptionalHasElement},
	// From 18 the input may be a tensor or sequence (which always has an
	// element) or left out (which has none).
	{Name: "OptionalHasElement", Since: 18, MinInputs: 0, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferOptionalHasElement, Run: runOptionalHasElement},
	{Name: "OptionalGetElement", Since: 15, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferOptionalGetElement, Run: runOptionalGetElement},
	// From 18 a tensor or sequence input passes through.
	{Name: "OptionalGetElement", Since: 18, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Types: controlFlowTypes, Infer: inferOptionalGetElement, Run: runOptionalGetElement},
}

func init() { register(takingContainers(optionalOps)) }

// OptionalType is the type of an optional holding a value of type elem.
func OptionalType(elem ir.Type) ir.Type {
	e := elem.Clone()
	return ir.Type{Kind: ir.OptionalKind, Inner: &e}
}

func inferOptional(c *InferContext) error {
	has, typed := c.HasInput(0), c.Has("type")
	switch {
	case !has && !typed:
		return c.Errorf("an Optional without an input needs the type attribute")
	case has:
		in := c.In(0)
		if in.Kind == ir.OptionalKind {
			return c.Errorf("input is %s; an optional cannot hold an optional", in)
		}
		if typed && in.Kind != ir.UnknownKind && in.Kind != c.Attr("type").TP.Kind {
			return c.Errorf("input is %s, the type attribute says %s", in, c.Attr("type").TP)
		}
		c.Set(0, OptionalType(in))
	default:
		if c.Attr("type").TP == nil {
			return c.Errorf("the type attribute holds no type")
		}
		c.Set(0, OptionalType(*c.Attr("type").TP))
	}
	return nil
}

// innerDType is the element type of the tensors a type holds, through
// sequences and optionals; Undefined when unknown.
func innerDType(t *ir.Type) ir.DType {
	for t != nil && t.Kind != ir.TensorKind {
		t = t.Inner
	}
	if t == nil {
		return ir.Undefined
	}
	return t.Elem
}

func runOptional(c *KernelContext) error {
	if x := c.In(0); x != nil {
		if x.Kind == ir.OptionalKind {
			return c.Errorf("an optional cannot hold an optional")
		}
		c.Set(0, ir.NewOptional(x.DType, x))
		return nil
	}
	if !c.Has("type") || c.Attr("type").TP == nil {
		return c.Errorf("an Optional without an input needs the type attribute")
	}
	c.Set(0, ir.NewOptional(innerDType(c.Attr("type").TP), nil))
	return nil
}

func inferOptionalHasElement(c *InferContext) error {
	if c.HasInput(0) && c.Opset < 18 {
		if k := c.In(0).Kind; k != ir.OptionalKind && k != ir.UnknownKind {
			return c.Errorf("input is %s, want an optional before opset 18", c.In(0))
		}
	}
	c.Set(0, scalarType(ir.Bool))
	return nil
}

func runOptionalHasElement(c *KernelContext) error {
	x := c.In(0)
	has := x != nil && (x.Kind != ir.OptionalKind || len(x.Elems) > 0)
	c.Set(0, ir.Scalar(ir.Bool, has))
	return nil
}

func inferOptionalGetElement(c *InferContext) error {
	in := c.In(0)
	switch {
	case in.Kind == ir.OptionalKind:
		if in.Inner != nil {
			c.Set(0, in.Inner.Clone())
		}
	case c.Opset < 18 && in.Kind != ir.UnknownKind:
		return c.Errorf("input is %s, want an optional before opset 18", in)
	default:
		c.Set(0, in.Clone())
	}
	return nil
}

func runOptionalGetElement(c *KernelContext) error {
	x := c.In(0)
	if x == nil {
		return c.Errorf("input is missing")
	}
	if x.Kind != ir.OptionalKind {
		c.Set(0, x)
		return nil
	}
	if len(x.Elems) == 0 {
		return c.Errorf("the optional is empty")
	}
	c.Set(0, x.Elems[0])
	return nil
}
