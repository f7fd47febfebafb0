package serve

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-ml/kiln/internal/serve/inferencepb"
	"github.com/kiln-ml/kiln/ir"
)

// TestGRPC drives inference.GRPCInferenceService with a client generated
// from the protocol's .proto: health, metadata, and the 360 held-out
// digits (typed contents and raw contents), whose answers equal the
// engine's run directly; bad requests are answered INVALID_ARGUMENT.
func TestGRPC(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"], "digits_cnn": engs["cnn"]}), Instances: 2})
	c := s.grpc
	ctx := context.Background()
	set := digits(t)

	live, err := c.ServerLive(ctx, &inferencepb.ServerLiveRequest{})
	require.NoError(t, err)
	assert.True(t, live.GetLive())
	ready, err := c.ServerReady(ctx, &inferencepb.ServerReadyRequest{})
	require.NoError(t, err)
	assert.True(t, ready.GetReady())
	meta, err := c.ServerMetadata(ctx, &inferencepb.ServerMetadataRequest{})
	require.NoError(t, err)
	assert.Equal(t, "kiln", meta.GetName())
	assert.Contains(t, meta.GetExtensions(), "model_repository")
	for _, version := range []string{"", "1"} {
		m, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "digits_mlp", Version: version})
		require.NoError(t, err)
		assert.Equal(t, "digits_mlp", m.GetName())
		assert.Equal(t, []string{"1"}, m.GetVersions())
		require.Len(t, m.GetInputs(), 1)
		assert.Equal(t, "input", m.GetInputs()[0].GetName())
		assert.Equal(t, "FP32", m.GetInputs()[0].GetDatatype())
		assert.Equal(t, []int64{1, 64}, m.GetInputs()[0].GetShape())
		assert.Equal(t, []int64{1, 10}, m.GetOutputs()[0].GetShape())
		r, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "digits_mlp", Version: version})
		require.NoError(t, err)
		assert.True(t, r.GetReady())
	}
	r, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "digits_rnn"})
	require.NoError(t, err)
	assert.False(t, r.GetReady())
	_, err = c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "digits_rnn"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), `unknown model "digits_rnn"`)

	n := len(set.labels)
	for _, m := range []struct {
		name string
		eng  []byte
		x    *ir.Tensor
		raw  bool
	}{{"digits_mlp", engs["mlp"], set.flat, false}, {"digits_cnn", engs["cnn"], set.image, true}} {
		want := direct(t, m.eng, m.x, n)
		correct, wantCorrect := 0, 0
		for i := range n {
			x := sample(m.x, i)
			req := &inferencepb.ModelInferRequest{ModelName: m.name, Id: "g",
				Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "input", Datatype: "FP32", Shape: x.Dims}}}
			if m.raw {
				req.RawInputContents = [][]byte{x.Raw}
			} else {
				req.Inputs[0].Contents = &inferencepb.InferTensorContents{Fp32Contents: x.Float32s()}
			}
			resp, err := c.ModelInfer(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, "g", resp.GetId())
			require.Len(t, resp.GetOutputs(), 1)
			assert.Equal(t, "FP32", resp.GetOutputs()[0].GetDatatype())
			assert.Equal(t, []int64{1, 10}, resp.GetOutputs()[0].GetShape())
			got := ir.FromRaw(ir.Float32, []int64{1, 10}, resp.GetRawOutputContents()[0]).Float32s()
			require.Equal(t, want[i], got, "sample %d", i)
			if int64(argmax(got)) == set.labels[i] {
				correct++
			}
			if int64(argmax(want[i])) == set.labels[i] {
				wantCorrect++
			}
		}
		t.Logf("%s over gRPC: accuracy %.4f over %d held-out digits (the engine's: %.4f)", m.name, float64(correct)/float64(n), n, float64(wantCorrect)/float64(n))
		assert.Equal(t, wantCorrect, correct)
	}

	x := sample(set.flat, 0)
	input := func(name, dtype string, shape []int64, contents *inferencepb.InferTensorContents) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{ModelName: "digits_mlp",
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: name, Datatype: dtype, Shape: shape, Contents: contents}}}
	}
	fp32 := &inferencepb.InferTensorContents{Fp32Contents: x.Float32s()}
	rawReq := input("input", "FP32", []int64{1, 64}, nil)
	rawReq.RawInputContents = [][]byte{x.Raw[:100]}
	twoRaw := input("input", "FP32", []int64{1, 64}, nil)
	twoRaw.RawInputContents = [][]byte{x.Raw, x.Raw}
	unknownModel := input("input", "FP32", []int64{1, 64}, fp32)
	unknownModel.ModelName = "digits_rnn"
	unknownOutput := input("input", "FP32", []int64{1, 64}, fp32)
	unknownOutput.Outputs = []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "logits"}}
	for _, c2 := range []struct {
		name string
		req  *inferencepb.ModelInferRequest
		want string
	}{
		{"unknown model", unknownModel, `unknown model "digits_rnn"`},
		{"wrong datatype", input("input", "FP64", []int64{1, 64}, &inferencepb.InferTensorContents{Fp64Contents: make([]float64, 64)}), `input "input": datatype FP64, the model takes FP32`},
		{"wrong shape", input("input", "FP32", []int64{64}, fp32), `input "input": got shape [64], the engine takes float[1,64]`},
		{"wrong contents field", input("input", "FP32", []int64{1, 64}, &inferencepb.InferTensorContents{IntContents: make([]int32, 64)}), `fp32_contents holds 0 elements, shape [1 64] holds 64 (datatype FP32 takes fp32_contents)`},
		{"no data", input("input", "FP32", []int64{1, 64}, nil), `input "input": no data`},
		{"short raw contents", rawReq, `input "input": 100 bytes of data, shape [1 64] of FP32 needs 256`},
		{"raw contents count", twoRaw, `raw_input_contents holds 2 tensors for 1 inputs`},
		{"unknown input", input("pixels", "FP32", []int64{1, 64}, fp32), `model "digits_mlp" has no input "pixels"`},
		{"unknown output", unknownOutput, `model "digits_mlp" has no output "logits"`},
		{"no inputs", &inferencepb.ModelInferRequest{ModelName: "digits_mlp"}, `the request has no inputs`},
	} {
		_, err := c.ModelInfer(ctx, c2.req)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), c2.name)
		assert.Contains(t, status.Convert(err).Message(), c2.want, c2.name)
	}
	_, err = c.ModelInfer(ctx, input("input", "FP32", []int64{1, 64}, fp32))
	assert.NoError(t, err, "the server keeps serving after bad requests")
	metrics := scrape(t, s.url)
	assert.Equal(t, float64(n+9+1), metrics[`kiln_inference_requests_total{model="digits_mlp",protocol="grpc"}`])
	assert.Equal(t, 9.0, metrics[`kiln_inference_failures_total{model="digits_mlp",protocol="grpc",reason="bad_request"}`])
	assert.Equal(t, 1.0, metrics[`kiln_inference_failures_total{model="_unknown",protocol="grpc",reason="bad_request"}`])
}
