package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// The tree ensembles of ai.onnx.ml: TreeEnsembleRegressor and
// TreeEnsembleClassifier (1; 3 adds the double-precision *_as_tensor
// attributes) and TreeEnsemble (5), which all read into one forest. Where
// ONNX leaves the arithmetic open (Aggregation of targets no leaf votes
// for, the binary classifier's columns and labels), kiln computes what
// ONNX Runtime does, as skl2onnx and onnxmltools exports expect.

var legacyTreeAttrs = []AttrDef{
	defInts("nodes_treeids"), defInts("nodes_nodeids"), defInts("nodes_featureids"),
	{Name: "nodes_modes", Kind: ir.AttrStrings}, {Name: "nodes_values", Kind: ir.AttrFloats},
	defInts("nodes_truenodeids"), defInts("nodes_falsenodeids"), defInts("nodes_missing_value_tracks_true"),
	{Name: "nodes_hitrates", Kind: ir.AttrFloats}, {Name: "base_values", Kind: ir.AttrFloats},
	defString("post_transform", "NONE"),
}

// asTensorAttrs are opset 3's double-precision replacements.
func asTensorAttrs(names ...string) []AttrDef {
	var out []AttrDef
	for _, n := range names {
		out = append(out, AttrDef{Name: n + "_as_tensor", Kind: ir.AttrTensor})
	}
	return out
}

func treeRegressorAttrs(v3 bool) []AttrDef {
	a := slices.Concat(legacyTreeAttrs, []AttrDef{defInts("target_treeids"), defInts("target_nodeids"), defInts("target_ids"),
		{Name: "target_weights", Kind: ir.AttrFloats}, defInt("n_targets", 0), defString("aggregate_function", "SUM")})
	if v3 {
		a = append(a, asTensorAttrs("nodes_values", "nodes_hitrates", "base_values", "target_weights")...)
	}
	return a
}

func treeClassifierAttrs(v3 bool) []AttrDef {
	a := slices.Concat(legacyTreeAttrs, []AttrDef{defInts("class_treeids"), defInts("class_nodeids"), defInts("class_ids"),
		{Name: "class_weights", Kind: ir.AttrFloats}}, classLabelAttrs("classlabels_int64s"))
	if v3 {
		a = append(a, asTensorAttrs("nodes_values", "nodes_hitrates", "base_values", "class_weights")...)
	}
	return a
}

var treeEnsemble5Attrs = []AttrDef{
	defInt("aggregate_function", 1), defInts("leaf_targetids"), {Name: "leaf_weights", Kind: ir.AttrTensor},
	{Name: "membership_values", Kind: ir.AttrTensor}, defInt("n_targets", 0), defInts("nodes_falseleafs"),
	defInts("nodes_falsenodeids"), defInts("nodes_featureids"), {Name: "nodes_hitrates", Kind: ir.AttrTensor},
	defInts("nodes_missing_value_tracks_true"), {Name: "nodes_modes", Kind: ir.AttrTensor},
	{Name: "nodes_splits", Kind: ir.AttrTensor}, defInts("nodes_trueleafs"), defInts("nodes_truenodeids"),
	defInt("post_transform", 0), defInts("tree_roots"),
}

var mlTreeOps = []*Schema{
	{Domain: MLDomain, Name: "TreeEnsembleRegressor", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: treeRegressorAttrs(false), Types: mlNumeric, Infer: inferTreeRegressor, Run: runTreeRegressor},
	{Domain: MLDomain, Name: "TreeEnsembleRegressor", Since: 3, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: treeRegressorAttrs(true), Types: mlNumeric, Infer: inferTreeRegressor, Run: runTreeRegressor},
	{Domain: MLDomain, Name: "TreeEnsembleClassifier", Since: 1, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: treeClassifierAttrs(false), Types: mlNumeric, Infer: inferTreeClassifier, Run: runTreeClassifier},
	{Domain: MLDomain, Name: "TreeEnsembleClassifier", Since: 3, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 2,
		Attrs: treeClassifierAttrs(true), Types: mlNumeric, Infer: inferTreeClassifier, Run: runTreeClassifier},
	{Domain: MLDomain, Name: "TreeEnsemble", Since: 5, MinInputs: 1, MaxInputs: 1, MinOutputs: 1, MaxOutputs: 1,
		Attrs: treeEnsemble5Attrs, Types: []ir.DType{ir.Float32, ir.Float64}, Infer: inferTreeEnsemble, Run: runTreeEnsemble},
}

