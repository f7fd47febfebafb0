package autodiff

// The image rearrangements (ir/ops image.go).

func init() {
	notDifferentiable("", sampleMap, "Col2Im", "MaxUnpool")
}
