package ops

import "github.com/kiln-ml/kiln/ir"

// Comparisons, logical ops and Where. Comparisons with NaN are false
// (unordered satisfies none of the predicates).

var (
	boolTypes = []ir.DType{ir.Bool}
	// Equal takes bool since opset 7, and string since opset 19.
	equalTypes = concatTypes(numericTypes, []ir.DType{ir.Bool, ir.String})
)

var logicOps = concatRows(
	predicateRows(
		predicateOp{name: "Equal", since: 7, types: equalTypes, cmp: func(o int) bool { return o == 0 }},
		predicateOp{name: "Less", since: 7, types: numericTypes, cmp: func(o int) bool { return o == -1 }},
		predicateOp{name: "LessOrEqual", since: 12, types: numericTypes, cmp: func(o int) bool { return o == -1 || o == 0 }},
		predicateOp{name: "Greater", since: 7, types: numericTypes, cmp: func(o int) bool { return o == 1 }},
		predicateOp{name: "GreaterOrEqual", since: 12, types: numericTypes, cmp: func(o int) bool { return o == 1 || o == 0 }},
		predicateOp{name: "And", since: 7, types: boolTypes, logic: func(a, b bool) bool { return a && b }},
		predicateOp{name: "Or", since: 7, types: boolTypes, logic: func(a, b bool) bool { return a || b }},
		predicateOp{name: "Xor", since: 7, types: boolTypes, logic: func(a, b bool) bool { return a != b }},
		predicateOp{name: "Not", since: 1, types: boolTypes, logic: func(a, _ bool) bool { return !a }, unary: true},
	),
	[]*Schema{{Name: "Where", Elementwise: true, Since: 9, MinInputs: 3, MaxInputs: 3, MinOutputs: 1, MaxOutputs: 1,
		Types: boolTypes, Infer: inferWhere, Run: runWhere}},
)

func init() { register(logicOps) }

func inferWhere(c *InferContext) error {
	if e := c.In(0).Elem; e != ir.Undefined && e != ir.Bool {
		return c.Errorf("condition is %s, want bool", e)
	}
	elem, err := commonElem(c.In(1), c.In(2))
	if err != nil {
		return c.Errorf("%v", err)
	}
	shape, err := broadcastTypes(c.In(0), c.In(1), c.In(2))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

// runWhere takes each output element from x or y: both are gathered
// through their broadcast index maps, then y's elements replace x's where
// the condition is false. One code path serves every dtype and strings.
func runWhere(c *KernelContext) error {
	cond, x, y := c.In(0), c.In(1), c.In(2)
	if cond.DType != ir.Bool {
		return c.Errorf("condition is %s, want bool", cond.DType)
	}
	if x.DType != y.DType {
		return c.Errorf("inputs 1 and 2 are %s and %s, want one type", x.DType, y.DType)
	}
	if !movable(x.DType) {
		return c.Unsupported(x.DType)
	}
	dims, idx, err := broadcastTensors(cond, x, y)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := takeElems(x, dims, idx[1], nil)
	other := takeElems(y, dims, idx[2], nil)
	pick := Bools(cond)
	size := x.DType.Size()
	for k, j := range idx[0] {
		switch {
		case pick[j]:
		case x.DType == ir.String:
			out.Strings[k] = other.Strings[k]
		default:
			copy(out.Raw[k*size:(k+1)*size], other.Raw[k*size:])
		}
	}
	c.Set(0, out)
	return nil
}
