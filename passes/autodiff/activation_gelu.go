package autodiff

// Gelu (ir/ops activation_gelu.go) has no rule yet.

func init() {
	notDifferentiable("", "not implemented: its derivative is Phi(x) + x*phi(x) (or the tanh form's), a unary rule to add", "Gelu")
}
