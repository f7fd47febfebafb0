package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Ops of the ai.onnx.ml domain that compute on plain tensors of numbers:
// a threshold, a gather along the last axis, a lookup table, the linear
// models and the preprocessing of features. Their meaning (LabelEncoder's
// keys, values and default, a linear model's tables, a Scaler's offsets)
// is resolved by ir/ops; models compute in float64, as the reference.

// defBinarizer gives 1 where x > threshold, else 0 (NaN too), in x's type.
// Integers compare as float64 numbers, as the reference compares them.
func defBinarizer(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	th := float64(c.Float("threshold"))
	ct := ComputeType(x.DType)
	if !ct.IsFloat() {
		ct = ir.Float64
	}
	above := Gt(CastTo(Load(x, Vars(x.Rank())...), ct), Const(ct, th))
	c.Emit(copyOf(out, Select(above, IntConst(x.DType, 1), IntConst(x.DType, 0))))
	return nil
}

// defArrayFeatureExtractor gathers along x's last axis the elements that
// y's indices (all of them, in order) name; a vector x gives one row. An
// index outside the axis (which the reference refuses) is clamped into it.
func defArrayFeatureExtractor(c *Ctx) error {
	x, y, out := c.In[0], c.In[1], c.Out[0]
	if x.Rank() == 0 {
		return c.Unsupported("input is a scalar, want rank 1 or more")
	}
	last := x.Dims[x.Rank()-1]
	j := Clamp(CastTo(Load(y, unravel(Var(out.Rank()-1), y.Dims)...), ir.Int64), C(0), Sub(last, C(1)))
	at := []*Expr{j}
	if x.Rank() > 1 {
		at = append(Vars(x.Rank()-1), j)
	}
	c.Emit(copyOf(out, Load(x, at...)))
	return nil
}

// unravel is the index into a row-major tensor of dims of its element at
// flat position i.
func unravel(i *Expr, dims []*Expr) []*Expr {
	idx := make([]*Expr, len(dims))
	for d := len(dims) - 1; d > 0; d-- {
		idx[d], i = Rem(i, dims[d]), Div(i, dims[d])
	}
	if len(dims) > 0 {
		idx[0] = i
	}
	return idx
}

// defLabelEncoder maps each element to the value of the first key equal
// to it (a min over the keys' positions, len(keys) where none is), or the
// default. Keys and values are constant tables; string maps stay with the
// reference, which engines cannot bind.
func defLabelEncoder(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	m, err := c.LabelEncoderSpec(x.DType)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if m.Keys.DType == ir.String || m.Values.DType == ir.String {
		return c.Unsupported("string keys or values (engines bind numeric tensors only)")
	}
	fallback := StoreAs(constOf(m.Default), out.DType)
	n := m.Keys.Len()
	if n == 0 {
		c.Emit(copyOf(out, fallback))
		return nil
	}
	keys, values := c.Table(m.Keys), c.Table(m.Values)
	xv, k := Load(x, Vars(x.Rank())...), Load(keys, RVar(0))
	match := Eq(xv, k)
	if x.DType.IsFloat() {
		match = Or(match, And(IsNaN(xv), IsNaN(k)))
	}
	found := Acc(ir.Int64)
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: Select(match, RVar(0), C(n)),
		Reduce: &Reduce{Op: MinOp, Extents: Ints(n),
			Post: StoreAs(LoadOr(Lt(found, C(n)), values, fallback, found), out.DType)}})
	return nil
}

// constOf is t's single element as a constant of its type.
func constOf(t *ir.Tensor) *Expr {
	if t.DType.IsFloat() {
		return Const(t.DType, t.Float64At(0))
	}
	return IntConst(t.DType, t.Int64At(0))
}

// --- the linear models -----------------------------------------------------------

// mlNumeric are the classical-ML models' input types (ir/ops mlNumeric).
var mlNumeric = []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}

// sampleAt is feature f of sample n of an [N,F] or [F] input, as float64.
func sampleAt(x *Buffer, n, f *Expr) *Expr {
	if x.Rank() == 1 {
		return CastTo(Load(x, f), ir.Float64)
	}
	return CastTo(Load(x, n, f), ir.Float64)
}

