package autodiff

// The later normalizations (ir/ops norm_extra.go) have no rules yet.

func init() {
	notDifferentiable("", "not implemented: its gradient is LayerNormalization's without the mean term", "RMSNormalization")
	notDifferentiable("", "not implemented: its gradient is InstanceNormalization's over groups of channels", "GroupNormalization")
	notDifferentiable("", "not implemented: its gradient divides by the norm and subtracts the projection on x", "LpNormalization")
}
