package kernel

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/dimexpr"
)

// Op is an expression's operation.
type Op int

// The operations. Leaves first, then the scalar functions; the set is kept
// small (composite functions are built from these in math.go's helpers),
// so that every target implements few.
const (
	OpConst  Op = iota // a constant: Int (integers, Bool) or Float
	OpVar              // the iteration space's axis Int
	OpRVar             // the reduction's axis Int
	OpSym              // a runtime dimension named Name (int64)
	OpHole             // a value a host kernel supplies (Name)
	OpAcc              // the reduced value, in a Reduce's Post
	OpLoad             // Buf[Args...]
	OpLoadOr           // Args[0] ? Buf[Args[2:]...] : Args[1], reading nothing when false

	// Unary.
	OpNeg
	OpAbs
	OpNot // logical not (Bool) or bitwise not (integers)
	OpSqrt
	OpExp
	OpLog
	OpSin
	OpCos
	OpAtan
	OpTanh
	OpErf
	OpSigmoid
	OpFloor
	OpCeil
	OpRound // half to even
	OpIsNaN
	OpCast    // to Type, ONNX Cast semantics; to Float16/BFloat16 rounds
	OpBitcast // to Type, the operand's bits as that type (of the same width)

	// Binary.
	OpAdd
	OpSub
	OpMul
	OpDiv // integers truncate toward zero; a zero divisor gives 0
	OpRem // integers: the dividend's sign (C); a zero divisor gives 0
	OpMax // a NaN operand gives NaN
	OpMin
	OpPow
	OpAnd // logical (Bool) or bitwise
	OpOr
	OpXor
	OpShl
	OpShr // logical for unsigned, arithmetic for signed
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe

	OpSelect // Args[0] ? Args[1] : Args[2]
)

var opNames = [...]string{
	OpConst: "const", OpVar: "var", OpRVar: "rvar", OpSym: "sym", OpHole: "hole", OpAcc: "acc",
	OpLoad: "load", OpLoadOr: "loador",
	OpNeg: "neg", OpAbs: "abs", OpNot: "not", OpSqrt: "sqrt", OpExp: "exp", OpLog: "log",
	OpSin: "sin", OpCos: "cos", OpAtan: "atan", OpTanh: "tanh", OpErf: "erf", OpSigmoid: "sigmoid", OpFloor: "floor",
	OpCeil: "ceil", OpRound: "round", OpIsNaN: "isnan", OpCast: "cast", OpBitcast: "bitcast",
	OpAdd: "add", OpSub: "sub", OpMul: "mul", OpDiv: "div", OpRem: "rem", OpMax: "max", OpMin: "min",
	OpPow: "pow", OpAnd: "and", OpOr: "or", OpXor: "xor", OpShl: "shl", OpShr: "shr",
	OpEq: "eq", OpNe: "ne", OpLt: "lt", OpLe: "le", OpGt: "gt", OpGe: "ge", OpSelect: "select",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", int(o))
}

// Expr is one node of an expression DAG: what one element is, in terms of
// the iteration space's coordinates (OpVar), loads from buffers and
// constants. Type is the value's element type as computed: Float16 and
// BFloat16 data compute as Float32 (loads widen, stores narrow), so an
// Expr's Type is never one of them.
type Expr struct {
	Op    Op
	Type  ir.DType
	Args  []*Expr
	Buf   *Buffer // OpLoad, OpLoadOr
	Int   int64   // OpConst (integers, Bool), OpVar, OpRVar
	Float float64 // OpConst (floats)
	Name  string  // OpSym, OpHole
	// Round, for OpCast to Float32, is the narrower float type whose
	// precision the value is rounded to (Float16 or BFloat16).
	Round ir.DType
}

// Buffer is a tensor in memory: row-major, contiguous, of DType (Float16
// and BFloat16 included). Dims are int64 expressions: constants, or
// runtime dimensions (OpSym) and arithmetic on them.
type Buffer struct {
	Name  string
	DType ir.DType
	Dims  []*Expr
	// ID is the host's handle for the buffer (codegen's value index).
	ID int
	// Data, when set, is the buffer's constant contents: a table a
	// definition computed at compile time (Ctx.Table).
	Data *ir.Tensor
	// Dim, when set, makes the buffer the one int64 a kernel writes the
	// value of the data-dependent dim Dim to (Ctx.DataDim): the host's
	// dims table entry, which the kernels after it read as Sym(Dim).
	Dim string
}