// staticFeatures is the width F of an [N,F] or [F] input, which a model's
// tables are checked against when compiling.
func staticFeatures(c *Ctx, x *Buffer) (int, error) {
	if x.Rank() != 1 && x.Rank() != 2 {
		return 0, c.Unsupported("input of rank %d, want [N,F] or [F]", x.Rank())
	}
	f, ok := x.Dims[x.Rank()-1].IntValue()
	if !ok {
		return 0, c.Unsupported("the number of features is not known when compiling")
	}
	return int(f), nil
}

// linearScores emits the kernel writing each sample's raw scores,
// intercepts[t] + Σ_f coefficients[t,f]·x[n,f], into a float64 temporary
// [N, targets].
func linearScores(c *Ctx, x *Buffer, n *Expr, m *ops.LinearModel) *Buffer {
	coef := c.Table(ir.FromSlice(ir.Float32, []int64{int64(m.Targets), int64(m.Features)}, m.Coefficients))
	in := c.Table(ir.FromSlice(ir.Float32, []int64{int64(m.Targets)}, m.Intercepts))
	scores := c.Temp(ir.Float64, n, C(int64(m.Targets)))
	t := Var(1)
	c.Emit(&Kernel{Out: scores, Space: scores.Dims,
		Value:  Mul(CastTo(Load(coef, t, RVar(0)), ir.Float64), sampleAt(x, Var(0), RVar(0))),
		Reduce: &Reduce{Op: SumOp, Extents: Ints(int64(m.Features)), Post: Add(Acc(ir.Float64), CastTo(Load(in, t), ir.Float64))}})
	return scores
}

// samples is N of an [N,F] or [F] input.
func samples(x *Buffer) *Expr {
	if x.Rank() == 1 {
		return C(1)
	}
	return x.Dims[0]
}

// postTransformed is one score v transformed elementwise (post is not a
// softmax): 1/(1+e^-v), or √2·erfinv(2v-1) in Winitzki's approximation,
// as ir/ops computes PROBIT.
func postTransformed(post ops.PostTransform, v *Expr) *Expr {
	switch post {
	case ops.PostLogistic:
		return Sigmoid(v)
	case ops.PostProbit:
		x := Sub(Mul(num(v, 2), v), num(v, 1))
		l := Log(Mul(Sub(num(v, 1), x), Add(num(v, 1), x)))
		w := Add(num(v, 2/(math.Pi*0.147)), Mul(num(v, 0.5), l))
		r := Sqrt(Sub(Sqrt(Sub(Mul(w, w), Div(l, num(v, 0.147)))), w))
		return Mul(num(v, math.Sqrt2), Select(Lt(x, num(v, 0)), Neg(r), r))
	}
	return v
}

// emitPostTransform writes the rows of scores [N, T] (float64),
// transformed by post, into out [N, T]; a softmax normalizes exp(s - max)
// over the row, SOFTMAX_ZERO leaving scores within 1e-7 of zero out of
// the sum (ir/ops mlSoftmax).
func emitPostTransform(c *Ctx, scores, out *Buffer, post ops.PostTransform) {
	s := Load(scores, Var(0), Var(1))
	if post != ops.PostSoftmax && post != ops.PostSoftmaxZero {
		c.Emit(copyOf(out, StoreAs(CastTo(postTransformed(post, s), ComputeType(out.DType)), out.DType)))
		return
	}
	n, t := scores.Dims[0], scores.Dims[1]
	top := c.Temp(ir.Float64, n)
	c.Emit(&Kernel{Out: top, Space: []*Expr{n}, Value: Load(scores, Var(0), RVar(0)), Reduce: &Reduce{Op: MaxOp, Extents: []*Expr{t}}})
	// term is a score's share before normalizing, with at its point v.
	term := func(v *Expr) (*Expr, *Expr) {
		skip := Bool(false)
		if post == ops.PostSoftmaxZero {
			skip = Le(Abs(v), Const(ir.Float64, 1e-7))
		}
		m := Load(top, Var(0))
		return Select(skip, Mul(v, Exp(Neg(m))), Exp(Sub(v, m))), skip
	}
	sum := c.Temp(ir.Float64, n)
	rv, rskip := term(Load(scores, Var(0), RVar(0)))
	c.Emit(&Kernel{Out: sum, Space: []*Expr{n}, Value: Select(rskip, Const(ir.Float64, 0), rv), Reduce: &Reduce{Op: SumOp, Extents: []*Expr{t}}})
	v, _ := term(s)
	c.Emit(copyOf(out, StoreAs(CastTo(Div(v, Load(sum, Var(0))), ComputeType(out.DType)), out.DType)))
}