func init() { register(mlTreeOps) }

// --- the forest ------------------------------------------------------------------

// treeMode is a node's comparison; the order is TreeEnsemble-5's codes.
type treeMode uint8

const (
	branchLEQ treeMode = iota
	branchLT
	branchGTE
	branchGT
	branchEQ
	branchNEQ
	branchMember
	leafMode
)

var treeModeNames = []string{"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER", "LEAF"}

// treeNode is a branch (mode, feature, split, children as node indices)
// or a leaf (its weights).
type treeNode struct {
	mode          treeMode
	feature       int
	split         float64
	members       []float64
	missingTrue   bool
	ifTrue, ifNot int
	weights       []leafWeight
}

type leafWeight struct {
	target int
	weight float64
}

// Aggregation combines the trees' leaf weights per target (ONNX's
// aggregate_function, in TreeEnsemble-5's order).
type Aggregation int

const (
	AggAverage Aggregation = iota
	AggSum
	AggMin
	AggMax
)

var aggregationNames = []string{"AVERAGE", "SUM", "MIN", "MAX"}

// forest is a tree ensemble of any opset: nodes, the root of each tree,
// and how leaf weights become scores.
type forest struct {
	nodes    []treeNode
	roots    []int
	targets  int
	base     []float64
	agg      Aggregation
	post     PostTransform
	features int // 1 + the largest feature id a branch reads
}

// takes reports whether a branch sends x down its true side.
func (n *treeNode) takes(x float64) bool {
	if math.IsNaN(x) && n.missingTrue {
		return true
	}
	switch n.mode {
	case branchLEQ:
		return x <= n.split
	case branchLT:
		return x < n.split
	case branchGTE:
		return x >= n.split
	case branchGT:
		return x > n.split
	case branchEQ:
		return x == n.split
	case branchNEQ:
		return x != n.split
	}
	return slices.Contains(n.members, x)
}

// leaf walks one tree from root for sample x.
func (f *forest) leaf(root int, x []float64) *treeNode {
	n := &f.nodes[root]
	for n.mode != leafMode {
		next := n.ifNot
		if n.takes(x[n.feature]) {
			next = n.ifTrue
		}
		n = &f.nodes[next]
	}
	return n
}

// votes sums (or takes the least or greatest of) the weights the trees'
// leaves give each target; has tells the targets some leaf voted for.
func (f *forest) votes(x []float64) (score []float64, has []bool) {
	score, has = make([]float64, f.targets), make([]bool, f.targets)
	for _, r := range f.roots {
		for _, w := range f.leaf(r, x).weights {
			s, t := &score[w.target], w.target
			switch {
			case f.agg == AggSum || f.agg == AggAverage:
				*s += w.weight
			case !has[t], f.agg == AggMin && w.weight < *s, f.agg == AggMax && w.weight > *s:
				*s = w.weight
			}
			has[t] = true
		}
	}
	return score, has
}

// regress is a regressor's scores for x: the votes (averaged over the
// trees for AVERAGE; 0 for a target no leaf voted for), plus base_values
// when there is one per target, post-transformed.
func (f *forest) regress(x []float64) []float64 {
	s, _ := f.votes(x)
	for t := range s {
		if f.agg == AggAverage {
			s[t] /= float64(len(f.roots))
		}
		if len(f.base) == f.targets {
			s[t] += f.base[t]
		}
	}
	f.post.apply(s)
	return s
}

