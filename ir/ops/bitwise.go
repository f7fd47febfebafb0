package ops

import "github.com/kiln-ml/kiln/ir"

// Bitwise ops on integers: BitShift (unsigned only, as the spec says) and
// BitwiseAnd/Or/Xor/Not. They reuse the elementwise builders with exact
// integer functions only; every integer type goes through int64 or uint64
// and is narrowed back, which keeps the low bits as the type's own
// arithmetic would.

var bitwiseOps = concatRows(
	binaryRows(
		binaryOp{name: "BitShift", since: 11, types: unsignedTypes,
			attrs: []AttrDef{{Name: "direction", Kind: ir.AttrString, Required: true}}, arith: shiftArith},
		binaryOp{name: "BitwiseAnd", since: 18, types: intTypes, arith: fixed(arith{i: andOf[int64], u: andOf[uint64]})},
		binaryOp{name: "BitwiseOr", since: 18, types: intTypes, arith: fixed(arith{i: orOf[int64], u: orOf[uint64]})},
		binaryOp{name: "BitwiseXor", since: 18, types: intTypes, arith: fixed(arith{i: xorOf[int64], u: xorOf[uint64]})},
	),
	unaryRows(
		unaryOp{name: "BitwiseNot", since: 18, types: intTypes, f: integersOnly, i: notOf[int64], u: notOf[uint64]},
	),
)

func init() { register(bitwiseOps) }

func andOf[T kernelInt](a, b T) T { return a & b }
func orOf[T kernelInt](a, b T) T  { return a | b }
func xorOf[T kernelInt](a, b T) T { return a ^ b }
func notOf[T kernelInt](a T) T    { return ^a }

// integersOnly is the float function of an op whose Types are integers:
// the kernel builder asks for one, but no float reaches it.
func integersOnly(attrs) func(float64) float64 { return func(float64) float64 { return 0 } }

// shiftArith shifts in uint64; bits shifted past the type's width are
// dropped when the result is narrowed back, and Go defines a shift by 64
// or more as 0, which is what shifting every bit out gives.
func shiftArith(a attrs) (arith, error) {
	left, err := shiftLeft(a)
	switch {
	case err != nil:
		return arith{}, err
	case left:
		return arith{u: func(x, n uint64) uint64 { return x << n }}, nil
	}
	return arith{u: func(x, n uint64) uint64 { return x >> n }}, nil
}