// defLinearRegressor is each sample's scores, post-transformed: [N, targets].
func defLinearRegressor(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	f, err := staticFeatures(c, x)
	if err != nil {
		return err
	}
	m, err := c.LinearRegressorSpec(f)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	emitPostTransform(c, linearScores(c, x, samples(x), m), out, m.Post)
	return nil
}

// defLinearClassifier is each sample's label (Y) and scores (Z) with
// integer labels: the first highest score's label, or of a single score
// the second label where it is positive (ir/ops LinearModel).
func defLinearClassifier(c *Ctx) error {
	x := c.In[0]
	f, err := staticFeatures(c, x)
	if err != nil {
		return err
	}
	m, err := c.LinearClassifierSpec(f)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if m.StringLabels {
		return c.Unsupported("string labels (engines bind numeric tensors only)")
	}
	scores := linearScores(c, x, samples(x), m)
	if labels := c.Output(0); labels != nil {
		c.Emit(linearLabels(c, scores, labels, m))
	}
	z := c.Output(1)
	switch {
	case z == nil:
	case m.Targets > 1:
		emitPostTransform(c, scores, z, m.Post)
	default: // one score p: the column itself, or 1-p and p
		p := postTransformed(m.Post, Load(scores, Var(0), C(0)))
		if m.Columns == 2 {
			p = Select(Eq(Var(1), C(0)), Sub(Const(ir.Float64, 1), p), p)
		}
		c.Emit(copyOf(z, CastTo(p, ir.Float32)))
	}
	return nil
}

// linearLabels is the kernel writing a classifier's labels from its raw scores.
func linearLabels(c *Ctx, scores, labels *Buffer, m *ops.LinearModel) *Kernel {
	if m.Targets > 1 {
		table := c.Table(ir.FromSlice(ir.Int64, []int64{int64(len(m.Labels))}, m.Labels))
		return &Kernel{Out: labels, Space: labels.Dims, Value: Load(scores, Var(0), RVar(0)),
			Reduce: &Reduce{Op: ArgMaxOp, Extents: Ints(int64(m.Targets)), Post: Load(table, Acc(ir.Int64))}}
	}
	yes, no := C(1), C(0)
	if !m.RawLabels {
		yes, no = C(m.Labels[1]), C(m.Labels[0])
	}
	return copyOf(labels, Select(Gt(Load(scores, Var(0), C(0)), Const(ir.Float64, 0)), yes, no))
}

// --- tree ensembles --------------------------------------------------------------

// int64Table and float64Table are constant tables of one row per node.
func int64Table(c *Ctx, v []int64, dims ...int64) *Buffer {
	if dims == nil {
		dims = []int64{int64(len(v))}
	}
	return c.Table(ir.FromSlice(ir.Int64, dims, v))
}

func float64Table(c *Ctx, v []float64, dims ...int64) *Buffer {
	if dims == nil {
		dims = []int64{int64(len(v))}
	}
	return c.Table(ir.FromSlice(ir.Float64, dims, v))
}

