package kernel

import (
	"fmt"
	"math"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// The evaluator's expressions: an Expr DAG is compiled once per kernel into
// a list of instructions in dependency order (each node once, however many
// readers it has), run per point over a slice of registers. The numerics
// are doc.go's, computed in Go: float32 values round to float32 after
// every operation, integers wrap to their type's width.

// scalar is one computed element: floats in f (a Float32 value rounded to
// float32), integers in i (wrapped to the type's width, unsigned types
// zero-extended, Uint64 as its bits) and bools in i (0 or 1).
type scalar struct {
	f float64
	i int64
}

// instr is one node of a compiled expression: its result goes to the
// register of its own index.
type instr struct {
	e    *Expr
	args []int
	// t is the result's type, at the operands' (the type an operation
	// computes in; a cast's source).
	t, at ir.DType
	c     scalar   // OpConst, OpSym
	buf   *binding // OpLoad, OpLoadOr
	// varies marks an instruction that depends on a reduction axis.
	varies bool
}

// program is a compiled set of expressions (roots), evaluated together.
type program struct {
	code  []instr
	roots []int
	// invariant is the number of leading instructions that do not depend
	// on a reduction axis (the rest do): a reduction computes them once
	// per point.
	invariant int
}

// scope says which coordinates an expression may read where it is
// evaluated.
type scope struct {
	vars  int  // Var(0) ... Var(vars-1)
	rvars int  // RVar(0) ... RVar(rvars-1)
	acc   bool // Acc (a reduction's Post)
}

// compiler turns expressions into a program.
type compiler struct {
	k    *Kernel
	ev   *evaluation
	sc   scope
	regs map[*Expr]int
	p    *program
}

// compile compiles roots for evaluation in scope sc; the instructions that
// do not depend on a reduction axis come first.
func (ev *evaluation) compile(k *Kernel, sc scope, roots ...*Expr) (*program, error) {
	cm := &compiler{k: k, ev: ev, sc: sc, regs: map[*Expr]int{}, p: &program{}}
	for _, r := range roots {
		reg, err := cm.node(r)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", k.Name, err)
		}
		cm.p.roots = append(cm.p.roots, reg)
	}
	cm.p.hoist()
	return cm.p, nil
}

// hoist moves the instructions that do not vary along a reduction axis
// before those that do, keeping dependencies in order (an invariant one
// never reads a varying one).
func (p *program) hoist() {
	order := make([]int, 0, len(p.code))
	for i, in := range p.code {
		if !in.varies {
			order = append(order, i)
		}
	}
	p.invariant = len(order)
	for i, in := range p.code {
		if in.varies {
			order = append(order, i)
		}
	}
	moved := make([]int, len(p.code))
	for to, from := range order {
		moved[from] = to
	}
	code := make([]instr, len(p.code))
	for to, from := range order {
		in := p.code[from]
		args := make([]int, len(in.args))
		for j, a := range in.args {
			args[j] = moved[a]
		}
		in.args = args
		code[to] = in
	}
	for i, r := range p.roots {
		p.roots[i] = moved[r]
	}
	p.code = code
}

// node compiles e (once) and returns its register.
func (cm *compiler) node(e *Expr) (int, error) {
	if e == nil {
		return 0, fmt.Errorf("a nil expression")
	}
	if r, ok := cm.regs[e]; ok {
		return r, nil
	}
	in := instr{e: e, t: e.Type}
	for _, a := range e.Args {
		r, err := cm.node(a)
		if err != nil {
			return 0, err
		}
		in.args = append(in.args, r)
		in.varies = in.varies || cm.p.code[r].varies
	}
	if len(e.Args) > 0 {
		in.at = e.Args[0].Type
	}
	if err := cm.check(e, &in); err != nil {
		return 0, fmt.Errorf("%s: %w", e, err)
	}
	cm.p.code = append(cm.p.code, in)
	r := len(cm.p.code) - 1
	cm.regs[e] = r
	return r, nil
}

