package opcase

// Cases of the ai.onnx.ml ops the kernel layer defines
// (codegen/kernel/ops_ml.go).
var mlCases = map[string][]string{
	"TfIdfVectorizer": {
		`TfIdfVectorizer-9(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=2, ngram_counts=[0 3], ngram_indexes=[0 1 2 3 4], pool_int64s=[2 3 5 3 5 5 2]) int64[2,7]~[2 3 5 5 2 3 1 3 5 2 5 2 2 3]`,
		`TfIdfVectorizer-9(mode="IDF", min_gram_length=2, max_gram_length=2, max_skip_count=0, ngram_counts=[0 0], ngram_indexes=[1 0], pool_int64s=[2 3 3 5], weights=[0.5 2.0]) int32[9]~[2 3 5 3 5 2 3 3 5]`,
		`TfIdfVectorizer-9(mode="TFIDF", min_gram_length=1, max_gram_length=3, max_skip_count=1, ngram_counts=[0 2 6], ngram_indexes=[3 1 0 2 4], pool_int64s=[7 9 7 9 9 7 7 9 7], weights=[1.5 0.25 2.0 -1.0 3.0]) int64[3,6]~[7 9 7 7 9 9 9 7 9 7 7 9 1 7 9 7 9 7]`,
	},
	"Binarizer": {"ai.onnx.ml.Binarizer-1(threshold=0.5) T[3,4,5]", "ai.onnx.ml.Binarizer-1 T[7]",
		"ai.onnx.ml.Binarizer-1(threshold=-1.0) float[8]~[NaN -1 -0 0 0.5 1 Inf -Inf]"},
	"ArrayFeatureExtractor": {"ai.onnx.ml.ArrayFeatureExtractor-1 T[3,5], int64[2]~[4 1]",
		"ai.onnx.ml.ArrayFeatureExtractor-1 T[6], int64[2,2]~[0 5 2 2]",
		"ai.onnx.ml.ArrayFeatureExtractor-1 T[2,3,4], int64[3]=[3 0 3]"},
	// Numeric keys: some elements match (the first of equal keys counts),
	// others take the default; NaN matches a NaN key, -0 the key 0.
	"LabelEncoder": {
		"ai.onnx.ml.LabelEncoder-2(keys_int64s=[1 2 3 -4], values_floats=[0.5 1.5 2.5 -3.5], default_float=9.0) int64[4,5]",
		"ai.onnx.ml.LabelEncoder-2(keys_int64s=[3 -2 3], values_int64s=[7 8 9]) int64[10]~[3 -2 0 1 3 5 -2 7 8 3]",
		"ai.onnx.ml.LabelEncoder-2(keys_floats=[0.5 -1.0 NaN 0.0], values_int64s=[1 2 3 4], default_int64=-7) float[8]~[0.5 -1 NaN 0 -0 2 0.5 3]",
		"ai.onnx.ml.LabelEncoder-4(keys_floats=[1.5 2.5], values_floats=[10.0 20.0]) float[6]~[1.5 0 2.5 -1 1.5 3]",
	},
	// Every post_transform; a row of zero coefficients scores exactly 0,
	// which SOFTMAX_ZERO leaves out; PROBIT's scores lie in (0, 1).
	"LinearRegressor": {
		"ai.onnx.ml.LinearRegressor-1(coefficients=[0.5 -1.0 0.25 2.0 1.5 -0.5], intercepts=[0.1 -0.2], targets=2) T[4,3]",
		"ai.onnx.ml.LinearRegressor-1(coefficients=[0.3 -0.7 1.1], post_transform=\"LOGISTIC\") T[3]",
		"ai.onnx.ml.LinearRegressor-1(coefficients=[0.3 -0.7 1.1 0.2 0.9 -0.4 -1.2 0.6 0.1], intercepts=[0.5 0.0 -0.5], targets=3, post_transform=\"SOFTMAX\") T[5,3]",
		"ai.onnx.ml.LinearRegressor-1(coefficients=[0.0 0.0 0.4 -0.8 0.7 0.2], intercepts=[0.0 0.3], targets=2, post_transform=\"SOFTMAX_ZERO\") T[4,3]",
		"ai.onnx.ml.LinearRegressor-1(coefficients=[0.02 -0.03 0.01 0.5 0.25 -0.5], intercepts=[0.4 0.1], targets=2, post_transform=\"PROBIT\") T[6,3]~unit",
		"ai.onnx.ml.LinearRegressor-1(coefficients=[1.0 -2.0 0.5 0.25 -1.0 1.5], intercepts=[0.5 1.0 -0.5], targets=3, post_transform=\"LOGISTIC\") T[3,2]",
	},
	// Labels by the first highest score, or of one score by its sign: the
	// second of two labels, else the integer 1 or 0 itself.
	"LinearClassifier": {
		"ai.onnx.ml.LinearClassifier-1(coefficients=[0.5 -1.0 0.25 2.0 1.5 -0.5 -0.3 0.8 1.2], intercepts=[0.1 -0.2 0.3], classlabels_ints=[4 7 9]) T[6,3] -> 2",
		"ai.onnx.ml.LinearClassifier-1(coefficients=[0.5 -1.0 0.75], intercepts=[0.2], classlabels_ints=[3 8], post_transform=\"LOGISTIC\") T[6,3] -> 2",
		"ai.onnx.ml.LinearClassifier-1(coefficients=[0.5 -1.0 0.75], intercepts=[-0.1], classlabels_ints=[3 8]) T[5,3] -> 2",
		"ai.onnx.ml.LinearClassifier-1(coefficients=[0.4 -0.6 0.9], intercepts=[0.1], classlabels_ints=[5 6 7]) T[4,3] -> 2",
		"ai.onnx.ml.LinearClassifier-1(coefficients=[1.0 -2.0 0.5 0.25 -1.0 1.5 0.3 0.3], intercepts=[0.5 1.0 -0.5 0.0], classlabels_ints=[0 1 2 3], multi_class=1, post_transform=\"SOFTMAX\") T[5,2] -> 2",
		"ai.onnx.ml.LinearClassifier-1(coefficients=[1.0 -2.0 0.5 0.25], intercepts=[0.5 1.0], classlabels_ints=[2 1], post_transform=\"SOFTMAX_ZERO\") T[2]",
	},
	"Normalizer": {
		"ai.onnx.ml.Normalizer-1(norm=\"MAX\") T[4,5]", "ai.onnx.ml.Normalizer-1(norm=\"L1\") T[3,4]", "ai.onnx.ml.Normalizer-1(norm=\"L2\") T[6]",
		// A zero row stays as it is; NaN spreads through its row.
		"ai.onnx.ml.Normalizer-1(norm=\"L2\") float[3,3]~[0 0 0 1 -2 2 3 NaN 1]",
		"ai.onnx.ml.Normalizer-1(norm=\"MAX\") double[3,2]~[0 0 -1 -3 NaN 2]",
	},
	"Scaler": {
		"ai.onnx.ml.Scaler-1(offset=[0.5 -1.0 2.0], scale=[2.0 0.5 -1.5]) T[4,3]",
		"ai.onnx.ml.Scaler-1(offset=[0.25], scale=[3.0]) T[2,5]",
		"ai.onnx.ml.Scaler-1(offset=[1.5], scale=[-2.0 0.5]) T[2]",
	},
	// One line for every type: the float attributes for floats, the int64
	// ones for integers, the replaced value 0 where the input has zeros.
	"Imputer": {
		"ai.onnx.ml.Imputer-1(imputed_value_floats=[1.5 -2.0 7.0], imputed_value_int64s=[9 -8 7], replaced_value_float=0.0, replaced_value_int64=0) T[3,3]~[0 1 2 3 0 0 -1 4 0]",
		"ai.onnx.ml.Imputer-1(imputed_value_floats=[2.5], imputed_value_int64s=[6], replaced_value_float=-1.0, replaced_value_int64=-1) T[2,2]~[-1 1 2 -1]",
		"ai.onnx.ml.Imputer-1(imputed_value_floats=[2.5], replaced_value_float=0.5) float[4]~[0.5 NaN 1 0.5]",
	},
	// Two trees (depth 2 and 1) whose leaves vote for some of 2 targets
	// (one for target 1 twice); NaN takes the first split's true side.
	// TreeEnsemble-5: BRANCH_LEQ then two BRANCH_MEMBER nodes, sets
	// ended by NaN; a float and a NaN-holding input.
	"TreeEnsemble": {
		`ai.onnx.ml.TreeEnsemble-5(aggregate_function=1, leaf_targetids=[0 1 2 3], leaf_weights=float{1 10 1000 100}, ` +
			`membership_values=float{1.2 3.7 8 9 NaN 12 7 NaN}, n_targets=4, nodes_falseleafs=[1 0 1], nodes_falsenodeids=[2 2 3], ` +
			`nodes_featureids=[0 0 0], nodes_modes=uint8{0 6 6}, nodes_splits=float{11 232344 NaN}, nodes_trueleafs=[0 1 1], ` +
			`nodes_truenodeids=[1 0 1], post_transform=0, tree_roots=[0]) T[8,1]~[1.2 3.7 8 9 12 7 11 NaN]`,
		`ai.onnx.ml.TreeEnsemble-5(aggregate_function=1, leaf_targetids=[0 0 0], leaf_weights=float{-1 2 5}, ` +
			`n_targets=1, nodes_falseleafs=[0 1], nodes_falsenodeids=[1 2], nodes_featureids=[1 0], nodes_modes=uint8{2 0}, ` +
			`nodes_splits=float{0.5 -0.25}, nodes_trueleafs=[1 1], nodes_truenodeids=[0 1], post_transform=0, tree_roots=[0]) T[6,2]`,
	},
	"TreeEnsembleRegressor": {
		tree("SUM", "NONE", "") + " T[6,3]",
		tree("AVERAGE", "NONE", ", base_values=[0.5 -0.5]") + " T[5,3]",
		tree("MIN", "NONE", "") + " T[6,3]",
		tree("MAX", "LOGISTIC", "") + " T[6,3]",
		tree("SUM", "SOFTMAX", ", base_values=[0.25 0.0]") + " T[3]",
		tree("SUM", "NONE", "") + " float[4,3]~[NaN 0 1 0.5 NaN -1 0.5 -0.25 0 2 -0.25 NaN]",
		// Every comparison, on integers that meet the splits.
		`ai.onnx.ml.TreeEnsembleRegressor-1(nodes_treeids=[0 0 0 0 0 0 0 0 0], nodes_nodeids=[0 1 2 3 4 5 6 7 8], nodes_featureids=[0 1 2 0 0 1 0 0 0], ` +
			`nodes_modes=["BRANCH_EQ" "BRANCH_NEQ" "BRANCH_GTE" "LEAF" "LEAF" "BRANCH_LT" "LEAF" "LEAF" "LEAF"], nodes_values=[0.0 1.0 -1.0 0.0 0.0 2.0 0.0 0.0 0.0], ` +
			`nodes_truenodeids=[1 3 5 0 0 6 0 0 0], nodes_falsenodeids=[2 4 8 0 0 7 0 0 0], target_treeids=[0 0 0 0 0], target_nodeids=[3 4 6 7 8], ` +
			`target_ids=[0 0 0 0 0], target_weights=[1.0 2.0 3.0 4.0 5.0], n_targets=1) int64[8,3]~[0 1 5 0 2 -1 1 1 -1 1 2 -3 3 0 4 0 1 0 -2 -1 -1 2 5 -2]`,
	},
}

