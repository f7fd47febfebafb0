package build

import (
	"math"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// A PyTorch 1.13 export with dynamic axes (testdata/exporters/torch113:
// a transformer encoder over token ids [N, S], and the cumsum/topk/argmax
// text model) builds without --shape into one engine that matches the
// reference at every size tried, at 1 and 2 threads.
func TestTorchDynamicAxes(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name  string
		vocab int64
		max   []int64
		sizes [][]int64
	}{
		{"encoder", 100, []int64{4, 40}, [][]int64{{2, 10}, {1, 1}, {4, 40}, {3, 17}}},
		{"text", 50, []int64{4, 40}, [][]int64{{2, 9}, {1, 1}, {4, 40}, {3, 5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("..", "..", "testdata", "exporters", "torch113", c.name, "model.onnx")
			out, err := Build(path, Options{OptLevel: 2, Shapes: Shapes{Max: map[string][]int64{"ids": c.max}}})
			require.NoError(t, err)
			eng, err := runtime.LoadBytes(out.Engine)
			require.NoError(t, err)
			m, err := onnx.ReadFile(path)
			require.NoError(t, err)
			ref, err := reference.New(m)
			require.NoError(t, err)
			r := rand.New(rand.NewSource(5))
			for _, dims := range c.sizes {
				ids := ir.NewTensor(ir.Int64, dims...)
				for i := range ids.Int64s() {
					ids.Int64s()[i] = r.Int63n(c.vocab)
				}
				feeds := map[string]*ir.Tensor{"ids": ids}
				want, err := ref.Run(feeds)
				require.NoError(t, err)
				for _, threads := range []int{1, 2} {
					ctx, err := eng.NewContext(runtime.Options{Threads: threads})
					require.NoError(t, err)
					got, err := ctx.Run(feeds)
					require.NoError(t, err, "%v", dims)
					for name, w := range want {
						g := got[name]
						require.NotNil(t, g, name)
						require.Equal(t, w.Dims, g.Dims, "%s at %v", name, dims)
						for i := 0; i < int(w.Len()); i++ {
							a, b := g.Float64At(i), w.Float64At(i)
							require.LessOrEqual(t, math.Abs(a-b), 1e-4+1e-4*math.Abs(b), "%s[%d] at %v, %d threads: %g, want %g", name, i, dims, threads, a, b)
						}
					}
				}
			}
		})
	}
}