// check validates one node where it is evaluated and fills in what the
// instruction needs (constants, symbols, buffers).
func (cm *compiler) check(e *Expr, in *instr) error {
	if e.Type == ir.Float16 || e.Type == ir.BFloat16 || !evaluable(e.Type) {
		return fmt.Errorf("computes in %s", e.Type)
	}
	switch {
	case e.Op == OpConst:
		in.c = constScalar(e)
	case e.Op == OpVar:
		if e.Int < 0 || int(e.Int) >= cm.sc.vars {
			return fmt.Errorf("axis %d of a space of %d here", e.Int, cm.sc.vars)
		}
	case e.Op == OpRVar:
		if e.Int < 0 || int(e.Int) >= cm.sc.rvars {
			return fmt.Errorf("reduction axis %d of %d here", e.Int, cm.sc.rvars)
		}
		in.varies = true
	case e.Op == OpSym:
		v, ok := cm.ev.syms[e.Name]
		if !ok {
			return fmt.Errorf("no value for the runtime dimension %q", e.Name)
		}
		in.c = scalar{i: v}
	case e.Op == OpHole:
		return fmt.Errorf("a value a host kernel supplies, which the evaluator has not")
	case e.Op == OpAcc:
		if !cm.sc.acc {
			return fmt.Errorf("the reduced value outside a reduction's Post")
		}
	case e.Op == OpLoad, e.Op == OpLoadOr:
		return cm.checkLoad(e, in)
	case e.Op == OpSelect:
		if len(e.Args) != 3 || e.Args[0].Type != ir.Bool || e.Args[1].Type != e.Type || e.Args[2].Type != e.Type {
			return fmt.Errorf("select wants (bool, %s, %s)", e.Type, e.Type)
		}
	case e.Op == OpCast:
		if len(e.Args) != 1 {
			return fmt.Errorf("%d operands", len(e.Args))
		}
		if e.Round != ir.Undefined && (e.Type != ir.Float32 || e.Round != ir.Float16 && e.Round != ir.BFloat16) {
			return fmt.Errorf("rounds a %s to %s", e.Type, e.Round)
		}
	case e.Op == OpBitcast:
		if len(e.Args) != 1 || !HoldsBits(e.Type) || !HoldsBits(in.at) || e.Type.Size() != in.at.Size() {
			return fmt.Errorf("reinterprets %s as %s", argTypes(e), e.Type)
		}
	case e.Op >= OpNeg && e.Op <= OpIsNaN:
		if len(e.Args) != 1 {
			return fmt.Errorf("%d operands", len(e.Args))
		}
		return checkUnary(e)
	case e.Op >= OpAdd && e.Op <= OpGe:
		if len(e.Args) != 2 || e.Args[0].Type != e.Args[1].Type {
			return fmt.Errorf("operands of types %s", argTypes(e))
		}
		return checkBinary(e)
	default:
		return fmt.Errorf("unknown operation %d", int(e.Op))
	}
	return nil
}

// checkLoad validates a load's operands and binds its buffer.
func (cm *compiler) checkLoad(e *Expr, in *instr) error {
	idx := e.Args
	if e.Op == OpLoadOr {
		if len(e.Args) < 2 || e.Args[0].Type != ir.Bool || e.Args[1].Type != e.Type {
			return fmt.Errorf("loador wants a bool and a %s fallback", e.Type)
		}
		idx = e.Args[2:]
	}
	if e.Buf == nil {
		return fmt.Errorf("a load without a buffer")
	}
	if len(idx) != e.Buf.Rank() {
		return fmt.Errorf("%d indices into %s of rank %d", len(idx), e.Buf.Name, e.Buf.Rank())
	}
	for _, x := range idx {
		if !x.Type.IsInt() {
			return fmt.Errorf("an index of type %s", x.Type)
		}
	}
	if e.Type != ComputeType(e.Buf.DType) {
		return fmt.Errorf("a load of %s %s as %s", e.Buf.DType, e.Buf.Name, e.Type)
	}
	b, err := cm.ev.bind(e.Buf)
	if err != nil {
		return err
	}
	in.buf = b
	return nil
}

func argTypes(e *Expr) []ir.DType {
	ts := make([]ir.DType, len(e.Args))
	for i, a := range e.Args {
		ts[i] = a.Type
	}
	return ts
}

// evaluable reports whether the evaluator computes in type d.
func evaluable(d ir.DType) bool {
	return d == ir.Bool || d == ir.Float32 || d == ir.Float64 || d.IsInt()
}

// floatOnly are the unary operations defined on floats only.
var floatOnly = map[Op]bool{OpSqrt: true, OpExp: true, OpLog: true, OpSin: true, OpCos: true, OpAtan: true,
	OpTanh: true, OpErf: true, OpSigmoid: true, OpFloor: true, OpCeil: true, OpRound: true, OpIsNaN: true}

