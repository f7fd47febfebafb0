package ops

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// stump is a one-split regressor tree: x[0] <= 0.5 gives 1, else 2 (and NaN
// the true side); the golden tests in testdata/ml cover the rest.
func stump(extra ...*ir.Attribute) []*ir.Attribute {
	return append(extra, // first, so that they override
		ir.AttrIs("nodes_treeids", 0, 0, 0), ir.AttrIs("nodes_nodeids", 0, 1, 2), ir.AttrIs("nodes_featureids", 0, 0, 0),
		ir.AttrSs("nodes_modes", "BRANCH_LEQ", "LEAF", "LEAF"), ir.AttrFs("nodes_values", 0.5, 0, 0),
		ir.AttrIs("nodes_truenodeids", 1, 0, 0), ir.AttrIs("nodes_falsenodeids", 2, 0, 0),
		ir.AttrIs("nodes_missing_value_tracks_true", 1, 0, 0),
		ir.AttrIs("target_treeids", 0, 0), ir.AttrIs("target_nodeids", 1, 2), ir.AttrIs("target_ids", 0, 0),
		ir.AttrFs("target_weights", 1, 2), ir.AttrI("n_targets", 1))
}

// Integer inputs, which ONNX Runtime's regressor lacks, compare as their values.
func TestTreeRegressorIntegerInput(t *testing.T) {
	out, err := callML(t, "TreeEnsembleRegressor", 1, []*ir.Tensor{ir.FromSlice(ir.Int32, []int64{3, 1}, []int32{0, 1, -4})}, stump()...)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 1}, out.Float32s())
	out, err = callML(t, "TreeEnsembleRegressor", 1, []*ir.Tensor{vec(ir.Float32, float32(math.NaN()))}, stump()...)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, out.Dims, "a vector is one sample")
	assert.Equal(t, []float32{1}, out.Float32s(), "NaN takes the true side")
}

