package kernel

import (
	"github.com/kiln-ml/kiln/ir"
)

// defTfIdf is TfIdfVectorizer over an integer pool (ops.TfIdfSpec): the
// count of each pool n-gram in each row, over every skip and start (a
// 1-gram once), then each output the sum of its n-grams' counts, weighted
// by the mode. The pool, the n-grams' lengths, output indexes and weights
// are constant tables.
func defTfIdf(c *Ctx) error {
	spec, err := c.TfIdfSpec()
	if err != nil {
		return c.Unsupported("%v", err)
	}
	x, out := c.In[0], c.Out[0]
	if x.Rank() != 1 && x.Rank() != 2 {
		return c.Unsupported("input of rank %d (want 1 or 2)", x.Rank())
	}
	g := int64(len(spec.Grams))
	if g == 0 {
		return c.Unsupported("an empty pool")
	}
	width := int64(spec.MaxN)
	pool := make([]int64, g*width)
	lens := make([]int64, g)
	weights := make([]float32, g)
	for i, gram := range spec.Grams {
		copy(pool[int64(i)*width:], gram)
		lens[i] = int64(len(gram))
		weights[i] = 1
		if len(spec.Weights) > 0 {
			weights[i] = spec.Weights[i]
		}
	}
	poolT := c.Table(ir.FromSlice(ir.Int64, []int64{g, width}, pool))
	lenT := c.Table(ir.FromSlice(ir.Int64, []int64{g}, lens))
	idxT := c.Table(ir.FromSlice(ir.Int64, []int64{g}, spec.Indexes))
	wT := c.Table(ir.FromSlice(ir.Float32, []int64{g}, weights))

	rows, cols := C(1), x.Dims[0]
	token := func(r, i *Expr) *Expr { return CastTo(Load(x, Min(i, Sub(cols, C(1)))), ir.Int64) }
	if x.Rank() == 2 {
		rows, cols = x.Dims[0], x.Dims[1]
		token = func(r, i *Expr) *Expr { return CastTo(Load(x, r, Min(i, Sub(cols, C(1)))), ir.Int64) }
	}
	// counts[r, gram]: over skips RVar(0) and starts RVar(1), the n-gram
	// matches at start + t·(skip+1) for t below its length.
	n, skip, start := Load(lenT, Var(1)), RVar(0), RVar(1)
	step := Add(skip, C(1))
	match := And(And(Ge(n, C(int64(spec.MinN))), Le(n, C(int64(spec.MaxN)))), Or(Eq(skip, C(0)), Gt(n, C(1))))
	match = And(match, Lt(Add(start, Mul(Sub(n, C(1)), step)), cols))
	for t := int64(0); t < width; t++ {
		at := Add(start, Mul(C(t), step))
		match = And(match, Or(Ge(C(t), n), Eq(token(Var(0), at), Load(poolT, Var(1), C(t)))))
	}
	counts := c.Temp(ir.Float32, rows, C(g))
	c.Emit(&Kernel{Name: "TfIdf_counts", Out: counts, Space: []*Expr{rows, C(g)}, Value: CastTo(match, ir.Float32),
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(int64(spec.MaxSkip) + 1), cols}}})

	count := Load(counts, Var(0), RVar(0))
	w := Load(wT, RVar(0))
	switch spec.Mode {
	case "IDF":
		count = Mul(Min(count, Const(ir.Float32, 1)), w)
	case "TFIDF":
		count = Mul(count, w)
	}
	space := []*Expr{rows, C(spec.Width)}
	o := out
	if out.Rank() == 1 {
		o = &Buffer{Name: out.Name, DType: out.DType, Dims: space, ID: out.ID}
	}
	c.Emit(&Kernel{Name: "TfIdf_out", Out: o, Space: space,
		Value:  Select(Eq(Load(idxT, RVar(0)), Var(1)), count, Const(ir.Float32, 0)),
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{C(g)}}})
	return nil
}

func init() {
	define(map[string]*OpDef{
		"TfIdfVectorizer": {Types: []ir.DType{ir.Int32, ir.Int64}, Build: defTfIdf},
	})
}
