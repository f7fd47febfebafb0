package autodiff

func init() {
	notDifferentiable("", "not implemented: differentiating through a subgraph needs the body's own gradient graph (and, for Loop and Scan, every iteration's values)",
		"If", "Loop", "Scan")
}
