package crossrun_test

import (
	"bytes"
	"context"
	"flag"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/crossrun"
	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/internal/quantize"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// These tests cross-compile engines for aarch64-linux-gnu and run them
// with an arm64 infer under qemu-user (natively on an arm64 machine),
// checking them against the reference executor and PyTorch's outputs.
// They skip, saying what is missing, without qemu-aarch64-static, the
// arm64 C library, llc or ld.lld (make deps installs them all). Models
// stay small: qemu runs arm64 code 10-50 times slower than native.

var update = flag.Bool("update", false, "rewrite testdata/models/unet_small*")

const models = "../../testdata/models"

var (
	inferOnce sync.Once
	inferDir  string
	inferPath string
	inferErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if inferDir != "" {
		os.RemoveAll(inferDir)
	}
	os.Exit(code)
}

// runner returns a Runner with an arm64 infer, built once per test run,
// or skips the test.
func runner(t *testing.T) *crossrun.Runner {
	t.Helper()
	needCompiler(t)
	qemu, err := crossrun.Emulator()
	if err != nil {
		t.Skip(err)
	}
	inferOnce.Do(func() {
		if inferDir, inferErr = os.MkdirTemp("", "kiln-arm64-infer-*"); inferErr == nil {
			inferPath, inferErr = crossrun.BuildInfer("../..", inferDir)
		}
	})
	require.NoError(t, inferErr)
	return &crossrun.Runner{Qemu: qemu, Infer: inferPath}
}

func needCompiler(t *testing.T) {
	t.Helper()
	if err := cpu.AvailableFor(cpu.TripleARM64); err != nil {
		t.Skip(err)
	}
}

// buildFor compiles a model file for AArch64 and writes the engine.
func buildFor(t *testing.T, model, cpuName string) string {
	t.Helper()
	out, err := build.Build(model, build.Options{Target: "aarch64-linux-gnu", CPU: cpuName, OptLevel: 2})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), filepath.Base(model)+"."+cpuName+".kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))
	return path
}

// check runs `infer check` on the arm64 side and requires PASS.
func check(t *testing.T, r *crossrun.Runner, engine, testData string) {
	t.Helper()
	out, err := r.Command(context.Background(), r.Infer, "check", "--threads", "2", "--test-data", testData, engine).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "PASS")
	assert.NotContains(t, string(out), "FAIL")
}

// TestDigitsOnAArch64: the bundled digits models built for a NEON-only
// CPU and for one with the dot product match PyTorch's outputs.
func TestDigitsOnAArch64(t *testing.T) {
	r := runner(t)
	for _, name := range []string{"digits_mlp", "digits_cnn"} {
		for _, c := range []string{"generic", "cortex-a76"} {
			t.Run(name+"/"+c, func(t *testing.T) {
				check(t, r, buildFor(t, filepath.Join(models, name+".onnx"), c), filepath.Join(models, name, "test_data_set_0"))
			})
		}
	}
}

// TestUNetOnAArch64: a small U-Net (convolutions, max pooling,
// ConvTranspose upsampling, skip Concats, BatchNormalization) matches the
// reference executor's outputs stored beside it.
func TestUNetOnAArch64(t *testing.T) {
	model := filepath.Join(models, "unet_small.onnx")
	data := filepath.Join(models, "unet_small", "test_data_set_0")
	if *update {
		writeUNet(t, model, data)
	}
	r := runner(t)
	check(t, r, buildFor(t, model, "neoverse-n1"), data)
}

// TestUNetFileIsCurrent: the stored U-Net is what unetModel builds and
// its outputs are the reference executor's (go test -update rewrites).
func TestUNetFileIsCurrent(t *testing.T) {
	m, in := unetModel()
	want, err := onnx.Write(m)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(models, "unet_small.onnx"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "testdata/models/unet_small.onnx is stale: go test ./internal/crossrun -run UNet -update")
	stored, err := onnx.ReadTensorFile(filepath.Join(models, "unet_small", "test_data_set_0", "input_0.pb"))
	require.NoError(t, err)
	assert.Equal(t, in.Raw, stored.Raw)
}

