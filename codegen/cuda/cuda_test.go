package cuda_test

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
	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/opcase"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

const models = "../../testdata/models"

func needLLC(t *testing.T) {
	t.Helper()
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
}

// simCases cover the kernel layer's families under the GPU schedule: maps
// with broadcasting, index remaps, gathers, a serial scatter, reductions
// (ArgMax included), a scan, a selection, and the convolutions and matrix
// products the GPU computes through the layer.
var simCases = []string{
	"Add-17 float[3,1,5], float[4,5]",
	"Sigmoid-17 float[7,33]",
	"Erf-17 float[300]",
	"Where-17 bool[3,4], float[3,4], float[1,4]",
	"Transpose-17(perm=[2 0 1]) float[3,4,5]",
	"Slice-17 float[20,10,5], int64[2]=[0 1], int64[2]=[3 -1], int64[2]=[0 2]",
	"Pad-17(mode=\"reflect\") float[3,5], int64[4]=[1 2 1 0]",
	"Gather-17(axis=1) float[3,4], int64[2]~[0 -1]",
	"ScatterElements-17(axis=0,reduction=\"add\") float[4,3], int64[2,3]~idx(4), float[2,3]",
	"ReduceMean-17(axes=[1]) float[3,10,4]",
	"ReduceMax-17(axes=[0 2],keepdims=0) float[5,3,6]",
	"ArgMax-17(axis=1,select_last_index=1) float[4,9]",
	"CumSum-17(reverse=1) float[3,8], int64[]=[1]",
	"TopK-17(largest=0) float[3,12], int64[1]=[4] -> 2",
	"Softmax-17(axis=-1) float[4,19]",
	"LayerNormalization-17(axis=-1) float[3,21], float[21]=rand, float[21]=rand",
	"Conv-17(pads=[1 1 1 1],strides=[2 2],group=2) float[1,4,9,7], float[6,2,3,3]=rand, float[6]=rand",
	"ConvTranspose-17(strides=[2 2],pads=[1 1 1 1],output_padding=[1 1]) float[1,3,5,6], float[3,4,3,3]=rand, float[4]=rand",
	"MaxPool-17(kernel_shape=[3 3],strides=[2 2],pads=[1 1 1 1]) float[1,3,9,9]",
	"MatMul-17 float[2,5,17], float[2,17,9]",
	"Gemm-17(transB=1,alpha=0.5) float[3,20], float[13,20]=rand, float[13]=rand",
	"Resize-17(mode=\"linear\") float[1,2,4,5], _, float[4]=[1 1 2 1.5]",
	// The tiled GEMM (shared memory, barriers): sizes off its 64×64×8
	// tiles, a B shared by the batch, Gemm's transposes and C broadcast,
	// and a convolution with uneven pads, strides and dilations.
	"MatMul-17 float[2,70,33], float[2,33,65]",
	"MatMul-17 float[3,40,20], float[20,100]",
	"Gemm-17(transA=1,transB=1,alpha=0.5,beta=2.0) float[33,70], float[65,33]=rand, float[70,1]=rand",
	"Conv-17(pads=[1 2 1 0],strides=[2 1],dilations=[1 2]) float[2,5,17,19], float[24,5,3,3]=rand, float[24]=rand",
	"Cast-17(to=10) float[10]",
	"Cast-17(to=6) float[10]",
}

// TestSimOps runs one model of simCases as a cuda-sim engine through the
// runtime and compares it with the reference executor on random inputs.
func TestSimOps(t *testing.T) {
	needLLC(t)
	m, feeds, err := opcase.Model(simCases, ir.Float32, 17, rand.New(rand.NewSource(7)))
	require.NoError(t, err)
	ref, err := reference.New(m)
	require.NoError(t, err)
	want, err := ref.Run(feeds)
	require.NoError(t, err)
	src, err := onnx.Write(m)
	require.NoError(t, err)
	// The GPU build of the same model has the tiled kernels' shared memory
	// and barriers.
	gpuModel, err := onnx.Read(src, "")
	require.NoError(t, err)
	gpu, err := build.BuildModel(gpuModel, src, build.Options{Target: build.TargetCUDA, OptLevel: 2})
	require.NoError(t, err)
	assert.Contains(t, gpu.GPU.Module.PTX, "bar.sync")
	assert.Contains(t, gpu.GPU.Module.PTX, ".shared")
	out, err := build.BuildModel(m, src, build.Options{Target: build.TargetCUDASim, OptLevel: 2})
	require.NoError(t, err)
	e, err := runtime.LoadBytes(out.Engine)
	require.NoError(t, err)
	defer e.Close()
	ctx, err := e.NewContext(runtime.Options{Threads: 2})
	require.NoError(t, err)
	got, err := ctx.Run(feeds)
	require.NoError(t, err)
	for name, w := range want {
		gt := got[name]
		require.NotNil(t, gt, name)
		require.Equal(t, w.Dims, gt.Dims, name)
		for i := 0; i < int(w.Len()); i++ {
			a, b := gt.Float64At(i), w.Float64At(i)
			if w.DType == ir.Float16 && math.Abs(a-b) <= 1e-3*math.Abs(b) || math.Abs(a-b) <= 1e-5+1e-4*math.Abs(b) {
				continue
			}
			t.Errorf("%s[%d]: got %g, want %g", name, i, a, b)
			break
		}
	}
}