// check makes sure every walk ends at a leaf within the node tables and
// every feature and target is in range, so walks cannot fail.
func (f *forest) check() error {
	if len(f.roots) == 0 {
		return fmt.Errorf("the ensemble has no trees")
	}
	if f.targets < 1 {
		return fmt.Errorf("%d targets, want 1 or more", f.targets)
	}
	state := make([]uint8, len(f.nodes)) // 0 unseen, 1 on the path, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		if i < 0 || i >= len(f.nodes) {
			return fmt.Errorf("a branch leads to node %d, outside the %d nodes", i, len(f.nodes))
		}
		switch state[i] {
		case 1:
			return fmt.Errorf("node %d lies on a cycle", i)
		case 2:
			return nil
		}
		n := &f.nodes[i]
		if n.mode == leafMode {
			for _, w := range n.weights {
				if w.target < 0 || w.target >= f.targets {
					return fmt.Errorf("a leaf votes for target %d of %d", w.target, f.targets)
				}
			}
			state[i] = 2
			return nil
		}
		if n.feature < 0 {
			return fmt.Errorf("a branch reads feature %d", n.feature)
		}
		f.features = max(f.features, n.feature+1)
		state[i] = 1
		for _, next := range []int{n.ifTrue, n.ifNot} {
			if err := visit(next); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for _, r := range f.roots {
		if err := visit(r); err != nil {
			return err
		}
	}
	return nil
}

// run gives each sample's scores by fn after checking its features.
func (f *forest) run(x *ir.Tensor, fn func(row []float64)) error {
	rows, err := samplesOf(x)
	if err != nil {
		return err
	}
	if len(rows) > 0 && len(rows[0]) < f.features {
		return fmt.Errorf("the trees read feature %d, the input has %d", f.features-1, len(rows[0]))
	}
	for _, r := range rows {
		fn(r)
	}
	return nil
}

// --- opsets 1 and 3 --------------------------------------------------------------

// floatsOrTensor reads name_as_tensor (opset 3, double) if set, else name.
func floatsOrTensor(a attrs, name string) []float64 {
	if a.declares(name+"_as_tensor") && a.Has(name+"_as_tensor") {
		return Float64s(a.Tensor(name + "_as_tensor"))
	}
	v := a.Floats(name)
	out := make([]float64, len(v))
	for i, e := range v {
		out[i] = float64(e)
	}
	return out
}

type treeNodeID struct{ tree, node int64 }

// legacyForest reads opsets 1 and 3's nodes_* and the leaf votes of
// prefix (target or class). A tree's root is its first node listed.
func legacyForest(a attrs, prefix string) (*forest, error) {
	trees, ids, features := a.Ints("nodes_treeids"), a.Ints("nodes_nodeids"), a.Ints("nodes_featureids")
	modes, values := a.Strings("nodes_modes"), floatsOrTensor(a, "nodes_values")
	ifTrue, ifNot, missing := a.Ints("nodes_truenodeids"), a.Ints("nodes_falsenodeids"), a.Ints("nodes_missing_value_tracks_true")
	n := len(ids)
	for name, l := range map[string]int{"nodes_treeids": len(trees), "nodes_featureids": len(features), "nodes_modes": len(modes),
		"nodes_values": len(values), "nodes_truenodeids": len(ifTrue), "nodes_falsenodeids": len(ifNot)} {
		if l != n && !(name == "nodes_values" && l == 0) {
			return nil, fmt.Errorf("%s has %d entries, nodes_nodeids %d", name, l, n)
		}
	}
	if len(missing) != 0 && len(missing) != n {
		return nil, fmt.Errorf("nodes_missing_value_tracks_true has %d entries, nodes_nodeids %d", len(missing), n)
	}
	f := &forest{nodes: make([]treeNode, n)}
	index := map[treeNodeID]int{}
	for i := range n {
		id := treeNodeID{trees[i], ids[i]}
		if _, dup := index[id]; dup {
			return nil, fmt.Errorf("tree %d has node %d twice", id.tree, id.node)
		}
		index[id] = i
		if i == 0 || trees[i] != trees[i-1] {
			f.roots = append(f.roots, i)
		}
	}
	for i := range n {
		m := slices.Index(treeModeNames, modes[i])
		if m < 0 || treeMode(m) == branchMember {
			return nil, fmt.Errorf("node mode %q is not one of BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ, LEAF", modes[i])
		}
		nd := treeNode{mode: treeMode(m), feature: int(features[i]), missingTrue: len(missing) > 0 && missing[i] != 0}
		if len(values) > 0 {
			nd.split = values[i]
		}
		if nd.mode != leafMode {
			var ok1, ok2 bool
			nd.ifTrue, ok1 = index[treeNodeID{trees[i], ifTrue[i]}]
			nd.ifNot, ok2 = index[treeNodeID{trees[i], ifNot[i]}]
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("node %d of tree %d leads to node %d or %d, which the tree lacks", ids[i], trees[i], ifTrue[i], ifNot[i])
			}
		}
		f.nodes[i] = nd
	}
	wTrees, wNodes, wIDs, weights := a.Ints(prefix+"_treeids"), a.Ints(prefix+"_nodeids"), a.Ints(prefix+"_ids"), floatsOrTensor(a, prefix+"_weights")
	if len(wNodes) != len(wTrees) || len(wIDs) != len(wTrees) || len(weights) != len(wTrees) {
		return nil, fmt.Errorf("%s_treeids, _nodeids, _ids and _weights have %d, %d, %d and %d entries, want one length",
			prefix, len(wTrees), len(wNodes), len(wIDs), len(weights))
	}
	for k := range wTrees {
		i, ok := index[treeNodeID{wTrees[k], wNodes[k]}]
		if !ok || f.nodes[i].mode != leafMode {
			return nil, fmt.Errorf("a weight is for node %d of tree %d, which is not a leaf", wNodes[k], wTrees[k])
		}
		f.nodes[i].weights = append(f.nodes[i].weights, leafWeight{int(wIDs[k]), weights[k]})
	}
	var err error
	if f.post, err = parsePostTransform(a.String("post_transform")); err != nil {
		return nil, err
	}
	f.base = floatsOrTensor(a, "base_values")
	return f, nil
}