// NewBuffer returns a buffer with static dims.
func NewBuffer(name string, d ir.DType, dims ...int64) *Buffer {
	return &Buffer{Name: name, DType: d, Dims: Ints(dims...)}
}

// Rank is the buffer's number of dims.
func (b *Buffer) Rank() int { return len(b.Dims) }

// Static returns the dims when they are all constants.
func (b *Buffer) Static() ([]int64, bool) { return StaticInts(b.Dims) }

// Numel is the number of elements.
func (b *Buffer) Numel() *Expr { return Product(b.Dims) }

// ComputeType is the type a value of memory type d computes as.
func ComputeType(d ir.DType) ir.DType {
	if d == ir.Float16 || d == ir.BFloat16 {
		return ir.Float32
	}
	return d
}

// ---- constructors ----

// C returns an int64 constant.
func C(v int64) *Expr { return &Expr{Op: OpConst, Type: ir.Int64, Int: v} }

// Ints returns int64 constants.
func Ints(vs ...int64) []*Expr {
	out := make([]*Expr, len(vs))
	for i, v := range vs {
		out[i] = C(v)
	}
	return out
}

// Const returns the constant v of type d (a float for float types, else
// truncated to an integer; Bool is v != 0).
func Const(d ir.DType, v float64) *Expr {
	d = ComputeType(d)
	switch {
	case d.IsFloat():
		if d == ir.Float32 {
			v = float64(float32(v))
		}
		return &Expr{Op: OpConst, Type: d, Float: v}
	case d == ir.Bool:
		return &Expr{Op: OpConst, Type: d, Int: b2i(v != 0)}
	}
	return &Expr{Op: OpConst, Type: d, Int: wrapInt(d, int64(v))}
}

// IntConst returns the integer constant v of type d.
func IntConst(d ir.DType, v int64) *Expr {
	if d.IsFloat() {
		return Const(d, float64(v))
	}
	if d == ir.Bool {
		return &Expr{Op: OpConst, Type: d, Int: b2i(v != 0)}
	}
	return &Expr{Op: OpConst, Type: d, Int: wrapInt(d, v)}
}

// Bool returns a Bool constant.
func Bool(b bool) *Expr { return &Expr{Op: OpConst, Type: ir.Bool, Int: b2i(b)} }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Var is the iteration space's axis i.
func Var(i int) *Expr { return &Expr{Op: OpVar, Type: ir.Int64, Int: int64(i)} }

// Vars returns Var(0) ... Var(n-1).
func Vars(n int) []*Expr {
	out := make([]*Expr, n)
	for i := range out {
		out[i] = Var(i)
	}
	return out
}

// RVar is the reduction's axis i.
func RVar(i int) *Expr { return &Expr{Op: OpRVar, Type: ir.Int64, Int: int64(i)} }

// Sym is a dimension known only at run time.
func Sym(name string) *Expr { return &Expr{Op: OpSym, Type: ir.Int64, Name: name} }

// Hole is a value of type d that a host kernel supplies when it evaluates
// the expression (an accumulator in registers).
func Hole(name string, d ir.DType) *Expr { return &Expr{Op: OpHole, Type: d, Name: name} }

// Acc is the reduced value of type d, in a Reduce's Post.
func Acc(d ir.DType) *Expr { return &Expr{Op: OpAcc, Type: d} }

// Load reads b at the given index (one int64 expression per dim).
func Load(b *Buffer, idx ...*Expr) *Expr {
	if len(idx) != b.Rank() {
		panic(fmt.Sprintf("kernel: load of %s (rank %d) with %d indices", b.Name, b.Rank(), len(idx)))
	}
	return &Expr{Op: OpLoad, Type: ComputeType(b.DType), Buf: b, Args: idx}
}

// LoadOr reads b at idx where cond holds and is other elsewhere; where
// cond is false nothing is read, so idx may be out of range there.
func LoadOr(cond *Expr, b *Buffer, other *Expr, idx ...*Expr) *Expr {
	if len(idx) != b.Rank() {
		panic(fmt.Sprintf("kernel: load of %s (rank %d) with %d indices", b.Name, b.Rank(), len(idx)))
	}
	t := ComputeType(b.DType)
	return &Expr{Op: OpLoadOr, Type: t, Buf: b, Args: append([]*Expr{cond, CastTo(other, t)}, idx...)}
}

