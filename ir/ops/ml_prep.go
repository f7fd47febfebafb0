package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The preprocessing ops of ai.onnx.ml that scikit-learn pipelines export
// (Normalizer, Scaler, OneHotEncoder, Imputer, FeatureVectorizer), and
// ZipMap, which kiln refuses: its output is a sequence of maps.

var mlPrepOps = []*Schema{
	{Domain: MLDomain, Name: "Normalizer", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defString("norm", "MAX")}, Types: mlNumeric, Infer: floatLikeInput, Run: runNormalizer},
	{Domain: MLDomain, Name: "Scaler", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "offset", Kind: ir.AttrFloats}, {Name: "scale", Kind: ir.AttrFloats}},
		Types: mlNumeric, Infer: floatLikeInput, Run: runScaler},
	{Domain: MLDomain, Name: "OneHotEncoder", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("cats_int64s"), {Name: "cats_strings", Kind: ir.AttrStrings}, defInt("zeros", 1)},
		Types: []ir.DType{ir.String, ir.Int64, ir.Int32, ir.Float32, ir.Float64}, Infer: inferOneHotEncoder, Run: runOneHotEncoder},
	{Domain: MLDomain, Name: "Imputer", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "imputed_value_floats", Kind: ir.AttrFloats}, defFloat("replaced_value_float", 0),
			defInts("imputed_value_int64s"), defInt("replaced_value_int64", 0)},
		Types: mlNumeric, Infer: SameAsInput, Run: runImputer},
	{Domain: MLDomain, Name: "FeatureVectorizer", Since: 1, MinInputs: 1, MaxInputs: -1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{defInts("inputdimensions")}, Types: mlNumeric, Infer: inferFeatureVectorizer, Run: runFeatureVectorizer},
	{Domain: MLDomain, Name: "ZipMap", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: classLabelAttrs("classlabels_int64s"), Types: []ir.DType{ir.Float32}, Infer: inferZipMap, Run: runZipMap},
}

func init() { register(mlPrepOps) }

// floatLikeInput is float with the input's shape.
func floatLikeInput(c *InferContext) error {
	c.Set(0, ir.TensorType(ir.Float32, c.In(0).Shape.Clone()))
	return nil
}

// lastAxisRows views x as rows along its last axis (a scalar is one row).
func lastAxisRows(v []float64, dims []int64) [][]float64 {
	f := int64(1)
	if len(dims) > 0 {
		f = dims[len(dims)-1]
	}
	if f == 0 {
		return nil
	}
	rows := make([][]float64, int64(len(v))/f)
	for i := range rows {
		rows[i] = v[int64(i)*f : int64(i+1)*f]
	}
	return rows
}

// --- Normalizer ------------------------------------------------------------------

// Norm is a Normalizer's norm of a row: its max, its L1 or its L2 norm.
type Norm int

// The norms, in ONNX's order.
const (
	NormMax Norm = iota
	NormL1
	NormL2
)

var normNames = []string{"MAX", "L1", "L2"}

// NormalizerSpec is a Normalizer node's norm.
func (c *KernelContext) NormalizerSpec() (Norm, error) {
	i := slices.Index(normNames, c.String("norm"))
	if i < 0 {
		return 0, c.Errorf("norm %q is not one of MAX, L1, L2", c.String("norm"))
	}
	return Norm(i), nil
}

func (n Norm) of(r []float64) float64 {
	if n == NormMax {
		return slices.Max(r)
	}
	s := 0.0
	for _, v := range r {
		if n == NormL1 {
			s += math.Abs(v)
		} else {
			s += v * v
		}
	}
	if n == NormL2 {
		return math.Sqrt(s)
	}
	return s
}

// runNormalizer divides each row by its max, L1 or L2 norm; a zero
// divisor leaves the row as it is.
func runNormalizer(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	if len(x.Dims) > 2 {
		return c.Errorf("input is %s%v, want [N,C] or [C]", x.DType, ir.FormatList(x.Dims))
	}
	norm, err := c.NormalizerSpec()
	if err != nil {
		return err
	}
	v := Float64s(x)
	for _, r := range lastAxisRows(v, x.Dims) {
		if d := norm.of(r); d != 0 {
			for i := range r {
				r[i] /= d
			}
		}
	}
	c.Set(0, FromFloat64s(ir.Float32, x.Dims, v))
	return nil
}