func treeRegressorOf(a attrs) (*forest, error) {
	f, err := legacyForest(a, "target")
	if err != nil {
		return nil, err
	}
	f.targets = int(a.Int("n_targets"))
	agg := slices.Index(aggregationNames, a.String("aggregate_function"))
	if agg < 0 {
		return nil, fmt.Errorf("aggregate_function %q is not one of %v", a.String("aggregate_function"), aggregationNames)
	}
	f.agg = Aggregation(agg)
	return f, f.check()
}

func inferTreeRegressor(c *InferContext) error {
	f, err := treeRegressorOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, err := sampleCount(c)
	if err != nil {
		return err
	}
	c.Set(0, ir.TensorType(ir.Float32, ir.ShapeOf(n, ir.D(int64(f.targets)))))
	return nil
}

func runTreeRegressor(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	f, err := treeRegressorOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	var out []float64
	if err := f.run(x, func(r []float64) { out = append(out, f.regress(r)...) }); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, FromFloat64s(ir.Float32, []int64{int64(len(out) / f.targets), int64(f.targets)}, out))
	return nil
}

// --- the classifier --------------------------------------------------------------

// treeClassifier is a forest voting for classes, with ONNX Runtime's
// reading of two classes: binary when every weight is for one class
// (XGBoost's and LightGBM's exports), the scores then s and its
// complement.
type treeClassifier struct {
	*forest
	labels      classLabels
	binary      bool
	allPositive bool
}

func treeClassifierOf(a attrs) (*treeClassifier, error) {
	f, err := legacyForest(a, "class")
	if err != nil {
		return nil, err
	}
	c := &treeClassifier{forest: f, allPositive: true}
	if c.labels, err = classLabelsOf(a, "classlabels_int64s"); err != nil {
		return nil, err
	}
	f.targets, f.agg = c.labels.len(), AggSum
	if f.targets < 2 {
		return nil, fmt.Errorf("%d class label, want 2 or more", f.targets)
	}
	classes := map[int64]bool{}
	for _, id := range a.Ints("class_ids") {
		classes[id] = true
	}
	for _, w := range floatsOrTensor(a, "class_weights") {
		c.allPositive = c.allPositive && w >= 0
	}
	c.binary = f.targets == 2 && len(classes) == 1
	return c, f.check()
}

