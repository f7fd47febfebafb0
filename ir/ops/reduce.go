package ops

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The reduce family: ReduceX over a set of axes, ArgMax/ArgMin, TopK and
// CumSum. All of them (and the normalizations in norm.go) walk a tensor as
// groups of elements that share their coordinates on the kept axes: the
// reduction type of reduction.go.

// axisMask marks the given axes (possibly negative, no repeats) of a
// rank-rank tensor.
func axisMask(axes []int64, rank int) ([]bool, error) {
	norm, err := normAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	set := make([]bool, rank)
	for _, a := range norm {
		set[a] = true
	}
	return set, nil
}

// reducedDims is the shape after reducing the marked axes: 1 there with
// keepdims, else without them.
func reducedDims[D any](dims []D, reduced []bool, keep bool, one D) []D {
	out := make([]D, 0, len(dims))
	for i, d := range dims {
		switch {
		case !reduced[i]:
			out = append(out, d)
		case keep:
			out = append(out, one)
		}
	}
	return out
}

// orderKeys returns an integer tensor's elements as int64 whose signed order
// is the elements' order: uint64 values have their top bit flipped, since
// Int64s wraps those above MaxInt64 to negatives. fromOrderKeys undoes it.
func orderKeys(t *ir.Tensor) []int64 {
	v := Int64s(t)
	if t.DType == ir.Uint64 {
		for i := range v {
			v[i] ^= math.MinInt64
		}
	}
	return v
}

func fromOrderKeys(dtype ir.DType, dims []int64, v []int64) *ir.Tensor {
	if dtype == ir.Uint64 {
		for i := range v {
			v[i] ^= math.MinInt64
		}
	}
	return FromInt64s(dtype, dims, v)
}

// keyBounds is the least and greatest order key of an integer type (for
// empty ReduceMax/ReduceMin).
func keyBounds(d ir.DType) (lo, hi int64) {
	switch d {
	case ir.Bool:
		return 0, 1
	case ir.Int8:
		return math.MinInt8, math.MaxInt8
	case ir.Uint8:
		return 0, math.MaxUint8
	case ir.Int16:
		return math.MinInt16, math.MaxInt16
	case ir.Uint16:
		return 0, math.MaxUint16
	case ir.Int32:
		return math.MinInt32, math.MaxInt32
	case ir.Uint32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64 // int64, and uint64 in key form
}

// Element types: ReduceX take ONNX's "high-precision numeric" types;
// ReduceMax/ReduceMin add 8-bit integers (opset 12) and bool (opset 20).
var (
	reduceTypes       = concatTypes(floatTypes, []ir.DType{ir.Int32, ir.Int64, ir.Uint32, ir.Uint64})
	reduceMinMaxTypes = concatTypes(reduceTypes, []ir.DType{ir.Int8, ir.Uint8, ir.Bool})
)

// reduceOp is one ReduceX operator: how it folds a group computed in
// float64, and in int64 for integer types (nil: integers go through
// float64 too, for the ops with logarithms and roots). A fold sees an empty
// group for reductions over a zero-sized axis and returns the op's identity
// there, as ONNX specifies since opset 18.
type reduceOp struct {
	name string
	// axesInput is the opset from which axes is an input, not an attribute.
	axesInput int64
	types     []ir.DType
	viaFloat  func(xs []float64) float64
	viaInt    func(xs []int64, t intFold) int64
	// ordered folds (max and min) see order keys (orderKeys); the others
	// see the values wrapped to int64, whose sums and products wrap as the
	// type's own do.
	ordered bool
}

// intFold describes the integer type a fold runs over: its least and
// greatest value (in order-key form: the identities of max and min), and
// whether it is unsigned (for absolute values and division).
type intFold struct {
	lo, hi   int64
	unsigned bool
}

var reduceOps = []reduceOp{
	{"ReduceSum", 13, reduceTypes, sumF, func(xs []int64, _ intFold) int64 { return sumI(xs) }, false},
	{"ReduceMean", 18, reduceTypes, func(xs []float64) float64 { return sumF(xs) / float64(len(xs)) },
		func(xs []int64, t intFold) int64 {
			if len(xs) == 0 {
				return 0
			}
			if t.unsigned {
				return int64(uint64(sumI(xs)) / uint64(len(xs)))
			}
			return sumI(xs) / int64(len(xs))
		}, false},
	{"ReduceProd", 18, reduceTypes, func(xs []float64) float64 {
		p := 1.0
		for _, x := range xs {
			p *= x
		}
		return p
	}, func(xs []int64, _ intFold) int64 {
		p := int64(1)
		for _, x := range xs {
			p *= x
		}
		return p
	}, false},
	{"ReduceMax", 18, reduceMinMaxTypes, func(xs []float64) float64 {
		m := math.Inf(-1)
		for _, x := range xs {
			if x > m || math.IsNaN(x) {
				m = x
			}
		}
		return m
	}, func(xs []int64, t intFold) int64 {
		m := t.lo
		for _, x := range xs {
			m = max(m, x)
		}
		return m
	}, true},
	{"ReduceMin", 18, reduceMinMaxTypes, func(xs []float64) float64 {
		m := math.Inf(1)
		for _, x := range xs {
			if x < m || math.IsNaN(x) {
				m = x
			}
		}
		return m
	}, func(xs []int64, t intFold) int64 {
		m := t.hi
		for _, x := range xs {
			m = min(m, x)
		}
		return m
	}, true},
	{"ReduceL1", 18, reduceTypes, func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += math.Abs(x)
		}
		return s
	}, func(xs []int64, t intFold) int64 {
		var s int64
		for _, x := range xs {
			if !t.unsigned {
				x = max(x, -x)
			}
			s += x
		}
		return s
	}, false},
	{"ReduceL2", 18, reduceTypes, func(xs []float64) float64 { return math.Sqrt(sumSquareF(xs)) }, nil, false},
	{"ReduceSumSquare", 18, reduceTypes, sumSquareF, func(xs []int64, _ intFold) int64 {
		var s int64
		for _, x := range xs {
			s += x * x
		}
		return s
	}, false},
	{"ReduceLogSum", 18, reduceTypes, func(xs []float64) float64 { return math.Log(sumF(xs)) }, nil, false},
	{"ReduceLogSumExp", 18, reduceTypes, logSumExp, nil, false},
}