// walkTrees emits the walk of every tree for every sample: a temporary
// [N, trees] of node indices starts at the roots and takes Depth steps,
// a branch moving to its true or false child by its comparison, a leaf
// staying; it returns the buffer holding the leaves.
func walkTrees(c *Ctx, x *Buffer, f *ops.Forest) *Buffer {
	modes, features, splits := int64Table(c, f.Modes), int64Table(c, f.Features), float64Table(c, f.Splits)
	missing, ifTrue, ifFalse := int64Table(c, f.MissingTrue), int64Table(c, f.True), int64Table(c, f.False)
	n, trees := samples(x), C(int64(len(f.Roots)))
	cur, next := c.Temp(ir.Int64, n, trees), c.Temp(ir.Int64, n, trees)
	c.Emit(copyOf(cur, Load(int64Table(c, f.Roots), Var(1))))
	for range f.Depth {
		i := Load(cur, Var(0), Var(1))
		mode, v, split := Load(modes, i), sampleAt(x, Var(0), Load(features, i)), Load(splits, i)
		tests := []*Expr{Le(v, split), Lt(v, split), Ge(v, split), Gt(v, split), Eq(v, split)}
		took := Ne(v, split) // BRANCH_NEQ, mode 5
		if f.MaxSet > 0 {
			sets := float64Table(c, f.Sets, int64(len(f.Modes)), int64(f.MaxSet))
			member := Bool(false)
			for k := range f.MaxSet {
				member = Or(member, Eq(CastTo(v, ir.Float64), Load(sets, i, C(int64(k)))))
			}
			took = Select(Eq(mode, C(ops.TreeMember)), member, took)
		}
		for m := len(tests) - 1; m >= 0; m-- {
			took = Select(Eq(mode, C(int64(m))), tests[m], took)
		}
		took = Or(And(IsNaN(v), Eq(Load(missing, i), C(1))), took)
		c.Emit(copyOf(next, Select(Eq(mode, C(ops.TreeLeaf)), i, Select(took, Load(ifTrue, i), Load(ifFalse, i)))))
		cur, next = next, cur
	}
	return cur
}

// defTreeRegressor walks the trees and aggregates their leaves' scores per
// target: summed (AVERAGE: over the trees), or the least or greatest of
// the leaves that vote (0 where none does); then the base values and the
// post_transform.
func defTreeRegressor(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	features, err := staticFeatures(c, x)
	if err != nil {
		return err
	}
	f, err := c.ForestSpec(features)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	leaves := walkTrees(c, x, f)
	nodes, trees := int64(len(f.Modes)), float64(len(f.Roots))
	table, votes := float64Table(c, f.Scores, nodes, int64(f.Targets)), int64Table(c, f.Votes, nodes, int64(f.Targets))
	leaf, t := Load(leaves, Var(0), RVar(0)), Var(1)
	v, op := Load(table, leaf, t), SumOp
	acc := Acc(ir.Float64)
	post := acc
	switch f.Aggregate {
	case ops.AggAverage:
		post = Div(acc, Const(ir.Float64, trees))
	case ops.AggMin, ops.AggMax:
		none := math.Inf(1)
		op = MinOp
		if f.Aggregate == ops.AggMax {
			none, op = math.Inf(-1), MaxOp
		}
		v = Select(Eq(Load(votes, leaf, t), C(1)), v, Const(ir.Float64, none))
		post = Select(Eq(acc, Const(ir.Float64, none)), Const(ir.Float64, 0), acc)
	}
	scores := c.Temp(ir.Float64, samples(x), C(int64(f.Targets)))
	c.Emit(&Kernel{Out: scores, Space: scores.Dims, Value: v,
		Reduce: &Reduce{Op: op, Extents: Ints(int64(len(f.Roots))), Post: Add(post, Load(float64Table(c, f.Base), t))}})
	emitPostTransform(c, scores, out, f.Post)
	return nil
}

// --- preprocessing ---------------------------------------------------------------

