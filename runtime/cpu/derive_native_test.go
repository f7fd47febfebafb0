package cpu_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"math/rand"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ccpu "github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/ir"
	rcpu "github.com/kiln-ml/kiln/runtime/cpu"
)

// winogradEngine compiles a chain of 3×3 convolutions, each run as
// Winograd, with random weights: channels[i] → channels[i+1] at hw×hw.
func winogradEngine(t testing.TB, seed int64, hw int64, channels ...int64) *ccpu.Result {
	t.Helper()
	if _, err := exec.LookPath("llc"); err != nil {
		if _, err := exec.LookPath("llc-14"); err != nil {
			t.Skip("llc not found")
		}
	}
	r := rand.New(rand.NewSource(seed))
	g := ir.NewGraph("wino")
	y := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, channels[0], hw, hw)))
	for i := 1; i < len(channels); i++ {
		w := ir.NewTensor(ir.Float32, channels[i], channels[i-1], 3, 3)
		for j, f := 0, w.Float32s(); j < len(f); j++ {
			f[j] = float32(r.NormFloat64() * float64(int(1)<<r.Intn(8)) / 16)
		}
		y = g.Apply("Conv", []*ir.Value{y, g.AddInitializer(fmt.Sprintf("w%d", i), w)}, ir.AttrIs("pads", 1, 1, 1, 1))
	}
	y.Name = "y"
	g.SetOutputs(y)
	res, err := ccpu.Compile(ir.NewModel(g, 17), ccpu.Options{Winograd: ccpu.WinogradOn})
	require.NoError(t, err)
	require.NotEmpty(t, res.Derived, "no layer runs as Winograd: %v", res.Kernels)
	return res
}

// TestNativeDeriveIsTheReference: the engine's kiln_derive computes the
// reference transform's live weights bit for bit, for panels of several
// heights (the tile counts set MR), channel counts that leave a partial
// panel and a partial vector, on one thread and on several.
func TestNativeDeriveIsTheReference(t *testing.T) {
	for i, c := range []struct {
		hw       int64
		channels []int64
	}{
		{12, []int64{16, 24, 37, 19}}, // few tiles: tall panels
		{40, []int64{16, 20, 64}},     // many tiles: short panels
	} {
		res := winogradEngine(t, int64(i), c.hw, c.channels...)
		lib, err := rcpu.Open(res.SharedObject)
		require.NoError(t, err)
		want, err := rcpu.ExpandOracle(res.Weights, res.Derived)
		require.NoError(t, err)
		for _, procs := range []int{1, 3} {
			prev := runtime.GOMAXPROCS(procs)
			got, err := rcpu.ExpandWeights(lib, res.Weights, res.Derived)
			runtime.GOMAXPROCS(prev)
			require.NoError(t, err)
			var mr []int64
			for _, d := range res.Derived {
				mr = append(mr, d.MR)
			}
			assert.True(t, bytes.Equal(want.Bytes, got.Bytes), "case %d (MR %v), %d threads: the live weights differ from the reference's", i, mr, procs)
			got.Free()
		}
		want.Free()
		lib.Close()
	}
}

// An engine whose record lists derived weights must export kiln_derive.
func TestDeriveEntryRequired(t *testing.T) {
	res := winogradEngine(t, 7, 12, 16, 16)
	abi, err := cpuabi.ReadABI(res.SharedObject, elf.EM_X86_64)
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 only")
	}
	require.NoError(t, err)
	assert.NotEmpty(t, abi.Derived)
	stripped := bytes.ReplaceAll(res.SharedObject, []byte(cpuabi.DeriveEntryPoint+"\x00"), []byte("kiln_xxxxxx\x00"))
	_, err = cpuabi.ReadABI(stripped, elf.EM_X86_64)
	assert.ErrorContains(t, err, "exports no kiln_derive")
}

// BenchmarkNativeDerive: kiln_derive on a 256×256 3×3 layer's F(4×4, 3×3)
// kernels, one core (BenchmarkReferenceTransform is the Go reference).
func BenchmarkNativeDerive(b *testing.B) {
	if runtime.GOARCH != "amd64" {
		b.Skip("x86-64 only")
	}
	res := winogradEngine(b, 3, 28, 256, 256)
	lib, err := rcpu.Open(res.SharedObject)
	require.NoError(b, err)
	defer lib.Close()
	abi, err := cpuabi.ReadABI(res.SharedObject, elf.EM_X86_64)
	require.NoError(b, err)
	l, err := rcpu.NewLive(abi)
	require.NoError(b, err)
	defer l.Buf.Free()
	l.Put(0, res.Weights)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	for b.Loop() {
		require.NoError(b, l.Derive(lib))
	}
	d := res.Derived[0]
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(d.OC*d.C), "ns/kernel")
}
