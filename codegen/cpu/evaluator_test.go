package cpu

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// TestEvaluatorMatchesEngine holds the kernel layer's evaluator (the
// oracle its own tests run without llc) to the LLVM path: every case of
// every op the layer defines, for every element type its definition
// declares, compiled into an engine and run beside the evaluator on the
// same inputs. An op or type without a compared case fails.
func TestEvaluatorMatchesEngine(t *testing.T) {
	needLLC(t)
	var jobs []caseJob
	for _, op := range kernel.Ops() {
		lines := opCases[op]
		if len(lines) == 0 {
			t.Errorf("%s: no case in internal/opcase", op)
		}
		for _, line := range lines {
			c, err := opcase.Parse(line)
			if err != nil {
				t.Fatal(err)
			}
			types := []ir.DType{ir.Undefined}
			if c.Types() {
				types = kernel.Lookup(op).Types
			}
			for _, d := range types {
				if built, err := kernelBuilds(c, d); err != nil {
					t.Errorf("%s [T=%s]: %v", line, d, err)
				} else if built {
					jobs = append(jobs, caseJob{c, d})
				}
			}
		}
	}
	covered := map[string]map[ir.DType]bool{}
	for _, res := range runCaseJobsAgainst(t, jobs, Options{Winograd: WinogradOff}, evaluatorOracle) {
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
	for _, op := range kernel.Ops() {
		for _, d := range kernel.Lookup(op).Types {
			if !covered[op][d] {
				t.Errorf("%s: no case compared with the evaluator for element type %s", op, d)
			}
		}
	}
}

// evaluatorVL is the lanes the evaluator's CPU schedules take: AVX-512's,
// these machines' (another width changes a reduction's rounding only).
const evaluatorVL = 16

// evaluatorOracle runs every node of m through its kernel-layer definition
// on the evaluator, under the CPU schedule.
func evaluatorOracle(m *ir.Model, feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, error) {
	out := map[string]*ir.Tensor{}
	opsets := ops.OpsetsOf(m)
	schedule := func(k *kernel.Kernel) kernel.Schedule { return kernel.CPUSchedule(k, evaluatorVL) }
	for _, n := range m.Graph.Nodes {
		inputs, consts := opcase.Inputs(n, feeds)
		got, err := kernel.RunNode(n, opsets, inputs, consts, schedule)
		if err != nil {
			return nil, fmt.Errorf("evaluator: %w", err)
		}
		for i, v := range n.Outputs {
			out[v.Name] = got[i]
		}
	}
	return out, nil
}

// kernelBuilds reports whether the kernel layer's definition takes case c
// with T = d (false: it refuses the node, which the engine lowers by hand).
func kernelBuilds(c *opcase.Case, d ir.DType) (bool, error) {
	g := ir.NewGraph("case")
	_, feeds, err := c.Add(g, "c", d, rand.New(rand.NewSource(1)))
	if err != nil {
		return false, err
	}
	m := ir.NewModel(g, c.Opset)
	if _, err := ops.InferShapes(m); err != nil {
		return false, fmt.Errorf("shape inference: %v", err)
	}
	_, err = evaluatorOracle(m, feeds)
	var unsupported *ops.UnsupportedError
	if errors.As(err, &unsupported) {
		return false, nil
	}
	return err == nil, err
}