// --- Scaler ----------------------------------------------------------------------

// perFeature reads an attribute of one value or one per feature.
func perFeature(name string, v []float32, features int64) (func(i int) float64, error) {
	switch int64(len(v)) {
	case 1:
		return func(int) float64 { return float64(v[0]) }, nil
	case features:
		return func(i int) float64 { return float64(v[i]) }, nil
	}
	return nil, fmt.Errorf("%s has %d values, want 1 or one per feature (%d)", name, len(v), features)
}

// lastAxis is the number of features of x (its last axis; a scalar has 1).
func lastAxis(dims []int64) int64 {
	if len(dims) == 0 {
		return 1
	}
	return dims[len(dims)-1]
}

// ScalerSpec is a Scaler node's offset and scale for each of the given
// number of features: y = (x - offset)·scale.
func (c *KernelContext) ScalerSpec(features int64) (offset, scale []float64, err error) {
	o, err := perFeature("offset", c.Floats("offset"), features)
	if err != nil {
		return nil, nil, c.Errorf("%v", err)
	}
	s, err := perFeature("scale", c.Floats("scale"), features)
	if err != nil {
		return nil, nil, c.Errorf("%v", err)
	}
	for i := range int(features) {
		offset, scale = append(offset, o(i)), append(scale, s(i))
	}
	return offset, scale, nil
}

// runScaler gives (x - offset) * scale per feature of the last axis.
func runScaler(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	offset, scale, err := c.ScalerSpec(lastAxis(x.Dims))
	if err != nil {
		return err
	}
	v := Float64s(x)
	for _, r := range lastAxisRows(v, x.Dims) {
		for i := range r {
			r[i] = (r[i] - offset[i]) * scale[i]
		}
	}
	c.Set(0, FromFloat64s(ir.Float32, x.Dims, v))
	return nil
}

// --- OneHotEncoder ---------------------------------------------------------------

// oneHotCategories checks the categories fit the input type: strings for
// strings, integers for numbers (which are cast to int64).
func oneHotCategories(a attrs, in ir.DType) (int, error) {
	ints, strs := a.Ints("cats_int64s"), a.Strings("cats_strings")
	if (len(ints) > 0) == (len(strs) > 0) {
		return 0, fmt.Errorf("exactly one of cats_int64s and cats_strings must be set")
	}
	if in != ir.Undefined && (in == ir.String) != (len(strs) > 0) {
		return 0, fmt.Errorf("input is %s, the categories are %s", in, map[bool]string{true: "strings", false: "integers"}[len(strs) > 0])
	}
	return max(len(ints), len(strs)), nil
}

func inferOneHotEncoder(c *InferContext) error {
	n, err := oneHotCategories(c.attrs, c.In(0).Elem)
	if err != nil {
		return c.Errorf("%v", err)
	}
	s := ir.Shape{}
	if c.In(0).Shape.Ranked {
		s = ir.ShapeOf(append(slices.Clone(c.In(0).Shape.Dims), ir.D(int64(n)))...)
	}
	c.Set(0, ir.TensorType(ir.Float32, s))
	return nil
}

// runOneHotEncoder gives each element a row with a 1 at its category;
// with zeros=0 an element of no category is an error.
func runOneHotEncoder(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	n, err := oneHotCategories(c.attrs, x.DType)
	if err != nil {
		return c.Errorf("%v", err)
	}
	index := map[any]int{}
	for i, k := range c.Ints("cats_int64s") {
		index[k] = i
	}
	for i, k := range c.Strings("cats_strings") {
		index[k] = i
	}
	out := make([]float64, x.Len()*int64(n))
	for i := range int(x.Len()) {
		var key any
		if x.DType == ir.String {
			key = x.Strings[i]
		} else {
			key = int64(x.Float64At(i)) // ONNX Runtime truncates floats
		}
		j, ok := index[key]
		if !ok {
			if c.Int("zeros") == 0 {
				return c.Errorf("element %d (%v) is in no category, and zeros is 0", i, key)
			}
			continue
		}
		out[i*n+j] = 1
	}
	c.Set(0, FromFloat64s(ir.Float32, append(slices.Clone(x.Dims), int64(n)), out))
	return nil
}

// --- Imputer ---------------------------------------------------------------------