// TestInt8OnAArch64: the digits CNN quantized to INT8 runs on each of the
// AArch64 int8 paths (sdot with flipped activations, usdot with i8mm, and
// int16 pairs without either) with the same outputs as the engine for this
// machine, on random inputs; with --winograd on, its second convolution
// runs as integer Winograd. The host engine is built for a CPU without AMX
// (icelake-server), since with AMX tiles the x86-64 backend keeps integer
// convolutions direct even at --winograd on: what the two engines are
// compared on must not depend on the CPU the test runs on.
func TestInt8OnAArch64(t *testing.T) {
	r := runner(t)
	model := filepath.Join(models, "digits_cnn.onnx")
	src, err := os.ReadFile(model)
	require.NoError(t, err)
	qdq := func() *ir.Model {
		m, err := build.ReadModel(model)
		require.NoError(t, err)
		_, err = quantize.Quantize(m, src, quantize.Options{Method: quantize.Method{Name: "minmax"}, Data: []string{"../../testdata/data/digits_calib/x.pb"}})
		require.NoError(t, err)
		return m
	}
	rng := rand.New(rand.NewSource(3))
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	feeds := map[string]*ir.Tensor{"input": ir.FromSlice(ir.Float32, []int64{1, 1, 8, 8}, x)}
	for _, wino := range []string{cpu.WinogradAuto, cpu.WinogradOn} {
		host, err := build.BuildModel(qdq(), src, build.Options{CPU: "icelake-server", OptLevel: 2, Precision: "int8", Winograd: wino})
		require.NoError(t, err)
		e, err := runtime.LoadBytes(host.Engine)
		require.NoError(t, err)
		defer e.Close()
		ctx, err := e.NewContext(runtime.Options{Threads: 1})
		require.NoError(t, err)
		want, err := ctx.Run(feeds)
		require.NoError(t, err)
		for _, c := range []string{"generic", "cortex-a76", "neoverse-v1"} {
			t.Run("winograd="+wino+"/"+c, func(t *testing.T) {
				out, err := build.BuildModel(qdq(), src, build.Options{Target: "aarch64-linux-gnu", CPU: c, OptLevel: 2, Precision: "int8", Winograd: wino})
				require.NoError(t, err)
				assert.Equal(t, "int8", precisionOf(t, out.Engine))
				got, err := r.Run(context.Background(), out.Engine, feeds, 2)
				require.NoError(t, err)
				for name, w := range want {
					require.Contains(t, got, name)
					assert.Equal(t, w.Float32s(), got[name].Float32s(), "output %s", name)
				}
			})
		}
	}
}

func precisionOf(t *testing.T, eng []byte) string {
	e, err := engine.Decode(eng)
	require.NoError(t, err)
	return e.Meta.Precision
}

