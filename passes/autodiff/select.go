package autodiff

import "github.com/kiln-ml/kiln/ir"

// The selection ops (ir/ops select.go): ReverseSequence is its own
// gradient; NonZero and Compress have none.

func init() {
	define("", map[string]Rule{
		// Reversing the same prefixes again undoes it.
		"ReverseSequence": func(c *Ctx) ([]*ir.Value, error) {
			return []*ir.Value{c.Op("ReverseSequence", []*ir.Value{c.DY[0], c.Node.Inputs[1]}, c.Node.Attrs...)}, nil
		},
	})
	notDifferentiable("", "an integer result (the coordinates of the nonzero elements)", "NonZero")
	notDifferentiable("", "not implemented: the gradient puts dy back at the kept slices and zeros elsewhere, a scatter along the axis", "Compress")
}
