package autodiff

// The sequence ops (ir/ops sequence.go).

func init() {
	notDifferentiable("", containerValues,
		"SequenceEmpty", "SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength",
		"SplitToSequence", "ConcatFromSequence")
}