func sumF(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

func sumI(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func sumSquareF(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x * x
	}
	return s
}

// logSumExp is log(sum(exp(x))), shifted by the maximum so large inputs do
// not overflow; -Inf for an empty group (log of an empty sum).
func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// reduceRows makes the two rows of a ReduceX op: axes as an attribute
// from opset 1 (negative axes from 11, which the first row accepts), and
// as an optional input with noop_with_empty_axes from op.axesInput.
func reduceRows(op reduceOp) []*Schema {
	keepdims := defInt("keepdims", 1)
	return []*Schema{{
		Name: op.name, Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("axes"), keepdims},
		Types: op.types, Infer: inferReduce(false), Run: runReduce(op),
	}, {
		Name: op.name, Since: op.axesInput, MinInputs: 1, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{keepdims, defInt("noop_with_empty_axes", 0)},
		Types: op.types, Infer: inferReduce(true), Run: runReduce(op),
	}}
}

// reduceAxes is the axes a ReduceX node names: from the attribute, or from
// input 1 (axesTensor, nil when absent). noop reports that the node is the
// identity (no axes and noop_with_empty_axes); otherwise no axes means all.
func reduceAxes(a attrs, axesInput bool, axesTensor *ir.Tensor) (axes []int64, noop bool) {
	if !axesInput {
		return a.Ints("axes"), false
	}
	if axesTensor != nil {
		axes = Int64s(axesTensor)
	}
	return axes, len(axes) == 0 && a.Int("noop_with_empty_axes") != 0
}