// tree is a TreeEnsembleRegressor-1 case's op and attributes for an
// aggregate function, a post_transform and more attributes.
func tree(aggregate, post, more string) string {
	return `ai.onnx.ml.TreeEnsembleRegressor-1(nodes_treeids=[0 0 0 0 0 1 1 1], nodes_nodeids=[0 1 2 3 4 0 1 2], nodes_featureids=[0 1 0 0 0 2 0 0], ` +
		`nodes_modes=["BRANCH_LEQ" "BRANCH_GT" "LEAF" "LEAF" "LEAF" "BRANCH_LT" "LEAF" "LEAF"], nodes_values=[0.5 -0.25 0.0 0.0 0.0 0.0 0.0 0.0], ` +
		`nodes_truenodeids=[1 3 0 0 0 1 0 0], nodes_falsenodeids=[2 4 0 0 0 2 0 0], nodes_missing_value_tracks_true=[1 0 0 0 0 0 0 0], ` +
		`target_treeids=[0 0 0 0 1 1 1], target_nodeids=[2 3 4 4 1 2 2], target_ids=[0 1 0 1 0 1 1], ` +
		`target_weights=[1.5 -0.5 2.0 0.25 -1.0 0.75 0.5], n_targets=2, aggregate_function="` + aggregate + `", post_transform="` + post + `"` + more + `)`
}
