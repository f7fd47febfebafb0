package autodiff

// SequenceMap (ir/ops sequence_map.go).

func init() {
	notDifferentiable("", containerValues, "SequenceMap")
}
