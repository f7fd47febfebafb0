package cpu

import (
	"testing"

	"github.com/kiln-ml/kiln/codegen/kernel"
	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
)

// TestKernelSchedules runs the kernel layer's families under every CPU
// schedule a kernel admits (scalar or in vector lanes along the innermost
// axis or, for reductions, the innermost reduced axis; on one thread or
// split across threads) against the reference executor: every
// broadcasting pattern up to rank 6 over sizes 1, 7, 17 and 1023, empty
// tensors, negative axes. A schedule may change nothing but the order of
// a reduction's sums.
func TestKernelSchedules(t *testing.T) {
	needLLC(t)
	cases := opcase.ScheduleCases()
	for _, v := range scheduleVariants {
		t.Run(v.name, func(t *testing.T) {
			var jobs []caseJob
			for _, line := range cases {
				c, err := opcase.Parse(line)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, caseJob{c, ir.Float32})
			}
			for _, res := range runCaseJobs(t, jobs, Options{Winograd: WinogradOff, schedule: v.pick}) {
				if res.err != nil {
					t.Errorf("%s: %v", res.job.c.Line, res.err)
				}
			}
		})
	}
}

// scheduleVariants force one kind of schedule wherever a kernel admits it
// (else they leave the automatic one).
var scheduleVariants = []struct {
	name string
	pick func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule
}{
	{"scalar-serial", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
		return kernel.Schedule{Axis: -1, Parallel: false}
	}},
	{"scalar-parallel", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
		return kernel.Schedule{Axis: -1, Parallel: !k.Serial}
	}},
	{"lanes-serial", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
		s := lanes(k, auto)
		s.Parallel = false
		return s
	}},
	{"lanes-parallel", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
		s := lanes(k, auto)
		s.Parallel = !k.Serial
		return s
	}},
	{"reduction-lanes", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
		if r := k.Reduce; r != nil && r.Op != kernel.ArgMaxOp && r.Op != kernel.ArgMinOp && len(r.Extents) > 0 {
			return kernel.Schedule{VL: 16, Axis: len(r.Extents) - 1, Reduction: true, Parallel: !k.Serial}
		}
		return auto
	}},
	{"auto", func(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule { return auto }},
}

// lanes puts k's innermost space axis in 16 lanes where it can be (not
// for selections, combining stores, serial kernels or a scan's own axis).
func lanes(k *kernel.Kernel, auto kernel.Schedule) kernel.Schedule {
	if k.Serial || k.TopK != nil || k.Combine != kernel.None || len(k.Space) == 0 {
		return auto
	}
	axis := len(k.Space) - 1
	if k.Scan != nil && k.Scan.Axis == axis {
		if axis == 0 {
			return auto
		}
		axis--
	}
	return kernel.Schedule{VL: 16, Axis: axis}
}
