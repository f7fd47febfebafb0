package autodiff

// The bitwise ops (ir/ops bitwise.go).

func init() {
	notDifferentiable("", integerResult, "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
}
