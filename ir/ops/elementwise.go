package ops

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/ir"
)

// The elementwise family. Most of its ops have one of four shapes, each a
// table of small per-op functions that one builder turns into schema rows:
//
//	unaryOp      y = f(x)                  math, activations, IsNaN, IsInf
//	binaryOp     c = a ∘ b, broadcast      Add Sub Mul Div Pow Mod, PRelu
//	predicateOp  bool c = a ∘ b            comparisons; And Or Xor Not
//	variadicOp   y = x1 ∘ x2 ∘ ... ∘ xn    Max Min Sum Mean
//
// The tables are in elementwise_math.go, elementwise_logic.go and
// activation.go; the ops with signatures of their own (Cast, Clip, Dropout,
// Identity, Where) are in elementwise_misc.go.
//
// Kernels compute floating types in float64 and integer types exactly, in
// int64 or uint64: float64 cannot hold every int64, and uint64 values above
// MaxInt64 order and divide differently from their int64 bit patterns. So an
// op gives one function per number representation, usually one generic
// function instantiated three times, never one per dtype.

// kernelNum is what the kernels compute in.
type kernelNum interface{ ~int64 | ~uint64 | ~float64 }

// kernelInt is the exact representations of the integer types.
type kernelInt interface{ ~int64 | ~uint64 }

// unaryOp is an op with one input and one output of its shape.
type unaryOp struct {
	name  string
	since int64
	types []ir.DType
	attrs []AttrDef
	// boolOut makes the output bool (IsNaN, IsInf); f returns 0 or 1.
	boolOut bool
	// f maps floats; it reads the node's attributes once per kernel call.
	f func(a attrs) func(x float64) float64
	// i and u map signed and unsigned integers exactly. When nil, integers
	// go through f and are truncated back (Erf, Shrink).
	i func(x int64) int64
	u func(x uint64) uint64
}

// pure is f for ops without attributes.
func pure(f func(float64) float64) func(attrs) func(float64) float64 {
	return func(attrs) func(float64) float64 { return f }
}

func unaryRows(ops ...unaryOp) []*Schema {
	rows := make([]*Schema, len(ops))
	for k, op := range ops {
		rows[k] = &Schema{Elementwise: true, Name: op.name, Since: op.since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
			Attrs: op.attrs, Types: op.types, Infer: op.infer, Run: op.run}
	}
	return rows
}

func (op unaryOp) infer(c *InferContext) error {
	t := c.In(0).Clone()
	if op.boolOut {
		t = ir.TensorType(ir.Bool, t.Shape)
	}
	c.Set(0, t)
	return nil
}

func (op unaryOp) run(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	out := x.DType
	if op.boolOut {
		out = ir.Bool
	}
	c.Set(0, mapElems(x, out, op.f(c.attrs), op.i, op.u))
	return nil
}

// mapElems applies an elementwise function to a numeric tensor, exactly
// for integers when i (signed) or u (unsigned) is given, else through f.
// The result has dtype out and x's shape.
func mapElems(x *ir.Tensor, out ir.DType, f func(float64) float64, i func(int64) int64, u func(uint64) uint64) *ir.Tensor {
	switch {
	case i != nil && x.DType.IsSigned():
		v := Int64s(x)
		for k, e := range v {
			v[k] = i(e)
		}
		return FromInt64s(out, x.Dims, v)
	case u != nil && x.DType.IsUnsigned():
		v := Int64s(x) // uint64 bit patterns, converted back losslessly
		for k, e := range v {
			v[k] = int64(u(uint64(e)))
		}
		return FromInt64s(out, x.Dims, v)
	}
	v := Float64s(x)
	for k, e := range v {
		v[k] = f(e)
	}
	return FromFloat64s(out, x.Dims, v)
}

// arith is a function of two numbers in each representation.
type arith struct {
	f func(a, b float64) float64
	i func(a, b int64) int64
	u func(a, b uint64) uint64
	// check rejects integer operands that have no result (a zero divisor)
	// before i or u sees them: a model error, not a panic.
	check func(a, b int64) error
}

// fixed is binaryOp.arith for ops whose function has no attributes.
func fixed(ar arith) func(attrs) (arith, error) {
	return func(attrs) (arith, error) { return ar, nil }
}

// binaryOp is an op c = a ∘ b with multidirectional broadcasting.
type binaryOp struct {
	name  string
	since int64
	types []ir.DType
	attrs []AttrDef
	// mixed lets b have another element type than a (Pow's exponent); the
	// output has a's.
	mixed bool
	// toA makes broadcasting unidirectional: b broadcasts to a's shape,
	// which is the output's (PRelu's slope).
	toA   bool
	arith func(a attrs) (arith, error)
}

func binaryRows(ops ...binaryOp) []*Schema {
	rows := make([]*Schema, len(ops))
	for k, op := range ops {
		rows[k] = &Schema{Elementwise: true, Name: op.name, Since: op.since, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
			Attrs: op.attrs, Types: op.types, Infer: op.infer, Run: op.run}
	}
	return rows
}