func inferReduce(axesInput bool) func(c *InferContext) error {
	return func(c *InferContext) error {
		x := c.In(0)
		keep := c.Int("keepdims") != 0
		if axesInput && c.HasInput(1) && c.Const(1) == nil {
			// The axes are only known at run time: so are the output dims.
			// The rank is known with keepdims, or from the axes' length.
			axesLen := int64(-1)
			if n, ok := c.In(1).Shape.Ints(); ok && len(n) == 1 {
				axesLen = n[0]
			}
			if axesLen == 0 {
				return inferReduceAxes(c, x, nil, keep, c.Int("noop_with_empty_axes") != 0)
			}
			out := ir.TensorType(x.Elem, ir.Shape{})
			if x.Shape.Ranked && (keep || axesLen > 0) {
				rank := len(x.Shape.Dims)
				if !keep {
					rank -= int(axesLen)
				}
				if rank < 0 {
					return c.Errorf("reduces %d axes of a rank-%d input", axesLen, len(x.Shape.Dims))
				}
				out.Shape = ir.Shape{Ranked: true, Dims: make([]ir.Dim, rank)}
				for i := range out.Shape.Dims {
					out.Shape.Dims[i] = ir.UnknownDim()
					if d := x.Shape.Dims[i]; keep && d.IsStatic() && d.Value == 1 {
						out.Shape.Dims[i] = ir.D(1)
					}
				}
			}
			c.Set(0, out)
			return nil
		}
		axes, noop := reduceAxes(c.attrs, axesInput, c.Const(1))
		return inferReduceAxes(c, x, axes, keep, noop)
	}
}

func inferReduceAxes(c *InferContext, x ir.Type, axes []int64, keep, noop bool) error {
	if noop || !x.Shape.Ranked {
		c.Set(0, x.Clone())
		return nil
	}
	reduced, err := reduceMask(axes, len(x.Shape.Dims))
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(reducedDims(x.Shape.Dims, reduced, keep, ir.D(1))...)))
	return nil
}

// reduceMask is axisMask where no axes means every axis.
func reduceMask(axes []int64, rank int) ([]bool, error) {
	if len(axes) == 0 {
		all := make([]bool, rank)
		for i := range all {
			all[i] = true
		}
		return all, nil
	}
	return axisMask(axes, rank)
}

// Reduce is a ReduceX node resolved against its input's rank: the axes
// it reduces and whether they stay (as 1s); Noop when the node is the
// identity (noop_with_empty_axes with no axes).
type Reduce struct {
	Axes []bool
	Keep bool
	Noop bool
}

// ReduceSpec resolves a ReduceX node for an input of rank rank, as every
// backend must: its axes come from the attribute or from input 1 (which
// must then be known, c.In), may be negative, and none means every axis
// unless noop_with_empty_axes.
func (c *KernelContext) ReduceSpec(rank int) (*Reduce, error) {
	axesInput := !c.declares("axes")
	var t *ir.Tensor
	if axesInput && c.HasInput(1) {
		if t = c.In(1); t == nil {
			return nil, c.Errorf("axes (input 1) must be known at compile time")
		}
	}
	axes, noop := reduceAxes(c.attrs, axesInput, t)
	r := &Reduce{Keep: c.Int("keepdims") != 0, Noop: noop}
	if noop {
		return r, nil
	}
	mask, err := reduceMask(axes, rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	r.Axes = mask
	return r, nil
}

func runReduce(op reduceOp) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		spec, err := c.ReduceSpec(len(x.Dims))
		if err != nil {
			return err
		}
		if spec.Noop {
			c.Set(0, x.Clone())
			return nil
		}
		r := newReduction(x.Dims, spec.Axes)
		dims := reducedDims(x.Dims, spec.Axes, spec.Keep, 1)
		if x.DType.IsFloat() || op.viaInt == nil {
			c.Set(0, FromFloat64s(x.DType, dims, foldGroups(r, Float64s(x), op.viaFloat)))
			return nil
		}
		lo, hi := keyBounds(x.DType)
		t := intFold{lo: lo, hi: hi, unsigned: x.DType.IsUnsigned()}
		if !op.ordered {
			c.Set(0, FromInt64s(x.DType, dims, foldGroups(r, Int64s(x), func(xs []int64) int64 { return op.viaInt(xs, t) })))
			return nil
		}
		out := foldGroups(r, orderKeys(x), func(xs []int64) int64 { return op.viaInt(xs, t) })
		c.Set(0, fromOrderKeys(x.DType, dims, out))
		return nil
	}
}

// ArgMax and ArgMin: the index of the first (or, with select_last_index
// from opset 12, the last) extreme element along one axis, as int64.

