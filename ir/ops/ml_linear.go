package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The linear models of ai.onnx.ml and what the classical-ML ops share:
// the post_transform of scores and the class labels of a classifier.
// Where ONNX leaves a case open, kiln computes what ONNX Runtime does.

var mlLinearOps = []*Schema{
	{Domain: MLDomain, Name: "LinearRegressor", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: []AttrDef{{Name: "coefficients", Kind: ir.AttrFloats}, {Name: "intercepts", Kind: ir.AttrFloats},
			defString("post_transform", "NONE"), defInt("targets", 1)},
		Types: mlNumeric, Infer: inferLinearRegressor, Run: runLinearRegressor},
	{Domain: MLDomain, Name: "LinearClassifier", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: append([]AttrDef{{Name: "coefficients", Kind: ir.AttrFloats, Required: true}, {Name: "intercepts", Kind: ir.AttrFloats},
			defInt("multi_class", 0), defString("post_transform", "NONE")}, classLabelAttrs("classlabels_ints")...),
		Types: mlNumeric, Infer: inferLinearClassifier, Run: runLinearClassifier},
}

// mlNumeric are the input types of the classical-ML models.
var mlNumeric = []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}

func init() { register(mlLinearOps) }

// --- post_transform --------------------------------------------------------------

// PostTransform is how scores are turned into outputs (post_transform):
// PostSoftmaxZero leaves scores within 1e-7 of zero at (about) zero.
type PostTransform int

// The post transforms, in ONNX's (and TreeEnsemble-5's) order.
const (
	PostNone PostTransform = iota
	PostSoftmax
	PostLogistic
	PostSoftmaxZero
	PostProbit
)

var postTransformNames = []string{"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"}

func parsePostTransform(s string) (PostTransform, error) {
	if i := slices.Index(postTransformNames, s); i >= 0 {
		return PostTransform(i), nil
	}
	return 0, fmt.Errorf("post_transform %q is not one of %v", s, postTransformNames)
}

func mlLogistic(v float64) float64 {
	e := 1 / (1 + math.Exp(-math.Abs(v)))
	if v < 0 {
		return 1 - e
	}
	return e
}

// erfInv is the approximation of the inverse error function (Winitzki's,
// a = 0.147) that ONNX's reference and ONNX Runtime both compute PROBIT
// with, so kiln's probits match theirs rather than the exact function.
func erfInv(x float64) float64 {
	sgn := 1.0
	if x < 0 {
		sgn = -1
	}
	x = (1 - x) * (1 + x)
	l := math.Log(x)
	v := 2/(math.Pi*0.147) + 0.5*l
	return sgn * math.Sqrt(-v+math.Sqrt(v*v-l/0.147))
}

func probit(v float64) float64 { return math.Sqrt2 * erfInv(2*v-1) }

// apply transforms one sample's scores as the tree ensembles do.
func (p PostTransform) apply(s []float64) { p.transform(s, false) }

// Of is the transform a row of n scores gets: of a single score the tree
// ensembles transform only with PROBIT, the linear models with LOGISTIC
// too (as ONNX Runtime does).
func (p PostTransform) Of(n int, linear bool) PostTransform {
	if n == 1 && p != PostProbit && (p != PostLogistic || !linear) {
		return PostNone
	}
	return p
}

func (p PostTransform) transform(s []float64, linear bool) {
	switch p.Of(len(s), linear) {
	case PostLogistic:
		for i := range s {
			s[i] = mlLogistic(s[i])
		}
	case PostProbit:
		for i := range s {
			s[i] = probit(s[i])
		}
	case PostSoftmax, PostSoftmaxZero:
		mlSoftmax(s, p == PostSoftmaxZero)
	}
}

