package autodiff

// The sampling-grid ops (ir/ops grid.go).

func init() {
	notDifferentiable("", sampleMap, "GridSample", "AffineGrid")
}