// TestOpsOnAArch64: one model of ops from each family (the kernel layer's
// and the hand-written kernels') matches the reference on random inputs.
func TestOpsOnAArch64(t *testing.T) {
	r := runner(t)
	cases := []string{
		"Conv-17(pads=[1 1 1 1],group=2) float[1,4,9,7], float[6,2,3,3]=rand, float[6]=rand",
		"Conv-17(strides=[2 2],pads=[2 2 2 2],dilations=[2 2]) float[1,3,11,10], float[5,3,3,3]=rand",
		"Conv-17(group=4) float[1,4,6,6], float[4,1,3,3]=rand",
		"ConvTranspose-17(strides=[2 2],pads=[1 1 1 1],output_padding=[1 1]) float[1,3,5,6], float[3,4,3,3]=rand, float[4]=rand",
		"MaxPool-17(kernel_shape=[3 3],strides=[2 2],pads=[1 1 1 1]) float[1,3,9,9]",
		"AveragePool-17(kernel_shape=[2 2],strides=[2 2]) float[1,5,8,8]",
		"Gemm-17(transB=1) float[3,20], float[13,20]=rand, float[13]=rand",
		"MatMul-17 float[2,5,17], float[2,17,9]",
		"Softmax-17(axis=-1) float[4,19]",
		"LayerNormalization-17(axis=-1) float[3,21], float[21]=rand, float[21]=rand",
		"Erf-17 float[37]",
		"Sigmoid-17 float[5,11]",
		"Transpose-17(perm=[0 2 1]) float[2,7,5]",
		"ReduceMean-17(axes=[1]) float[3,10,4]",
		"Gather-17(axis=0) float[6,5], int64[4]~idx(6)",
		"Where-17 bool[3,4], float[3,4], float[3,4]",
	}
	m, feeds, err := opcase.Model(cases, ir.Float32, 17, rand.New(rand.NewSource(1)))
	require.NoError(t, err)
	ref, err := reference.New(m)
	require.NoError(t, err)
	want, err := ref.Run(feeds)
	require.NoError(t, err)
	src, err := onnx.Write(m)
	require.NoError(t, err)
	out, err := build.BuildModel(m, src, build.Options{Target: "aarch64-linux-gnu", CPU: "cortex-a76", OptLevel: 2})
	require.NoError(t, err)
	got, err := r.Run(context.Background(), out.Engine, feeds, 2)
	require.NoError(t, err)
	for name, w := range want {
		require.Contains(t, got, name)
		g := got[name]
		require.Equal(t, w.Dims, g.Dims, name)
		for i := 0; i < int(w.Len()); i++ {
			a, b := g.Float64At(i), w.Float64At(i)
			if math.Abs(a-b) > 1e-5+1e-4*math.Abs(b) {
				t.Errorf("%s[%d]: got %g, want %g", name, i, a, b)
				break
			}
		}
	}
}

// TestRefusedOnOtherArch: this machine's runtime refuses an engine built
// for the other architecture, naming both and the flags that build for
// this one; `infer` says so and exits 1.
func TestRefusedOnOtherArch(t *testing.T) {
	needCompiler(t)
	other := cpu.TripleARM64
	if cpu.HostTriple() == cpu.TripleARM64 {
		other = cpu.TripleX86
	}
	out, err := build.Build(filepath.Join(models, "digits_mlp.onnx"), build.Options{Target: other, OptLevel: 2})
	require.NoError(t, err)
	_, err = runtime.LoadBytes(out.Engine)
	require.Error(t, err)
	short := strings.Replace(cpu.HostTriple(), "-unknown-", "-", 1)
	assert.Contains(t, err.Error(), "holds code for "+other)
	assert.Contains(t, err.Error(), "this machine is "+cpu.HostTriple())
	assert.Contains(t, err.Error(), "--target "+short)

	path := filepath.Join(t.TempDir(), "other.kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))
	cmd := exec.Command("go", "run", "../../cmd/infer", "run", path)
	msg, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", msg)
	assert.Equal(t, 1, exit.ExitCode(), "%s", msg)
	assert.Contains(t, string(msg), "wrong architecture")
	assert.NotContains(t, string(msg), "panic")
}

// TestTargetErrors: unknown triples and CPUs, and --cpu native for
// another architecture, are refused by name.
func TestTargetErrors(t *testing.T) {
	needCompiler(t)
	model := filepath.Join(models, "digits_mlp.onnx")
	for _, c := range []struct{ target, cpu, want string }{
		{"riscv64-linux-gnu", "", `unknown target "riscv64-linux-gnu"`},
		{"aarch64-linux-gnu", "cortex-a99", `unknown AArch64 CPU "cortex-a99"`},
		{"aarch64-linux-gnu", "skylake-avx512", `unknown AArch64 CPU "skylake-avx512"`},
	} {
		_, err := build.Build(model, build.Options{Target: c.target, CPU: c.cpu})
		if assert.Error(t, err, c) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
	if cpu.HostTriple() != cpu.TripleARM64 {
		_, err := build.Build(model, build.Options{Target: "aarch64-linux-gnu", CPU: "native"})
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), "--cpu native names this machine's CPU, which is not AArch64")
		}
	}
}