func unary(op Op, x *Expr) *Expr {
	if c, ok := foldUnary(op, x); ok {
		return c
	}
	return &Expr{Op: op, Type: x.Type, Args: []*Expr{x}}
}

// Neg is -x.
func Neg(x *Expr) *Expr { return unary(OpNeg, x) }

// Abs is |x|.
func Abs(x *Expr) *Expr { return unary(OpAbs, x) }

// Not is logical (Bool) or bitwise not.
func Not(x *Expr) *Expr { return unary(OpNot, x) }

// Sqrt, Exp, Log, Sin, Cos, Atan, Tanh, Erf, Floor, Ceil and Round are the
// float functions of their names (Round: half to even).
func Sqrt(x *Expr) *Expr  { return unary(OpSqrt, x) }
func Exp(x *Expr) *Expr   { return unary(OpExp, x) }
func Log(x *Expr) *Expr   { return unary(OpLog, x) }
func Sin(x *Expr) *Expr   { return unary(OpSin, x) }
func Cos(x *Expr) *Expr   { return unary(OpCos, x) }
func Atan(x *Expr) *Expr  { return unary(OpAtan, x) }
func Tanh(x *Expr) *Expr  { return unary(OpTanh, x) }
func Erf(x *Expr) *Expr   { return unary(OpErf, x) }
func Floor(x *Expr) *Expr { return unary(OpFloor, x) }
func Ceil(x *Expr) *Expr  { return unary(OpCeil, x) }
func Round(x *Expr) *Expr { return unary(OpRound, x) }

// Sigmoid is 1/(1+e^-x), one op so that the emitter can build it without
// the reciprocal's edge select (Fn.Sigmoid).
func Sigmoid(x *Expr) *Expr { return unary(OpSigmoid, x) }

// IsNaN is a Bool.
func IsNaN(x *Expr) *Expr {
	if !x.Type.IsFloat() {
		return Bool(false)
	}
	return &Expr{Op: OpIsNaN, Type: ir.Bool, Args: []*Expr{x}}
}

// CastTo converts x to type d with ONNX Cast semantics: floats to integers
// truncate toward zero (saturating; NaN gives 0), integers wrap, anything to
// Bool is x != 0. Casting to Float16 or BFloat16 gives a Float32 rounded to
// that type's precision.
func CastTo(x *Expr, d ir.DType) *Expr {
	round := ir.Undefined
	if d == ir.Float16 || d == ir.BFloat16 {
		round, d = d, ir.Float32
	}
	if x.Type == d && round == ir.Undefined {
		return x
	}
	if x.Op == OpConst && round == ir.Undefined {
		return foldCast(x, d)
	}
	return &Expr{Op: OpCast, Type: d, Args: []*Expr{x}, Round: round}
}

// Bitcast reinterprets x's bits as type d of the same width: integers
// and Float32/Float64 in registers hold their bits exactly. Float16,
// BFloat16 and Bool compute in another form (a float32, an i1), so their
// bits are read and written as the unsigned integer of their width
// (BitsType) through a buffer of that type viewing the same bytes
// (Reinterpret).
func Bitcast(x *Expr, d ir.DType) *Expr {
	if !HoldsBits(x.Type) || !HoldsBits(d) || x.Type.Size() != d.Size() {
		panic(fmt.Sprintf("kernel: bitcast of %s to %s", x.Type, d))
	}
	if x.Type == d {
		return x
	}
	return &Expr{Op: OpBitcast, Type: d, Args: []*Expr{x}}
}

// HoldsBits reports whether a value of type d computes as its own bits:
// what Bitcast can reinterpret.
func HoldsBits(d ir.DType) bool {
	return d.IsInt() || d == ir.Float32 || d == ir.Float64
}

// BitsType is the type that holds d's bits in registers: d itself where
// it does (HoldsBits), else the unsigned integer of d's width.
func BitsType(d ir.DType) ir.DType {
	if HoldsBits(d) {
		return d
	}
	switch d.Size() {
	case 1:
		return ir.Uint8
	case 2:
		return ir.Uint16
	case 4:
		return ir.Uint32
	case 8:
		return ir.Uint64
	}
	return ir.Undefined
}

// Reinterpret is b's bytes as elements of type d of the same width (a
// view of a node's input or output, as view is; a table's data is
// retyped with it).
func Reinterpret(b *Buffer, d ir.DType) *Buffer {
	if b.DType == d {
		return b
	}
	v := *b
	v.Name, v.DType = b.Name+"."+d.String(), d
	if b.Data != nil {
		t := *b.Data
		t.DType = d
		v.Data = &t
	}
	return &v
}

