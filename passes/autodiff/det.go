package autodiff

// Det (ir/ops det.go).

func init() {
	notDifferentiable("", "not implemented: needs the adjugate (det · inverse transposed), and MatrixInverse is not in the registry", "Det")
}
