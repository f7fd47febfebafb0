package autodiff

// The transformer ops (ir/ops attention.go) have no rules yet.

func init() {
	notDifferentiable("", "not implemented: its gradient is two batched MatMuls through a softmax's, per head group, plus the caches' slices", "Attention")
	notDifferentiable("", "not implemented: its gradient is the inverse rotation of dy (the angles are constants)", "RotaryEmbedding")
}