func checkUnary(e *Expr) error {
	x := e.Args[0].Type
	switch {
	case floatOnly[e.Op] && !x.IsFloat():
		return fmt.Errorf("%s of %s", e.Op, x)
	case e.Op == OpNot && x.IsFloat():
		return fmt.Errorf("not of %s", x)
	case e.Op == OpIsNaN && e.Type != ir.Bool, e.Op != OpIsNaN && e.Type != x:
		return fmt.Errorf("%s of %s gives %s", e.Op, x, e.Type)
	}
	return nil
}

func checkBinary(e *Expr) error {
	x := e.Args[0].Type
	compare := e.Op >= OpEq && e.Op <= OpGe
	switch {
	case compare && e.Type != ir.Bool, !compare && e.Type != x:
		return fmt.Errorf("%s of %s gives %s", e.Op, x, e.Type)
	case x.IsFloat() && e.Op >= OpAnd && e.Op <= OpShr:
		return fmt.Errorf("%s of %s", e.Op, x)
	}
	return nil
}

// constScalar is a constant's value, wrapped to its type.
func constScalar(e *Expr) scalar {
	if e.Type.IsFloat() {
		return scalar{f: roundFloat(e.Type, e.Float)}
	}
	return scalar{i: wrapTo(e.Type, e.Int)}
}

// run evaluates instructions from to the end (from: 0, or the program's
// invariant count to redo only what varies along a reduction axis) at the
// point m holds.
func (p *program) run(m *evalPoint, regs []scalar, from int) {
	for i := from; i < len(p.code); i++ {
		in := &p.code[i]
		regs[i] = m.exec(in, regs)
	}
}

// exec computes one instruction.
func (m *evalPoint) exec(in *instr, regs []scalar) scalar {
	e := in.e
	arg := func(j int) scalar { return regs[in.args[j]] }
	switch e.Op {
	case OpConst, OpSym:
		return in.c
	case OpVar:
		return scalar{i: m.vars[e.Int]}
	case OpRVar:
		return scalar{i: m.rvars[e.Int]}
	case OpAcc:
		return m.acc
	case OpLoad:
		return m.load(in, regs, in.args)
	case OpLoadOr:
		if arg(0).i == 0 {
			return arg(1) // nothing is read
		}
		return m.load(in, regs, in.args[2:])
	case OpSelect:
		if arg(0).i != 0 {
			return arg(1)
		}
		return arg(2)
	case OpCast:
		return castScalar(arg(0), in.at, e.Type, e.Round)
	case OpBitcast:
		return bitcastScalar(arg(0), in.at, e.Type)
	}
	if len(in.args) == 1 {
		return unaryScalar(e.Op, in.at, arg(0))
	}
	return binaryScalar(e.Op, in.at, arg(0), arg(1))
}

// load reads the instruction's buffer at the indices in registers idx; an
// index outside the buffer is an error (the definition should have
// clamped it), and reads 0.
func (m *evalPoint) load(in *instr, regs []scalar, idx []int) scalar {
	b := in.buf
	off := 0
	for d, r := range idx {
		x := regs[r].i
		if x < 0 || x >= b.dims[d] {
			m.fail(fmt.Errorf("kernel %s: %s reads %s%v at %v", m.k.Name, in.e, b.b.Name, b.dims, indexValues(regs, idx)))
			return scalar{}
		}
		off += int(x) * b.strides[d]
	}
	return b.get(off)
}

func indexValues(regs []scalar, idx []int) []int64 {
	out := make([]int64, len(idx))
	for i, r := range idx {
		out[i] = regs[r].i
	}
	return out
}

// ---- numerics (doc.go's) ----

// roundFloat rounds v to the precision of float type t.
func roundFloat(t ir.DType, v float64) float64 {
	if t == ir.Float32 {
		return float64(float32(v))
	}
	return v
}

// wrapTo truncates v to integer (or Bool) type t's width.
func wrapTo(t ir.DType, v int64) int64 {
	if t == ir.Bool {
		return v & 1
	}
	return wrapInt(t, v)
}

// bitWidth is an integer type's width in bits (Bool: 1).
func bitWidth(t ir.DType) uint64 {
	if t == ir.Bool {
		return 1
	}
	return uint64(8 * t.Size())
}

func boolScalar(b bool) scalar { return scalar{i: b2i(b)} }

