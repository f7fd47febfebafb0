package build

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// PyTorch 1.13 exports whose shapes are the data's or the loop's build
// with no flags into one engine each, and match PyTorch's outputs at every
// size their test data holds, at 1 and 2 threads:
//   - scripted loops that build a list (testdata/exporters/scripted:
//     outs.append in a for loop over a dynamic dim, then torch.stack or
//     torch.cat on several axes; an RNN cell unrolled with its state
//     carried), whose loop fills a scan output in the arena; a sample-rate
//     If whose branches give different lengths (31 frames or 63: the
//     branch that runs sets the dim);
//   - boolean masks and torch.nonzero, and an SSD-style NonMaxSuppression
//     checked against a NumPy NMS (testdata/exporters/datadep), whose counts
//     the engine computes (none selected, too);
//   - argsort, sort and topk of half an axis (TopK with K the axis' size)
//     and a reflect pad over dynamic H and W (testdata/exporters/dynamic);
//   - F.interpolate to another feature map's size, whose taps the engine
//     computes from the run's sizes (nearest, bilinear, bicubic), and by
//     a scale of 1.5 (testdata/exporters/dynamic/interpolate);
//   - a CRNN over a dynamic width (a reshape to [N, W//2, C·H], whose
//     run-time target the engine follows, then a bidirectional LSTM) and a
//     transformer encoder whose positional table is sliced to the length
//     (pe[:, :T], a Slice whose ends come from a Shape) with a padding
//     mask built from lengths (testdata/exporters/dynamic/{crnn,encoder}).
func TestExportsOfRunTimeShapes(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	for _, name := range []string{"scripted/lists", "scripted/cell", "scripted/branches", "datadep/masks", "datadep/nms", "dynamic/sorts", "dynamic/reflect_pad", "dynamic/interpolate", "dynamic/crnn", "dynamic/encoder"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", "exporters", name)
			path := filepath.Join(dir, "model.onnx")
			out, err := Build(path, Options{OptLevel: 2})
			require.NoError(t, err)
			eng, err := runtime.LoadBytes(out.Engine)
			require.NoError(t, err)
			m, err := onnx.ReadFile(path)
			require.NoError(t, err)
			sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
			require.Len(t, sets, 3)
			for _, set := range sets {
				feeds := map[string]*ir.Tensor{}
				for i, v := range m.Graph.Inputs {
					feeds[v.Name] = readPB(t, filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
				}
				for _, threads := range []int{1, 2} {
					ctx, err := eng.NewContext(runtime.Options{Threads: threads})
					require.NoError(t, err)
					got, err := ctx.Run(feeds)
					require.NoError(t, err, set)
					for i, v := range m.Graph.Outputs {
						want := readPB(t, filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
						detail, ok := conformance.Compare(want, got[v.Name], conformance.DefaultTolerance)
						assert.True(t, ok, "%s %s, %d threads: %s", filepath.Base(set), v.Name, threads, detail)
					}
				}
			}
		})
	}
}

func readPB(t *testing.T, path string) *ir.Tensor {
	t.Helper()
	buf, err := os.ReadFile(path)
	require.NoError(t, err)
	x, err := onnx.ReadTensor(buf)
	require.NoError(t, err)
	return x
}
