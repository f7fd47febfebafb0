package autodiff

// Unique (ir/ops unique.go).

func init() {
	notDifferentiable("", sampleMap, "Unique")
}