// unaryScalar computes a unary operation on an operand of type t.
func unaryScalar(op Op, t ir.DType, x scalar) scalar {
	if t.IsFloat() {
		if op == OpIsNaN {
			return boolScalar(math.IsNaN(x.f))
		}
		return scalar{f: roundFloat(t, floatUnary(op, x.f))}
	}
	switch op {
	case OpNeg:
		return scalar{i: wrapTo(t, -x.i)}
	case OpAbs:
		if x.i < 0 && t.IsSigned() {
			return scalar{i: wrapTo(t, -x.i)} // MinInt stays MinInt
		}
		return x
	case OpNot:
		return scalar{i: wrapTo(t, ^x.i)}
	}
	return x // excluded by checkUnary
}

func floatUnary(op Op, v float64) float64 {
	switch op {
	case OpNeg:
		return -v
	case OpAbs:
		return math.Abs(v)
	case OpSqrt:
		return math.Sqrt(v)
	case OpExp:
		return math.Exp(v)
	case OpLog:
		return math.Log(v)
	case OpSin:
		return math.Sin(v)
	case OpCos:
		return math.Cos(v)
	case OpAtan:
		return math.Atan(v)
	case OpTanh:
		return math.Tanh(v)
	case OpErf:
		return math.Erf(v)
	case OpSigmoid:
		return 1 / (1 + math.Exp(-v))
	case OpFloor:
		return math.Floor(v)
	case OpCeil:
		return math.Ceil(v)
	case OpRound:
		return math.RoundToEven(v)
	}
	return v // excluded by checkUnary
}

// binaryScalar computes a binary operation on operands of type t.
func binaryScalar(op Op, t ir.DType, x, y scalar) scalar {
	if t.IsFloat() {
		return floatBinary(op, t, x.f, y.f)
	}
	if op >= OpEq && op <= OpGe {
		return boolScalar(intCompare(op, t.IsSigned(), x.i, y.i))
	}
	return scalar{i: wrapTo(t, intBinary(op, t, x.i, y.i))}
}

func floatBinary(op Op, t ir.DType, a, b float64) scalar {
	var r float64
	switch op {
	case OpAdd:
		r = a + b
	case OpSub:
		r = a - b
	case OpMul:
		r = a * b
	case OpDiv:
		r = a / b
	case OpRem:
		r = math.Mod(a, b) // C's fmod: the dividend's sign
	case OpMax:
		r = b
		if math.IsNaN(a) || a > b { // y only when x is neither greater nor NaN
			r = a
		}
	case OpMin:
		r = b
		if math.IsNaN(a) || a < b {
			r = a
		}
	case OpPow:
		r = math.Pow(a, b)
	case OpEq:
		return boolScalar(a == b)
	case OpNe:
		return boolScalar(a != b) // true when either is NaN
	case OpLt:
		return boolScalar(a < b)
	case OpLe:
		return boolScalar(a <= b)
	case OpGt:
		return boolScalar(a > b)
	case OpGe:
		return boolScalar(a >= b)
	}
	return scalar{f: roundFloat(t, r)}
}

func intCompare(op Op, signed bool, a, b int64) bool {
	if !signed { // unsigned and Bool values are zero-extended: compare the bits
		ua, ub := uint64(a), uint64(b)
		switch op {
		case OpLt:
			return ua < ub
		case OpLe:
			return ua <= ub
		case OpGt:
			return ua > ub
		case OpGe:
			return ua >= ub
		}
	}
	switch op {
	case OpEq:
		return a == b
	case OpNe:
		return a != b
	case OpLt:
		return a < b
	case OpLe:
		return a <= b
	case OpGt:
		return a > b
	}
	return a >= b
}

