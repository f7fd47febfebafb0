package kernel

import (
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Ops of the ai.onnx.ml domain that compute on plain tensors of numbers:
// a threshold, a gather along the last axis, a lookup table. Their
// meaning (LabelEncoder's keys, values and default) is resolved by ir/ops.

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

func init() {
	define(map[string]*OpDef{
		"Binarizer":             {Domain: ops.MLDomain, Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}, Build: defBinarizer},
		"ArrayFeatureExtractor": {Domain: ops.MLDomain, Types: []ir.DType{ir.Float32, ir.Float64, ir.Int64, ir.Int32}, Build: defArrayFeatureExtractor},
		"LabelEncoder":          {Domain: ops.MLDomain, Types: []ir.DType{ir.Int64, ir.Float32}, Build: defLabelEncoder},
	})
}
