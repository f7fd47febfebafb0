package cpu

import (
	"slices"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/ir"
)

// transposePerm returns a Transpose's permutation (reversal by default).
func (g *gen) transposePerm(n *ir.Node) []int64 {
	perm := g.attrs(n).Ints("perm")
	if len(perm) == 0 {
		for i := len(dimsOf(n.Inputs[0])) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	return perm
}

// transposeIsView reports whether a Transpose only moves unit dims: the
// bytes are the same, so its output can alias its input.
func transposeIsView(g *gen, n *ir.Node) bool {
	var kept []int64
	id := dimsOf(n.Inputs[0])
	for _, p := range g.transposePerm(n) {
		if id[p] != 1 {
			kept = append(kept, p)
		}
	}
	for i := 1; i < len(kept); i++ {
		if kept[i] < kept[i-1] {
			return false
		}
	}
	return true
}

func init() {
	// A view of a small type's codes shares their bytes (a packed type's
	// elements keep their order); its copy copies the bytes.
	viewed := append(slices.Clone(anyFixed), kernel.SmallTypes()...)
	view := func() *opInfo { return &opInfo{types: viewed, view: true, lower: (*gen).lowerCopy} }
	register(map[string]*opInfo{
		"Reshape":   view(),
		"Flatten":   view(),
		"Squeeze":   view(),
		"Unsqueeze": view(),
		"Identity":  view(),
	})
}