// argRows makes ArgMax (sign +1) or ArgMin (sign -1).
func argRows(name string, sign int) []*Schema {
	attrs := []AttrDef{defInt("axis", 0), defInt("keepdims", 1)}
	row := func(since int64, attrs []AttrDef) *Schema {
		return &Schema{Name: name, Since: since, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
			Attrs: attrs, Types: numericTypes, Infer: inferArg, Run: runArg(sign)}
	}
	return []*Schema{
		row(1, attrs),
		row(12, append(slices.Clone(attrs), defInt("select_last_index", 0))),
	}
}

func inferArg(c *InferContext) error {
	x := c.In(0)
	out := ir.TensorType(ir.Int64, ir.Shape{})
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		reduced := make([]bool, len(x.Shape.Dims))
		reduced[axis] = true
		out.Shape = ir.ShapeOf(reducedDims(x.Shape.Dims, reduced, c.Int("keepdims") != 0, ir.D(1))...)
	}
	c.Set(0, out)
	return nil
}

// Arg is an ArgMax or ArgMin node resolved against its input: the axis,
// whether it stays (as 1), and whether the last of equal values wins.
type Arg struct {
	Axis       int
	Keep, Last bool
}

// ArgSpec resolves an ArgMax or ArgMin node for an input of shape dims
// (a dim below 0 is unknown), as every backend must: the axis may be
// negative, select_last_index exists from opset 12, and an empty axis
// has no index to give.
func (c *KernelContext) ArgSpec(dims []int64) (*Arg, error) {
	axis, err := NormAxis(c.Int("axis"), len(dims))
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	if dims[axis] == 0 {
		return nil, c.Errorf("%s over the empty axis %d", c.Node.OpType, axis)
	}
	last := c.declares("select_last_index") && c.Int("select_last_index") != 0
	return &Arg{Axis: axis, Keep: c.Int("keepdims") != 0, Last: last}, nil
}

func runArg(sign int) func(c *KernelContext) error {
	return func(c *KernelContext) error {
		x := c.In(0)
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		spec, err := c.ArgSpec(x.Dims)
		if err != nil {
			return err
		}
		reduced := make([]bool, len(x.Dims))
		reduced[spec.Axis] = true
		r := newReduction(x.Dims, reduced)
		var idx []int64
		if x.DType.IsFloat() {
			idx = foldGroups(r, Float64s(x), func(xs []float64) int64 { return argBest(xs, sign, spec.Last) })
		} else {
			idx = foldGroups(r, orderKeys(x), func(xs []int64) int64 { return argBest(xs, sign, spec.Last) })
		}
		c.Set(0, FromInt64s(ir.Int64, reducedDims(x.Dims, reduced, spec.Keep, 1), idx))
		return nil
	}
}

// argBest returns the index of the greatest (sign +1) or least (sign -1)
// element of a non-empty line: the first among equals, or with last the
// last. A NaN wins over every number, as numpy's argmax/argmin have it.
func argBest[T cmp.Ordered](xs []T, sign int, last bool) int64 {
	best := 0
	for i := 1; i < len(xs); i++ {
		if isNaN(xs[best]) {
			break
		}
		c := cmp.Compare(xs[i], xs[best]) * sign
		if c > 0 || last && c == 0 || isNaN(xs[i]) {
			best = i
		}
	}
	return int64(best)
}

func isNaN[T cmp.Ordered](x T) bool { return x != x }

// TopK: the k greatest (or, with largest=0 from opset 11, least) elements
// along an axis, sorted, with their indices; equal elements keep their
// index order. k is an attribute before opset 10 and an input from it.

var topKRows = []*Schema{{
	Name: "TopK", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{defInt("axis", -1), {Name: "k", Kind: ir.AttrInt, Required: true}},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}, {
	Name: "TopK", Since: 10, MinInputs: 2, MaxInputs: 2, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{defInt("axis", -1)},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}, {
	Name: "TopK", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 2, MaxOutputs: 2,
	Attrs: []AttrDef{
		defInt("axis", -1),
		defInt("largest", 1),
		defInt("sorted", 1),
	},
	Types: numericTypes, Infer: inferTopK, Run: runTopK,
}}

