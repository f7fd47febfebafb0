package cpu

import (
	"fmt"
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
	for _, res := range runCaseJobs(t, jobs, Options{Winograd: WinogradOff}) {
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
// first input it declares: its hand-written row's and, for nodes the row
// refuses (handInfo), the kernel layer's.
func loweredOps() map[string][]ir.DType {
	out := map[string][]ir.DType{}
	for name, info := range opTable {
		out[name] = slices.Clone(info.types)
	}
	for _, name := range kernel.Ops() {
		for _, d := range kernel.Lookup(name).Types {
			if !slices.Contains(out[name], d) {
				out[name] = append(out[name], d)
			}
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

// oracle computes the outputs a compiled model is held to.
type oracle func(m *ir.Model, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, error)

// referenceOracle runs the model on the reference executor.
func referenceOracle(m *ir.Model, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	ref, err := reference.New(m)
	if err != nil {
		return nil, fmt.Errorf("reference: %v", err)
	}
	want, err := ref.Run(feeds)
	if err != nil {
		return nil, fmt.Errorf("reference run: %v", err)
	}
	return want, nil
}

// runCaseJobs runs the jobs in few engines against the reference.
func runCaseJobs(t *testing.T, jobs []caseJob, opts Options) []caseResult {
	return runCaseJobsAgainst(t, jobs, opts, referenceOracle)
}

// runCaseJobsAgainst runs the jobs in few engines, held to want: one model
// per opset holding every job's node; a batch that fails is split to find
// the culprits.
func runCaseJobsAgainst(t *testing.T, jobs []caseJob, opts Options, want oracle) []caseResult {
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
		out = append(out, runBatch(t, byOpset[o], opts, want)...)
	}
	return out
}

func runBatch(t *testing.T, jobs []caseJob, opts Options, want oracle) []caseResult {
	errs, types := runTogether(jobs, opts, want)
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
		return append(runBatch(t, jobs[:mid], opts, want), runBatch(t, jobs[mid:], opts, want)...)
	}
	res := make([]caseResult, len(jobs))
	for i, j := range jobs {
		res[i] = caseResult{job: j, types: []ir.DType{types[i]}, err: errs[i]}
	}
	return res
}

// runTogether builds one model of all jobs, runs it on the oracle and
// compiled, and returns per-job comparison errors (nil: all passed), or a
// single error when the batch could not run at all.
func runTogether(jobs []caseJob, opts Options, oracle oracle) ([]error, []ir.DType) {
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
	want, err := oracle(m, feeds)
	if err != nil {
		return []error{err}, nil
	}
	res, err := Compile(m, opts)
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

// compareOut compares a compiled output with the reference's (tolerance
// per dtype: opcase.Compare).
func compareOut(got, want *ir.Tensor) error { return opcase.Compare(got, want) }

// opCases holds each lowered op's cases (opcase syntax, the table the
// kernel layer's evaluator runs too): together they must cover every
// element type the op declares.
var opCases = opcase.Cases()
