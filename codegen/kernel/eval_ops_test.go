package kernel

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// TestEveryOpOnTheEvaluator runs every op the layer defines, for every
// element type its definition declares, through its definition and the
// evaluator against the reference executor on random inputs: the cases of
// internal/opcase, which codegen/cpu's engines run too. An op without a
// case, a type without a passing one, or a refusal the case does not
// declare (checkRefusal) fails.
func TestEveryOpOnTheEvaluator(t *testing.T) {
	cases := opcase.Cases()
	var missing []string
	for _, op := range Ops() {
		// Each op draws from its own stream, so that adding an op leaves
		// the others' inputs as they were.
		r := rand.New(rand.NewSource(seedOf(op)))
		lines := cases[op]
		if len(lines) == 0 {
			missing = append(missing, op)
			continue
		}
		covered := map[ir.DType]bool{}
		for _, line := range lines {
			c, err := opcase.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			types := []ir.DType{ir.Undefined}
			if c.Types() {
				types = Lookup(op).Types
			}
			for _, d := range types {
				res := runCase(c, d, r, nil)
				switch {
				case c.Refusal != "" || res.refused:
					if err := checkRefusal(c, res, Lookup(op).Types); err != nil {
						t.Errorf("%s [T=%s]: %v", line, d, err)
					}
				case res.err != nil:
					t.Errorf("%s [T=%s]: %v", line, d, res.err)
				default:
					covered[res.dtype] = true
				}
			}
		}
		for _, d := range Lookup(op).Types {
			if !covered[d] {
				t.Errorf("%s: no passing case for element type %s", op, d)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("ops without a case in internal/opcase: %s", strings.Join(missing, ", "))
	}
}

// checkRefusal holds a refusal to the case's declaration: a case meant to
// be refused is, for the reason it names, and a case of an element type
// the definition declares is refused only when it is meant to be (so a
// definition that stops taking a case it claims fails, not passes over).
func checkRefusal(c *opcase.Case, res caseRun, declared []ir.DType) error {
	switch {
	case c.Refusal == "" && slices.Contains(declared, res.dtype):
		return fmt.Errorf("refused, though the definition declares %s: %v (a case meant to be refused says !refused(\"why\"))", res.dtype, res.err)
	case c.Refusal == "":
		return nil
	case !res.refused && res.err == nil:
		return fmt.Errorf("built and matched the reference, but the case says !refused(%q)", c.Refusal)
	case !res.refused:
		return fmt.Errorf("the case says !refused(%q), but: %v", c.Refusal, res.err)
	case !strings.Contains(res.err.Error(), c.Refusal):
		return fmt.Errorf("refused with %q, not for %q as the case says", res.err, c.Refusal)
	}
	return nil
}

// seedOf is a fixed seed for an op's random inputs.
func seedOf(op string) int64 {
	h := fnv.New64a()
	h.Write([]byte(op))
	return int64(h.Sum64() >> 1)
}

// evalSchedules are the schedules that change what the evaluator computes
// (the order of a reduction's combinations): the CPU's own at AVX-512's
// and NEON's widths, and every reduction forced into lanes along its last
// axis, 16 of them (a tree across the lanes) or 6 (a tree, then the rest
// in order).
var evalSchedules = []struct {
	name string
	pick func(k *Kernel) Schedule
}{
	{"cpu-16", func(k *Kernel) Schedule { return CPUSchedule(k, 16) }},
	{"cpu-4", func(k *Kernel) Schedule { return CPUSchedule(k, 4) }},
	{"reduction-lanes-16", func(k *Kernel) Schedule { return reductionLanes(k, 16) }},
	{"reduction-lanes-6", func(k *Kernel) Schedule { return reductionLanes(k, 6) }},
}

// reductionLanes puts k's last reduction axis in vl lanes where it can be.
func reductionLanes(k *Kernel, vl int) Schedule {
	if r := k.Reduce; r != nil && r.Op != ArgMaxOp && r.Op != ArgMinOp && len(r.Extents) > 0 {
		return Schedule{VL: vl, Axis: len(r.Extents) - 1, Reduction: true}
	}
	return Schedule{Axis: -1}
}

// TestSchedulesOnTheEvaluator runs the schedule cases (every broadcasting
// pattern up to rank 6, reductions, scans, selections, empty tensors)
// under each schedule against the reference and against the same case in
// order: a schedule changes a result by rounding only.
func TestSchedulesOnTheEvaluator(t *testing.T) {
	lines := opcase.ScheduleCases()
	for _, v := range evalSchedules {
		t.Run(v.name, func(t *testing.T) {
			for i, line := range lines {
				c, err := opcase.Parse(line)
				if err != nil {
					t.Fatal(err)
				}
				seed := int64(i)
				res := runCase(c, ir.Float32, rand.New(rand.NewSource(seed)), v.pick)
				if res.err != nil || res.refused {
					t.Errorf("%s: %v", line, res.err)
					continue
				}
				plain := runCase(c, ir.Float32, rand.New(rand.NewSource(seed)), nil)
				if plain.err != nil {
					t.Errorf("%s (in order): %v", line, plain.err)
					continue
				}
				for j := range res.got {
					if err := opcase.Compare(res.got[j], plain.got[j]); err != nil {
						t.Errorf("%s: output %d scheduled vs in order: %v", line, j, err)
					}
				}
			}
		})
	}
}

// caseRun is one case's evaluation: what it produced, or why not.
type caseRun struct {
	dtype   ir.DType // the node's first input's (or its output's) element type
	got     []*ir.Tensor
	refused bool // the definition does not take this node (an UnsupportedError, in err)
	err     error
}

// runCase builds case c with T = d as a one-node model, runs the reference
// and the node's definition on the evaluator (under schedule, when set)
// on the same inputs, and compares every output.
func runCase(c *opcase.Case, d ir.DType, r *rand.Rand, schedule func(*Kernel) Schedule) caseRun {
	g := ir.NewGraph("case")
	outs, feeds, err := c.Add(g, "c", d, r)
	if err != nil {
		return caseRun{err: err}
	}
	m := opcase.NewModel(g, c.Opset)
	if _, err := ops.InferShapes(m); err != nil {
		return caseRun{err: fmt.Errorf("shape inference: %v", err)}
	}
	ref, err := reference.New(m)
	if err != nil {
		return caseRun{err: fmt.Errorf("reference: %v", err)}
	}
	want, err := ref.Run(feeds)
	if err != nil {
		return caseRun{err: fmt.Errorf("reference run: %v", err)}
	}
	n := g.Nodes[0]
	res := caseRun{dtype: d}
	if v := n.Input(0); v != nil {
		res.dtype = v.Type.Elem
	} else if d == ir.Undefined {
		res.dtype = outs[0].Type.Elem
	}
	inputs, consts := opcase.Inputs(n, feeds)
	res.got, err = RunNode(n, ops.OpsetsOf(m), inputs, consts, schedule)
	var unsupported *ops.UnsupportedError
	switch {
	case errors.As(err, &unsupported):
		res.refused, res.err = true, err
		return res
	case err != nil:
		res.err = err
		return res
	}
	for i, o := range outs {
		if err := opcase.Compare(res.got[i], want[o.Name]); err != nil {
			res.err = fmt.Errorf("%s: %v", o.Name, err)
			return res
		}
	}
	return res
}

// TestCheckRefusal: an undeclared refusal of a declared type fails, one
// of a type the definition does not declare passes, and a declared
// refusal must happen for the reason it names.
func TestCheckRefusal(t *testing.T) {
	refusal := &ops.UnsupportedError{Op: "Relu", Reason: "no kernel for this"}
	declared := []ir.DType{ir.Float32}
	for _, tc := range []struct {
		line string
		res  caseRun
		ok   bool
	}{
		{`Relu-14 T[3]`, caseRun{dtype: ir.Float32, refused: true, err: refusal}, false},
		{`Relu-14 T[3]`, caseRun{dtype: ir.Int8, refused: true, err: refusal}, true},
		{`Relu-14 T[3] !refused("no kernel")`, caseRun{dtype: ir.Float32, refused: true, err: refusal}, true},
		{`Relu-14 T[3] !refused("other")`, caseRun{dtype: ir.Float32, refused: true, err: refusal}, false},
		{`Relu-14 T[3] !refused("no kernel")`, caseRun{dtype: ir.Float32}, false},
		{`Relu-14 T[3] !refused("no kernel")`, caseRun{dtype: ir.Float32, err: errors.New("mismatch")}, false},
	} {
		c, err := opcase.Parse(tc.line)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRefusal(c, tc.res, declared); (err == nil) != tc.ok {
			t.Errorf("%s with %+v: %v, want ok=%v", tc.line, tc.res, err, tc.ok)
		}
	}
}
