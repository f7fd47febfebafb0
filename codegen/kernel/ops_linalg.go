package kernel

import (
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// Linear algebra: each output element is a sum of products (a reduction
// over the contracted axes). These are the general forms, for every type
// and for operands known only at run time; a target's hand-tuned GEMM
// takes the float32 forms it is built for. Integers accumulate in int64
// and wrap to the output's width, floats in their compute type.

// accType is the type products of d accumulate in.
func accType(d ir.DType) ir.DType {
	if t := ComputeType(d); t.IsFloat() {
		return t
	}
	return ir.Int64
}

// broadcastPrefix indexes the leading (batch) dims of a buffer against
// the batch part of a space (numpy rules, aligned at the last batch axis):
// dims of static extent 1 read index 0, others the coordinate.
func broadcastPrefix(dims, batch []*Expr) []*Expr {
	off := len(batch) - len(dims)
	idx := make([]*Expr, len(dims))
	for i, d := range dims {
		switch n, ok := d.IntValue(); {
		case ok && n == 1:
			idx[i] = C(0)
		case sameExtent(d, batch[off+i]):
			idx[i] = Var(off + i)
		default:
			idx[i] = Select(Eq(d, C(1)), C(0), Var(off+i))
		}
	}
	return idx
}

// sumOfProducts is the kernel writing out = Post(Σ over extents of
// Π loads), with products in acc type t.
func sumOfProducts(out *Buffer, t ir.DType, extents []*Expr, loads []*Expr, post func(acc *Expr) *Expr) *Kernel {
	v := CastTo(loads[0], t)
	for _, l := range loads[1:] {
		v = Mul(v, CastTo(l, t))
	}
	k := &Kernel{Out: out, Space: out.Dims}
	if len(extents) == 0 {
		k.Value = StoreAs(post(v), out.DType)
		return k
	}
	k.Value = v
	k.Reduce = &Reduce{Op: SumOp, Extents: extents}
	if p := StoreAs(post(Acc(t)), out.DType); p.Op != OpAcc {
		k.Reduce.Post = p
	}
	return k
}

// defMatMul is numpy's matmul: batch dims broadcast, a 1-D operand is a
// row (left) or column (right) whose axis the output drops.
func defMatMul(c *Ctx) error {
	a, b, out := c.In[0], c.In[1], c.Out[0]
	ar, br, r := a.Rank(), b.Rank(), out.Rank()
	nb := r // the output's batch rank
	if ar > 1 {
		nb--
	}
	if br > 1 {
		nb--
	}
	batch := out.Dims[:nb]
	k := RVar(0)
	aIdx := []*Expr{k}
	if ar > 1 {
		aIdx = append(broadcastPrefix(a.Dims[:ar-2], batch), Var(nb), k)
	}
	bIdx := []*Expr{k}
	if br > 1 {
		bIdx = append(broadcastPrefix(b.Dims[:br-2], batch), k, Var(r-1))
	}
	t := accType(out.DType)
	c.Emit(sumOfProducts(out, t, []*Expr{a.Dims[ar-1]}, []*Expr{Load(a, aIdx...), Load(b, bIdx...)},
		func(acc *Expr) *Expr { return CastTo(acc, ComputeType(out.DType)) }))
	return nil
}

// defGemm is alpha·A'·B' + beta·C with A' and B' optionally transposed and
// C broadcast to the output. Integers scale exactly by whole alpha and
// beta, else in float64 truncated (as the reference).
func defGemm(c *Ctx) error {
	a, b, out := c.In[0], c.In[1], c.Out[0]
	i, j, k := Var(0), Var(1), RVar(0)
	aIdx, bIdx := []*Expr{i, k}, []*Expr{k, j}
	kext := a.Dims[1]
	if c.Int("transA") != 0 {
		aIdx, kext = []*Expr{k, i}, a.Dims[0]
	}
	if c.Int("transB") != 0 {
		bIdx = []*Expr{j, k}
	}
	alpha, beta := float64(c.Float("alpha")), float64(c.Float("beta"))
	var bias *Expr
	if cb := c.Input(2); cb != nil {
		bias = Load(cb, Broadcast(cb, out.Dims)...)
	}
	t := accType(out.DType)
	ct := ComputeType(out.DType)
	post := func(acc *Expr) *Expr {
		if t.IsFloat() {
			v := acc
			if alpha != 1 {
				v = Mul(Const(t, alpha), v)
			}
			if bias != nil && beta != 0 {
				bv := bias
				if beta != 1 {
					bv = Mul(Const(t, beta), bv)
				}
				v = Add(v, bv)
			}
			return v
		}
		var bv *Expr
		if bias != nil {
			bv = CastTo(bias, ir.Int64)
		}
		if alpha == math.Trunc(alpha) && beta == math.Trunc(beta) {
			v := Mul(C(int64(alpha)), acc)
			if bv != nil {
				v = Add(v, Mul(C(int64(beta)), bv))
			}
			return CastTo(v, ct)
		}
		v := Mul(Const(ir.Float64, alpha), CastTo(acc, ir.Float64))
		if bv != nil {
			v = Add(v, Mul(Const(ir.Float64, beta), CastTo(bv, ir.Float64)))
		}
		return CastTo(CastTo(v, ir.Int64), ct)
	}
	c.Emit(sumOfProducts(out, t, []*Expr{kext}, []*Expr{Load(a, aIdx...), Load(b, bIdx...)}, post))
	return nil
}

// defEinsum sums, at each combination of the output's labels, the product
// of the operands over the other labels (ir/ops resolves the equation):
// a repeated label within an operand reads its diagonal.
func defEinsum(c *Ctx) error {
	// A dim known only at run time resolves as ir/ops' inference does (-1:
	// any size), and its label's extent is then that dim's expression.
	dims := make([][]int64, len(c.In))
	for i, b := range c.In {
		dims[i] = make([]int64, b.Rank())
		for j, d := range b.Dims {
			v, ok := d.IntValue()
			if !ok {
				v = -1
			}
			dims[i][j] = v
		}
	}
	e, err := c.Einsum(dims)
	if err != nil {
		return c.Unsupported("%v", err)
	}
	size, err := einsumExtents(c, dims, e)
	if err != nil {
		return err
	}
	at := map[int]*Expr{}
	for i, l := range e.Output {
		at[l] = Var(i)
	}
	var extents []*Expr
	for _, labels := range e.Inputs {
		for _, l := range labels {
			if at[l] == nil {
				at[l] = RVar(len(extents))
				extents = append(extents, size[l])
			}
		}
	}
	loads := make([]*Expr, len(c.In))
	for i, b := range c.In {
		idx := make([]*Expr, b.Rank())
		for j, l := range e.Inputs[i] {
			idx[j] = at[l]
			if dims[i][j] == 1 && e.Sizes[l] != 1 { // an ellipsis axis of size 1, broadcast
				idx[j] = C(0)
			}
		}
		loads[i] = Load(b, idx...)
	}
	out := c.Out[0]
	c.Emit(sumOfProducts(out, accType(out.DType), extents, loads,
		func(acc *Expr) *Expr { return CastTo(acc, ComputeType(out.DType)) }))
	return nil
}

// einsumExtents is each label's extent: its static size, or the dim of
// the operand axes that carry it when none is static. Letters have one
// size in every operand; an ellipsis axis known only at run time might
// broadcast against another, which one loop nest cannot choose, unless
// all the axes of its label are the same dim.
func einsumExtents(c *Ctx, dims [][]int64, e *ops.Einsum) ([]*Expr, error) {
	size := make([]*Expr, len(e.Sizes))
	for i, labels := range e.Inputs {
		for j, l := range labels {
			d := c.In[i].Dims[j]
			switch {
			case e.Sizes[l] >= 0:
				if size[l] == nil {
					size[l] = C(e.Sizes[l])
				}
				if dims[i][j] < 0 && e.Ellipsis(l) {
					return nil, c.Unsupported("an ellipsis axis of dynamic dim %s against one of size %d", d, e.Sizes[l])
				}
			case dims[i][j] >= 0: // of size 1, broadcast against the dynamic ones
			case size[l] == nil:
				size[l] = d
			case e.Ellipsis(l) && size[l].String() != d.String():
				return nil, c.Unsupported("ellipsis axes of dynamic dims %s and %s", size[l], d)
			}
		}
	}
	return size, nil
}

// maxDetSize is the largest matrix Det expands: its M! products grow
// past that faster than a pivoting decomposition's work.
const maxDetSize = 4

// defDet is each matrix's determinant as the sum over permutations σ of
// sign(σ)·Π a[i, σ(i)], in float64: the value the reference's pivoted
// LU decomposition computes, up to rounding.
func defDet(c *Ctx) error {
	x, out := c.In[0], c.Out[0]
	r := x.Rank()
	if r < 2 {
		return c.Unsupported("input of rank %d, want (*, M, M)", r)
	}
	m, ok := x.Dims[r-1].IntValue()
	if !ok || !sameSize(x.Dims[r-2], C(m)) {
		return c.Unsupported("matrices of dims %s", x.Dims[r-2:])
	}
	if m > maxDetSize {
		return c.Unsupported("a determinant of %dx%d matrices (at most %dx%d)", m, m, maxDetSize, maxDetSize)
	}
	f := ir.Float64
	det := Const(f, 0)
	if m == 0 {
		det = Const(f, 1)
	}
	batch := Vars(r - 2)
	permutations(int(m), func(perm []int, sign float64) {
		term := Const(f, sign)
		for i, j := range perm {
			term = Mul(term, CastTo(Load(x, append(append([]*Expr{}, batch...), C(int64(i)), C(int64(j)))...), f))
		}
		det = Add(det, term)
	})
	c.Emit(copyOf(out, StoreAs(CastTo(det, ComputeType(out.DType)), out.DType)))
	return nil
}

// permutations calls f with every permutation of 0..n-1 (n >= 1) and its
// sign.
func permutations(n int, f func(perm []int, sign float64)) {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	var walk func(k int, sign float64)
	walk = func(k int, sign float64) {
		if k == n {
			f(perm, sign)
			return
		}
		for i := k; i < n; i++ {
			perm[k], perm[i] = perm[i], perm[k]
			s := sign
			if i != k {
				s = -s
			}
			walk(k+1, s)
			perm[k], perm[i] = perm[i], perm[k]
		}
	}
	if n > 0 {
		walk(0, 1)
	}
}

func init() {
	matmul := []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64, ir.Uint32, ir.Uint64}
	define(map[string]*OpDef{
		"MatMul": {Types: matmul, Build: defMatMul},
		"Gemm":   {Types: matmul, Build: defGemm},
		"Det":    {Types: registryTypes("Det"), Build: defDet},
		"Einsum": {Types: []ir.DType{ir.Float32, ir.Float64, ir.Float16, ir.Int8, ir.Int16, ir.Int32, ir.Int64,
			ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}, Build: defEinsum},
	})
}