func TestTreeEnsembleErrors(t *testing.T) {
	x := ir.FromSlice(ir.Float32, []int64{2, 1}, []float32{0, 1})
	for _, c := range []struct {
		attrs []*ir.Attribute
		want  string
	}{
		{stump(ir.AttrIs("nodes_truenodeids", 0, 0, 0)), "lies on a cycle"},
		{stump(ir.AttrIs("nodes_falsenodeids", 7, 0, 0)), "leads to node 1 or 7, which the tree lacks"},
		{stump(ir.AttrSs("nodes_modes", "BRANCH_XX", "LEAF", "LEAF")), `node mode "BRANCH_XX" is not one of`},
		{stump(ir.AttrIs("nodes_featureids", 3, 0, 0)), "the trees read feature 3, the input has 1"},
		{stump(ir.AttrIs("target_ids", 0, 4)), "a leaf votes for target 4 of 1"},
		{stump(ir.AttrIs("target_nodeids", 0, 2)), "a weight is for node 0 of tree 0, which is not a leaf"},
		{stump(ir.AttrS("aggregate_function", "MEDIAN")), `aggregate_function "MEDIAN" is not one of`},
		{stump(ir.AttrS("post_transform", "TANH")), `post_transform "TANH" is not one of`},
		{stump(ir.AttrIs("nodes_featureids", 0, 0)), "nodes_featureids has 2 entries, nodes_nodeids 3"},
	} {
		_, err := callML(t, "TreeEnsembleRegressor", 1, []*ir.Tensor{x}, c.attrs...)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestTreeEnsemble5Errors(t *testing.T) {
	x := ir.FromSlice(ir.Float32, []int64{2, 1}, []float32{0, 1})
	base := func(extra ...*ir.Attribute) []*ir.Attribute {
		return append(extra,
			ir.AttrIs("nodes_featureids", 0), ir.AttrT("nodes_modes", ir.FromSlice(ir.Uint8, []int64{1}, []uint8{6})),
			ir.AttrT("nodes_splits", ir.FromSlice(ir.Float32, []int64{1}, []float32{0})),
			ir.AttrIs("nodes_truenodeids", 0), ir.AttrIs("nodes_falsenodeids", 1), ir.AttrIs("nodes_trueleafs", 1),
			ir.AttrIs("nodes_falseleafs", 1), ir.AttrIs("leaf_targetids", 0, 0),
			ir.AttrT("leaf_weights", ir.FromSlice(ir.Float32, []int64{2}, []float32{1, 2})), ir.AttrIs("tree_roots", 0),
			ir.AttrI("n_targets", 1))
	}
	members := ir.AttrT("membership_values", ir.FromSlice(ir.Float32, []int64{3}, []float32{1, 0.25, float32(math.NaN())}))
	out, err := callML(t, "TreeEnsemble", 5, []*ir.Tensor{ir.FromSlice(ir.Float32, []int64{3, 1}, []float32{0.25, 0.3, 1})}, base(members)...)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 1}, out.Float32s(), "members match exactly, not as integers")
	for _, c := range []struct {
		attrs []*ir.Attribute
		want  string
	}{
		{base(), "membership_values has no NaN-ended set for BRANCH_MEMBER node 0"},
		{base(members, ir.AttrIs("tree_roots", 3)), "tree root 3 is outside the 1 nodes"},
		{base(members, ir.AttrIs("nodes_falsenodeids", 5)), "a branch leads to node 6, outside the 3 nodes"},
		{base(members, ir.AttrI("post_transform", 9)), "post_transform is 9, want 0 (NONE) to 4 (PROBIT)"},
		{base(members, ir.AttrI("aggregate_function", -1)), "aggregate_function is -1"},
		{base(members, ir.AttrIs("leaf_targetids", 0)), "leaf_targetids has 1 entries, leaf_weights 2"},
	} {
		_, err := callML(t, "TreeEnsemble", 5, []*ir.Tensor{x}, c.attrs...)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestMLRefusalsAndErrors(t *testing.T) {
	_, err := callML(t, "ZipMap", 1, []*ir.Tensor{ir.FromSlice(ir.Float32, []int64{1, 2}, []float32{0.2, 0.8})},
		ir.AttrIs("classlabels_int64s", 0, 1))
	var u *UnsupportedError
	require.ErrorAs(t, err, &u)
	assert.Contains(t, u.Reason, "sequence of maps")
	x := ir.FromSlice(ir.Float32, []int64{2, 2}, []float32{1, 2, 3, 4})
	_, err = callML(t, "LinearClassifier", 1, []*ir.Tensor{x}, ir.AttrFs("coefficients", 1, 2), ir.AttrFs("intercepts", 0))
	assert.ErrorContains(t, err, "exactly one of classlabels_strings and classlabels_ints must be set")
	_, err = callML(t, "LinearRegressor", 1, []*ir.Tensor{x}, ir.AttrFs("coefficients", 1, 2, 3), ir.AttrFs("intercepts", 0))
	assert.ErrorContains(t, err, "3 coefficients for 1 targets of 2 features, want 2")
	_, err = callML(t, "Scaler", 1, []*ir.Tensor{x}, ir.AttrFs("offset", 1, 2, 3), ir.AttrFs("scale", 1))
	assert.ErrorContains(t, err, "offset has 3 values, want 1 or one per feature (2)")
	_, err = callML(t, "OneHotEncoder", 1, []*ir.Tensor{x}, ir.AttrIs("cats_int64s", 1), ir.AttrI("zeros", 0))
	assert.ErrorContains(t, err, "element 1 (2) is in no category, and zeros is 0")
	_, err = callML(t, "Normalizer", 1, []*ir.Tensor{x}, ir.AttrS("norm", "L3"))
	assert.ErrorContains(t, err, `norm "L3" is not one of MAX, L1, L2`)
}