// defNormalizer divides each row (the last axis) by its max, L1 or L2
// norm, leaving a row whose norm is 0 as it is.
func defNormalizer(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	norm, err := c.NormalizerSpec()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	if x.Rank() != 1 && x.Rank() != 2 {
		return c.Unsupported("input of rank %d, want [N,C] or [C]", x.Rank())
	}
	r := x.Rank()
	row := Vars(r - 1)
	at := func(j *Expr) *Expr { return CastTo(Load(x, append(Vars(r-1), j)...), ir.Float64) }
	v, op, post := at(RVar(0)), MaxOp, (*Expr)(nil)
	switch norm {
	case ops.NormL1:
		v, op = Abs(v), SumOp
	case ops.NormL2:
		v, op, post = Mul(v, v), SumOp, Sqrt(Acc(ir.Float64))
	}
	d := c.Temp(ir.Float64, x.Dims[:r-1]...)
	c.Emit(&Kernel{Out: d, Space: d.Dims, Value: v, Reduce: &Reduce{Op: op, Extents: x.Dims[r-1:], Post: post}})
	dv, xv := Load(d, row...), at(Var(r-1))
	c.Emit(copyOf(out, CastTo(Select(Eq(dv, Const(ir.Float64, 0)), xv, Div(xv, dv)), ir.Float32)))
	return nil
}

// lastFeatures is the static length of x's last axis (1 for a scalar),
// which a per-feature table is made for.
func lastFeatures(c *Ctx, x *Buffer) (int64, error) {
	if x.Rank() == 0 {
		return 1, nil
	}
	f, ok := x.Dims[x.Rank()-1].IntValue()
	if !ok {
		return 0, c.Unsupported("the last axis is not known when compiling")
	}
	return f, nil
}

// featureOf is the feature (last-axis) coordinate of a point of x.
func featureOf(x *Buffer) *Expr {
	if x.Rank() == 0 {
		return C(0)
	}
	return Var(x.Rank() - 1)
}

// defScaler is (x - offset)·scale per feature, as float32.
func defScaler(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	f, err := lastFeatures(c, x)
	if err != nil {
		return err
	}
	offset, scale, err := c.ScalerSpec(f)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	o, s := c.Table(ir.FromSlice(ir.Float64, []int64{f}, offset)), c.Table(ir.FromSlice(ir.Float64, []int64{f}, scale))
	j := featureOf(x)
	xv := CastTo(Load(x, Vars(x.Rank())...), ir.Float64)
	c.Emit(copyOf(out, CastTo(Mul(Sub(xv, Load(o, j)), Load(s, j)), ir.Float32)))
	return nil
}

// defImputer replaces each element equal to the replaced value (any NaN
// when that is NaN) by its feature's imputed value; elements compare as
// float64, as the reference compares them.
func defImputer(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	f, err := lastFeatures(c, x)
	if err != nil {
		return err
	}
	imputed, replaced, err := c.ImputerSpec(x.DType, f)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	values := c.Table(ops.FromFloat64s(x.DType, []int64{f}, imputed))
	xv := Load(x, Vars(x.Rank())...)
	match := Eq(CastTo(xv, ir.Float64), Const(ir.Float64, replaced))
	if math.IsNaN(replaced) {
		match = IsNaN(xv)
	}
	c.Emit(copyOf(out, Select(match, Load(values, featureOf(x)), xv)))
	return nil
}

func init() {
	define(map[string]*OpDef{
		"LinearRegressor":       {Domain: ops.MLDomain, Types: mlNumeric, Build: defLinearRegressor},
		"LinearClassifier":      {Domain: ops.MLDomain, Types: mlNumeric, Build: defLinearClassifier},
		"Normalizer":            {Domain: ops.MLDomain, Types: mlNumeric, Build: defNormalizer},
		"Scaler":                {Domain: ops.MLDomain, Types: mlNumeric, Build: defScaler},
		"Imputer":               {Domain: ops.MLDomain, Types: mlNumeric, Build: defImputer},
		"TreeEnsembleRegressor": {Domain: ops.MLDomain, Types: mlNumeric, Build: defTreeRegressor},
		"TreeEnsemble":          {Domain: ops.MLDomain, Types: []ir.DType{ir.Float32, ir.Float64}, Build: defTreeRegressor},
		"Binarizer":             {Domain: ops.MLDomain, Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}, Build: defBinarizer},
		"ArrayFeatureExtractor": {Domain: ops.MLDomain, Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}, Build: defArrayFeatureExtractor},
		"LabelEncoder":          {Domain: ops.MLDomain, Types: []ir.DType{ir.Int64, ir.Float32}, Build: defLabelEncoder},
	})
}