func (op binaryOp) infer(c *InferContext) error {
	a, b := c.In(0), c.In(1)
	elem := a.Elem
	if !op.mixed {
		var err error
		if elem, err = commonElem(a, b); err != nil {
			return c.Errorf("%v", err)
		}
	}
	shape, err := broadcastTypes(a, b)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if op.toA {
		if shape, err = broadcastsToFirst(a.Shape, shape); err != nil {
			return c.Errorf("%v", err)
		}
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

func (op binaryOp) run(c *KernelContext) error {
	a, b := c.In(0), c.In(1)
	if err := checkType(c, a.DType); err != nil {
		return err
	}
	if !op.mixed && b.DType != a.DType {
		return c.Errorf("inputs are %s and %s, want one type", a.DType, b.DType)
	}
	if !b.DType.IsFloat() && !b.DType.IsInt() {
		return c.Unsupported(b.DType)
	}
	ar, err := op.arith(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	dims, idx, err := broadcastTensors(a, b)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if op.toA && !slices.Equal(dims, a.Dims) {
		return c.Errorf("input 1 of shape %v does not broadcast to input 0's shape %v", ir.FormatList(b.Dims), ir.FormatList(a.Dims))
	}
	ia, ib := idx[0], idx[1]
	// Integers are exact only when both operands are: an integer base with
	// a float exponent goes through float64 and is truncated back.
	if a.DType.IsInt() && b.DType.IsInt() && (a.DType.IsSigned() && ar.i != nil || a.DType.IsUnsigned() && ar.u != nil) {
		x, y := Int64s(a), Int64s(b)
		out := make([]int64, len(ia))
		for k := range out {
			p, q := x[ia[k]], y[ib[k]]
			if ar.check != nil {
				if err := ar.check(p, q); err != nil {
					return c.Errorf("%v", err)
				}
			}
			if a.DType.IsUnsigned() {
				out[k] = int64(ar.u(uint64(p), uint64(q)))
			} else {
				out[k] = ar.i(p, q)
			}
		}
		c.Set(0, FromInt64s(a.DType, dims, out))
		return nil
	}
	x, y := Float64s(a), Float64s(b)
	out := make([]float64, len(ia))
	for k := range out {
		out[k] = ar.f(x[ia[k]], y[ib[k]])
	}
	c.Set(0, FromFloat64s(a.DType, dims, out))
	return nil
}

// unordered is the order of two values of which one is NaN.
const unordered = 2

// predicateOp is an op with a bool output: a comparison of two tensors of
// one type, or a logical op on bools (Not takes one input).
type predicateOp struct {
	name  string
	since int64
	types []ir.DType
	// cmp decides from the order of a and b: -1, 0, +1, or unordered.
	cmp func(order int) bool
	// logic combines bools; Not ignores b.
	logic func(a, b bool) bool
	unary bool
}

func predicateRows(ops ...predicateOp) []*Schema {
	rows := make([]*Schema, len(ops))
	for k, op := range ops {
		n := 2
		if op.unary {
			n = 1
		}
		rows[k] = &Schema{Elementwise: true, Name: op.name, Since: op.since, MinInputs: n, MaxInputs: n, MinOutputs: 1, MaxOutputs: 1,
			Types: op.types, Infer: op.infer, Run: op.run}
	}
	return rows
}

func (op predicateOp) infer(c *InferContext) error {
	ins := c.Inputs[:len(c.Node.Inputs)]
	elem, err := commonElem(ins...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if op.logic != nil && elem != ir.Undefined && elem != ir.Bool {
		return c.Errorf("takes bool inputs, got %s", elem)
	}
	shape, err := broadcastTypes(ins...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(ir.Bool, shape))
	return nil
}

func (op predicateOp) run(c *KernelContext) error {
	ins := c.Inputs[:len(c.Node.Inputs)]
	for _, t := range ins {
		if t.DType != ins[0].DType {
			return c.Errorf("inputs are %s and %s, want one type", ins[0].DType, t.DType)
		}
	}
	if err := checkType(c, ins[0].DType); err != nil {
		return err
	}
	dims, idx, err := broadcastTensors(ins...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := make([]bool, ir.Product(dims))
	if op.cmp != nil {
		order := orderer(ins[0], ins[1])
		for k := range out {
			out[k] = op.cmp(order(idx[0][k], idx[1][k]))
		}
	} else {
		x, ix := Bools(ins[0]), idx[0]
		y, iy := x, ix
		if !op.unary {
			y, iy = Bools(ins[1]), idx[1]
		}
		for k := range out {
			out[k] = op.logic(x[ix[k]], y[iy[k]])
		}
	}
	c.Set(0, FromBools(dims, out))
	return nil
}

// orderer returns a function giving the order of a's element i against
// b's element j (a and b have one dtype).
func orderer(a, b *ir.Tensor) func(i, j int) int {
	switch {
	case a.DType == ir.String:
		x, y := a.Strings, b.Strings
		return func(i, j int) int { return strings.Compare(x[i], y[j]) }
	case a.DType.IsFloat():
		x, y := Float64s(a), Float64s(b)
		return func(i, j int) int {
			if math.IsNaN(x[i]) || math.IsNaN(y[j]) {
				return unordered
			}
			return cmp.Compare(x[i], y[j])
		}
	}
	x, y := orderKeys(a), orderKeys(b)
	return func(i, j int) int { return cmp.Compare(x[i], y[j]) }
}

// variadicOp folds one or more inputs, broadcast together, with an arith.
type variadicOp struct {
	name  string
	since int64
	types []ir.DType
	arith arith
	// mean divides the fold by the number of inputs.
	mean bool
}

// Before opset 8 these ops took inputs of one shape; broadcasting gives the
// same result on every such model, so one row serves both.
func variadicRows(ops ...variadicOp) []*Schema {
	rows := make([]*Schema, len(ops))
	for k, op := range ops {
		rows[k] = &Schema{Elementwise: true, Name: op.name, Since: op.since, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
			Types: op.types, Infer: op.infer, Run: op.run}
	}
	return rows
}

func (op variadicOp) infer(c *InferContext) error {
	for i := range c.Node.Inputs {
		if !c.HasInput(i) {
			return c.Errorf("input %d is missing", i)
		}
	}
	elem, err := commonElem(c.Inputs...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	shape, err := broadcastTypes(c.Inputs...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(elem, shape))
	return nil
}

func (op variadicOp) run(c *KernelContext) error {
	ins := c.Inputs
	for i, t := range ins {
		if t == nil {
			return c.Errorf("input %d is missing", i)
		}
		if t.DType != ins[0].DType {
			return c.Errorf("inputs are %s and %s, want one type", ins[0].DType, t.DType)
		}
	}
	dt := ins[0].DType
	if err := checkType(c, dt); err != nil {
		return err
	}
	dims, idx, err := broadcastTensors(ins...)
	if err != nil {
		return c.Errorf("%v", err)
	}
	n := ir.Product(dims)
	if dt.IsInt() && !op.mean {
		acc := make([]int64, n)
		for j, t := range ins {
			x := Int64s(t)
			for k := range acc {
				switch e := x[idx[j][k]]; {
				case j == 0:
					acc[k] = e
				case dt.IsUnsigned():
					acc[k] = int64(op.arith.u(uint64(acc[k]), uint64(e)))
				default:
					acc[k] = op.arith.i(acc[k], e)
				}
			}
		}
		c.Set(0, FromInt64s(dt, dims, acc))
		return nil
	}
	acc := make([]float64, n)
	for j, t := range ins {
		x := Float64s(t)
		for k := range acc {
			if e := x[idx[j][k]]; j == 0 {
				acc[k] = e
			} else {
				acc[k] = op.arith.f(acc[k], e)
			}
		}
	}
	if op.mean {
		for k := range acc {
			acc[k] /= float64(len(ins))
		}
	}
	c.Set(0, FromFloat64s(dt, dims, acc))
	return nil
}

// commonElem returns the element type the inputs share, Undefined when
// none is known, or an error when two known ones differ.
func commonElem(ts ...ir.Type) (ir.DType, error) {
	elem := ir.Undefined
	for _, t := range ts {
		switch {
		case t.Elem == ir.Undefined:
		case elem == ir.Undefined:
			elem = t.Elem
		case t.Elem != elem:
			return elem, fmt.Errorf("inputs are %s and %s, want one type", elem, t.Elem)
		}
	}
	return elem, nil
}

// broadcastTypes broadcasts the shapes of input types.
func broadcastTypes(ts ...ir.Type) (ir.Shape, error) {
	shapes := make([]ir.Shape, len(ts))
	for i, t := range ts {
		shapes[i] = t.Shape
	}
	return BroadcastShape(shapes...)
}

// broadcastsToFirst checks that broadcasting to a gave a's own shape, and
// returns a's shape, which is the more precise.
func broadcastsToFirst(a, b ir.Shape) (ir.Shape, error) {
	if !a.Ranked || !b.Ranked {
		return a.Clone(), nil
	}
	if len(b.Dims) != len(a.Dims) {
		return a, fmt.Errorf("input 1 has a higher rank than input 0 (%s), to which it must broadcast", a)
	}
	for i, d := range a.Dims {
		if o := b.Dims[i]; d.IsStatic() && o.IsStatic() && d.Value != o.Value {
			return a, fmt.Errorf("input 1 does not broadcast to input 0's shape %s", a)
		}
	}
	return a.Clone(), nil
}

// broadcastTensors broadcasts the tensors' shapes together. It returns the
// output dims and, per tensor, the flat index of the element each output
// element reads.
func broadcastTensors(ts ...*ir.Tensor) ([]int64, [][]int, error) {
	all := make([][]int64, len(ts))
	for i, t := range ts {
		all[i] = t.Dims
	}
	dims, err := BroadcastDims(all...)
	if err != nil {
		return nil, nil, err
	}
	idx := make([][]int, len(ts))
	for i, t := range ts {
		idx[i] = BroadcastIndex(t.Dims, dims)
	}
	return dims, idx, nil
}
