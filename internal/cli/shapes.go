package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// Shapes returns a repeatable flag of input shapes, NAME=DxDx...D (a scalar
// is NAME=): --shape, --min, --opt and --max. A name given twice is an
// error.
func Shapes(fs *flag.FlagSet, name, usage string) map[string][]int64 {
	v := shapesValue{}
	fs.Var(v, name, usage)
	return v
}

type shapesValue map[string][]int64

func (s shapesValue) String() string {
	var parts []string
	for k, dims := range s {
		ds := make([]string, len(dims))
		for i, d := range dims {
			ds[i] = strconv.FormatInt(d, 10)
		}
		parts = append(parts, k+"="+strings.Join(ds, "x"))
	}
	return strings.Join(parts, ",")
}

func (s shapesValue) Set(arg string) error {
	name, spec, ok := strings.Cut(arg, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=DIMS (e.g. input=1x3x224x224), got %q", arg)
	}
	if _, dup := s[name]; dup {
		return fmt.Errorf("%q is given twice", name)
	}
	dims := []int64{}
	if spec != "" {
		for _, f := range strings.Split(spec, "x") {
			d, err := strconv.ParseInt(f, 10, 64)
			if err != nil || d < 0 {
				return fmt.Errorf("%q: dim %q is not a size", arg, f)
			}
			dims = append(dims, d)
		}
	}
	s[name] = dims
	return nil
}

// Values returns a repeatable flag of input values, NAME=V,V,... (cc
// build --value). A name given twice is an error.
func Values(fs *flag.FlagSet, name, usage string) map[string][]float64 {
	v := valuesValue{}
	fs.Var(v, name, usage)
	return v
}

type valuesValue map[string][]float64

func (s valuesValue) String() string {
	var parts []string
	for k, vals := range s {
		vs := make([]string, len(vals))
		for i, v := range vals {
			vs[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		parts = append(parts, k+"="+strings.Join(vs, ","))
	}
	return strings.Join(parts, ";")
}

func (s valuesValue) Set(arg string) error {
	name, spec, ok := strings.Cut(arg, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUES (e.g. k=3 or shape=1,-1), got %q", arg)
	}
	if _, dup := s[name]; dup {
		return fmt.Errorf("%q is given twice", name)
	}
	vals := []float64{}
	if spec != "" {
		for _, f := range strings.Split(spec, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("%q: %q is not a number", arg, f)
			}
			vals = append(vals, v)
		}
	}
	s[name] = vals
	return nil
}
