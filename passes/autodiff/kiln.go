package autodiff

import "github.com/kiln-ml/kiln/ir"

// kiln's own ops (ir/ops kiln.go).

func init() {
	notDifferentiable(ir.KilnDomain, "formed by the fusion passes after autodiff runs: differentiate the model before it is compiled", "FusionGroup")
}
