package serve

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
)

// TestInputDefaults: an engine input with a default (cc build
// --overridable-initializers) may be left out of a request, which then
// computes with the default, as infer run does; a request that gives it
// computes with what it gives.
func TestInputDefaults(t *testing.T) {
	builtEngines(t) // skips without llc
	path := filepath.Join("../../testdata/models", "digits_mlp.onnx")
	m, err := build.ReadModel(path)
	require.NoError(t, err)
	if m.IRVersion < 4 {
		m.IRVersion = 4
	}
	var bias *ir.Value
	for _, v := range m.Graph.Initializers {
		if v.Const.Len() == 10 { // the last layer's bias
			bias = v
		}
	}
	require.NotNil(t, bias, "digits_mlp has a bias of 10")
	m.Graph.Inputs = append(m.Graph.Inputs, bias)
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	out, err := build.BuildModel(m, src, build.Options{OptLevel: 2, OverridableInitializers: true})
	require.NoError(t, err)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"mlp": out.Engine})})

	x := sample(digits(t).flat, 3)
	want := direct(t, out.Engine, x, 1)[0]
	code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/mlp/infer", jsonInfer("input", x), nil)
	require.Equal(t, 200, code, "%s", body)
	var rep inferReply
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Len(t, rep.Outputs, 1)
	assert.InDeltaSlice(t, want, rep.Outputs[0].Data, 1e-6)

	shifted := make([]float32, 10)
	for i := range shifted {
		shifted[i] = bias.Const.Float32s()[i] + float32(i)
	}
	req, _ := json.Marshal(map[string]any{"inputs": []map[string]any{
		{"name": "input", "datatype": "FP32", "shape": x.Dims, "data": x.Float32s()},
		{"name": bias.Name, "datatype": "FP32", "shape": []int64{10}, "data": shifted},
	}})
	code, body, _ = post(t, http.DefaultClient, s.url+"/v2/models/mlp/infer", req, nil)
	require.Equal(t, 200, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &rep))
	for i := range want {
		assert.InDelta(t, want[i]+float32(i), rep.Outputs[0].Data[i], 1e-4, "logit %d follows the bias given", i)
	}
}
