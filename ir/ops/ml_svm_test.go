package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// callSVM runs SVMClassifier (both outputs) or SVMRegressor on x, checking
// the outputs' types against inference; testdata/ml's goldens from ONNX
// Runtime cover the kernels, Platt coupling and post_transforms.
func callSVM(t *testing.T, op string, x *ir.Tensor, attrs ...*ir.Attribute) ([]*ir.Tensor, error) {
	t.Helper()
	s, err := Lookup(MLDomain, op, 1)
	require.NoError(t, err)
	n := &ir.Node{Domain: MLDomain, OpType: op, Attrs: attrs, Inputs: []*ir.Value{{Name: "x", Type: x.Type()}}}
	for i := range s.MaxOutputs {
		n.Outputs = append(n.Outputs, &ir.Value{Name: fmt.Sprint("out", i)})
	}
	if err := s.CheckNode(n); err != nil {
		return nil, err
	}
	c := NewKernelContext(s, n, 1, []*ir.Tensor{x})
	if err := s.Run(c); err != nil {
		return nil, err
	}
	ic := NewInferContext(s, n, 1, []ir.Type{x.Type()}, []*ir.Tensor{x})
	if assert.NoError(t, s.Infer(ic)) {
		for i, o := range c.Outputs {
			assert.Equal(t, ic.Outputs[i].String(), o.Type().String(), "output %d: inferred type vs kernel result", i)
		}
	}
	return c.Outputs, nil
}

// threeClassSVC is a linear-kernel SVC of one feature and one support
// vector per class (1, 2 and 3).
func threeClassSVC(extra ...*ir.Attribute) []*ir.Attribute {
	return append(extra, ir.AttrIs("classlabels_ints", 10, 20, 30), ir.AttrIs("vectors_per_class", 1, 1, 1),
		ir.AttrFs("support_vectors", 1, 2, 3), ir.AttrFs("coefficients", 0.5, -1, 0.25, 2, -0.5, 1.5),
		ir.AttrFs("rho", 0.1, -0.2, 0.3), ir.AttrS("kernel_type", "LINEAR"))
}

// TestSVMClassifierVotes checks the one-vs-one scores against libsvm's
// formula written out per pair: the pair (i, j) weighs class i's vectors
// by coefficient row j-1 and class j's by row i.
func TestSVMClassifierVotes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	x := randTensor(rng, ir.Float32, 6, 1)
	out, err := callSVM(t, "SVMClassifier", x, threeClassSVC()...)
	require.NoError(t, err)
	a, b := []float64{0.5, -1, 0.25}, []float64{2, -0.5, 1.5} // coefficient rows 0 and 1
	for r, v := range Float64s(x) {
		k := []float64{v * 1, v * 2, v * 3}
		want := []float64{a[0]*k[0] + a[1]*k[1] + 0.1, b[0]*k[0] + a[2]*k[2] - 0.2, b[1]*k[1] + b[2]*k[2] + 0.3}
		assertClose(t, want, Float64s(out[1])[r*3:r*3+3], 1e-6, 1e-6, fmt.Sprint("row ", r))
		votes := make([]int, 3)
		for p, pair := range [][2]int{{0, 1}, {0, 2}, {1, 2}} {
			if want[p] > 0 {
				votes[pair[0]]++
			} else {
				votes[pair[1]]++
			}
		}
		best := 0
		for c := range votes {
			if votes[c] > votes[best] {
				best = c
			}
		}
		assert.Equal(t, []int64{10, 20, 30}[best], out[0].Int64s()[r], "row %d: votes %v", r, votes)
	}
}

// TestSVMProbabilitiesCouple: with Platt scaling, Z is a distribution per
// sample, and of two classes the pair's probability (to the tolerance at
// which the coupling's iteration stops).
func TestSVMProbabilitiesCouple(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	x := randTensor(rng, ir.Float64, 5, 1)
	out, err := callSVM(t, "SVMClassifier", x, threeClassSVC(ir.AttrFs("prob_a", -1.5, -0.7, -2), ir.AttrFs("prob_b", 0.1, 0, -0.3))...)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 3}, out[1].Dims)
	for r := range 5 {
		p := Float64s(out[1])[r*3 : r*3+3]
		assert.InDelta(t, 1, p[0]+p[1]+p[2], 1e-5, "row %d: %v", r, p)
	}
	two := []*ir.Attribute{ir.AttrSs("classlabels_strings", "no", "yes"), ir.AttrIs("vectors_per_class", 1, 1),
		ir.AttrFs("support_vectors", 1, -1), ir.AttrFs("coefficients", 0.5, -0.5), ir.AttrFs("rho", 0.2),
		ir.AttrS("kernel_type", "RBF"), ir.AttrFs("kernel_params", 0.5, 0, 0), ir.AttrFs("prob_a", -2), ir.AttrFs("prob_b", 0.25)}
	out, err = callSVM(t, "SVMClassifier", x, two...)
	require.NoError(t, err)
	for r, v := range Float64s(x) {
		s := 0.5*math.Exp(-0.5*(v-1)*(v-1)) - 0.5*math.Exp(-0.5*(v+1)*(v+1)) + 0.2
		p := 1 - 1/(1+math.Exp(-(s*-2+0.25)))
		assert.InDeltaSlice(t, []float64{p, 1 - p}, Float64s(out[1])[r*2:r*2+2], 0.005, "row %d", r)
	}
}

