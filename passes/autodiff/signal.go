package autodiff

// The signal ops (ir/ops signal.go): window functions, DFT, STFT and
// MelWeightMatrix, none differentiated.

func init() {
	notDifferentiable("", "its result does not depend on any float input (sizes, a rate and edge frequencies make a constant)",
		"HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix")
	notDifferentiable("", "not implemented: the gradient of a DFT is the adjoint transform (an unnormalized inverse DFT, folded for onesided)", "DFT", "STFT")
}
