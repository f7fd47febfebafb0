package autodiff

// The integer, vision and detection ops of ir/ops (bitwise.go, grid.go,
// image.go, detection.go, unique.go, det.go, deform_conv.go) that have no
// rule yet, and why.
func init() {
	notDifferentiable("", "integer or boolean outputs: no gradient exists",
		"BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "NonMaxSuppression")
	notDifferentiable("", "not implemented: the gradient scatters through the same index or sample map the kernel builds; no model kiln trains uses it yet",
		"CenterCropPad", "GridSample", "AffineGrid", "Col2Im", "MaxUnpool", "RoiAlign", "DeformConv", "Unique")
	notDifferentiable("", "not implemented: needs the adjugate (det · inverse transposed), and MatrixInverse is not in the registry", "Det")
}
