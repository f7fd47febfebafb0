package build

import (
	"fmt"
	"sort"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Shapes are the shape flags of cc build, per input name: Pin fixes an
// input's dims (--shape; its dynamic dims then compile as constants); Min,
// Opt and Max give the range of its dynamic dims (--min/--opt/--max,
// TensorRT's optimization profile). Dims the model declares static must be
// given as they are.
type Shapes struct {
	Pin, Min, Opt, Max map[string][]int64
	// Values compile inputs as constants (--value): those whose values
	// set shapes (ops.ShapeTensorInputs) must be given.
	Values map[string][]float64
}

// apply pins m's inputs and returns the ranges of the symbols left dynamic
// and the inputs compiled as constants.
func (s Shapes) apply(m *ir.Model) (map[string]cpu.DimRange, []engine.Pinned, error) {
	profile, err := s.applyShapes(m)
	if err != nil {
		return nil, nil, err
	}
	var pinned []engine.Pinned
	for _, name := range sortedNames(s.Values) {
		var v *ir.Value
		for _, in := range m.Graph.Inputs {
			if in.Name == name && in.Const == nil {
				v = in
			}
		}
		if v == nil {
			return nil, nil, fmt.Errorf("--value %s: the model has no input %q", name, name)
		}
		dims, ok := v.Type.Shape.Ints()
		if !ok {
			return nil, nil, fmt.Errorf("--value %s: the input's shape %s is not static (pin it with --shape)", name, v.Type)
		}
		vals := s.Values[name]
		if int64(len(vals)) != ir.Product(dims) {
			return nil, nil, fmt.Errorf("--value %s: %d values for an input of shape %s", name, len(vals), v.Type)
		}
		t := ops.FromFloat64s(v.Type.Elem, dims, vals)
		if err := m.Graph.PinInput(name, t); err != nil {
			return nil, nil, fmt.Errorf("--value %s: %v", name, err)
		}
		pinned = append(pinned, engine.Pinned{Name: name, DType: t.DType.String(), Shape: dims, Data: t.Raw})
	}
	shapeTensors := ops.ShapeTensorInputs(m.Graph)
	var first *ir.Value
	for v := range shapeTensors {
		if first == nil || v.Name < first.Name {
			first = v
		}
	}
	if first != nil {
		return nil, nil, &ops.ShapeTensorError{Input: first.Name, Use: shapeTensors[first]}
	}
	return profile, pinned, nil
}

// applyShapes pins inputs' dims and returns the ranges of the symbols
// left dynamic.
func (s Shapes) applyShapes(m *ir.Model) (map[string]cpu.DimRange, error) {
	inputs := map[string]*ir.Value{}
	for _, v := range m.Graph.Inputs {
		if v.Const == nil {
			inputs[v.Name] = v
		}
	}
	// symbol values pinned, and the ranges asked for.
	pinned := map[string]int64{}
	ranges := map[string]*cpu.DimRange{}
	for _, f := range []struct {
		flag   string
		shapes map[string][]int64
	}{{"--shape", s.Pin}, {"--min", s.Min}, {"--opt", s.Opt}, {"--max", s.Max}} {
		for _, name := range sortedNames(f.shapes) {
			dims := f.shapes[name]
			v := inputs[name]
			if v == nil {
				return nil, fmt.Errorf("%s %s: the model has no input %q", f.flag, name, name)
			}
			if !v.Type.Shape.Ranked || len(v.Type.Shape.Dims) != len(dims) {
				return nil, fmt.Errorf("%s %s: %d dims for an input of shape %s", f.flag, name, len(dims), v.Type)
			}
			for i, d := range v.Type.Shape.Dims {
				switch {
				case d.IsStatic() && d.Value != dims[i]:
					return nil, fmt.Errorf("%s %s: dim %d is %d in the model, not %d", f.flag, name, i, d.Value, dims[i])
				case d.IsSymbolic() && f.flag == "--shape":
					if p, ok := pinned[d.Param]; ok && p != dims[i] {
						return nil, fmt.Errorf("--shape %s: dim %d (%s) is %d, where another input has %d", name, i, d.Param, dims[i], p)
					}
					pinned[d.Param] = dims[i]
				case d.IsSymbolic() && dims[i] == 0:
					// Zero marks a bound not given below, and the engines'
					// dynamic code takes no zero-size dims: refuse it
					// rather than change it.
					return nil, fmt.Errorf("%s %s: dim %d (%s) is 0; a dynamic dim's bounds must be at least 1 (kiln's dynamic dims are never zero-size; pin a zero-size input with --shape)", f.flag, name, i, d.Param)
				case d.IsSymbolic():
					r := ranges[d.Param]
					if r == nil {
						r = &cpu.DimRange{}
						ranges[d.Param] = r
					}
					p := map[string]*int64{"--min": &r.Min, "--opt": &r.Opt, "--max": &r.Max}[f.flag]
					if *p != 0 && *p != dims[i] {
						return nil, fmt.Errorf("%s %s: dim %d (%s) is %d, where another input has %d", f.flag, name, i, d.Param, dims[i], *p)
					}
					*p = dims[i]
				case !d.IsStatic():
					return nil, fmt.Errorf("%s %s: dim %d has no size or name in the model", f.flag, name, i)
				}
			}
		}
	}
	for _, v := range m.Graph.Inputs {
		for i, d := range v.Type.Shape.Dims {
			if p, ok := pinned[d.Param]; ok && d.IsSymbolic() {
				v.Type.Shape.Dims[i] = ir.D(p)
			}
		}
	}
	profile := map[string]cpu.DimRange{}
	for name, r := range ranges {
		if _, ok := pinned[name]; ok {
			return nil, fmt.Errorf("dim %s is both pinned (--shape) and given a range", name)
		}
		// A bound left out defaults as cc build's help says: min 1, opt
		// min, max DefaultMaxDim (or opt when that is larger).
		if r.Min == 0 {
			r.Min = 1
		}
		if r.Opt == 0 {
			r.Opt = r.Min
		}
		if r.Max == 0 {
			r.Max = max(cpu.DefaultMaxDim, r.Opt)
		}
		if !(1 <= r.Min && r.Min <= r.Opt && r.Opt <= r.Max) {
			return nil, fmt.Errorf("dim %s: min %d, opt %d, max %d: want 1 <= min <= opt <= max", name, r.Min, r.Opt, r.Max)
		}
		profile[name] = *r
	}
	return profile, nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