// mlSoftmax normalizes exp(s); SOFTMAX_ZERO leaves (near-)zero scores at zero.
func mlSoftmax(s []float64, skipZeros bool) {
	top := slices.Max(s)
	sum := 0.0
	for i, v := range s {
		if skipZeros && math.Abs(v) <= 1e-7 {
			s[i] = v * math.Exp(-top)
			continue
		}
		s[i] = math.Exp(v - top)
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
}

// --- class labels ----------------------------------------------------------------

// classLabelAttrs declares classlabels_strings and the integer labels
// (named classlabels_ints or classlabels_int64s by the op).
func classLabelAttrs(ints string) []AttrDef {
	return []AttrDef{{Name: "classlabels_strings", Kind: ir.AttrStrings}, {Name: ints, Kind: ir.AttrInts}}
}

// classLabels are a classifier's labels: strings or integers.
type classLabels struct {
	strings []string
	ints    []int64
}

// classLabelsOf reads exactly one of classlabels_strings and the integer
// labels.
func classLabelsOf(a attrs, ints string) (classLabels, error) {
	l := classLabels{strings: a.Strings("classlabels_strings"), ints: a.Ints(ints)}
	if (len(l.strings) > 0) == (len(l.ints) > 0) {
		return l, fmt.Errorf("exactly one of classlabels_strings and %s must be set", ints)
	}
	return l, nil
}

func (l classLabels) len() int { return max(len(l.strings), len(l.ints)) }

func (l classLabels) dtype() ir.DType {
	if len(l.strings) > 0 {
		return ir.String
	}
	return ir.Int64
}

// tensor holds the labels picked for each sample: an index into the
// labels, or for integer labels with raw set the integer itself.
func (l classLabels) tensor(picked []int64, raw []bool) *ir.Tensor {
	n := int64(len(picked))
	if len(l.strings) > 0 {
		t := ir.NewTensor(ir.String, n)
		for i, p := range picked {
			t.Strings[i] = l.strings[p]
		}
		return t
	}
	v := make([]int64, n)
	for i, p := range picked {
		v[i] = l.ints[p]
		if raw != nil && raw[i] {
			v[i] = p
		}
	}
	return ir.FromSlice(ir.Int64, []int64{n}, v)
}

// --- samples ---------------------------------------------------------------------

// samplesOf views an [N,F] or [F] input as N rows of F features (float64).
func samplesOf(x *ir.Tensor) (rows [][]float64, err error) {
	switch len(x.Dims) {
	case 1, 2:
	default:
		return nil, fmt.Errorf("input is %s%v, want [N,F] or [F]", x.DType, ir.FormatList(x.Dims))
	}
	n, f := int64(1), x.Dims[len(x.Dims)-1]
	if len(x.Dims) == 2 {
		n = x.Dims[0]
	}
	v := Float64s(x)
	rows = make([][]float64, n)
	for i := range rows {
		rows[i] = v[int64(i)*f : int64(i+1)*f]
	}
	return rows, nil
}

// sampleCount is the N of an [N,F] or [F] input's type.
func sampleCount(c *InferContext) (ir.Dim, error) {
	x := c.In(0)
	if !x.Shape.Ranked {
		return ir.UnknownDim(), nil
	}
	switch x.Shape.Rank() {
	case 1:
		return ir.D(1), nil
	case 2:
		return x.Shape.Dims[0], nil
	}
	return ir.Dim{}, c.Errorf("input is %s, want [N,F] or [F]", x)
}

// --- LinearRegressor ---------------------------------------------------------------

// linearModel is coefficients [targets, F] and intercepts.
type linearModel struct {
	coef       []float32
	intercepts []float32
	targets    int
	post       PostTransform
}

func (m linearModel) scores(row []float64) ([]float64, error) {
	f := len(row)
	if len(m.coef) != m.targets*f {
		return nil, fmt.Errorf("%d coefficients for %d targets of %d features, want %d", len(m.coef), m.targets, f, m.targets*f)
	}
	s := make([]float64, m.targets)
	for t := range s {
		if len(m.intercepts) > t {
			s[t] = float64(m.intercepts[t])
		}
		for j, x := range row {
			s[t] += float64(m.coef[t*f+j]) * x
		}
	}
	return s, nil
}

func linearRegressorOf(a attrs) (linearModel, error) {
	m := linearModel{coef: a.Floats("coefficients"), intercepts: a.Floats("intercepts"), targets: int(a.Int("targets"))}
	var err error
	if m.post, err = parsePostTransform(a.String("post_transform")); err != nil {
		return m, err
	}
	if m.targets < 1 {
		return m, fmt.Errorf("targets is %d, want 1 or more", m.targets)
	}
	if len(m.intercepts) != 0 && len(m.intercepts) != m.targets {
		return m, fmt.Errorf("%d intercepts for %d targets", len(m.intercepts), m.targets)
	}
	return m, nil
}

func inferLinearRegressor(c *InferContext) error {
	m, err := linearRegressorOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, err := sampleCount(c)
	if err != nil {
		return err
	}
	c.Set(0, ir.TensorType(ir.Float32, ir.ShapeOf(n, ir.D(int64(m.targets)))))
	return nil
}

// runLinearRegressor gives X·coefficientsᵀ + intercepts per sample, post-transformed.
func runLinearRegressor(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	m, err := linearRegressorOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	rows, err := samplesOf(x)
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := make([]float64, 0, len(rows)*m.targets)
	for _, r := range rows {
		s, err := m.scores(r)
		if err != nil {
			return c.Errorf("%v", err)
		}
		m.post.transform(s, true)
		out = append(out, s...)
	}
	c.Set(0, FromFloat64s(ir.Float32, []int64{int64(len(rows)), int64(m.targets)}, out))
	return nil
}

// --- LinearClassifier --------------------------------------------------------------

// linearClassifier is a linear model with one score per intercept; one
// score with two labels is a binary classifier whose second column
// ONNX Runtime adds.
type linearClassifier struct {
	linearModel
	labels classLabels
}

func linearClassifierOf(a attrs) (linearClassifier, error) {
	m := linearClassifier{linearModel: linearModel{coef: a.Floats("coefficients"), intercepts: a.Floats("intercepts")}}
	var err error
	if m.post, err = parsePostTransform(a.String("post_transform")); err != nil {
		return m, err
	}
	if m.labels, err = classLabelsOf(a, "classlabels_ints"); err != nil {
		return m, err
	}
	m.targets = len(m.intercepts)
	if m.targets == 0 {
		return m, fmt.Errorf("intercepts are empty, want one per class")
	}
	if m.targets != 1 && m.targets != m.labels.len() {
		return m, fmt.Errorf("%d intercepts for %d class labels", m.targets, m.labels.len())
	}
	return m, nil
}

// columns is the width of the scores output.
func (m linearClassifier) columns() int {
	if m.targets == 1 && m.labels.len() == 2 {
		return 2
	}
	return m.targets
}

func inferLinearClassifier(c *InferContext) error {
	m, err := linearClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return setClassified(c, m.labels.dtype(), m.columns())
}

// setClassified types a classifier's outputs: a label of type labels per
// sample, and [N, columns] float scores.
func setClassified(c *InferContext, labels ir.DType, columns int) error {
	n, err := sampleCount(c)
	if err != nil {
		return err
	}
	c.Set(0, ir.TensorType(labels, ir.ShapeOf(n)))
	if len(c.Outputs) > 1 {
		c.Set(1, ir.TensorType(ir.Float32, ir.ShapeOf(n, ir.D(int64(columns)))))
	}
	return nil
}

// runLinearClassifier scores each class linearly and picks the first
// highest; a single score picks the second label when positive and gets
// the complement 1-s as the first column.
func runLinearClassifier(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	m, err := linearClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	rows, err := samplesOf(x)
	if err != nil {
		return c.Errorf("%v", err)
	}
	picked := make([]int64, len(rows))
	raw := make([]bool, len(rows))
	out := make([]float64, 0, len(rows)*m.columns())
	for i, r := range rows {
		s, err := m.scores(r)
		if err != nil {
			return c.Errorf("%v", err)
		}
		if m.targets == 1 {
			// Two labels: the second when the score is positive; other
			// counts of labels give 1 or 0 themselves (ONNX Runtime).
			picked[i], raw[i] = b2i(s[0] > 0), m.labels.len() != 2
			if raw[i] && len(m.labels.strings) > 0 {
				return c.Errorf("one score with %d string labels: want 2", m.labels.len())
			}
		} else {
			picked[i] = int64(argmaxFirst(s))
		}
		m.post.transform(s, true)
		if m.columns() == 2 && m.targets == 1 {
			s = []float64{1 - s[0], s[0]}
		}
		out = append(out, s...)
	}
	c.Set(0, m.labels.tensor(picked, raw))
	if len(c.Outputs) > 1 {
		c.Set(1, FromFloat64s(ir.Float32, []int64{int64(len(rows)), int64(m.columns())}, out))
	}
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// argmaxFirst is the index of the first largest score.
func argmaxFirst(s []float64) int {
	best := 0
	for i, v := range s {
		if v > s[best] {
			best = i
		}
	}
	return best
}

// --- the kernel layer's view -----------------------------------------------------

// LinearModel is a LinearRegressor or LinearClassifier node's model, for
// the kernel layer: score t of a sample x is Intercepts[t] +
// Σ_f Coefficients[t·Features+f]·x[f], and Post (PostTransform.Of a row of
// Targets scores) transforms the row.
type LinearModel struct {
	Coefficients []float32
	Intercepts   []float32 // one per target, zeros where the node gives none
	Targets      int
	Features     int
	Post         PostTransform
	// Classifier only: Labels are the labels (nil when they are strings);
	// Columns is the scores output's width. With one score (Targets 1) the
	// label is index 1 where the score is > 0, else 0, into Labels, or
	// (RawLabels) the integer itself; two columns are 1-p and p of the
	// transformed score p. With more, the label is the first highest
	// score's.
	Labels       []int64
	StringLabels bool
	RawLabels    bool
	Columns      int
}

func (m linearModel) spec(features int) (*LinearModel, error) {
	if len(m.coef) != m.targets*features {
		return nil, fmt.Errorf("%d coefficients for %d targets of %d features, want %d", len(m.coef), m.targets, features, m.targets*features)
	}
	in := make([]float32, m.targets)
	copy(in, m.intercepts)
	return &LinearModel{Coefficients: m.coef, Intercepts: in, Targets: m.targets, Features: features,
		Post: m.post.Of(m.targets, true), Columns: m.targets}, nil
}

// LinearRegressorSpec resolves a LinearRegressor node for samples of
// the given number of features.
func (c *KernelContext) LinearRegressorSpec(features int) (*LinearModel, error) {
	m, err := linearRegressorOf(c.attrs)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	s, err := m.spec(features)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return s, nil
}

// LinearClassifierSpec resolves a LinearClassifier node for samples of
// the given number of features.
func (c *KernelContext) LinearClassifierSpec(features int) (*LinearModel, error) {
	m, err := linearClassifierOf(c.attrs)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	s, err := m.spec(features)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	s.Labels, s.StringLabels, s.Columns = m.labels.ints, len(m.labels.strings) > 0, m.columns()
	s.RawLabels = m.targets == 1 && m.labels.len() != 2
	if s.RawLabels && s.StringLabels {
		return nil, c.Errorf("one score with %d string labels: want 2", m.labels.len())
	}
	return s, nil
}
