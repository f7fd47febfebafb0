package cpu

import (
	"errors"
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
// inputs (opCases, below). Where the kernel layer defines the case, the
// engine's outputs are also held to the layer's evaluator (the oracle its
// own tests run without llc), so the evaluator is checked against the
// LLVM path on every op case. An op or type without a passing case, or a
// kernel-layer op or type without one compared with the evaluator, fails.
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
	covered, evaluated := map[string]map[ir.DType]bool{}, map[string]map[ir.DType]bool{}
	mark := func(m map[string]map[ir.DType]bool, res caseResult) {
		if m[res.job.c.Op] == nil {
			m[res.job.c.Op] = map[ir.DType]bool{}
		}
		m[res.job.c.Op][res.typ] = true
	}
	for _, res := range runCaseJobsWith(t, jobs, Options{Winograd: WinogradOff}, true) {
		if res.err != nil {
			t.Errorf("%s [T=%s]: %v", res.job.c.Line, res.job.t, res.err)
			continue
		}
		mark(covered, res)
		if res.evaluated {
			mark(evaluated, res)
		}
	}
	for _, op := range sortedKeys(want) {
		for _, d := range want[op] {
			if !covered[op][d] && len(opCases[op]) > 0 {
				t.Errorf("%s: no passing case for element type %s", op, d)
			}
		}
	}
	for _, op := range kernel.Ops() {
		for _, d := range kernel.Lookup(op).Types {
			if !evaluated[op][d] && len(opCases[op]) > 0 {
				t.Errorf("%s: no case compared with the evaluator for element type %s", op, d)
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
	job caseJob
	typ ir.DType // the first input's element type, which the case covers
	err error
	// evaluated says the engine's outputs were also held to the kernel
	// layer's evaluator.
	evaluated bool
}

// referenceOutputs runs the model on the reference executor.
func referenceOutputs(m *ir.Model, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
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

// evaluatorVL is the lanes the evaluator's CPU schedules take: AVX-512's,
// these machines' (another width changes a reduction's rounding only).
const evaluatorVL = 16

// evaluatorOutputs runs node n of job j through its kernel-layer
// definition on the evaluator, under the CPU schedule: nil where the layer
// does not define the op at j's element type or refuses the node (the
// engine lowers it by hand).
func evaluatorOutputs(m *ir.Model, n *ir.Node, j caseJob, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	def := kernel.Lookup(n.OpType)
	if def == nil || j.t != ir.Undefined && !slices.Contains(def.Types, j.t) {
		return nil, nil
	}
	schedule := func(k *kernel.Kernel) kernel.Schedule { return kernel.CPUSchedule(k, evaluatorVL) }
	inputs, consts := opcase.Inputs(n, feeds)
	got, err := kernel.RunNode(n, ops.OpsetsOf(m), inputs, consts, schedule)
	var unsupported *ops.UnsupportedError
	switch {
	case errors.As(err, &unsupported):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	out := map[string]*ir.Tensor{}
	for i, v := range n.Outputs {
		if v != nil && i < len(got) {
			out[v.Name] = got[i]
		}
	}
	return out, nil
}

// runCaseJobs runs the jobs in few engines against the reference.
func runCaseJobs(t *testing.T, jobs []caseJob, opts Options) []caseResult {
	return runCaseJobsWith(t, jobs, opts, false)
}

// runCaseJobsWith runs the jobs in few engines, held to the reference and,
// with evaluate, to the kernel layer's evaluator where it defines a job:
// one model per opset holding every job's node; a batch that fails as a
// whole is split to find the culprits.
func runCaseJobsWith(t *testing.T, jobs []caseJob, opts Options, evaluate bool) []caseResult {
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
		out = append(out, runBatch(byOpset[o], opts, evaluate)...)
	}
	return out
}

func runBatch(jobs []caseJob, opts Options, evaluate bool) []caseResult {
	res, err := runTogether(jobs, opts, evaluate)
	switch {
	case err == nil:
		return res
	case len(jobs) == 1:
		return []caseResult{{job: jobs[0], err: err}}
	}
	mid := len(jobs) / 2
	return append(runBatch(jobs[:mid], opts, evaluate), runBatch(jobs[mid:], opts, evaluate)...)
}

// runTogether builds one model of all jobs (a node each), runs it on the
// reference (and the evaluator) and compiled, and returns each job's
// result, or an error when the batch could not run at all.
func runTogether(jobs []caseJob, opts Options, evaluate bool) ([]caseResult, error) {
	g := ir.NewGraph("cases")
	r := rand.New(rand.NewSource(1))
	feeds := map[string]*ir.Tensor{}
	outs := make([][]*ir.Value, len(jobs))
	nodes := make([]*ir.Node, len(jobs))
	res := make([]caseResult, len(jobs))
	for i, j := range jobs {
		o, f, err := j.c.Add(g, fmt.Sprintf("c%d", i), j.t, r)
		if err != nil {
			return nil, err
		}
		outs[i] = o
		for k, v := range f {
			feeds[k] = v
		}
		nodes[i] = g.Nodes[len(g.Nodes)-1]
		res[i] = caseResult{job: j, typ: j.t}
		if v := nodes[i].Input(0); v != nil {
			res[i].typ = v.Type.Elem
		}
	}
	m := opcase.NewModel(g, jobs[0].c.Opset)
	if _, err := ops.InferShapes(m); err != nil {
		return nil, fmt.Errorf("shape inference: %v", err)
	}
	for _, v := range g.Outputs {
		if v.Type.Kind == ir.UnknownKind {
			return nil, fmt.Errorf("output %s has no type", v.Name)
		}
	}
	want, err := referenceOutputs(m, feeds)
	if err != nil {
		return nil, err
	}
	evaluated := make([]map[string]*ir.Tensor, len(jobs))
	if evaluate {
		for i, j := range jobs {
			evaluated[i], res[i].err = evaluatorOutputs(m, nodes[i], j, feeds)
			res[i].evaluated = evaluated[i] != nil
		}
	}
	compiled, err := Compile(m, opts)
	if err != nil {
		return nil, fmt.Errorf("compile: %v", err)
	}
	e, err := Load(compiled)
	if err != nil {
		return nil, fmt.Errorf("load: %v", err)
	}
	defer e.Close()
	for _, threads := range []int{1, 2} {
		got, err := e.Run(feeds, threads, nil)
		if err != nil {
			return nil, fmt.Errorf("run: %v", err)
		}
		for i := range jobs {
			for _, o := range outs[i] {
				if res[i].err != nil {
					break
				}
				if err := compareOut(got[o.Name], want[o.Name]); err != nil {
					res[i].err = fmt.Errorf("%s (%d threads): %v", o.Name, threads, err)
				} else if ev := evaluated[i]; ev != nil {
					if err := compareOut(got[o.Name], ev[o.Name]); err != nil {
						res[i].err = fmt.Errorf("%s (%d threads), against the evaluator: %v", o.Name, threads, err)
					}
				}
			}
		}
	}
	return res, nil
}

// compareOut compares a compiled output with the reference's (tolerance
// per dtype: opcase.Compare).
func compareOut(got, want *ir.Tensor) error { return opcase.Compare(got, want) }

// opCases holds each lowered op's cases (opcase syntax, the table the
// kernel layer's evaluator runs too): together they must cover every
// element type the op declares.
var opCases = opcase.Cases()