func binary(op Op, x, y *Expr) *Expr {
	if x.Type != y.Type {
		panic(fmt.Sprintf("kernel: %s of %s and %s", op, x.Type, y.Type))
	}
	if c, ok := foldBinary(op, x, y); ok {
		return c
	}
	t := x.Type
	if op >= OpEq && op <= OpGe {
		t = ir.Bool
	}
	return &Expr{Op: op, Type: t, Args: []*Expr{x, y}}
}

// Add, Sub, Mul, Div, Rem, Max, Min, Pow, And, Or, Xor, Shl and Shr take
// operands of one type; see the Op constants for their semantics.
func Add(x, y *Expr) *Expr { return binary(OpAdd, x, y) }
func Sub(x, y *Expr) *Expr { return binary(OpSub, x, y) }
func Mul(x, y *Expr) *Expr { return binary(OpMul, x, y) }
func Div(x, y *Expr) *Expr { return binary(OpDiv, x, y) }
func Rem(x, y *Expr) *Expr { return binary(OpRem, x, y) }
func Max(x, y *Expr) *Expr { return binary(OpMax, x, y) }
func Min(x, y *Expr) *Expr { return binary(OpMin, x, y) }
func Pow(x, y *Expr) *Expr { return binary(OpPow, x, y) }
func And(x, y *Expr) *Expr { return binary(OpAnd, x, y) }
func Or(x, y *Expr) *Expr  { return binary(OpOr, x, y) }
func Xor(x, y *Expr) *Expr { return binary(OpXor, x, y) }
func Shl(x, y *Expr) *Expr { return binary(OpShl, x, y) }
func Shr(x, y *Expr) *Expr { return binary(OpShr, x, y) }

// Eq, Ne, Lt, Le, Gt and Ge compare (ordered: false when a float is NaN,
// except Ne) and give Bool.
func Eq(x, y *Expr) *Expr { return binary(OpEq, x, y) }
func Ne(x, y *Expr) *Expr { return binary(OpNe, x, y) }
func Lt(x, y *Expr) *Expr { return binary(OpLt, x, y) }
func Le(x, y *Expr) *Expr { return binary(OpLe, x, y) }
func Gt(x, y *Expr) *Expr { return binary(OpGt, x, y) }
func Ge(x, y *Expr) *Expr { return binary(OpGe, x, y) }

// Select is c ? x : y.
func Select(c, x, y *Expr) *Expr {
	if c.Type != ir.Bool || x.Type != y.Type {
		panic(fmt.Sprintf("kernel: select(%s, %s, %s)", c.Type, x.Type, y.Type))
	}
	if c.Op == OpConst {
		if c.Int != 0 {
			return x
		}
		return y
	}
	if x == y {
		return x
	}
	return &Expr{Op: OpSelect, Type: x.Type, Args: []*Expr{c, x, y}}
}

// FloorDiv is x / y rounded toward -Inf for int64 index arithmetic.
func FloorDiv(x, y *Expr) *Expr {
	if a, ok := x.IntValue(); ok {
		if b, ok := y.IntValue(); ok && b != 0 {
			return C(dimexpr.FloorDiv(a, b))
		}
	}
	q := Div(x, y)
	// Truncation rounds up when the signs differ and the division is inexact.
	adjust := And(Ne(Rem(x, y), C(0)), Ne(Lt(x, C(0)), Lt(y, C(0))))
	return Select(adjust, Sub(q, C(1)), q)
}

// FloorMod is x - FloorDiv(x, y)*y: the divisor's sign.
func FloorMod(x, y *Expr) *Expr {
	r := Rem(x, y)
	adjust := And(Ne(r, C(0)), Ne(Lt(r, C(0)), Lt(y, C(0))))
	return Select(adjust, Add(r, y), r)
}

// Clamp is min(max(x, lo), hi).
func Clamp(x, lo, hi *Expr) *Expr { return Min(Max(x, lo), hi) }

// Product multiplies int64 expressions (1 for none).
func Product(xs []*Expr) *Expr {
	p := C(1)
	for _, x := range xs {
		p = Mul(p, x)
	}
	return p
}

// Sum adds int64 expressions (0 for none).
func Sum(xs []*Expr) *Expr {
	s := C(0)
	for _, x := range xs {
		s = Add(s, x)
	}
	return s
}

