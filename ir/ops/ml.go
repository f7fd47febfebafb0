package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// MLDomain is ONNX's classical machine-learning domain: this file holds
// Binarizer, ArrayFeatureExtractor and LabelEncoder; ml_tree.go, ml_linear.go
// and ml_prep.go the tree ensembles, linear models and preprocessing ops.
const MLDomain = "ai.onnx.ml"

var mlOps = []*Schema{
	{Domain: MLDomain, Name: "Binarizer", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defFloat("threshold", 0)},
		Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}, Infer: SameAsInput, Run: runBinarizer},
	{Domain: MLDomain, Name: "ArrayFeatureExtractor", Since: 1, MinInputs: 2, MaxInputs: 2, MinOutputs: 1, MaxOutputs: 1,
		Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32, ir.String}, Infer: inferArrayFeatureExtractor, Run: runArrayFeatureExtractor},
	// LabelEncoder-1 maps strings to their index in classes_strings and
	// back; 2 maps keys_* to values_* of string, int64 or float; 4 adds
	// keys, values and defaults as tensors of more types.
	{Domain: MLDomain, Name: "LabelEncoder", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "classes_strings", Kind: ir.AttrStrings}, defInt("default_int64", -1), defString("default_string", "_Unused")},
		Types: []ir.DType{ir.String, ir.Int64}, Infer: inferLabelEncoder, Run: runLabelEncoder},
	{Domain: MLDomain, Name: "LabelEncoder", Since: 2, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: labelEncoder2Attrs, Types: []ir.DType{ir.String, ir.Int64, ir.Float32}, Infer: inferLabelEncoder, Run: runLabelEncoder},
	{Domain: MLDomain, Name: "LabelEncoder", Since: 4, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: append(slices.Clone(labelEncoder2Attrs), AttrDef{Name: "keys_tensor", Kind: ir.AttrTensor},
			AttrDef{Name: "values_tensor", Kind: ir.AttrTensor}, AttrDef{Name: "default_tensor", Kind: ir.AttrTensor}),
		Types: []ir.DType{ir.String, ir.Int64, ir.Float32, ir.Int32, ir.Int16, ir.Float64}, Infer: inferLabelEncoder, Run: runLabelEncoder},
}

var labelEncoder2Attrs = []AttrDef{
	{Name: "keys_floats", Kind: ir.AttrFloats}, {Name: "keys_int64s", Kind: ir.AttrInts}, {Name: "keys_strings", Kind: ir.AttrStrings},
	{Name: "values_floats", Kind: ir.AttrFloats}, {Name: "values_int64s", Kind: ir.AttrInts}, {Name: "values_strings", Kind: ir.AttrStrings},
	defFloat("default_float", float32(math.Copysign(0, -1))), defInt("default_int64", -1), defString("default_string", "_Unused"),
}

func init() { register(mlOps) }

// --- Binarizer -------------------------------------------------------------------