// unetModel builds a small U-Net for 1×3×16×16 images (two levels:
// Conv+BN+Relu, MaxPool down; ConvTranspose up, one with stride 2 and a
// 2×2 kernel, one 3×3 with output_padding; skip Concats; a 1×1 Conv and
// Sigmoid head) with seeded random weights, and a random input.
func unetModel() (*ir.Model, *ir.Tensor) {
	rng := rand.New(rand.NewSource(13))
	g := ir.NewGraph("unet_small")
	weights := func(name string, fanIn int64, dims ...int64) *ir.Value {
		n := ir.Product(dims)
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * math.Sqrt(2/float64(fanIn)))
		}
		return g.AddInitializer(name, ir.FromSlice(ir.Float32, dims, w))
	}
	vec := func(name string, n int64, lo, hi float64) *ir.Value {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return g.AddInitializer(name, ir.FromSlice(ir.Float32, []int64{n}, v))
	}
	pad1 := ir.AttrIs("pads", 1, 1, 1, 1)
	block := func(name string, x *ir.Value, cin, cout int64) *ir.Value {
		w := weights(name+".w", cin*9, cout, cin, 3, 3)
		y := g.Apply("Conv", []*ir.Value{x, w}, pad1)
		bn := g.Apply("BatchNormalization", []*ir.Value{y, vec(name+".gamma", cout, 0.5, 1.5), vec(name+".beta", cout, -0.2, 0.2),
			vec(name+".mean", cout, -0.1, 0.1), vec(name+".var", cout, 0.5, 2)})
		return g.Apply("Relu", []*ir.Value{bn})
	}
	pool := func(x *ir.Value) *ir.Value {
		return g.Apply("MaxPool", []*ir.Value{x}, ir.AttrIs("kernel_shape", 2, 2), ir.AttrIs("strides", 2, 2))
	}
	x := g.AddInput("image", ir.TensorType(ir.Float32, ir.S(1, 3, 16, 16)))
	e1 := block("enc1", x, 3, 8)
	e2 := block("enc2", pool(e1), 8, 16)
	mid := block("mid", pool(e2), 16, 32)
	u2 := g.Apply("ConvTranspose", []*ir.Value{mid, weights("up2.w", 32*4, 32, 16, 2, 2), vec("up2.b", 16, -0.1, 0.1)},
		ir.AttrIs("strides", 2, 2))
	d2 := block("dec2", g.Apply("Concat", []*ir.Value{u2, e2}, ir.AttrI("axis", 1)), 32, 16)
	u1 := g.Apply("ConvTranspose", []*ir.Value{d2, weights("up1.w", 16*9, 16, 8, 3, 3)},
		ir.AttrIs("strides", 2, 2), pad1, ir.AttrIs("output_padding", 1, 1))
	d1 := block("dec1", g.Apply("Concat", []*ir.Value{u1, e1}, ir.AttrI("axis", 1)), 16, 8)
	head := g.Apply("Conv", []*ir.Value{d1, weights("head.w", 8, 2, 8, 1, 1), vec("head.b", 2, -0.1, 0.1)})
	y := g.Apply("Sigmoid", []*ir.Value{head})
	y.Name = "mask"
	g.SetOutputs(y)
	in := make([]float32, 3*16*16)
	for i := range in {
		in[i] = float32(rng.NormFloat64())
	}
	return ir.NewModel(g, 17), ir.FromSlice(ir.Float32, []int64{1, 3, 16, 16}, in)
}

// writeUNet writes the U-Net and its reference output as an ONNX test.
func writeUNet(t *testing.T, model, data string) {
	m, in := unetModel()
	require.NoError(t, onnx.WriteFile(model, m)) // before the reference annotates its types
	ref, err := reference.New(m)
	require.NoError(t, err)
	out, err := ref.Run(map[string]*ir.Tensor{"image": in})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(data, 0o755))
	for name, tensor := range map[string]*ir.Tensor{"input_0.pb": in, "output_0.pb": out["mask"]} {
		b, err := onnx.WriteTensor(tensor)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(data, name), b, 0o644))
	}
}