// IntValue returns the value of an integer constant.
func (e *Expr) IntValue() (int64, bool) {
	if e.Op == OpConst && !e.Type.IsFloat() {
		return e.Int, true
	}
	return 0, false
}

// IsConst reports whether e is a constant.
func (e *Expr) IsConst() bool { return e.Op == OpConst }

// StaticInts returns the values of int64 constants.
func StaticInts(xs []*Expr) ([]int64, bool) {
	out := make([]int64, len(xs))
	for i, x := range xs {
		v, ok := x.IntValue()
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// String prints e as a nested call (for tests and errors).
func (e *Expr) String() string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *Expr) write(b *strings.Builder) {
	switch e.Op {
	case OpConst:
		if e.Type.IsFloat() {
			fmt.Fprintf(b, "%g", e.Float)
		} else {
			fmt.Fprintf(b, "%d", e.Int)
		}
		if e.Type != ir.Int64 {
			fmt.Fprintf(b, ":%s", e.Type)
		}
		return
	case OpVar:
		fmt.Fprintf(b, "i%d", e.Int)
		return
	case OpRVar:
		fmt.Fprintf(b, "r%d", e.Int)
		return
	case OpSym, OpHole:
		fmt.Fprintf(b, "%s", e.Name)
		return
	case OpAcc:
		b.WriteString("acc")
		return
	}
	b.WriteString(e.Op.String())
	if e.Op == OpCast || e.Op == OpBitcast {
		fmt.Fprintf(b, "<%s>", e.Type)
	}
	b.WriteByte('(')
	if e.Buf != nil {
		b.WriteString(e.Buf.Name)
		if len(e.Args) > 0 {
			b.WriteString(", ")
		}
	}
	for i, a := range e.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		a.write(b)
	}
	b.WriteByte(')')
}

// ---- constant folding (integers: index arithmetic; floats: constants) ----

// wrapInt truncates v to integer type d's width (two's complement).
func wrapInt(d ir.DType, v int64) int64 {
	switch d {
	case ir.Int8:
		return int64(int8(v))
	case ir.Uint8:
		return int64(uint8(v))
	case ir.Int16:
		return int64(int16(v))
	case ir.Uint16:
		return int64(uint16(v))
	case ir.Int32:
		return int64(int32(v))
	case ir.Uint32:
		return int64(uint32(v))
	}
	return v
}

func foldUnary(op Op, x *Expr) (*Expr, bool) {
	if x.Op != OpConst {
		return nil, false
	}
	if x.Type.IsFloat() {
		f, ok := map[Op]func(float64) float64{OpNeg: func(v float64) float64 { return -v }, OpAbs: math.Abs,
			OpSqrt: math.Sqrt, OpFloor: math.Floor, OpCeil: math.Ceil, OpRound: math.RoundToEven}[op]
		if !ok {
			return nil, false
		}
		return Const(x.Type, f(x.Float)), true
	}
	switch op {
	case OpNeg:
		return IntConst(x.Type, -x.Int), true
	case OpAbs:
		if x.Type.IsUnsigned() {
			return x, true
		}
		return IntConst(x.Type, max(x.Int, -x.Int)), true
	case OpNot:
		if x.Type == ir.Bool {
			return Bool(x.Int == 0), true
		}
		return IntConst(x.Type, ^x.Int), true
	}
	return nil, false
}