// ImputerSpec is an Imputer node's value for each of the given number of
// features and the value it replaces (NaN: any NaN), for inputs of type
// in: the float attributes for floats, the int64 ones for integers.
func (c *KernelContext) ImputerSpec(in ir.DType, features int64) (imputed []float64, replaced float64, err error) {
	var values []float32
	name := "imputed_value_floats"
	if in.IsFloat() {
		values, replaced = c.Floats(name), float64(c.Float("replaced_value_float"))
	} else {
		name = "imputed_value_int64s"
		ints := c.Ints(name)
		if slices.ContainsFunc(ints, func(v int64) bool { return float64(float32(v)) != float64(v) }) {
			return nil, 0, c.Errorf("imputed_value_int64s %v do not all fit the kernel's arithmetic", ints)
		}
		for _, v := range ints {
			values = append(values, float32(v))
		}
		replaced = float64(c.Int("replaced_value_int64"))
	}
	value, err := perFeature(name, values, features)
	if err != nil {
		return nil, 0, c.Errorf("%v", err)
	}
	for i := range int(features) {
		imputed = append(imputed, value(i))
	}
	return imputed, replaced, nil
}

// runImputer replaces the elements equal to the replaced value (any NaN
// when it is NaN) by the imputed value of their feature.
func runImputer(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	imputed, replaced, err := c.ImputerSpec(x.DType, lastAxis(x.Dims))
	if err != nil {
		return err
	}
	v := Float64s(x)
	for _, r := range lastAxisRows(v, x.Dims) {
		for i, e := range r {
			if e == replaced || math.IsNaN(replaced) && math.IsNaN(e) {
				r[i] = imputed[i]
			}
		}
	}
	c.Set(0, FromFloat64s(x.DType, x.Dims, v))
	return nil
}

// --- FeatureVectorizer -----------------------------------------------------------

func inferFeatureVectorizer(c *InferContext) error {
	dims := c.Ints("inputdimensions")
	if len(dims) != len(c.Inputs) {
		return c.Errorf("inputdimensions has %d entries for %d inputs", len(dims), len(c.Inputs))
	}
	n := ir.UnknownDim()
	if in := c.In(0); in.Shape.Ranked {
		n = ir.D(1)
		if in.Shape.Rank() == 2 {
			n = in.Shape.Dims[0]
		}
	}
	var total int64
	for _, d := range dims {
		total += d
	}
	c.Set(0, ir.TensorType(ir.Float32, ir.ShapeOf(n, ir.D(total))))
	return nil
}

// runFeatureVectorizer concatenates each sample's features from every
// input, each cut or zero-padded to its entry of inputdimensions.
func runFeatureVectorizer(c *KernelContext) error {
	dims := c.Ints("inputdimensions")
	if len(dims) != len(c.Inputs) {
		return c.Errorf("inputdimensions has %d entries for %d inputs", len(dims), len(c.Inputs))
	}
	var total int64
	for _, d := range dims {
		if d < 0 {
			return c.Errorf("inputdimensions has %d", d)
		}
		total += d
	}
	rows := int64(-1)
	var out []float64
	col := int64(0)
	for k, x := range c.Inputs {
		if err := checkType(c, x.DType); err != nil {
			return err
		}
		r, err := samplesOf(x)
		if err != nil {
			return c.Errorf("input %d: %v", k, err)
		}
		if rows < 0 {
			rows, out = int64(len(r)), make([]float64, int64(len(r))*total)
		} else if int64(len(r)) != rows {
			return c.Errorf("input %d has %d rows, input 0 %d", k, len(r), rows)
		}
		for i, row := range r {
			copy(out[int64(i)*total+col:int64(i)*total+col+dims[k]], row)
		}
		col += dims[k]
	}
	c.Set(0, FromFloat64s(ir.Float32, []int64{rows, total}, out))
	return nil
}

// --- ZipMap ----------------------------------------------------------------------

// zipMapRefused says why kiln does not run ZipMap: remove it (skl2onnx's
// options={"zipmap": False}) to keep the probabilities as a tensor.
func zipMapRefused(opset int64) error {
	return &UnsupportedError{Domain: MLDomain, Op: "ZipMap", Opset: opset,
		Reason: "its output is a sequence of maps, which kiln's values cannot hold; export without it (skl2onnx: options={'zipmap': False}) to keep the scores as a tensor"}
}

func inferZipMap(c *InferContext) error { return zipMapRefused(c.Opset) }

func runZipMap(c *KernelContext) error { return zipMapRefused(c.Opset) }
