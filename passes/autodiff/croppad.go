package autodiff

// CenterCropPad (ir/ops croppad.go).

func init() {
	notDifferentiable("", sampleMap, "CenterCropPad")
}