// intBinary computes an integer operation in int64 (the caller wraps):
// division and remainder by zero give 0 and MinInt / -1 wraps (Go's
// int64 division does, and a narrower MinInt over -1 wraps back in
// wrapTo), shifts of the width or more give 0.
func intBinary(op Op, t ir.DType, a, b int64) int64 {
	signed := t.IsSigned()
	switch op {
	case OpAdd:
		return a + b
	case OpSub:
		return a - b
	case OpMul:
		return a * b
	case OpDiv, OpRem:
		switch {
		case b == 0:
			return 0
		case signed && op == OpDiv:
			return a / b
		case signed:
			return a % b
		case op == OpDiv:
			return int64(uint64(a) / uint64(b))
		}
		return int64(uint64(a) % uint64(b))
	case OpMax:
		if intCompare(OpGt, signed, a, b) {
			return a
		}
		return b
	case OpMin:
		if intCompare(OpLt, signed, a, b) {
			return a
		}
		return b
	case OpAnd:
		return a & b
	case OpOr:
		return a | b
	case OpXor:
		return a ^ b
	case OpShl, OpShr:
		w := bitWidth(t)
		n := uint64(b) // the shift as the type's unsigned bits
		if w < 64 {
			n &= 1<<w - 1
		}
		switch {
		case n >= w:
			return 0
		case op == OpShl:
			return a << n
		case signed:
			return a >> n
		}
		return int64(uint64(a) >> n)
	case OpPow:
		return ops.IntPow(a, b, signed)
	}
	return 0 // excluded by checkBinary
}

// castScalar converts x of type from to type to (ONNX Cast, as CastTo
// says), rounding a Float32 result to round's precision when set.
func castScalar(x scalar, from, to, round ir.DType) scalar {
	var r scalar
	switch {
	case from.IsFloat() && to.IsFloat():
		r.f = roundFloat(to, x.f)
	case from.IsFloat() && to == ir.Bool:
		r.i = b2i(x.f != 0) // NaN is true
	case from.IsFloat():
		r.i = saturate(x.f, to)
	case to == ir.Float32 && from.IsSigned():
		r.f = float64(float32(x.i)) // one rounding, from the integer
	case to == ir.Float32:
		r.f = float64(float32(uint64(x.i)))
	case to.IsFloat() && from.IsSigned():
		r.f = float64(x.i)
	case to.IsFloat():
		r.f = float64(uint64(x.i))
	case to == ir.Bool:
		r.i = b2i(x.i != 0)
	default:
		r.i = wrapTo(to, x.i) // the source is already extended by its signedness
	}
	switch round {
	case ir.Float16:
		r.f = float64(ir.HalfToFloat32(ir.Float32ToHalf(float32(r.f))))
	case ir.BFloat16:
		r.f = float64(ir.BFloat16ToFloat32(ir.Float32ToBFloat16(float32(r.f))))
	}
	return r
}

// bitcastScalar reinterprets x's bits, of type from, as type to (of the
// same width; see Bitcast).
func bitcastScalar(x scalar, from, to ir.DType) scalar {
	var bits uint64
	switch from {
	case ir.Float32:
		bits = uint64(math.Float32bits(narrow32(x.f)))
	case ir.Float64:
		bits = math.Float64bits(x.f)
	default:
		bits = uint64(x.i)
	}
	switch to {
	case ir.Float32:
		return scalar{f: widen32(math.Float32frombits(uint32(bits)))}
	case ir.Float64:
		return scalar{f: math.Float64frombits(bits)}
	}
	return scalar{i: wrapTo(to, int64(bits))}
}

// widen32 is f as a float64, a NaN keeping its payload and its signaling
// bit as a register holding f does (Go's conversion quiets a signaling
// NaN).
func widen32(f float32) float64 {
	if f == f {
		return float64(f)
	}
	b := math.Float32bits(f)
	return math.Float64frombits(uint64(b>>31)<<63 | 0x7ff<<52 | uint64(b&0x7fffff)<<29)
}

// narrow32 is widen32's inverse: v rounded to float32, a NaN keeping the
// top of its payload and its signaling bit.
func narrow32(v float64) float32 {
	if v == v {
		return float32(v)
	}
	b := math.Float64bits(v)
	return math.Float32frombits(uint32(b>>63)<<31 | 0xff<<23 | uint32(b>>29)&0x7fffff)
}

// combineScalar merges x into acc of type t (a reduction's step or a
// store's Combine). Bools add as or and multiply as and.
func combineScalar(op ReduceOp, t ir.DType, acc, x scalar) scalar {
	if t == ir.Bool {
		switch op {
		case SumOp, MaxOp:
			return scalar{i: acc.i | x.i}
		case ProdOp, MinOp:
			return scalar{i: acc.i & x.i}
		}
	}
	switch op {
	case SumOp:
		return binaryScalar(OpAdd, t, acc, x)
	case ProdOp:
		return binaryScalar(OpMul, t, acc, x)
	case MaxOp:
		return binaryScalar(OpMax, t, x, acc)
	case MinOp:
		return binaryScalar(OpMin, t, x, acc)
	}
	return x
}