// topKCount reads k from the attribute (before opset 10) or from the
// input's value; known is false when that value is not available.
func topKCount(a attrs, kTensor *ir.Tensor) (k int64, known bool, err error) {
	if a.declares("k") {
		k = a.Int("k")
	} else {
		if kTensor == nil {
			return 0, false, nil
		}
		if kTensor.Len() != 1 {
			return 0, false, fmt.Errorf("K must hold one value, has shape %v", ir.FormatList(kTensor.Dims))
		}
		k = Int64s(kTensor)[0]
	}
	if k < 0 {
		return 0, false, fmt.Errorf("k is negative (%d)", k)
	}
	return k, true, nil
}

func inferTopK(c *InferContext) error {
	x := c.In(0)
	out := ir.TensorType(x.Elem, ir.Shape{})
	if x.Shape.Ranked {
		axis, err := NormAxis(c.Int("axis"), len(x.Shape.Dims))
		if err != nil {
			return c.Errorf("%v", err)
		}
		k, known, err := topKCount(c.attrs, c.Const(1))
		if err != nil {
			return c.Errorf("%v", err)
		}
		out.Shape = x.Shape.Clone()
		d := &out.Shape.Dims[axis]
		switch {
		case !known:
			*d = ir.UnknownDim()
			if ks := c.SymInts(1); len(ks) == 1 { // topk(x, min(10, S))
				*d = symDim(ks[0])
			}
		case d.IsStatic() && k > d.Value:
			return c.Errorf("k = %d exceeds the axis size %d", k, d.Value)
		default:
			*d = ir.D(k)
		}
	}
	c.Set(0, out)
	c.Set(1, ir.TensorType(ir.Int64, out.Shape.Clone()))
	return nil
}

// TopK is a TopK node resolved against its input: the axis, the count k
// and whether the greatest come first.
type TopK struct {
	Axis    int
	K       int64
	Largest bool
}

// TopKSpec resolves a TopK node for an input of shape dims (a dim below 0
// is unknown), as every backend must: k from the attribute (before opset
// 10) or input 1 (which must then be known, c.In), at most the axis'
// size; a negative axis; largest from opset 11. The selection is always
// sorted.
func (c *KernelContext) TopKSpec(dims []int64) (*TopK, error) {
	axis, err := NormAxis(c.Int("axis"), len(dims))
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	k, known, err := topKCount(c.attrs, c.In(1))
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	if !known {
		return nil, c.Errorf("K (input 1) must be known at compile time")
	}
	if dims[axis] >= 0 && k > dims[axis] {
		return nil, c.Errorf("k = %d exceeds the axis size %d", k, dims[axis])
	}
	return &TopK{Axis: axis, K: k, Largest: !c.declares("largest") || c.Int("largest") != 0}, nil
}

// TopKOrder resolves a TopK node's axis and direction for an input of
// rank rank, without its K: for a backend that takes K from the output's
// dim (an expression over the model's dims, as inference gives a K of
// x.size(1) // 2).
func (c *KernelContext) TopKOrder(rank int) (axis int, largest bool, err error) {
	axis, err = NormAxis(c.Int("axis"), rank)
	if err != nil {
		return 0, false, c.Errorf("%v", err)
	}
	return axis, !c.declares("largest") || c.Int("largest") != 0, nil
}

func runTopK(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.TopKSpec(x.Dims)
	if err != nil {
		return err
	}
	axis, k, largest := spec.Axis, spec.K, spec.Largest
	outDims := slices.Clone(x.Dims)
	outDims[axis] = k
	in, out := alongAxis(x.Dims, axis), alongAxis(outDims, axis)
	var idx []int64
	if x.DType.IsFloat() {
		var vals []float64
		vals, idx = topK(in, out, Float64s(x), int(k), largest)
		c.Set(0, FromFloat64s(x.DType, outDims, vals))
	} else {
		var vals []int64
		vals, idx = topK(in, out, orderKeys(x), int(k), largest)
		c.Set(0, fromOrderKeys(x.DType, outDims, vals))
	}
	c.Set(1, FromInt64s(ir.Int64, outDims, idx))
	return nil
}

// topK selects along the lines of in into the (k-long) lines of out.
func topK[T cmp.Ordered](in, out reduction, xs []T, k int, largest bool) ([]T, []int64) {
	vals := make([]T, len(out.base)*k)
	idx := make([]int64, len(vals))
	order := make([]int, len(in.offs))
	for g, b := range in.base {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int {
			c := cmp.Compare(xs[b+in.offs[i]], xs[b+in.offs[j]])
			if largest {
				return -c
			}
			return c
		})
		for j, i := range order[:k] {
			o := out.base[g] + out.offs[j]
			vals[o], idx[o] = xs[b+in.offs[i]], int64(i)
		}
	}
	return vals, idx
}