// classify gives a sample's label (an index into the labels, or with raw
// the integer label itself) and its scores, as ONNX Runtime does.
func (c *treeClassifier) classify(x []float64) (label int64, raw bool, scores []float64) {
	s, has := c.votes(x)
	if c.targets > 2 {
		for k := range min(len(c.base), len(s)) {
			s[k] += c.base[k]
			has[k] = true
		}
		label = -1
		for k := range s {
			if has[k] && (label < 0 || s[k] > s[label]) {
				label = int64(k)
			}
		}
		c.post.apply(s)
		return max(label, 0), false, s
	}
	single := false // one score s, the second column derived from it
	switch len(c.base) {
	case 2:
		if has[1] { // ONNX Runtime adds base_values[1] to class 0's votes
			s[1] = c.base[1] + s[0]
			s[0] = -s[1]
		} else {
			s[0] += c.base[0]
			s[1] += c.base[1]
		}
	case 1:
		s[0] += c.base[0]
		single = !has[1]
	case 0:
		single = !has[1]
	}
	positive := s[0]
	if !single && has[1] {
		positive = s[1]
	} else if !has[0] {
		positive = 0
	}
	complement := false // 1-s for positive weights, else -s
	switch {
	case c.binary && c.allPositive:
		label, complement = b2i(positive > 0.5), true
	case c.binary:
		label = b2i(positive > 0)
	default: // ONNX Runtime gives labels 1 and 0 themselves, not classlabels_int64s' entries
		label, raw = b2i(positive > 0), true
	}
	if !single {
		c.post.apply(s)
		return label, raw, s
	}
	switch {
	case c.post == PostProbit:
		return label, raw, []float64{probit(s[0]), 0}
	case complement:
		return label, raw, []float64{1 - s[0], s[0]}
	case c.post == PostLogistic:
		return label, raw, []float64{mlLogistic(-s[0]), mlLogistic(s[0])}
	}
	return label, raw, []float64{-s[0], s[0]}
}

func inferTreeClassifier(c *InferContext) error {
	t, err := treeClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	return setClassified(c, t.labels.dtype(), t.targets)
}

