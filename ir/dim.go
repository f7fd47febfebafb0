package ir

import (
	"errors"

	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Dim arithmetic. A symbolic Dim's Param is a dimexpr expression in its
// canonical form ("2*N", "(H + 1)//2"); a plain dim_param ("batch") is a
// one-symbol expression, so ONNX files keep their names. The helpers give
// a static dim when every input is static, an expression when one is
// symbolic, and an unknown dim only when an input is unknown (or the
// result is not a dim: negative, an overflow, a division that does not
// divide).

// DimExpr returns d as an expression: a constant for a static dim, the
// parsed Param for a symbolic one, and false for an unknown dim.
func DimExpr(d Dim) (*dimexpr.Expr, bool) {
	switch {
	case d.Param != "":
		e, err := dimexpr.Parse(d.Param)
		return e, err == nil
	case d.Value >= 0:
		return dimexpr.Const(d.Value), true
	}
	return nil, false
}

// DimOf returns the dim e stands for: static for a non-negative constant,
// symbolic (Param is e's canonical form) for an expression, and unknown
// for nil or a negative constant.
func DimOf(e *dimexpr.Expr) Dim {
	if e == nil {
		return UnknownDim()
	}
	if v, ok := e.Value(); ok {
		if v < 0 {
			return UnknownDim()
		}
		return D(v)
	}
	return Dim{Param: e.String(), Value: -1}
}

// dimOp applies f to the operands' expressions; unknown when any is.
func dimOp(f func(xs []*dimexpr.Expr) *dimexpr.Expr, ds ...Dim) Dim {
	xs := make([]*dimexpr.Expr, len(ds))
	for i, d := range ds {
		e, ok := DimExpr(d)
		if !ok {
			return UnknownDim()
		}
		xs[i] = e
	}
	return DimOf(f(xs))
}

// DimAdd returns a + b.
func DimAdd(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return x[0].Add(x[1]) }, a, b)
}

// DimSub returns a - b (unknown when static and negative).
func DimSub(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return x[0].Sub(x[1]) }, a, b)
}

// DimMul returns a * b.
func DimMul(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return x[0].Mul(x[1]) }, a, b)
}

// DimProduct multiplies dims; the product of none is 1.
func DimProduct(ds ...Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr {
		p := dimexpr.Const(1)
		for _, e := range x {
			p = p.Mul(e)
		}
		return p
	}, ds...)
}

// DimFloorDiv returns floor(a / b): b static and positive, or an
// expression that divides a exactly (N*S*64 / N*S); unknown otherwise.
func DimFloorDiv(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr {
		if v, ok := x[1].Value(); ok && v <= 0 {
			return nil
		}
		q, _ := x[0].FloorDiv(x[1])
		return q
	}, a, b)
}

// DimCeilDiv returns ceil(a / b), under DimFloorDiv's rules.
func DimCeilDiv(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr {
		if v, ok := x[1].Value(); ok && v <= 0 {
			return nil
		}
		q, _ := x[0].CeilDiv(x[1])
		return q
	}, a, b)
}

// DimExactDiv returns a / b when b divides a for every value of the
// symbols (12 by 4, 2*N by 2, N*S by S), else unknown.
func DimExactDiv(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return x[0].ExactDiv(x[1]) }, a, b)
}

// DimMin and DimMax return the smaller and the larger of a and b.
func DimMin(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return dimexpr.Min(x[0], x[1]) }, a, b)
}

// DimMax returns the larger of a and b.
func DimMax(a, b Dim) Dim {
	return dimOp(func(x []*dimexpr.Expr) *dimexpr.Expr { return dimexpr.Max(x[0], x[1]) }, a, b)
}

// DimEqual reports whether a and b are provably the same size: equal
// static sizes, or expressions with the same canonical form ("N*2" and
// "2*N"). False means "not proven".
func DimEqual(a, b Dim) bool {
	x, ok1 := DimExpr(a)
	y, ok2 := DimExpr(b)
	return ok1 && ok2 && x.Equal(y)
}

// Expr returns the dim as an expression, or nil when it is unknown.
func (d Dim) Expr() *dimexpr.Expr {
	e, _ := DimExpr(d)
	return e
}

// Eval returns the dim's size with each symbol bound by env.
func (d Dim) Eval(env map[string]int64) (int64, error) {
	e, ok := DimExpr(d)
	if !ok {
		return 0, errors.New("the dim is unknown")
	}
	return e.Eval(env)
}