// CumSum: running sums along an axis given as input 1, optionally
// exclusive (each sum omits its own element) and reversed.

var cumSumRows = []*Schema{{
	Name: "CumSum", Since: 11, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
	Attrs: []AttrDef{
		defInt("exclusive", 0),
		defInt("reverse", 0),
	},
	Types: reduceTypes, Infer: inferCumSum, Run: runCumSum,
}}

func inferCumSum(c *InferContext) error {
	if a := c.In(1); a.Shape.Ranked && a.Shape.Rank() > 1 || a.Elem != ir.Undefined && a.Elem != ir.Int32 && a.Elem != ir.Int64 {
		return c.Errorf("axis must be an int32 or int64 scalar, is %s", a)
	}
	if x, t := c.In(0), c.Const(1); x.Shape.Ranked && t != nil {
		if _, err := cumSumAxis(t, len(x.Shape.Dims)); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return SameAsInput(c)
}

func cumSumAxis(t *ir.Tensor, rank int) (int, error) {
	if t.Len() != 1 {
		return 0, fmt.Errorf("axis must hold one value, has shape %v", ir.FormatList(t.Dims))
	}
	return NormAxis(Int64s(t)[0], rank)
}

// CumSum is a CumSum node resolved against its input's rank.
type CumSum struct {
	Axis               int
	Exclusive, Reverse bool
}

// CumSumSpec resolves a CumSum node for an input of rank rank, as every
// backend must: the axis is input 1 (which must be known, c.In), a
// scalar or one value, possibly negative.
func (c *KernelContext) CumSumSpec(rank int) (*CumSum, error) {
	t := c.In(1)
	if t == nil {
		return nil, c.Errorf("axis (input 1) must be known at compile time")
	}
	axis, err := cumSumAxis(t, rank)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return &CumSum{Axis: axis, Exclusive: c.Int("exclusive") != 0, Reverse: c.Int("reverse") != 0}, nil
}

func runCumSum(c *KernelContext) error { return runCumulative(c, scanSum) }

// scanOp is a running reduction along an axis: CumSum's sum, CumProd's
// product. They share the axis, exclusive and reverse handling (scanLine).
type scanOp struct {
	identity int64 // the empty scan's value: what an exclusive scan starts from
	f        func(a, b float64) float64
	i        func(a, b int64) int64
}

var scanSum = scanOp{0, func(a, b float64) float64 { return a + b }, func(a, b int64) int64 { return a + b }}

func runCumulative(c *KernelContext, op scanOp) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	spec, err := c.CumSumSpec(len(x.Dims))
	if err != nil {
		return err
	}
	r := alongAxis(x.Dims, spec.Axis)
	exclusive, reverse := spec.Exclusive, spec.Reverse
	if x.DType.IsFloat() {
		v := Float64s(x)
		mapGroups(r, v, func(line []float64) { scanLine(line, exclusive, reverse, float64(op.identity), op.f) })
		c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	} else {
		// Wrapping int64 arithmetic is exact for every narrower integer
		// type and for uint64 once wrapped back (FromInt64s).
		v := Int64s(x)
		mapGroups(r, v, func(line []int64) { scanLine(line, exclusive, reverse, op.identity, op.i) })
		c.Set(0, FromInt64s(x.DType, x.Dims, v))
	}
	return nil
}

func scanLine[T float64 | int64](line []T, exclusive, reverse bool, acc T, combine func(a, b T) T) {
	for j := range line {
		i := j
		if reverse {
			i = len(line) - 1 - j
		}
		x := line[i]
		if !exclusive {
			acc = combine(acc, x)
		}
		line[i] = acc
		if exclusive {
			acc = combine(acc, x)
		}
	}
}

func init() {
	var rows []*Schema
	for _, op := range reduceOps {
		rows = append(rows, reduceRows(op)...)
	}
	rows = append(rows, argRows("ArgMax", 1)...)
	rows = append(rows, argRows("ArgMin", -1)...)
	rows = append(rows, topKRows...)
	rows = append(rows, cumSumRows...)
	register(rows)
}
