package kernel

import "github.com/kiln-ml/kiln/ir"

// exprArith is ops.Arith over expressions: uint64 and float64
// values, booleans as Bool.
type exprArith struct{}

func (exprArith) Uint(c uint64) *Expr         { return IntConst(ir.Uint64, int64(c)) }
func (exprArith) Float(c float64) *Expr       { return Const(ir.Float64, c) }
func (exprArith) IAdd(a, b *Expr) *Expr       { return Add(a, b) }
func (exprArith) IMul(a, b *Expr) *Expr       { return Mul(a, b) }
func (exprArith) Xor(a, b *Expr) *Expr        { return Xor(a, b) }
func (exprArith) And(a, b *Expr) *Expr        { return And(a, b) }
func (exprArith) Or(a, b *Expr) *Expr         { return Or(a, b) }
func (e exprArith) Shl(a *Expr, n uint) *Expr { return Shl(a, e.Uint(uint64(n))) }
func (e exprArith) Shr(a *Expr, n uint) *Expr { return Shr(a, e.Uint(uint64(n))) }
func (exprArith) FAdd(a, b *Expr) *Expr       { return Add(a, b) }
func (exprArith) FSub(a, b *Expr) *Expr       { return Sub(a, b) }
func (exprArith) FMul(a, b *Expr) *Expr       { return Mul(a, b) }
func (exprArith) FDiv(a, b *Expr) *Expr       { return Div(a, b) }
func (exprArith) Sqrt(a *Expr) *Expr          { return Sqrt(a) }
func (exprArith) Abs(a *Expr) *Expr           { return Abs(a) }
func (exprArith) Less(a, b *Expr) *Expr       { return Lt(a, b) }
func (exprArith) LessEq(a, b *Expr) *Expr     { return Le(a, b) }
func (exprArith) Select(c, a, b *Expr) *Expr  { return Select(c, a, b) }
func (exprArith) ToFloat(a *Expr) *Expr       { return CastTo(a, ir.Float64) }
func (exprArith) Bits(a *Expr) *Expr          { return Bitcast(a, ir.Uint64) }
func (exprArith) FromBits(a *Expr) *Expr      { return Bitcast(a, ir.Float64) }
