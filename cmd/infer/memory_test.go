package main

import (
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// mlpEngine builds y = MatMul(Sigmoid(MatMul(x, W1)), W2) for x[N,64]
// with N up to maxN, and writes the engine; its arena holds the
// [N,64] float intermediate at N = maxN.
func mlpEngine(t *testing.T, maxN int64) string {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	weight := func(name string) *ir.Tensor {
		w := ir.NewTensor(ir.Float32, 64, 64)
		for i := range w.Float32s() {
			w.Float32s()[i] = float32(rng.NormFloat64() / 8)
		}
		w.Name = name
		return w
	}
	g := ir.NewGraph("mlp")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.ShapeOf(ir.Sym("N"), ir.D(64))))
	h := g.Apply("Sigmoid", []*ir.Value{g.Apply("MatMul", []*ir.Value{x, g.AddInitializer("W1", weight("W1"))})})
	y := g.Apply("MatMul", []*ir.Value{h, g.AddInitializer("W2", weight("W2"))})
	y.Name = "y"
	g.SetOutputs(y)
	out, err := build.BuildModel(ir.NewModel(g, 17), nil, build.Options{OptLevel: 2,
		Shapes: build.Shapes{Max: map[string][]int64{"x": {maxN, 64}}}})
	require.NoError(t, err)
	require.GreaterOrEqual(t, out.Code.ArenaBytes, maxN*64*4)
	path := filepath.Join(t.TempDir(), "mlp"+strconv.FormatInt(maxN, 10)+".kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))
	return path
}

// underAddressLimit runs infer with its address space limited to kb KiB
// (ulimit -v): a process past it cannot map more, so the test needs no
// machine short of memory.
func underAddressLimit(t *testing.T, kb int64, bin string, args ...string) inferResult {
	t.Helper()
	return runInfer(t, "/bin/sh", append([]string{"-c", `ulimit -v "$0" && exec "$@"`, strconv.FormatInt(kb, 10), bin}, args...)...)
}

// An engine whose arena does not fit the memory infer can get is refused
// with an error naming the arena's size, what is available and what to
// change, not a Go fatal out-of-memory; one that fits runs under the same
// limit.
func TestArenaOverMemory(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildInfer(t)
	const limitKB = 5 << 20    // 5 GiB of address space, the Go runtime's reservations included
	big := mlpEngine(t, 1<<25) // an 8 GiB arena
	r := underAddressLimit(t, limitKB, bin, "run", big)
	assert.Equal(t, 1, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
	assert.NotContains(t, r.stderr, "fatal error")
	assert.Contains(t, r.stderr, "the engine's arena: 8589934592 bytes (8 GiB) do not fit")
	assert.Contains(t, r.stderr, "RLIMIT_AS")
	assert.Contains(t, r.stderr, "cc build --max")

	small := mlpEngine(t, 1024)
	r = underAddressLimit(t, limitKB, bin, "run", small, "--shape", "x=3x64")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "y float[3 64]")
}

// A --shape outside the engine's range is refused, naming the input, the
// dim, the value and the range, before its random data is made: under an
// address-space limit, making 100000000x64 floats first would be fatal.
func TestShapeOutsideRange(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildInfer(t)
	eng := mlpEngine(t, 32)
	for _, cmd := range [][]string{{"run"}, {"bench", "--iterations", "1", "--warmup", "0"}} {
		r := underAddressLimit(t, 5<<20, bin, append(cmd, eng, "--shape", "x=100000000x64")...)
		assert.Equal(t, 1, r.code, "%v: %s", cmd, r.stderr)
		assert.NotContains(t, r.stderr, "fatal error")
		assert.Contains(t, r.stderr, `--shape: input "x" dim 0: dim N is 100000000, the engine takes 1 to 32`, cmd)
	}
	r := runInfer(t, bin, "run", eng, "--shape", "x=3x65")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `input "x": got shape [3 65], the engine takes float[N,64] (dim 1 differs)`)
	r = runInfer(t, bin, "run", eng, "--shape", "x=32x64")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "y float[32 64]")
}

// infer run leaves an input with an initializer default to the engine
// (cc build --overridable-initializers), which then computes what the
// reference does with the default, and runs on a fed value as the
// reference does; an engine built without the flag refuses a fed value.
func TestRunInputDefaults(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	rng := rand.New(rand.NewSource(32))
	normal := func(dims ...int64) *ir.Tensor {
		v := ir.NewTensor(ir.Float32, dims...)
		for i := range v.Float32s() {
			v.Float32s()[i] = float32(rng.NormFloat64())
		}
		return v
	}
	w, x, fedW := normal(4, 3), normal(2, 4), normal(4, 3)
	model := func() *ir.Model {
		g := ir.NewGraph("defaults")
		xv := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2, 4)))
		wv := g.AddInitializer("W", w.Clone())
		g.Inputs = append(g.Inputs, wv)
		y := g.Apply("MatMul", []*ir.Value{xv, wv})
		y.Name = "y"
		g.SetOutputs(y)
		return ir.NewModel(g, 17)
	}
	dir := t.TempDir()
	file := func(name string, v *ir.Tensor) string {
		data, err := onnx.WriteTensor(v)
		require.NoError(t, err)
		path := filepath.Join(dir, name+".pb")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		return path
	}
	xFile, wFile := file("x", x), file("W", fedW)
	ref, err := reference.New(model())
	require.NoError(t, err)
	bin := buildInfer(t)
	for _, overridable := range []bool{false, true} {
		out, err := build.BuildModel(model(), nil, build.Options{OptLevel: 2, OverridableInitializers: overridable})
		require.NoError(t, err)
		eng := filepath.Join(dir, "defaults"+strconv.FormatBool(overridable)+".kiln")
		require.NoError(t, os.WriteFile(eng, out.Engine, 0o644))
		for _, fed := range []bool{false, true} {
			feeds, inputs := map[string]*ir.Tensor{"x": x}, []string{"--input", "x=" + xFile}
			if fed {
				feeds["W"] = fedW
				inputs = append(inputs, "--input", "W="+wFile)
			}
			r := runInfer(t, bin, append([]string{"run", eng, "--output-dir", filepath.Join(dir, "out")}, inputs...)...)
			// bench runs a static engine through Context.RunInto.
			bench := runInfer(t, bin, append([]string{"bench", eng, "--iterations", "2", "--warmup", "0"}, inputs...)...)
			if fed && !overridable {
				for _, r := range []inferResult{r, bench} {
					assert.Equal(t, 1, r.code, r.stdout)
					assert.Contains(t, r.stderr, `input "W" is a constant in this engine`)
					assert.Contains(t, r.stderr, "--overridable-initializers")
				}
				continue
			}
			require.Equal(t, 0, r.code, "overridable %v, fed %v: %s", overridable, fed, r.stderr)
			require.Equal(t, 0, bench.code, "bench, overridable %v, fed %v: %s", overridable, fed, bench.stderr)
			got, err := onnx.ReadTensorFile(filepath.Join(dir, "out", "output_0.pb"))
			require.NoError(t, err)
			want, err := ref.Run(feeds)
			require.NoError(t, err)
			require.Equal(t, want["y"].Dims, got.Dims)
			for i, v := range want["y"].Float32s() {
				require.InDelta(t, v, got.Float32s()[i], 1e-5, "overridable %v, fed %v: element %d", overridable, fed, i)
			}
		}
	}
}
