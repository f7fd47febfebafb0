package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// TestEveryLoweredOp runs every op the CPU backend lowers, for every
// element type it declares, against the reference executor on random
// inputs (opCases, below). An op or type without a passing case fails.
func TestEveryLoweredOp(t *testing.T) {
	needLLC(t)
	want := loweredOps()
	var jobs []caseJob
	var missing []string
	for _, op := range sortedKeys(want) {
		lines := opCases[op]
		if len(lines) == 0 {
			missing = append(missing, op)
			continue
		}
		for _, line := range lines {
			c, err := opcase.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			if c.Op != op {
				t.Fatalf("case %q is filed under %s", line, op)
			}
			if !c.Types() {
				jobs = append(jobs, caseJob{c, ir.Undefined})
				continue
			}
			for _, d := range want[op] {
				jobs = append(jobs, caseJob{c, d})
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("lowered ops without a case in opCases: %s", strings.Join(missing, ", "))
	}
	covered := map[string]map[ir.DType]bool{}
	for _, res := range runCaseJobs(t, jobs) {
		if res.err != nil {
			t.Errorf("%s [T=%s]: %v", res.job.c.Line, res.job.t, res.err)
			continue
		}
		if covered[res.job.c.Op] == nil {
			covered[res.job.c.Op] = map[ir.DType]bool{}
		}
		for _, d := range res.types {
			covered[res.job.c.Op][d] = true
		}
	}
	for _, op := range sortedKeys(want) {
		for _, d := range want[op] {
			if !covered[op][d] && len(opCases[op]) > 0 {
				t.Errorf("%s: no passing case for element type %s", op, d)
			}
		}
	}
}

// loweredOps maps each op the backend lowers to the element types of its
// first input it declares.
func loweredOps() map[string][]ir.DType {
	out := map[string][]ir.DType{}
	for name, info := range opTable {
		out[name] = info.types
	}
	for _, name := range kernel.Ops() {
		if _, ok := out[name]; !ok {
			out[name] = kernel.Lookup(name).Types
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type caseJob struct {
	c *opcase.Case
	t ir.DType // the element type T stands for (Undefined: not a template)
}

type caseResult struct {
	job   caseJob
	types []ir.DType // the first input's element type, which the case covers
	err   error
}

// runCaseJobs runs the jobs in few engines: one model per opset holding
// every job's node; a batch that fails is split to find the culprits.
func runCaseJobs(t *testing.T, jobs []caseJob) []caseResult {
	byOpset := map[int64][]caseJob{}
	for _, j := range jobs {
		byOpset[j.c.Opset] = append(byOpset[j.c.Opset], j)
	}
	var out []caseResult
	opsets := make([]int64, 0, len(byOpset))
	for o := range byOpset {
		opsets = append(opsets, o)
	}
	slices.Sort(opsets)
	for _, o := range opsets {
		out = append(out, runBatch(t, byOpset[o])...)
	}
	return out
}

func runBatch(t *testing.T, jobs []caseJob) []caseResult {
	errs, types := runTogether(jobs)
	if errs == nil {
		res := make([]caseResult, len(jobs))
		for i, j := range jobs {
			res[i] = caseResult{job: j, types: []ir.DType{types[i]}}
		}
		return res
	}
	if len(jobs) == 1 {
		return []caseResult{{job: jobs[0], err: errs[0]}}
	}
	if errs[0] != nil && len(errs) == 1 { // the batch failed as a whole
		mid := len(jobs) / 2
		return append(runBatch(t, jobs[:mid]), runBatch(t, jobs[mid:])...)
	}
	res := make([]caseResult, len(jobs))
	for i, j := range jobs {
		res[i] = caseResult{job: j, types: []ir.DType{types[i]}, err: errs[i]}
	}
	return res
}

// runTogether builds one model of all jobs, runs it on the reference and
// compiled, and returns per-job comparison errors (nil: all passed), or a
// single error when the batch could not run at all.
func runTogether(jobs []caseJob) ([]error, []ir.DType) {
	g := ir.NewGraph("cases")
	r := rand.New(rand.NewSource(1))
	feeds := map[string]*ir.Tensor{}
	outs := make([][]*ir.Value, len(jobs))
	types := make([]ir.DType, len(jobs))
	for i, j := range jobs {
		o, f, err := j.c.Add(g, fmt.Sprintf("c%d", i), j.t, r)
		if err != nil {
			return []error{err}, nil
		}
		outs[i] = o
		for k, v := range f {
			feeds[k] = v
		}
		n := g.Nodes[len(g.Nodes)-1]
		if v := n.Input(0); v != nil {
			types[i] = v.Type.Elem
		} else {
			types[i] = j.t
		}
	}
	m := ir.NewModel(g, jobs[0].c.Opset)
	if _, err := ops.InferShapes(m); err != nil {
		return []error{fmt.Errorf("shape inference: %v", err)}, nil
	}
	for _, v := range g.Outputs {
		if _, err := ops.InferShapes(m); err != nil || v.Type.Kind == ir.UnknownKind {
			return []error{fmt.Errorf("output %s has no type", v.Name)}, nil
		}
	}
	ref, err := reference.New(m)
	if err != nil {
		return []error{fmt.Errorf("reference: %v", err)}, nil
	}
	want, err := ref.Run(feeds)
	if err != nil {
		return []error{fmt.Errorf("reference run: %v", err)}, nil
	}
	res, err := Compile(m, Options{Winograd: WinogradOff})
	if err != nil {
		return []error{fmt.Errorf("compile: %v", err)}, nil
	}
	e, err := Load(res)
	if err != nil {
		return []error{fmt.Errorf("load: %v", err)}, nil
	}
	defer e.Close()
	errs := make([]error, len(jobs))
	failed := false
	for _, threads := range []int{1, 2} {
		got, err := e.Run(feeds, threads, nil)
		if err != nil {
			return []error{fmt.Errorf("run: %v", err)}, nil
		}
		for i := range jobs {
			for _, o := range outs[i] {
				if err := compareOut(got[o.Name], want[o.Name]); err != nil && errs[i] == nil {
					errs[i] = fmt.Errorf("%s (%d threads): %v", o.Name, threads, err)
					failed = true
				}
			}
		}
	}
	if failed {
		return errs, types
	}
	return nil, types
}

// compareOut compares a compiled output with the reference's: integers and
// bools exactly, floats within a tolerance of their precision, NaN equal
// only to NaN.
func compareOut(got, want *ir.Tensor) error {
	if got == nil {
		return fmt.Errorf("missing")
	}
	if got.DType != want.DType || !slices.Equal(got.Dims, want.Dims) {
		return fmt.Errorf("got %s%v, want %s%v", got.DType, got.Dims, want.DType, want.Dims)
	}
	rtol, atol := 1e-4, 1e-5
	switch want.DType {
	case ir.Float16:
		rtol, atol = 2e-3, 1e-3
	case ir.BFloat16:
		rtol, atol = 1.6e-2, 1e-2
	}
	for i := 0; i < int(want.Len()); i++ {
		if !want.DType.IsFloat() {
			if got.Int64At(i) != want.Int64At(i) {
				return fmt.Errorf("element %d: got %d, want %d", i, got.Int64At(i), want.Int64At(i))
			}
			continue
		}
		a, b := got.Float64At(i), want.Float64At(i)
		switch {
		case math.IsNaN(a) || math.IsNaN(b):
			if math.IsNaN(a) != math.IsNaN(b) {
				return fmt.Errorf("element %d: got %g, want %g", i, a, b)
			}
		case math.IsInf(b, 0):
			if a != b {
				return fmt.Errorf("element %d: got %g, want %g", i, a, b)
			}
		case math.Abs(a-b) > atol+rtol*math.Abs(b):
			return fmt.Errorf("element %d: got %g, want %g", i, a, b)
		}
	}
	return nil
}

// opCases holds each lowered op's cases (opcase syntax): together they
// must cover every element type the op declares.
var opCases = map[string][]string{
	// Elementwise, unary.
	"Abs":             {"Abs-13 T[3,17]"},
	"Neg":             {"Neg-13 T[2,33]"},
	"Sign":            {"Sign-13 T[40]"},
	"Relu":            {"Relu-14 T[7,17]"},
	"Sqrt":            {"Sqrt-13 T[5,19]~pos", "Sqrt-13 T[6]~[-1 0 4 1e30 2 9]"},
	"Exp":             {"Exp-13 T[2,41]", "Exp-13 T[6]~[-200 -80 0 80 100 0.5]"},
	"Log":             {"Log-13 T[3,23]~pos", "Log-13 T[5]~[0 -1 1 1e-30 1e30]"},
	"Sin":             {"Sin-7 T[4,17]", "Sin-7 T[4]~[100 -1000 3.14159 0]"},
	"Cos":             {"Cos-7 T[4,17]", "Cos-7 T[4]~[100 -1000 3.14159 0]"},
	"Tan":             {"Tan-7 T[2,17]~unit"},
	"Asin":            {"Asin-7 T[2,17]~unit", "Asin-7 T[4]~[1 -1 0 2]"},
	"Acos":            {"Acos-7 T[2,17]~unit", "Acos-7 T[4]~[1 -1 0 2]"},
	"Atan":            {"Atan-7 T[3,17]", "Atan-7 T[4]~[1e30 -1e30 0.5 -3]"},
	"Sinh":            {"Sinh-9 T[3,17]", "Sinh-9 T[4]~[0.001 -0.05 20 -3]"},
	"Cosh":            {"Cosh-9 T[3,17]"},
	"Tanh":            {"Tanh-13 T[3,17]", "Tanh-13 T[4]~[0.0001 -20 20 0]"},
	"Erf":             {"Erf-13 T[3,17]", "Erf-13 T[4]~[6 -7 5 -5]"},
	"Floor":           {"Floor-13 T[3,17]"},
	"Ceil":            {"Ceil-13 T[3,17]"},
	"Round":           {"Round-11 T[8]~[0.5 1.5 2.5 -0.5 -1.5 0.4 0.6 -2.5]", "Round-11 T[3,7]"},
	"Reciprocal":      {"Reciprocal-13 T[3,17]~nz"},
	"Sigmoid":         {"Sigmoid-13 T[3,17]", "Sigmoid-13 T[3]~[-100 100 0]"},
	"Softplus":        {"Softplus-1 T[3,17]"},
	"Softsign":        {"Softsign-1 T[3,17]"},
	"Mish":            {"Mish-18 T[3,17]"},
	"HardSwish":       {"HardSwish-14 T[3,17]"},
	"HardSigmoid":     {"HardSigmoid-6(alpha=0.3, beta=0.4) T[3,17]"},
	"LeakyRelu":       {"LeakyRelu-6(alpha=0.2) T[3,17]"},
	"ThresholdedRelu": {"ThresholdedRelu-10(alpha=0.5) T[3,17]"},
	"Elu":             {"Elu-6(alpha=0.7) T[3,17]"},
	"Selu":            {"Selu-6 T[3,17]"},
	"Celu":            {"Celu-12(alpha=1.5) T[3,17]"},
	"Shrink":          {"Shrink-9(bias=1.5, lambd=1.0) T[3,17]"},
	"IsNaN":           {"IsNaN-13 T[4]~[0 1 -1 2]"},
	"IsInf":           {"IsInf-10(detect_negative=0) T[4]~[1e300 -1e300 0 1]", "IsInf-10 T[2,9]"},
	"Not":             {"Not-1 bool[3,17]"},
	"Cast": {
		"Cast-13(to=1) T[3,17]", "Cast-13(to=7) T[2,9]", "Cast-13(to=6) T[2,9]", "Cast-13(to=2) T[2,9]",
		"Cast-13(to=9) T[2,9]", "Cast-13(to=10) T[2,9]", "Cast-13(to=11) T[2,9]", "Cast-13(to=16) T[2,9]",
		"Cast-13(to=12) T[2,9]", "Cast-13(to=3) T[2,9]", "Cast-13(to=13) T[2,9]",
	},
	// Elementwise, binary and variadic, with broadcasting.
	"Add":            {"Add-14 T[2,3,17], T[3,17]", "Add-14 T[1,7], T[17,1]", "Add-14 T[33], T"},
	"Sub":            {"Sub-14 T[2,3,17], T[2,1,17]", "Sub-14 T, T[9]"},
	"Mul":            {"Mul-14 T[4,17], T[4,1]"},
	"Div":            {"Div-14 T[4,17], T[17]~nz", "Div-14 T[4]~[7 -7 7 -7], T[4]~[2 2 -2 5]"},
	"Mod":            {"Mod-13(fmod=1) T[4,9], T[9]~nz", "Mod-13 T[6]~[7 -7 7 -7 5 -5], T[6]~[3 3 -3 -3 2 5]"},
	"Pow":            {"Pow-15 T[3,9]~pos, T[9]~[0 1 2 3 0 1 2 3 2]", "Pow-15 T[2,3], int64[3]~[2 0 3]"},
	"PRelu":          {"PRelu-16 T[2,3,9], T[3,1]"},
	"Equal":          {"Equal-13 T[3,9], T[9]"},
	"Less":           {"Less-13 T[3,9], T[9]"},
	"LessOrEqual":    {"LessOrEqual-16 T[3,9], T[9]"},
	"Greater":        {"Greater-13 T[3,9], T[9]"},
	"GreaterOrEqual": {"GreaterOrEqual-16 T[3,9], T[9]"},
	"And":            {"And-7 bool[3,9], bool[9]"},
	"Or":             {"Or-7 bool[3,9], bool[9]"},
	"Xor":            {"Xor-7 bool[3,9], bool[9]"},
	"Max":            {"Max-13 T[3,9], T[9], T[3,1]", "Max-13 float[4]~[1 0 -1 2], float[4]~[0 1 -1 3]"},
	"Min":            {"Min-13 T[3,9], T[9]", "Min-13 T[5]"},
	"Sum":            {"Sum-13 T[3,9], T[9], T[3,1]"},
	"Mean":           {"Mean-13 T[3,9], T[9]"},
	"Where":          {"Where-16 bool[3,9], float[9], float[3,1]", "Where-16 bool[9], int64[2,9], int64"},
	"Clip": {"Clip-13 T[3,9], T=[-1], T=[2]", "Clip-13 T[3,9], _, T~[1]", "Clip-13 T[5]",
		"Clip-6(min=-0.5, max=0.5) float[3,9]"},
	// Index remaps, gathers and scatters.
	"Transpose": {"Transpose-13 T[2,3,17]", "Transpose-13(perm=[1 2 0]) T[4,5,17]", "Transpose-13(perm=[0 2 1]) T[3,1,9]"},
	"Slice": {
		"Slice-13 T[20,10,5], int64[2]=[0 1], int64[2]=[3 -1], int64[2]=[0 2]",
		"Slice-13 T[6,7], int64[2]=[-1 -100], int64[2]=[-100 100], int64[2]=[0 1], int64[2]=[-2 3]",
		"Slice-13 T[5], int64[1]=[-7], int64[1]=[-100], int64[1]=[0], int64[1]=[-1]",
		"Slice-13 T[5,4], int64[1]=[100], int64[1]=[-100], int64[1]=[-1], int64[1]=[-1]",
		"Slice-1(starts=[1 0], ends=[3 -1], axes=[1 0]) T[4,5]",
	},
	"Pad": {
		"Pad-13 T[3,5], int64[4]=[1 2 2 0]", "Pad-13(mode=\"edge\") T[3,5], int64[4]=[2 1 0 3]",
		"Pad-13(mode=\"reflect\") T[3,5], int64[4]=[2 3 2 4]", "Pad-19(mode=\"wrap\") T[3,5], int64[4]=[1 7 2 0]",
		"Pad-18 T[2,3,5], int64[2]=[1 -1], T~[5], int64[1]=[-1]", "Pad-2(pads=[0 1 1 0], value=2.5) float[3,3]",
	},
	"Concat":          {"Concat-13(axis=1) T[2,3,5], T[2,7,5], T[2,1,5]", "Concat-13(axis=-1) T[3,17], T[3,2]"},
	"Split":           {"Split-13(axis=1) T[2,7,5], int64[2]=[3 4] -> 2", "Split-18(axis=0, num_outputs=3) T[7,3] -> 3"},
	"Expand":          {"Expand-13 T[3,1], int64[3]=[2 3 17]"},
	"Tile":            {"Tile-13 T[2,3,5], int64[3]=[2 1 3]"},
	"DepthToSpace":    {"DepthToSpace-13(blocksize=2) T[1,8,3,2]", "DepthToSpace-13(blocksize=2, mode=\"CRD\") T[2,8,2,3]"},
	"SpaceToDepth":    {"SpaceToDepth-13(blocksize=2) T[1,3,4,6]"},
	"Trilu":           {"Trilu-14 T[2,4,5]", "Trilu-14(upper=0) T[5,4], int64~[-1]", "Trilu-14 T[4,4], int64=[2]"},
	"EyeLike":         {"EyeLike-9(k=1) T[4,5]", "EyeLike-9(dtype=1) T[3,3]"},
	"Range":           {"Range-11 T=[2], T=[17], T=[3]", "Range-11 T=[10], T=[1], T=[-2]"},
	"ConstantOfShape": {"ConstantOfShape-9 int64[3]=[2 3 4]"},
	"OneHot":          {"OneHot-11(axis=1) T[2,3]~[0 1 2 -1 -3 5], int64=[4], float[2]~[-1 3]", "OneHot-11 T[4]~[0 1 2 3], float=[4], int32[2]~[0 7]"},
	"Gather":          {"Gather-13(axis=1) T[3,5,2], int64[2,2]~idx(5)", "Gather-13 T[5,3], int32~[-2]"},
	"GatherElements":  {"GatherElements-13(axis=1) T[3,5], int64[3,4]~idx(5)", "GatherElements-13 T[4,3], int32[2,3]~idx(4)"},
	"GatherND":        {"GatherND-13 T[3,4,5], int64[2,2]~[0 1 -1 3]", "GatherND-13(batch_dims=1) T[2,3,4], int64[2,1]~[1 2]"},
	"ScatterElements": {"ScatterElements-16(axis=1, reduction=\"add\") T[3,5], int64[3,4]~idx(5), T[3,4]",
		"ScatterElements-13 T[4,3], int64[2,3]~[0 1 2 3 -1 -2], T[2,3]"},
	"ScatterND": {"ScatterND-16(reduction=\"mul\") T[4,3], int64[2,1]~[1 1], T[2,3]", "ScatterND-13 T[4,5,2], int64[2,2]~[0 1 3 -1], T[2,2]"},
	"Resize": {
		"Resize-13(mode=\"linear\") T[1,2,4,4], _, float[4]=[1 1 2 1.5]",
		"Resize-13(mode=\"cubic\") T[1,1,5,4], _, float[4]=[1 1 0.6 1.5]",
		"Resize-13(mode=\"nearest\", coordinate_transformation_mode=\"asymmetric\") T[1,2,3,4], _, _, int64[4]=[1 2 7 2]",
		"Resize-13(mode=\"linear\", coordinate_transformation_mode=\"align_corners\") T[2,3,4], _, _, int64[3]=[2 3 7]",
		"Resize-13(mode=\"linear\", coordinate_transformation_mode=\"tf_crop_and_resize\", extrapolation_value=9.0) T[1,1,4,4], float[8]=[0 0 0.4 0.6 1 1 1.2 1.7], _, int64[4]=[1 1 3 3]",
		"Resize-18(mode=\"cubic\", antialias=1) T[1,1,8,8], _, float[4]=[1 1 0.5 0.6]",
	},
}
