package build

import (
	"slices"

	"github.com/kiln-ml/kiln/ir"
)

// Inputs with initializer defaults. ONNX (IR version 4 on) lets a graph
// input have an initializer of its name: the initializer is its value
// when a run does not give it. Caffe2-era exporters declare every weight
// so, and compiled as inputs those weights would neither fold nor be
// packed. So by default cc build compiles such inputs as constants, and
// the engine records their names (Metadata.Folded) to refuse a run that
// gives one, naming the flag; with --overridable-initializers they stay
// inputs, typed as their initializer, and the engine carries each
// initializer as the input's default (Binding.Default). Either way the
// engine computes what the reference does for the runs it accepts.

// declareInputs settles the engine's inputs before the passes run: the
// inputs with initializer defaults (above), then the shape flags' pins and
// ranges (Shapes.apply).
func (o *Options) declareInputs(m *ir.Model) error {
	if o.OverridableInitializers {
		o.defaults = keepDefaults(m.Graph)
	} else {
		o.folded = FoldDefaults(m.Graph)
	}
	var err error
	o.profile, o.pinned, err = o.Shapes.apply(m)
	return err
}

// FoldDefaults makes g's inputs with initializer defaults plain
// initializers and returns their names (cc build's default, and what
// cc quantize does before calibrating: a weight that is an input would
// not quantize as a constant).
func FoldDefaults(g *ir.Graph) []string {
	var names []string
	g.Inputs = slices.DeleteFunc(g.Inputs, func(v *ir.Value) bool {
		if v.Const != nil {
			names = append(names, v.Name)
		}
		return v.Const != nil
	})
	return names
}

// keepDefaults types each of g's inputs with an initializer default as its
// initializer (a fed value must have the default's shape, which the
// engine's code is compiled for) and returns the defaults by name.
func keepDefaults(g *ir.Graph) map[string][]byte {
	defaults := map[string][]byte{}
	for _, v := range g.Inputs {
		if v.Const != nil {
			v.Type = v.Const.Type()
			defaults[v.Name] = v.Const.Raw
		}
	}
	return defaults
}
