package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The random ops: ir/ops's generator (ops.RandomDraw, MultinomialWeight and
// MultinomialThreshold over ops.Arith) built as expressions of each
// output element's row-major index, so an
// engine draws what the reference draws, bit for bit, for a node with a
// seed. A node without one draws the stream ops.RandomSpec fixes when the
// engine is built (the reference draws a fresh one per run).

// rowMajor is the row-major index of the point Vars(len(dims)) in dims.
func rowMajor(dims []*Expr) *Expr {
	i := C(0)
	for a, d := range dims {
		i = Add(Mul(i, d), Var(a))
	}
	return i
}

// defRandom writes each element's draw (RandomDraw), rounded to the
// output's type as the reference rounds it (through float32 for the
// half types).
func defRandom(c *Ctx) error {
	s, err := c.RandomSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	out := c.Out[0]
	i := CastTo(rowMajor(out.Dims), ir.Uint64)
	p := Const(ir.Float64, 0)
	if s.Law == ops.BernoulliLaw {
		p = CastTo(Load(c.In[0], Vars(out.Rank())...), ir.Float64)
	}
	v := ops.RandomDraw[*Expr](exprArith{}, s, i, p)
	if out.DType == ir.Float16 || out.DType == ir.BFloat16 {
		v = CastTo(v, ir.Float32)
	}
	c.Emit(copyOf(out, StoreAs(v, out.DType)))
	return nil
}

// defMultinomial: each row's largest log-probability (a max, exact in
// any order), the running total of the class weights in class order (a
// scan), each sample's threshold on it, and the sample as the count of
// classes whose running total is at most the threshold (an integer sum,
// exact in any order), at most the last class: the reference's steps.
func defMultinomial(c *Ctx) error {
	s, err := c.RandomSpec()
	if err != nil {
		return c.Errorf("%v", err)
	}
	x, out := c.In[0], c.Out[0]
	if x.Rank() != 2 {
		return c.Unsupported("an input of rank %d (want batch_size, class_size)", x.Rank())
	}
	var a exprArith
	batch, classes, samples := x.Dims[0], x.Dims[1], out.Dims[1]
	logp := func(k *Expr) *Expr { return CastTo(Load(x, Var(0), k), ir.Float64) }
	top := c.Temp(ir.Float64, batch)
	c.Emit(&Kernel{Out: top, Space: []*Expr{batch}, Value: logp(RVar(0)), Reduce: &Reduce{Op: MaxOp, Extents: []*Expr{classes}}})
	cum := c.Temp(ir.Float64, batch, classes)
	c.Emit(&Kernel{Out: cum, Space: cum.Dims, Value: ops.MultinomialWeight[*Expr](a, logp(Var(1)), Load(top, Var(0))),
		Scan: &Scan{Axis: 1, Op: SumOp}})
	last := Sub(classes, C(1))
	total := LoadOr(Gt(classes, C(0)), cum, Const(ir.Float64, 0), Var(0), last) // no classes: the reference refuses
	threshold := c.Temp(ir.Float64, batch, samples)
	c.Emit(&Kernel{Out: threshold, Space: threshold.Dims,
		Value: ops.MultinomialThreshold[*Expr](a, s, CastTo(rowMajor(threshold.Dims), ir.Uint64), total)})
	below := Select(a.LessEq(Load(cum, Var(0), RVar(0)), Load(threshold, Var(0), Var(1))), C(1), C(0))
	c.Emit(&Kernel{Out: out, Space: out.Dims, Value: below,
		Reduce: &Reduce{Op: SumOp, Extents: []*Expr{classes}, Post: CastTo(Min(Acc(ir.Int64), last), out.DType)}})
	return nil
}

func init() {
	floats := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16}
	ints := []ir.DType{ir.Int8, ir.Int16, ir.Int32, ir.Int64, ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
	all := concat(floats, ints, []ir.DType{ir.Bool})
	define(map[string]*OpDef{
		"RandomUniform":     {Types: floats, Build: defRandom},
		"RandomNormal":      {Types: floats, Build: defRandom},
		"RandomUniformLike": {Types: all, Build: defRandom},
		"RandomNormalLike":  {Types: all, Build: defRandom},
		"Bernoulli":         {Types: floats, Build: defRandom},
		"Multinomial":       {Types: floats, Build: defMultinomial},
	})
}
