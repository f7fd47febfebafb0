package autodiff

// The optional-value ops (ir/ops optional.go).

func init() {
	notDifferentiable("", containerValues, "Optional", "OptionalHasElement", "OptionalGetElement")
}