// foldBinary folds integer arithmetic on constants and identities with 0
// and 1 (index expressions are mostly static); floats fold only when both
// operands are constants.
func foldBinary(op Op, x, y *Expr) (*Expr, bool) {
	t := x.Type
	if t == ir.Int64 {
		a, aok := x.IntValue()
		b, bok := y.IntValue()
		switch {
		case aok && bok:
			switch op {
			case OpAdd:
				return C(a + b), true
			case OpSub:
				return C(a - b), true
			case OpMul:
				return C(a * b), true
			case OpDiv:
				if b == 0 {
					return C(0), true
				}
				return C(a / b), true
			case OpRem:
				if b == 0 {
					return C(0), true
				}
				return C(a % b), true
			case OpMax:
				return C(max(a, b)), true
			case OpMin:
				return C(min(a, b)), true
			case OpEq:
				return Bool(a == b), true
			case OpNe:
				return Bool(a != b), true
			case OpLt:
				return Bool(a < b), true
			case OpLe:
				return Bool(a <= b), true
			case OpGt:
				return Bool(a > b), true
			case OpGe:
				return Bool(a >= b), true
			}
		case op == OpAdd && aok && a == 0, op == OpMul && aok && a == 1:
			return y, true
		case (op == OpAdd || op == OpSub) && bok && b == 0, (op == OpMul || op == OpDiv) && bok && b == 1:
			return x, true
		case op == OpMul && (aok && a == 0 || bok && b == 0):
			return C(0), true
		case op == OpRem && bok && b == 1:
			return C(0), true
		case (op == OpMax || op == OpMin) && x == y:
			return x, true
		}
		return nil, false
	}
	if x.Op != OpConst || y.Op != OpConst {
		return nil, false
	}
	if t == ir.Bool {
		a, b := x.Int != 0, y.Int != 0
		switch op {
		case OpAnd:
			return Bool(a && b), true
		case OpOr:
			return Bool(a || b), true
		case OpXor, OpNe:
			return Bool(a != b), true
		case OpEq:
			return Bool(a == b), true
		}
		return nil, false
	}
	if t.IsFloat() {
		a, b := x.Float, y.Float
		switch op {
		case OpAdd:
			return Const(t, a+b), true
		case OpSub:
			return Const(t, a-b), true
		case OpMul:
			return Const(t, a*b), true
		case OpDiv:
			return Const(t, a/b), true
		}
	}
	return nil, false
}

func foldCast(x *Expr, d ir.DType) *Expr {
	switch {
	case x.Type.IsFloat() && d.IsFloat():
		return Const(d, x.Float)
	case x.Type.IsFloat() && d == ir.Bool:
		return Bool(x.Float != 0)
	case x.Type.IsFloat():
		return IntConst(d, saturate(x.Float, d))
	case d.IsFloat():
		if x.Type.IsUnsigned() {
			return Const(d, float64(uint64(x.Int)))
		}
		return Const(d, float64(x.Int))
	}
	return IntConst(d, x.Int)
}

// saturate converts f to integer type d as the reference does: truncated
// toward zero into int64 (saturating; NaN gives 0; Uint64 keeps values up to
// 2^64), then wrapped to d's width.
func saturate(f float64, d ir.DType) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case d == ir.Uint64 && f >= math.MaxInt64:
		if f >= math.MaxUint64 {
			return -1 // all ones
		}
		return int64(uint64(f))
	case f >= math.MaxInt64:
		return wrapInt(d, math.MaxInt64)
	case f <= math.MinInt64:
		return wrapInt(d, math.MinInt64)
	}
	return wrapInt(d, int64(f))
}

// EvalInt evaluates an int64 index expression of constants and symbols
// (env gives the symbols' values); ok is false for anything else.
func EvalInt(e *Expr, env map[string]int64) (int64, bool) {
	switch e.Op {
	case OpConst:
		return e.Int, !e.Type.IsFloat()
	case OpSym:
		v, ok := env[e.Name]
		return v, ok
	case OpSelect: // a floor division of a possibly negative dim
		c, ok := EvalInt(e.Args[0], env)
		if !ok {
			return 0, false
		}
		if c != 0 {
			return EvalInt(e.Args[1], env)
		}
		return EvalInt(e.Args[2], env)
	}
	if len(e.Args) != 2 {
		return 0, false
	}
	a, ok1 := EvalInt(e.Args[0], env)
	b, ok2 := EvalInt(e.Args[1], env)
	if !ok1 || !ok2 {
		return 0, false
	}
	switch e.Op {
	case OpAdd:
		return a + b, true
	case OpSub:
		return a - b, true
	case OpMul:
		return a * b, true
	case OpDiv:
		if b == 0 {
			return 0, true
		}
		return a / b, true
	case OpRem:
		if b == 0 {
			return 0, true
		}
		return a % b, true
	case OpMax:
		return max(a, b), true
	case OpMin:
		return min(a, b), true
	case OpAnd:
		return a & b, true
	case OpOr:
		return a | b, true
	}
	// Comparisons give 1 or 0, as booleans.
	cmp, ok := map[Op]bool{OpEq: a == b, OpNe: a != b, OpLt: a < b, OpLe: a <= b, OpGt: a > b, OpGe: a >= b}[e.Op]
	if !ok {
		return 0, false
	}
	if cmp {
		return 1, true
	}
	return 0, true
}