func runTreeClassifier(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	t, err := treeClassifierOf(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	var picked []int64
	var raw []bool
	var out []float64
	err = t.run(x, func(r []float64) {
		label, isRaw, s := t.classify(r)
		picked, raw, out = append(picked, label), append(raw, isRaw), append(out, s...)
	})
	if err != nil {
		return c.Errorf("%v", err)
	}
	if len(t.labels.strings) > 0 {
		raw = nil // string labels are picked by index
	}
	c.Set(0, t.labels.tensor(picked, raw))
	if len(c.Outputs) > 1 {
		c.Set(1, FromFloat64s(ir.Float32, []int64{int64(len(picked)), int64(t.targets)}, out))
	}
	return nil
}

// --- TreeEnsemble-5 --------------------------------------------------------------

// ensemble5Of reads TreeEnsemble-5: branches in nodes_*, whose children
// are branches or (by nodes_*leafs) entries of leaf_*, one weight each.
func ensemble5Of(a attrs) (*forest, error) {
	features, ifTrue, ifNot := a.Ints("nodes_featureids"), a.Ints("nodes_truenodeids"), a.Ints("nodes_falsenodeids")
	trueLeafs, falseLeafs, missing := a.Ints("nodes_trueleafs"), a.Ints("nodes_falseleafs"), a.Ints("nodes_missing_value_tracks_true")
	if a.Tensor("nodes_modes") == nil || a.Tensor("nodes_splits") == nil || a.Tensor("leaf_weights") == nil {
		return nil, fmt.Errorf("nodes_modes, nodes_splits and leaf_weights are required")
	}
	modes, splits := Int64s(a.Tensor("nodes_modes")), Float64s(a.Tensor("nodes_splits"))
	targets, weights := a.Ints("leaf_targetids"), Float64s(a.Tensor("leaf_weights"))
	n := len(features)
	for name, l := range map[string]int{"nodes_modes": len(modes), "nodes_splits": len(splits), "nodes_truenodeids": len(ifTrue),
		"nodes_falsenodeids": len(ifNot), "nodes_trueleafs": len(trueLeafs), "nodes_falseleafs": len(falseLeafs)} {
		if l != n {
			return nil, fmt.Errorf("%s has %d entries, nodes_featureids %d", name, l, n)
		}
	}
	if len(missing) != 0 && len(missing) != n {
		return nil, fmt.Errorf("nodes_missing_value_tracks_true has %d entries, nodes_featureids %d", len(missing), n)
	}
	if len(targets) != len(weights) {
		return nil, fmt.Errorf("leaf_targetids has %d entries, leaf_weights %d", len(targets), len(weights))
	}
	f := &forest{nodes: make([]treeNode, n, n+len(weights)), targets: int(a.Int("n_targets"))}
	for k := range weights {
		f.nodes = append(f.nodes, treeNode{mode: leafMode, weights: []leafWeight{{int(targets[k]), weights[k]}}})
	}
	child := func(id, leaf int64) int {
		if leaf != 0 {
			return n + int(id)
		}
		return int(id)
	}
	var members []float64
	if t := a.Tensor("membership_values"); t != nil {
		members = Float64s(t)
	}
	for i := range n {
		if modes[i] < 0 || modes[i] > int64(branchMember) {
			return nil, fmt.Errorf("node %d has mode %d, want 0 to 6", i, modes[i])
		}
		if ifTrue[i] < 0 || ifNot[i] < 0 {
			return nil, fmt.Errorf("node %d leads to a negative index", i)
		}
		nd := treeNode{mode: treeMode(modes[i]), feature: int(features[i]), split: splits[i],
			missingTrue: len(missing) > 0 && missing[i] != 0, ifTrue: child(ifTrue[i], trueLeafs[i]), ifNot: child(ifNot[i], falseLeafs[i])}
		if nd.mode == branchMember { // this node's set: membership_values up to the next NaN
			end := slices.IndexFunc(members, math.IsNaN)
			if end < 0 {
				return nil, fmt.Errorf("membership_values has no NaN-ended set for BRANCH_MEMBER node %d", i)
			}
			nd.members, members = members[:end], members[end+1:]
		}
		f.nodes[i] = nd
	}
	for _, r := range a.Ints("tree_roots") {
		if r < 0 || r >= int64(n) {
			return nil, fmt.Errorf("tree root %d is outside the %d nodes", r, n)
		}
		nd := f.nodes[r]
		if trueLeafs[r] != 0 && falseLeafs[r] != 0 && ifTrue[r] == ifNot[r] { // a tree that is one leaf
			f.roots = append(f.roots, nd.ifTrue)
			continue
		}
		f.roots = append(f.roots, int(r))
	}
	agg, post := a.Int("aggregate_function"), a.Int("post_transform")
	if agg < 0 || agg > int64(AggMax) {
		return nil, fmt.Errorf("aggregate_function is %d, want 0 (AVERAGE) to 3 (MAX)", agg)
	}
	if post < 0 || post > int64(PostProbit) {
		return nil, fmt.Errorf("post_transform is %d, want 0 (NONE) to 4 (PROBIT)", post)
	}
	f.agg, f.post = Aggregation(agg), PostTransform(post)
	return f, f.check()
}

func inferTreeEnsemble(c *InferContext) error {
	f, err := ensemble5Of(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	n, err := sampleCount(c)
	if err != nil {
		return err
	}
	c.Set(0, ir.TensorType(c.In(0).Elem, ir.ShapeOf(n, ir.D(int64(f.targets)))))
	return nil
}

func runTreeEnsemble(c *KernelContext) error {
	x := c.In(0)
	if err := checkType(c, x.DType); err != nil {
		return err
	}
	f, err := ensemble5Of(c.attrs)
	if err != nil {
		return c.Errorf("%v", err)
	}
	var out []float64
	if err := f.run(x, func(r []float64) { out = append(out, f.regress(r)...) }); err != nil {
		return c.Errorf("%v", err)
	}
	c.Set(0, FromFloat64s(x.DType, []int64{int64(len(out) / f.targets), int64(f.targets)}, out))
	return nil
}

// --- the kernel layer's view -----------------------------------------------------

// TreeLeaf is a leaf's entry in Forest.Modes; branches have
// TreeEnsemble-5's codes, 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER).
const TreeLeaf = int64(leafMode)

// TreeMember is a BRANCH_MEMBER node's entry in Forest.Modes.
const TreeMember = int64(branchMember)

// Forest is a tree ensemble's nodes as tables, for the kernel layer. A
// walk starts at a root and, Depth times, moves from a branch to True
// where x[Features] compares with Splits by Modes (or is NaN and
// MissingTrue is 1), else to False; a leaf stays. Scores [nodes, Targets]
// are each leaf's weights per target (combined within the leaf as
// Aggregate combines the trees), Votes 1 where it has one; Base is added
// after aggregating, and Post (PostTransform.Of a row of Targets) last.
type Forest struct {
	Modes, Features, MissingTrue, True, False []int64
	Splits                                    []float64
	Roots                                     []int64
	Depth, Targets                            int
	Scores                                    []float64
	Votes                                     []int64
	Base                                      []float64
	Aggregate                                 Aggregation
	Post                                      PostTransform
	// Sets, for BRANCH_MEMBER nodes (mode 6), is each node's set of
	// values in a row of MaxSet, padded with NaN (which equals nothing).
	Sets   []float64
	MaxSet int
}

// ForestSpec resolves a TreeEnsembleRegressor or TreeEnsemble node for
// samples of the given number of features; BRANCH_MEMBER nodes, whose
// sets are not tables of one width, are refused.
func (c *KernelContext) ForestSpec(features int) (*Forest, error) {
	var f *forest
	var err error
	switch c.Node.OpType {
	case "TreeEnsembleRegressor":
		f, err = treeRegressorOf(c.attrs)
	case "TreeEnsemble":
		f, err = ensemble5Of(c.attrs)
	default:
		err = fmt.Errorf("%s is not a tree regressor", c.Node.OpType)
	}
	if err == nil && features < max(f.features, 1) {
		err = fmt.Errorf("the trees read feature %d, the input has %d", max(f.features, 1)-1, features)
	}
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return f.tables()
}

func (f *forest) tables() (*Forest, error) {
	n, t := len(f.nodes), f.targets
	s := &Forest{Targets: t, Aggregate: f.agg, Post: f.post.Of(t, false), Scores: make([]float64, n*t), Votes: make([]int64, n*t),
		Base: make([]float64, t)}
	if len(f.base) == t {
		copy(s.Base, f.base)
	}
	for _, nd := range f.nodes {
		s.MaxSet = max(s.MaxSet, len(nd.members))
	}
	if s.MaxSet > 0 {
		s.Sets = make([]float64, n*s.MaxSet)
		for i := range s.Sets {
			s.Sets[i] = math.NaN()
		}
	}
	for i, nd := range f.nodes {
		copy(s.Sets[i*s.MaxSet:], nd.members)
		next := [2]int{nd.ifTrue, nd.ifNot}
		if nd.mode == leafMode {
			next = [2]int{i, i}
		}
		s.Modes, s.Features, s.Splits = append(s.Modes, int64(nd.mode)), append(s.Features, int64(max(nd.feature, 0))), append(s.Splits, nd.split)
		s.MissingTrue, s.True, s.False = append(s.MissingTrue, b2i(nd.missingTrue)), append(s.True, int64(next[0])), append(s.False, int64(next[1]))
		for _, w := range nd.weights {
			at := i*t + w.target
			switch v := &s.Scores[at]; {
			case f.agg == AggSum || f.agg == AggAverage:
				*v += w.weight
			case s.Votes[at] == 0, f.agg == AggMin && w.weight < *v, f.agg == AggMax && w.weight > *v:
				*v = w.weight
			}
			s.Votes[at] = 1
		}
	}
	depth := make([]int, n) // the longest path below each node; check ruled out cycles
	var below func(i int) int
	below = func(i int) int {
		if nd := f.nodes[i]; nd.mode != leafMode && depth[i] == 0 {
			depth[i] = 1 + max(below(nd.ifTrue), below(nd.ifNot))
		}
		return depth[i]
	}
	for _, r := range f.roots {
		s.Roots = append(s.Roots, int64(r))
		s.Depth = max(s.Depth, below(r))
	}
	return s, nil
}
