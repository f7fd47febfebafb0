package autodiff

// The transformer and extra normalization ops (ir/ops attention.go,
// norm_extra.go, activation_gelu.go, pool_lp.go) have no rules yet.

func init() {
	notDifferentiable("", "not implemented: its gradient is two batched MatMuls through a softmax's, per head group, plus the caches' slices", "Attention")
	notDifferentiable("", "not implemented: its gradient is the inverse rotation of dy (the angles are constants)", "RotaryEmbedding")
	notDifferentiable("", "not implemented: its gradient is LayerNormalization's without the mean term", "RMSNormalization")
	notDifferentiable("", "not implemented: its gradient is InstanceNormalization's over groups of channels", "GroupNormalization")
	notDifferentiable("", "not implemented: its gradient divides by the norm and subtracts the projection on x", "LpNormalization")
	notDifferentiable("", "not implemented: its gradient spreads dy * (|x|/y)^(p-1) * sign(x) over each window", "LpPool")
	notDifferentiable("", "not implemented: its derivative is Phi(x) + x*phi(x) (or the tanh form's), a unary rule to add", "Gelu")
}