// TestGPUBuild: the digits CNN and the U-Net build for the GPU: PTX with
// an entry per launch, the same launch plan as their cuda-sim build (the
// same kernels, grids and blocks: the simulator runs what the GPU would),
// and where ptxas is present a cubin per architecture; the runtime checks
// the engine without a GPU and refuses to run it, naming the target.
func TestGPUBuild(t *testing.T) {
	needLLC(t)
	_, ptxasErr := cuda.PTXAS()
	for _, name := range []string{"digits_cnn", "unet_small"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(models, name+".onnx")
			gpu, err := build.Build(path, build.Options{Target: build.TargetCUDA, GPUs: []string{"sm_80", "sm_90"}, OptLevel: 2})
			require.NoError(t, err)
			sim, err := build.Build(path, build.Options{Target: build.TargetCUDASim, OptLevel: 2})
			require.NoError(t, err)
			mod := gpu.GPU.Module
			assert.Equal(t, "sm_80", mod.PTXArch)
			assert.Contains(t, mod.PTX, ".target sm_80")
			require.Equal(t, len(sim.GPU.Kernels), len(mod.Kernels))
			assert.Equal(t, sim.GPU.Kernels, gpu.GPU.Kernels)
			for _, k := range mod.Kernels {
				assert.Contains(t, mod.PTX, ".entry "+k.Name+"(")
				assert.True(t, k.Grid >= 1 && k.Block >= 1 && k.Block <= 1024, "%+v", k)
			}
			if ptxasErr != nil {
				t.Logf("no cubins: %v", ptxasErr)
				assert.NotEmpty(t, gpu.Warnings)
			} else {
				assert.Equal(t, []string{"sm_80", "sm_90"}, mod.Archs())
			}
			f, err := engine.Decode(gpu.Engine)
			require.NoError(t, err)
			require.NoError(t, runtime.Validate(f))
			_, err = runtime.LoadBytes(gpu.Engine)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "nvptx64-nvidia-cuda (built with --target cuda --gpu sm_80,sm_90)")
		})
	}
}

// TestGPUEngineTampered: metadata that disagrees with the CUDA code's
// plan, and a plan that disagrees with itself, are refused before any
// code would load.
func TestGPUEngineTampered(t *testing.T) {
	needLLC(t)
	out, err := build.Build(filepath.Join(models, "digits_mlp.onnx"), build.Options{Target: build.TargetCUDA, OptLevel: 2})
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		edit func(e *engine.Engine)
		want string
	}{
		{"arena", func(e *engine.Engine) { e.Meta.ArenaBytes++ }, "metadata arena_bytes"},
		{"kernels", func(e *engine.Engine) { e.Meta.Kernels = e.Meta.Kernels[1:] }, "kernels, the code launches"},
		{"shape", func(e *engine.Engine) { e.Meta.Inputs[0].Shape = []int64{1, 65} }, `binding "`},
		{"weights", func(e *engine.Engine) { e.Weights = e.Weights[:len(e.Weights)-1] }, `section "weights"`},
		{"launch", func(e *engine.Engine) {
			e.Code[cudacode.Triple] = []byte(strings.Replace(string(e.Code[cudacode.Triple]), `"block":`, `"block":4096,"x":`, 1))
		}, "CUDA code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := engine.Decode(out.Engine)
			require.NoError(t, err)
			c.edit(e)
			err = runtime.Validate(e)
			require.ErrorIs(t, err, runtime.ErrInconsistent)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestParseGPUs: --gpu lists sort and dedupe; bad names are refused.
func TestParseGPUs(t *testing.T) {
	got, err := cuda.ParseGPUs("sm_90, sm_80,sm_90")
	require.NoError(t, err)
	assert.Equal(t, []string{"sm_80", "sm_90"}, got)
	for _, bad := range []string{"", "sm80", "compute_80", "sm_30", "sm_8"} {
		_, err := cuda.ParseGPUs(bad)
		assert.Error(t, err, bad)
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