func TestSVMRegressor(t *testing.T) {
	x := ir.FromSlice(ir.Int32, []int64{3, 2}, []int32{1, 2, -3, 0, 2, 2})
	sv := []*ir.Attribute{ir.AttrI("n_supports", 2), ir.AttrFs("support_vectors", 1, 0, 0, 1), ir.AttrFs("coefficients", 2, -1),
		ir.AttrFs("rho", 0.5), ir.AttrS("kernel_type", "POLY"), ir.AttrFs("kernel_params", 1, 1, 2)}
	out, err := callSVM(t, "SVMRegressor", x, sv...)
	require.NoError(t, err)
	// 2(x0+1)² - (x1+1)² + 0.5
	assert.Equal(t, []float32{8 - 9 + 0.5, 8 - 1 + 0.5, 18 - 9 + 0.5}, out[0].Float32s())
	out, err = callSVM(t, "SVMRegressor", x, append(sv, ir.AttrI("one_class", 1))...)
	require.NoError(t, err)
	assert.Equal(t, []float32{-1, 1, 1}, out[0].Float32s())
	out, err = callSVM(t, "SVMRegressor", vec(ir.Float32, float32(2), 3), ir.AttrFs("coefficients", 0.5, -1), ir.AttrFs("rho", 1))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, out[0].Dims, "a vector is one sample")
	assert.Equal(t, []float32{1 - 3 + 1}, out[0].Float32s(), "no support vectors: x·coefficients + rho")
}

func TestSVMErrors(t *testing.T) {
	x := ir.FromSlice(ir.Float32, []int64{2, 1}, []float32{0, 1})
	for _, c := range []struct {
		op    string
		attrs []*ir.Attribute
		want  string
	}{
		{"SVMClassifier", threeClassSVC(ir.AttrS("kernel_type", "CUBIC")), `kernel_type "CUBIC" is not one of`},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("kernel_params", 1, 2)), "kernel_params has 2 values, want 3"},
		{"SVMClassifier", threeClassSVC(ir.AttrIs("vectors_per_class", 1, 2)), "vectors_per_class has 2 counts for 3 class labels"},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("coefficients", 1, 2)), "2 coefficients, want (classes-1)·vectors = 6"},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("rho", 1)), "rho has 1 values, want one per pair of classes (3)"},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("support_vectors", 1, 2)), "2 support_vectors do not divide into 3 rows"},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("prob_a", 1, 2, 3)), "prob_a has 3 values, prob_b 0"},
		{"SVMClassifier", threeClassSVC(ir.AttrFs("support_vectors", 1, 2, 3, 4, 5, 6)), "the input has 1 features, the model 2"},
		{"SVMClassifier", threeClassSVC(ir.AttrSs("classlabels_strings", "a")), "exactly one of classlabels_strings and classlabels_ints"},
		{"SVMClassifier", []*ir.Attribute{ir.AttrIs("classlabels_ints", 0, 1), ir.AttrIs("vectors_per_class", 1, 1),
			ir.AttrFs("support_vectors", 1, 2), ir.AttrFs("coefficients", 1, -1), ir.AttrFs("rho", 0), ir.AttrS("post_transform", "PROBIT")},
			"PROBIT of a binary SVM's single score"},
		{"SVMClassifier", []*ir.Attribute{ir.AttrIs("classlabels_ints", 0, 1), ir.AttrFs("coefficients", 1, 2, 3)},
			"3 coefficients do not divide into 2 classes"},
		{"SVMRegressor", []*ir.Attribute{ir.AttrI("n_supports", 2), ir.AttrFs("coefficients", 1), ir.AttrFs("rho", 0)},
			"1 coefficients for 2 support vectors"},
		{"SVMRegressor", []*ir.Attribute{ir.AttrFs("coefficients", 1), ir.AttrFs("rho", 0), ir.AttrS("post_transform", "CUBE")},
			`post_transform "CUBE" is not one of`},
		{"SVMRegressor", []*ir.Attribute{ir.AttrFs("coefficients", 1, 2), ir.AttrFs("rho", 0)}, "the input has 1 features, the model 2"},
		{"SVMRegressor", []*ir.Attribute{ir.AttrFs("coefficients", 1)}, "rho is empty"},
	} {
		_, err := callSVM(t, c.op, x, c.attrs...)
		assert.ErrorContains(t, err, c.want, "%s %v", c.op, c.attrs)
	}
}
