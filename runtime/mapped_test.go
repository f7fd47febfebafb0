package runtime_test

import (
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// winogradModel is two 3×3 convolutions the compiler runs as Winograd
// (their kernels derived at load) and a MatMul, with random weights. The
// first one's transformed kernels (17 input channels, 18 output
// channels in panels of 6) are not a whole number of 64-byte lines, so the
// second's start after a gap.
func winogradModel(r *rand.Rand) *ir.Model {
	g := ir.NewGraph("mapped")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 17, 12, 12)))
	w1 := g.AddInitializer("w1", randomTensor(r, 18, 17, 3, 3))
	w2 := g.AddInitializer("w2", randomTensor(r, 24, 18, 3, 3))
	m := g.AddInitializer("m", randomTensor(r, 12, 7))
	y := g.Apply("Conv", []*ir.Value{x, w1}, ir.AttrIs("pads", 1, 1, 1, 1))
	y = g.Apply("Conv", []*ir.Value{y, w2}, ir.AttrIs("pads", 1, 1, 1, 1))
	y = g.Apply("MatMul", []*ir.Value{y, m})
	y.Name = "y"
	g.SetOutputs(y)
	return ir.NewModel(g, 17)
}

func randomTensor(r *rand.Rand, dims ...int64) *ir.Tensor {
	t := ir.NewTensor(ir.Float32, dims...)
	for i, f := 0, t.Float32s(); i < len(f); i++ {
		f[i] = r.Float32()*2 - 1
	}
	return t
}

// TestMappedWeights: Load serves the weights from the file's pages (the
// stored ones mapped, the derived Winograd kernels computed after them)
// and computes what the reference does, and what a copying load does, bit
// for bit; a damaged weights section is refused as before.
func TestMappedWeights(t *testing.T) {
	needLLC(t)
	r := rand.New(rand.NewSource(11))
	built, err := build.BuildModel(winogradModel(r), nil, build.Options{OptLevel: 2, Winograd: cpu.WinogradOn})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "e.kiln")
	require.NoError(t, os.WriteFile(path, built.Engine, 0o644))

	mapped, err := runtime.Load(path)
	require.NoError(t, err)
	defer mapped.Close()
	winograd := 0
	for _, k := range mapped.Meta.Kernels {
		if strings.HasSuffix(k, "WinogradGemm") {
			winograd++
		}
	}
	require.Equal(t, 2, winograd, "both convolutions run as Winograd, their kernels derived at load (kernels %v)", mapped.Meta.Kernels)
	copied, err := runtime.LoadWith(path, runtime.LoadOptions{CopyWeights: true})
	require.NoError(t, err)
	defer copied.Close()
	assert.True(t, mapped.LoadTimes().WeightsMapped, "Load maps the weights")
	assert.False(t, copied.LoadTimes().WeightsMapped, "CopyWeights copies them")

	x := randomTensor(r, 1, 17, 12, 12)
	ex, err := reference.New(winogradModel(rand.New(rand.NewSource(11))))
	require.NoError(t, err)
	want, err := ex.Run(map[string]*ir.Tensor{"x": x})
	require.NoError(t, err)
	var outs []*ir.Tensor
	for _, e := range []*runtime.Engine{mapped, copied} {
		ctx, err := e.NewContext(runtime.Options{Threads: 2})
		require.NoError(t, err)
		got, err := ctx.Run(map[string]*ir.Tensor{"x": x})
		require.NoError(t, err)
		outs = append(outs, got["y"])
		w, g := want["y"].Float32s(), got["y"].Float32s()
		require.Len(t, g, len(w))
		// Two Winograd layers round differently from the reference's
		// direct sums: errors scale with the outputs' magnitude.
		scale := 0.0
		for _, v := range w {
			scale = max(scale, math.Abs(float64(v)))
		}
		for i := range w {
			require.InDelta(t, w[i], g[i], 1e-5*(1+scale), "y[%d]", i)
		}
	}
	assert.Equal(t, outs[1].Raw, outs[0].Raw, "mapped and copied weights compute the same bits")

	// One flipped byte in the weights section.
	f, err := engine.Parse(built.Engine)
	require.NoError(t, err)
	off, ok := f.SectionOffset(engine.SectionWeights)
	require.True(t, ok)
	bad := append([]byte(nil), built.Engine...)
	bad[off+100] ^= 0x40
	badPath := filepath.Join(t.TempDir(), "bad.kiln")
	require.NoError(t, os.WriteFile(badPath, bad, 0o644))
	_, err = runtime.Load(badPath)
	require.ErrorIs(t, err, engine.ErrChecksum)
	assert.ErrorContains(t, err, `section "weights"`)
}
