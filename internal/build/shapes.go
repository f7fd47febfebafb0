package build

import (
	"fmt"
	"sort"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/ir"
)

// Shapes are the shape flags of cc build, per input name: Pin fixes an
// input's dims (--shape; its dynamic dims then compile as constants); Min,
// Opt and Max give the range of its dynamic dims (--min/--opt/--max,
// TensorRT's optimization profile). Dims the model declares static must be
// given as they are.
type Shapes struct {
	Pin, Min, Opt, Max map[string][]int64
}

// apply pins m's inputs and returns the ranges of the symbols left dynamic.
func (s Shapes) apply(m *ir.Model) (map[string]cpu.DimRange, error) {
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

func sortedNames(m map[string][]int64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
