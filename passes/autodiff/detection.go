package autodiff

// The detection ops (ir/ops detection.go).

func init() {
	notDifferentiable("", integerResult, "NonMaxSuppression")
	notDifferentiable("", sampleMap, "RoiAlign")
}