// runBinarizer gives 1 where x > threshold, else 0 (NaN too, as ONNX's
// reference computes it).
func runBinarizer(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	th := float64(c.Float("threshold"))
	v := Float64s(x)
	for i, e := range v {
		v[i] = 0
		if e > th {
			v[i] = 1
		}
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}

// --- ArrayFeatureExtractor -------------------------------------------------------

// featureDims is ArrayFeatureExtractor's output shape: x's with its last
// axis replaced by the number of indices, a vector x giving [1, k].
func featureDims[D any](x []D, k D, one D) []D {
	if len(x) <= 1 {
		return []D{one, k}
	}
	return append(slices.Clone(x[:len(x)-1]), k)
}

func inferArrayFeatureExtractor(c *InferContext) error {
	x, y := c.In(0), c.In(1)
	if y.Elem != ir.Undefined && y.Elem != ir.Int64 {
		return c.Errorf("indices are %s, want int64", y.Elem)
	}
	if x.Shape.Ranked && x.Shape.Rank() == 0 {
		return c.Errorf("input is a scalar, want rank 1 or more")
	}
	if !x.Shape.Ranked || !y.Shape.Ranked {
		c.Set(0, ir.TensorType(x.Elem, ir.Shape{}))
		return nil
	}
	k := ir.D(1)
	if n := y.Shape.NumElements(); n >= 0 {
		k = ir.D(n)
	} else {
		k = ir.UnknownDim()
	}
	c.Set(0, ir.TensorType(x.Elem, ir.ShapeOf(featureDims(x.Shape.Dims, k, ir.D(1))...)))
	return nil
}

// runArrayFeatureExtractor gathers the indexed elements of x's last axis
// (all of y's elements, in order).
func runArrayFeatureExtractor(c *KernelContext) error {
	x, y := c.In(0), c.In(1)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if y.DType != ir.Int64 {
		return c.Errorf("indices are %s, want int64", y.DType)
	}
	if len(x.Dims) == 0 {
		return c.Errorf("input is a scalar, want rank 1 or more")
	}
	last := x.Dims[len(x.Dims)-1]
	ind := y.Int64s()
	for _, i := range ind {
		if i < 0 || i >= last {
			return c.Errorf("index %d is outside [0, %d) of the last axis", i, last)
		}
	}
	rows := x.Len() / max(last, 1)
	if last == 0 {
		rows = ir.Product(x.Dims[:len(x.Dims)-1])
	}
	idx := make([]int, 0, rows*int64(len(ind)))
	for r := int64(0); r < rows; r++ {
		for _, i := range ind {
			idx = append(idx, int(r*last+i))
		}
	}
	c.Set(0, takeElems(x, featureDims(x.Dims, int64(len(ind)), 1), idx, nil))
	return nil
}

// --- LabelEncoder ----------------------------------------------------------------

// labelMap is a LabelEncoder's keys and values as tensors of their types
// and the single-element default.
type labelMap struct {
	keys, values, fallback *ir.Tensor
}

func stringsTensor(s []string) *ir.Tensor {
	t := ir.NewTensor(ir.String, int64(len(s)))
	copy(t.Strings, s)
	return t
}

func int64sTensor(v []int64) *ir.Tensor {
	return ir.FromSlice(ir.Int64, []int64{int64(len(v))}, slices.Clone(v))
}

func floatsTensor(v []float32) *ir.Tensor {
	return ir.FromSlice(ir.Float32, []int64{int64(len(v))}, slices.Clone(v))
}

// labelSide returns the keys or values (prefix "keys" or "values") the
// node sets: exactly one of the _strings, _int64s, _floats and (v4)
// _tensor attributes.
func labelSide(a attrs, prefix string) (*ir.Tensor, error) {
	var found []*ir.Tensor
	var names []string
	add := func(name string, t func() *ir.Tensor) {
		if a.declares(name) && a.Has(name) {
			found, names = append(found, t()), append(names, name)
		}
	}
	add(prefix+"_strings", func() *ir.Tensor { return stringsTensor(a.Strings(prefix + "_strings")) })
	add(prefix+"_int64s", func() *ir.Tensor { return int64sTensor(a.Ints(prefix + "_int64s")) })
	add(prefix+"_floats", func() *ir.Tensor { return floatsTensor(a.Floats(prefix + "_floats")) })
	add(prefix+"_tensor", func() *ir.Tensor { return a.Tensor(prefix + "_tensor") })
	if len(found) != 1 {
		return nil, fmt.Errorf("exactly one of the %s_* attributes must be set, got %v", prefix, names)
	}
	return found[0], nil
}

// labelDefault is the value for keys not found: default_tensor (v4), else
// default_string, default_int64 or default_float by the values' type
// (converted to it).
func labelDefault(a attrs, values ir.DType) (*ir.Tensor, error) {
	if a.declares("default_tensor") && a.Has("default_tensor") {
		t := a.Tensor("default_tensor")
		if t.DType != values || t.Len() != 1 {
			return nil, fmt.Errorf("default_tensor is %s%v, want one %s like the values", t.DType, ir.FormatList(t.Dims), values)
		}
		return t, nil
	}
	switch {
	case values == ir.String:
		return stringsTensor([]string{a.String("default_string")}), nil
	case values.IsInt():
		return FromInt64s(values, []int64{1}, []int64{a.Int("default_int64")}), nil
	case values.IsFloat():
		return FromFloat64s(values, []int64{1}, []float64{float64(a.Float("default_float"))}), nil
	}
	return nil, fmt.Errorf("values are %s, want string, integer or float", values)
}

func labelMapOf(a attrs) (*labelMap, error) {
	if !a.declares("keys_strings") { // LabelEncoder-1: classes_strings and their indices
		classes := a.Strings("classes_strings")
		idx := make([]int64, len(classes))
		for i := range idx {
			idx[i] = int64(i)
		}
		return &labelMap{keys: stringsTensor(classes), values: int64sTensor(idx)}, nil
	}
	keys, err := labelSide(a, "keys")
	if err != nil {
		return nil, err
	}
	values, err := labelSide(a, "values")
	if err != nil {
		return nil, err
	}
	if keys.Len() != values.Len() || len(keys.Dims) != 1 || len(values.Dims) != 1 {
		return nil, fmt.Errorf("keys %v and values %v must be vectors of one length", ir.FormatList(keys.Dims), ir.FormatList(values.Dims))
	}
	m := &labelMap{keys: keys, values: values}
	if m.fallback, err = labelDefault(a, values.DType); err != nil {
		return nil, err
	}
	return m, nil
}

// forInput orients LabelEncoder-1's map by the input's type (strings to
// indices, or indices to strings) and checks the keys' type against it.
func (m *labelMap) forInput(a attrs, in ir.DType) (*labelMap, error) {
	if !a.declares("keys_strings") {
		out := &labelMap{keys: m.keys, values: m.values, fallback: FromInt64s(ir.Int64, []int64{1}, []int64{a.Int("default_int64")})}
		if in == ir.Int64 {
			out = &labelMap{keys: m.values, values: m.keys, fallback: stringsTensor([]string{a.String("default_string")})}
		}
		m = out
	}
	if in != ir.Undefined && in != m.keys.DType {
		return nil, fmt.Errorf("input is %s, the keys %s", in, m.keys.DType)
	}
	return m, nil
}

func inferLabelEncoder(c *InferContext) error {
	m, err := labelMapOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	elem := c.In(0).Elem
	if elem == ir.Undefined && !c.declares("keys_strings") {
		c.Set(0, ir.TensorType(ir.Undefined, c.In(0).Shape.Clone())) // strings or int64, by the input
		return nil
	}
	if m, err = m.forInput(c.attrs, elem); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, ir.TensorType(m.values.DType, c.In(0).Shape.Clone()))
	return nil
}

// labelKey is an element's lookup key: the string, the integer, or the
// float's value (all NaNs one key, as ONNX Runtime matches them).
func labelKey(t *ir.Tensor, i int) any {
	switch {
	case t.DType == ir.String:
		return t.Strings[i]
	case t.DType.IsInt():
		return t.Int64At(i)
	}
	v := t.Float64At(i)
	if math.IsNaN(v) {
		return "NaN"
	}
	return v + 0 // -0 and 0 are one key
}

// runLabelEncoder maps each element to the value of its key, or the
// default.
func runLabelEncoder(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	m, err := labelMapOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	if m, err = m.forInput(c.attrs, x.DType); err != nil {
		return c.Errorf("%v", err)
	}
	index := map[any]int{}
	for i := range int(m.keys.Len()) {
		if _, dup := index[labelKey(m.keys, i)]; !dup {
			index[labelKey(m.keys, i)] = i
		}
	}
	idx := make([]int, x.Len())
	for i := range idx {
		j, ok := index[labelKey(x, i)]
		if !ok {
			j = -1
		}
		idx[i] = j
	}
	c.Set(0, takeElems(m.values, x.Dims, idx, m.fallback))
	return nil
}
