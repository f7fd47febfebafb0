package runtime_test

import (
	"bytes"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
	"github.com/kiln-ml/kiln/runtime"
)

// paramEngine builds the digits MLP with its parameters as inputs and
// returns the engine and the parameters.
func paramEngine(t *testing.T) (*runtime.Engine, map[string]*ir.Tensor) {
	if err := cpu.Available(); err != nil {
		t.Skipf("%v: no engine to run", err)
	}
	m, err := onnx.ReadFile("../testdata/models/digits_mlp.onnx")
	require.NoError(t, err)
	params := map[string]*ir.Tensor{}
	for _, v := range m.Graph.Initializers {
		params[v.Name] = v.Const
		v.Const = nil
		m.Graph.Inputs = append(m.Graph.Inputs, v)
	}
	m.Graph.Initializers = nil
	out, err := build.BuildModel(m, nil, build.Options{OptLevel: 2})
	require.NoError(t, err)
	eng, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	return eng, params
}

// 8 goroutines run inferences while another swaps the weights between two
// sets 1,000 times: no run fails, and every output is exactly the old
// set's or the new set's, never a mix. The latencies with and without
// swaps are logged (p99), not asserted: timing is the machine's.
func TestSwapWeightsUnderLoad(t *testing.T) {
	eng, a := paramEngine(t)
	b := map[string]*ir.Tensor{}
	for name, w := range a {
		vals := ops.Float64s(w)
		for i := range vals {
			vals[i] = -0.5*vals[i] + 0.01*float64(i%7)
		}
		b[name] = ops.FromFloat64s(w.DType, w.Dims, vals)
	}
	x := ir.NewTensor(ir.Float32, 1, 64)
	for i, d := 0, ir.Data[float32](x); i < len(d); i++ {
		d[i] = float32(i%13) / 13
	}
	inputs := map[string]*ir.Tensor{"input": x}
	ws, err := eng.NewWeightSet(a)
	require.NoError(t, err)
	ctx, err := eng.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	outA, err := ctx.RunWith(ws, inputs)
	require.NoError(t, err)
	require.NoError(t, ws.SwapWeights(b))
	outB, err := ctx.RunWith(ws, inputs)
	require.NoError(t, err)
	require.False(t, bytes.Equal(outA["output"].Raw, outB["output"].Raw), "the two sets must give different outputs")

	run := func(swaps int) (lat []time.Duration, runs, mixed int64) {
		var done atomic.Bool
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := eng.NewContext(runtime.Options{Threads: 1})
				if !assert.NoError(t, err) {
					return
				}
				var mine []time.Duration
				for n := 0; !done.Load() || n < 50; n++ {
					t0 := time.Now()
					out, err := c.RunWith(ws, inputs)
					mine = append(mine, time.Since(t0))
					if !assert.NoError(t, err) {
						return
					}
					y := out["output"].Raw
					if !bytes.Equal(y, outA["output"].Raw) && !bytes.Equal(y, outB["output"].Raw) {
						atomic.AddInt64(&mixed, 1)
					}
					atomic.AddInt64(&runs, 1)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		// Each swap waits for 8 more runs, so runs overlap every swap.
		sets := []map[string]*ir.Tensor{a, b}
		waitRuns := func(n int64) {
			for atomic.LoadInt64(&runs) < n {
				goruntime.Gosched()
			}
		}
		for i := 0; i < swaps; i++ {
			require.NoError(t, ws.SwapWeights(sets[i%2]))
			waitRuns(int64(8 * (i + 1)))
		}
		if swaps == 0 {
			waitRuns(8000)
		}
		done.Store(true)
		wg.Wait()
		return lat, runs, mixed
	}
	quiet, _, _ := run(0)
	lat, runs, mixed := run(1000)
	assert.Zero(t, mixed, "outputs that are neither set's")
	assert.GreaterOrEqual(t, runs, int64(8000), "the runs overlapped the swaps")
	p99 := func(l []time.Duration) time.Duration {
		l = slices.Clone(l)
		slices.Sort(l)
		return l[len(l)*99/100]
	}
	t.Logf("%d runs during 1,000 swaps, none mixed; p99 %v with swaps, %v without", runs, p99(lat), p99(quiet))
}

// A set that does not fit the engine is refused and the current one
// stays.
func TestSwapWeightsRefusesMismatch(t *testing.T) {
	eng, a := paramEngine(t)
	ws, err := eng.NewWeightSet(a)
	require.NoError(t, err)
	var name string
	for name = range a {
		break
	}
	bad := map[string]*ir.Tensor{name: ir.NewTensor(ir.Float32, 3)}
	assert.ErrorContains(t, ws.SwapWeights(bad), name)
	assert.ErrorContains(t, ws.SwapWeights(map[string]*ir.Tensor{"nope": a[name]}), "not an input")
	assert.Equal(t, a[name], ws.Weights()[name])
	_, err = eng.NewWeightSet(bad)
	assert.Error(t, err)
}
