package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/ir"
)

// TestStealingRuns checks the work-stealing steps: more threads than cores
// (so threads lose their core mid-step and others steal), run after run on
// one arena (the counters must be cleared each time, or later runs would
// skip tiles), give outputs bit-identical to one thread's; so does an
// engine of a single stealing step.
func TestStealingRuns(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(21))
	for _, layers := range []int{1, 3} {
		g := ir.NewGraph("steal")
		x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 64, 20, 20)))
		y := x
		for i := 0; i < layers; i++ {
			y = g.Apply("Conv", []*ir.Value{y, g.AddInitializer(fmt.Sprintf("w%d", i), randTensor(r, 64, 64, 1, 1))})
		}
		y.Name = "y"
		g.SetOutputs(y)
		res, err := Compile(ir.NewModel(g, 13), Options{})
		require.NoError(t, err)
		require.Equal(t, layers, kernelsWith(res, "Conv1x1"), "kernels %v", res.Kernels)
		e, err := Load(res)
		require.NoError(t, err)
		in := map[string]*ir.Tensor{"x": randTensor(r, 1, 64, 20, 20)}
		want, err := e.Run(in, 1, nil)
		require.NoError(t, err)
		arena := e.NewArena()
		for run := 0; run < 20; run++ {
			threads := 2 + run%4 // up to 5 threads on this machine's cores
			got, err := e.Run(in, threads, arena)
			require.NoError(t, err)
			assert.Equal(t, want["y"].Raw, got["y"].Raw, "%d layers, run %d at %d threads", layers, run, threads)
		}
		e.Close()
	}
}
