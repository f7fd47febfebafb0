package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The support vector machines of ai.onnx.ml: SVMClassifier (libsvm's
// one-vs-one SVC with optional Platt-scaled probabilities, or liblinear's
// one score per class) and SVMRegressor. ONNX leaves most of the
// arithmetic to its reference; kiln computes what ONNX Runtime does, which
// skl2onnx's exports are checked against.

func svmAttrs(extra ...AttrDef) []AttrDef {
	return append([]AttrDef{{Name: "coefficients", Kind: ir.AttrFloats}, {Name: "kernel_params", Kind: ir.AttrFloats},
		defString("kernel_type", "LINEAR"), defString("post_transform", "NONE"), {Name: "rho", Kind: ir.AttrFloats},
		{Name: "support_vectors", Kind: ir.AttrFloats}}, extra...)
}

var mlSVMOps = []*Schema{
	{Domain: MLDomain, Name: "SVMClassifier", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: svmAttrs(append([]AttrDef{{Name: "prob_a", Kind: ir.AttrFloats}, {Name: "prob_b", Kind: ir.AttrFloats},
			defInts("vectors_per_class")}, classLabelAttrs("classlabels_ints")...)...),
		Types: mlNumeric, Infer: inferSVMClassifier, Run: runSVMClassifier},
	{Domain: MLDomain, Name: "SVMRegressor", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: svmAttrs(defInt("n_supports", 0), defInt("one_class", 0)),
		Types: mlNumeric, Infer: inferSVMRegressor, Run: runSVMRegressor},
}

func init() { register(mlSVMOps) }

// --- kernels ---------------------------------------------------------------------

// svmKernelType is how a sample meets a support vector.
type svmKernelType int

const (
	svmLinear svmKernelType = iota
	svmPoly
	svmRBF
	svmSigmoid
)

var svmKernelNames = []string{"LINEAR", "POLY", "RBF", "SIGMOID"}

// svmKernel is a kernel and its kernel_params (gamma, coef0, degree).
type svmKernel struct {
	kind                 svmKernelType
	gamma, coef0, degree float64
}

func svmKernelOf(a attrs) (svmKernel, error) {
	var k svmKernel
	i := slices.Index(svmKernelNames, a.String("kernel_type"))
	if i < 0 {
		return k, fmt.Errorf("kernel_type %q is not one of %v", a.String("kernel_type"), svmKernelNames)
	}
	k.kind = svmKernelType(i)
	switch p := a.Floats("kernel_params"); len(p) {
	case 0:
	case 3:
		k.gamma, k.coef0, k.degree = float64(p[0]), float64(p[1]), float64(p[2])
	default:
		return k, fmt.Errorf("kernel_params has %d values, want 3 (gamma, coef0, degree) or none", len(p))
	}
	return k, nil
}

// apply is K(x, v): x·v, (γ x·v + c)^d, exp(-γ |x-v|²) or tanh(γ x·v + c).
func (k svmKernel) apply(x []float64, v []float32) float64 {
	if k.kind == svmRBF {
		s := 0.0
		for i, e := range x {
			d := e - float64(v[i])
			s += d * d
		}
		return math.Exp(-k.gamma * s)
	}
	dot := 0.0
	for i, e := range x {
		dot += e * float64(v[i])
	}
	switch k.kind {
	case svmPoly:
		return math.Pow(k.gamma*dot+k.coef0, k.degree)
	case svmSigmoid:
		return math.Tanh(k.gamma*dot + k.coef0)
	}
	return dot
}

// rows cuts a flat table into count rows, the width it divides into.
func svmRows(table []float32, count int, what string) ([][]float32, error) {
	if count <= 0 || len(table) == 0 || len(table)%count != 0 {
		return nil, fmt.Errorf("%d %s do not divide into %d rows", len(table), what, count)
	}
	w := len(table) / count
	rows := make([][]float32, count)
	for i := range rows {
		rows[i] = table[i*w : (i+1)*w]
	}
	return rows, nil
}

// checkFeatures holds a sample's width to the model's.
func checkFeatures(rows [][]float64, want int) error {
	if len(rows) > 0 && len(rows[0]) != want {
		return fmt.Errorf("the input has %d features, the model %d", len(rows[0]), want)
	}
	return nil
}

// --- SVMClassifier ---------------------------------------------------------------

// svmClassifier is an SVMClassifier's model. With support vectors (SVC) it
// scores each pair of classes i<j, votes for i where the score is
// positive, and picks the class with the most votes; without, it scores
// each class linearly (liblinear).
type svmClassifier struct {
	kernel       svmKernel
	labels       classLabels
	post         PostTransform
	vectors      [][]float32 // support vectors, by class (starts[c] is class c's first)
	starts       []int
	perClass     []int64
	coef         []float32 // SVC: [classes-1, vectors]; linear: [classes, features]
	rho          []float32
	probA, probB []float32
	allPositive  bool // every coefficient ≥ 0: ONNX Runtime's binary label rule
}

func svmClassifierOf(a attrs) (*svmClassifier, error) {
	m := &svmClassifier{coef: a.Floats("coefficients"), rho: a.Floats("rho"), probA: a.Floats("prob_a"),
		probB: a.Floats("prob_b"), perClass: a.Ints("vectors_per_class")}
	var err error
	if m.kernel, err = svmKernelOf(a); err != nil {
		return nil, err
	}
	if m.post, err = parsePostTransform(a.String("post_transform")); err != nil {
		return nil, err
	}
	if m.labels, err = classLabelsOf(a, "classlabels_ints"); err != nil {
		return nil, err
	}
	if len(m.probA) != len(m.probB) {
		return nil, fmt.Errorf("prob_a has %d values, prob_b %d: want as many", len(m.probA), len(m.probB))
	}
	if len(m.coef) == 0 {
		return nil, fmt.Errorf("coefficients are empty")
	}
	m.allPositive = !slices.ContainsFunc(m.coef, func(v float32) bool { return v < 0 })
	count := 0
	for _, n := range m.perClass {
		if n < 0 {
			return nil, fmt.Errorf("vectors_per_class %v has a negative count", m.perClass)
		}
		m.starts = append(m.starts, count)
		count += int(n)
	}
	if count == 0 {
		return m, m.checkLinear()
	}
	if m.vectors, err = svmRows(a.Floats("support_vectors"), count, "support_vectors"); err != nil {
		return nil, err
	}
	return m, m.checkSVC()
}

// checkLinear holds liblinear's tables to their shapes: a row of
// coefficients per class and one rho, which every class shares.
func (m *svmClassifier) checkLinear() error {
	m.kernel = svmKernel{kind: svmLinear}
	if len(m.coef)%m.classes() != 0 {
		return fmt.Errorf("%d coefficients do not divide into %d classes", len(m.coef), m.classes())
	}
	if len(m.rho) == 0 {
		return fmt.Errorf("rho is empty, want one value")
	}
	return nil
}

// checkSVC holds the one-vs-one tables to their shapes: coefficients
// [classes-1, vectors], a rho (and prob_a, prob_b) per pair of classes.
func (m *svmClassifier) checkSVC() error {
	k, pairs := m.classes(), m.pairs()
	if len(m.perClass) != k {
		return fmt.Errorf("vectors_per_class has %d counts for %d class labels", len(m.perClass), k)
	}
	if k < 2 {
		return fmt.Errorf("%d class label: a one-vs-one SVM needs 2 or more", k)
	}
	if want := (k - 1) * len(m.vectors); len(m.coef) < want {
		return fmt.Errorf("%d coefficients, want (classes-1)·vectors = %d", len(m.coef), want)
	}
	if len(m.rho) < pairs {
		return fmt.Errorf("rho has %d values, want one per pair of classes (%d)", len(m.rho), pairs)
	}
	if len(m.probA) > 0 && len(m.probA) < pairs {
		return fmt.Errorf("prob_a has %d values, want one per pair of classes (%d)", len(m.probA), pairs)
	}
	if k == 2 && !m.probabilities() && m.post == PostProbit {
		return fmt.Errorf("post_transform PROBIT of a binary SVM's single score: ONNX Runtime gives no defined scores")
	}
	return nil
}

func (m *svmClassifier) classes() int { return m.labels.len() }

func (m *svmClassifier) pairs() int { return m.classes() * (m.classes() - 1) / 2 }

func (m *svmClassifier) svc() bool { return len(m.vectors) > 0 }

// probabilities tells whether Z holds Platt-scaled probabilities (SVC
// with prob_a and prob_b).
func (m *svmClassifier) probabilities() bool { return m.svc() && len(m.probA) > 0 }

// features is the width of a sample.
func (m *svmClassifier) features() int {
	if m.svc() {
		return len(m.vectors[0])
	}
	return len(m.coef) / m.classes()
}

// columns is Z's width: a probability or linear score per class, a score
// per pair of classes, or a binary SVM's score and its negation.
func (m *svmClassifier) columns() int {
	switch {
	case !m.svc() || m.probabilities():
		return m.classes()
	case m.classes() > 2:
		return m.pairs()
	}
	return 2
}

// pairScores are the one-vs-one decision values of a sample, in the
// order (0,1), (0,2), ..., (1,2), ..., and the votes they cast.
func (m *svmClassifier) pairScores(x []float64) (scores []float64, votes []float64) {
	kern := make([]float64, len(m.vectors))
	for v, sv := range m.vectors {
		kern[v] = m.kernel.apply(x, sv)
	}
	k, n := m.classes(), len(m.vectors)
	votes = make([]float64, k)
	// dual sums class c's vectors' kernels weighted by coefficient row r.
	dual := func(r, c int) float64 {
		s := 0.0
		for v := m.starts[c]; v < m.starts[c]+int(m.perClass[c]); v++ {
			s += float64(m.coef[r*n+v]) * kern[v]
		}
		return s
	}
	for i := range k {
		for j := i + 1; j < k; j++ {
			s := dual(j-1, i) + dual(i, j) + float64(m.rho[len(scores)])
			scores = append(scores, s)
			if s > 0 {
				votes[i]++
			} else {
				votes[j]++
			}
		}
	}
	return scores, votes
}

// probabilitiesOf couples the pairs' Platt-scaled probabilities into one
// per class.
func (m *svmClassifier) probabilitiesOf(scores []float64) []float64 {
	k := m.classes()
	r := make([]float64, k*k)
	p := 0
	for i := range k {
		for j := i + 1; j < k; j++ {
			v := 1 - mlLogistic(scores[p]*float64(m.probA[p])+float64(m.probB[p]))
			v = min(max(v, 1e-7), 1-1e-7)
			r[i*k+j], r[j*k+i] = v, 1-v
			p++
		}
	}
	return multiclassProbability(k, r)
}

// multiclassProbability is libsvm's pairwise coupling (Wu, Lin and Weng,
// method 2) as ONNX Runtime iterates it: at most 100 rounds, stopping when
// the error falls under 0.005/k.
func multiclassProbability(k int, r []float64) []float64 {
	q, qp, p := make([]float64, k*k), make([]float64, k), make([]float64, k)
	for i := range k {
		p[i] = 1 / float64(k)
		for j := range k {
			switch {
			case j < i:
				q[i*k+i] += r[j*k+i] * r[j*k+i]
				q[i*k+j] = q[j*k+i]
			case j > i:
				q[i*k+i] += r[j*k+i] * r[j*k+i]
				q[i*k+j] = -r[j*k+i] * r[i*k+j]
			}
		}
	}
	eps := 0.005 / float64(k)
	for range 100 {
		pqp := 0.0
		for i := range k {
			qp[i] = 0
			for j := range k {
				qp[i] += q[i*k+j] * p[j]
			}
			pqp += p[i] * qp[i]
		}
		worst := 0.0
		for i := range k {
			worst = max(worst, math.Abs(qp[i]-pqp))
		}
		if worst < eps {
			break
		}
		for i := range k {
			diff := (-qp[i] + pqp) / q[i*k+i]
			p[i] += diff
			pqp = (pqp + diff*(diff*q[i*k+i]+2*qp[i])) / (1 + diff) / (1 + diff)
			for j := range k {
				qp[j] = (qp[j] + diff*q[i*k+j]) / (1 + diff)
				p[j] /= 1 + diff
			}
		}
	}
	return p
}

// classify is a sample's label (an index into the labels) and scores.
func (m *svmClassifier) classify(x []float64) (int, []float64) {
	if !m.svc() {
		return m.classifyLinear(x)
	}
	scores, votes := m.pairScores(x)
	label := argmaxFirst(votes)
	switch {
	case m.probabilities():
		scores = m.probabilitiesOf(scores)
	case m.classes() == 2:
		return label, m.binaryScores(scores[0])
	}
	m.post.apply(scores)
	return label, scores
}

// binaryScores are Z's two columns of a binary SVM's score s, as ONNX
// Runtime writes them: -s and s, their logistics, or (SOFTMAX and
// SOFTMAX_ZERO, which it does not apply) 1-s and s.
func (m *svmClassifier) binaryScores(s float64) []float64 {
	switch m.post {
	case PostNone:
		return []float64{-s, s}
	case PostLogistic:
		return []float64{mlLogistic(-s), mlLogistic(s)}
	}
	return []float64{1 - s, s}
}

// classifyLinear scores each class x·coefficients[c] + rho[0] and picks
// the first highest; of two classes ONNX Runtime picks the second where
// the highest score is ≥ 0.5 (all coefficients ≥ 0) or > 0 (some < 0).
func (m *svmClassifier) classifyLinear(x []float64) (int, []float64) {
	f := m.features()
	scores := make([]float64, m.classes())
	for c := range scores {
		scores[c] = m.kernel.apply(x, m.coef[c*f:(c+1)*f]) + float64(m.rho[0])
	}
	label := argmaxFirst(scores)
	if top := scores[label]; m.classes() == 2 && len(m.probA) == 0 && (m.allPositive && top >= 0.5 || !m.allPositive && top > 0) {
		label = 1
	}
	m.post.apply(scores)
	return label, scores
}

func inferSVMClassifier(c *InferContext) error {
	m, err := svmClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return setClassified(c, m.labels.dtype(), m.columns())
}

// runSVMClassifier gives each sample's label (Y) and scores (Z).
func runSVMClassifier(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	m, err := svmClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	rows, err := samplesOf(x)
	if err == nil {
		err = checkFeatures(rows, m.features())
	}
	if err != nil {
		return c.Errorf("%v", err)
	}
	picked := make([]int64, len(rows))
	out := make([]float64, 0, len(rows)*m.columns())
	for i, r := range rows {
		label, scores := m.classify(r)
		picked[i] = int64(label)
		out = append(out, scores...)
	}
	c.Set(0, m.labels.tensor(picked, nil))
	if len(c.Outputs) > 1 {
		c.Set(1, FromFloat64s(ir.Float32, []int64{int64(len(rows)), int64(m.columns())}, out))
	}
	return nil
}

// --- SVMRegressor ----------------------------------------------------------------

// svmRegressor is Σ coefficients[v]·K(x, support_vectors[v]) + rho[0], or
// without support vectors x·coefficients + rho[0]; a one-class SVM gives
// the sign (±1). ONNX Runtime ignores post_transform (one score), and so
// does kiln.
type svmRegressor struct {
	kernel   svmKernel
	vectors  [][]float32
	coef     []float32
	rho      float64
	oneClass bool
}

func svmRegressorOf(a attrs) (*svmRegressor, error) {
	m := &svmRegressor{coef: a.Floats("coefficients"), oneClass: a.Int("one_class") != 0}
	var err error
	if m.kernel, err = svmKernelOf(a); err != nil {
		return nil, err
	}
	if _, err = parsePostTransform(a.String("post_transform")); err != nil {
		return nil, err
	}
	if len(m.coef) == 0 {
		return nil, fmt.Errorf("coefficients are empty")
	}
	rho := a.Floats("rho")
	if len(rho) == 0 {
		return nil, fmt.Errorf("rho is empty, want one value")
	}
	m.rho = float64(rho[0])
	n := a.Int("n_supports")
	switch {
	case n < 0:
		return nil, fmt.Errorf("n_supports is %d, want 0 or more", n)
	case n == 0:
		m.kernel = svmKernel{kind: svmLinear}
		return m, nil
	case len(m.coef) < int(n):
		return nil, fmt.Errorf("%d coefficients for %d support vectors", len(m.coef), n)
	}
	m.vectors, err = svmRows(a.Floats("support_vectors"), int(n), "support_vectors")
	return m, err
}

func (m *svmRegressor) features() int {
	if len(m.vectors) > 0 {
		return len(m.vectors[0])
	}
	return len(m.coef)
}

func (m *svmRegressor) predict(x []float64) float64 {
	s := m.rho
	if len(m.vectors) == 0 {
		s += m.kernel.apply(x, m.coef)
	}
	for v, sv := range m.vectors {
		s += float64(m.coef[v]) * m.kernel.apply(x, sv)
	}
	if m.oneClass {
		return float64(b2i(s > 0)*2 - 1)
	}
	return s
}

func inferSVMRegressor(c *InferContext) error {
	if _, err := svmRegressorOf(c.attrs); err != nil {
		return c.Errorf("%v", err)
	}
	n, err := sampleCount(c)
	if err != nil {
		return err
	}
	c.Set(0, ir.TensorType(ir.Float32, ir.ShapeOf(n, ir.D(1))))
	return nil
}

// runSVMRegressor gives one score per sample, [N,1].
func runSVMRegressor(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	m, err := svmRegressorOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	rows, err := samplesOf(x)
	if err == nil {
		err = checkFeatures(rows, m.features())
	}
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = m.predict(r)
	}
	c.Set(0, FromFloat64s(ir.Float32, []int64{int64(len(rows)), 1}, out))
	return nil
}
