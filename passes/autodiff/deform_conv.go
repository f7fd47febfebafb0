package autodiff

// DeformConv (ir/ops deform_conv.go).

func init() {
	notDifferentiable("", sampleMap, "DeformConv")
}
