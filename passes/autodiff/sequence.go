package autodiff

func init() {
	notDifferentiable("", "not implemented: gradients flow through tensors only; a sequence or optional value would need its own adjoint (a sequence of gradients)",
		"SequenceEmpty", "SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength",
		"SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement")
}
