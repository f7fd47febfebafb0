package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/serve/inferencepb"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// The engines the tests serve, built once from the bundled models.
var (
	enginesOnce sync.Once
	engines     map[string][]byte
	enginesErr  error
)

func builtEngines(t *testing.T) map[string][]byte {
	t.Helper()
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	enginesOnce.Do(func() {
		engines = map[string][]byte{}
		for name, src := range map[string]string{"mlp": "digits_mlp.onnx", "cnn": "digits_cnn.onnx", "dyn": "digits_cnn_dynamic/model.onnx"} {
			out, err := build.Build(filepath.Join("../../testdata/models", src), build.Options{OptLevel: 2})
			if err != nil {
				enginesErr = err
				return
			}
			engines[name] = out.Engine
		}
	})
	require.NoError(t, enginesErr)
	return engines
}

// repository writes engines as NAME/VERSION/model.kiln.
func repository(t *testing.T, models map[string][]byte) string {
	dir := t.TempDir()
	for name, eng := range models {
		writeVersion(t, dir, name, 1, eng)
	}
	return dir
}

func writeVersion(t *testing.T, dir, name string, version int, eng []byte) {
	path := filepath.Join(dir, name, strconv.Itoa(version), EngineFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, eng, 0o644))
}

// server is a Server running on loopback.
type server struct {
	*Server
	url      string
	grpcAddr string
	grpc     inferencepb.GRPCInferenceServiceClient
	stop     func()
}

func start(t *testing.T, cfg Config) *server {
	t.Helper()
	if cfg.Threads == 0 {
		cfg.Threads = 1
	}
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, Listeners{HTTP: ln, GRPC: gln}) }()
	conn, err := grpc.NewClient(gln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	srv := &server{Server: s, url: "http://" + ln.Addr().String(), grpcAddr: gln.Addr().String(), grpc: inferencepb.NewGRPCInferenceServiceClient(conn)}
	var once sync.Once
	srv.stop = func() {
		once.Do(func() {
			cancel()
			assert.NoError(t, <-done)
		})
	}
	t.Cleanup(srv.stop)
	return srv
}

// digits is the bundled held-out test split: 360 images, flat (for the
// MLP) and 1x8x8 (for the CNN), and their labels.
type digitSet struct {
	flat, image *ir.Tensor
	labels      []int64
}

func digits(t *testing.T) digitSet {
	flat, err := onnx.ReadTensorFile("../../testdata/data/digits_test/x_flat.pb")
	require.NoError(t, err)
	image, err := onnx.ReadTensorFile("../../testdata/data/digits_test/x.pb")
	require.NoError(t, err)
	y, err := onnx.ReadTensorFile("../../testdata/data/digits_test/y.pb")
	require.NoError(t, err)
	return digitSet{flat, image, y.Int64s()}
}

// sample returns image i of x as a batch of one.
func sample(x *ir.Tensor, i int) *ir.Tensor {
	dims := slices.Clone(x.Dims)
	dims[0] = 1
	n := len(x.Raw) / int(x.Dims[0])
	return ir.FromRaw(x.DType, dims, slices.Clone(x.Raw[i*n:(i+1)*n]))
}

func argmax(v []float32) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// direct runs an engine on each sample with the runtime, as infer run
// does: the oracle the server's answers must equal.
func direct(t *testing.T, eng []byte, x *ir.Tensor, n int) [][]float32 {
	e, err := runtime.LoadBytes(eng)
	require.NoError(t, err)
	defer e.Close()
	c, err := e.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	var out [][]float32
	for i := range n {
		res, err := c.Run(map[string]*ir.Tensor{e.Inputs()[0].Name: sample(x, i)})
		require.NoError(t, err)
		out = append(out, slices.Clone(res[e.Outputs()[0].Name].Float32s()))
	}
	return out
}

type inferReply struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	ID           string `json:"id"`
	Outputs      []struct {
		Name     string          `json:"name"`
		Datatype string          `json:"datatype"`
		Shape    []int64         `json:"shape"`
		Data     []float32       `json:"data"`
		Params   json.RawMessage `json:"parameters"`
	} `json:"outputs"`
	Error string `json:"error"`
}

// jsonInfer is a KServe v2 JSON request for one FP32 input.
func jsonInfer(input string, x *ir.Tensor) []byte {
	body, _ := json.Marshal(map[string]any{
		"id":     "req",
		"inputs": []map[string]any{{"name": input, "datatype": "FP32", "shape": x.Dims, "data": x.Float32s()}},
	})
	return body
}

func post(t *testing.T, client *http.Client, url string, body []byte, header map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data, resp.Header
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var v map[string]any
	if len(data) > 0 {
		require.NoError(t, json.Unmarshal(data, &v), "%s", data)
	}
	return resp.StatusCode, v
}

// TestHTTP drives the HTTP/REST protocol with a plain client: health,
// server and model metadata, readiness, and inference on the 360 held-out
// digits, whose answers (and so accuracy) equal the engine's run directly.
func TestHTTP(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"], "digits_cnn": engs["cnn"]}), Instances: 2})
	set := digits(t)

	code, _ := get(t, s.url+"/v2/health/live")
	assert.Equal(t, 200, code)
	code, _ = get(t, s.url+"/v2/health/ready")
	assert.Equal(t, 200, code)
	code, meta := get(t, s.url+"/v2")
	assert.Equal(t, 200, code)
	assert.Equal(t, "kiln", meta["name"])
	assert.Contains(t, meta["extensions"], "binary_tensor_data")

	for _, path := range []string{"/v2/models/digits_cnn", "/v2/models/digits_cnn/versions/1"} {
		code, meta = get(t, s.url+path)
		require.Equal(t, 200, code, "%s: %v", path, meta)
		assert.Equal(t, "digits_cnn", meta["name"])
		assert.Equal(t, []any{"1"}, meta["versions"])
		assert.Equal(t, []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []any{1.0, 1.0, 8.0, 8.0}}}, meta["inputs"])
		assert.Equal(t, []any{map[string]any{"name": "output", "datatype": "FP32", "shape": []any{1.0, 10.0}}}, meta["outputs"])
		code, _ = get(t, s.url+path+"/ready")
		assert.Equal(t, 200, code)
	}
	code, meta = get(t, s.url+"/v2/models/digits_cnn/versions/2/ready")
	assert.Equal(t, 400, code)
	assert.Contains(t, meta["error"], "version 2 is not loaded (version 1 is served)")
	code, meta = get(t, s.url+"/v2/models/digits_rnn")
	assert.Equal(t, 400, code)
	assert.Contains(t, meta["error"], `unknown model "digits_rnn"; the models loaded are "digits_cnn", "digits_mlp"`)

	// Every held-out digit through each model as JSON: the outputs equal
	// the runtime's bit for bit, so the accuracy is the engine's.
	n := len(set.labels)
	for _, m := range []struct {
		name string
		eng  []byte
		x    *ir.Tensor
	}{{"digits_mlp", engs["mlp"], set.flat}, {"digits_cnn", engs["cnn"], set.image}} {
		want := direct(t, m.eng, m.x, n)
		correct, wantCorrect := 0, 0
		for i := range n {
			code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/"+m.name+"/infer", jsonInfer("input", sample(m.x, i)), nil)
			require.Equal(t, 200, code, "%s", body)
			var r inferReply
			require.NoError(t, json.Unmarshal(body, &r))
			require.Len(t, r.Outputs, 1)
			assert.Equal(t, "req", r.ID)
			assert.Equal(t, "1", r.ModelVersion)
			assert.Equal(t, []int64{1, 10}, r.Outputs[0].Shape)
			require.Equal(t, want[i], r.Outputs[0].Data, "sample %d", i)
			if int64(argmax(r.Outputs[0].Data)) == set.labels[i] {
				correct++
			}
			if int64(argmax(want[i])) == set.labels[i] {
				wantCorrect++
			}
		}
		t.Logf("%s: accuracy %.4f over %d held-out digits through the server (the engine's: %.4f)", m.name, float64(correct)/float64(n), n, float64(wantCorrect)/float64(n))
		assert.Equal(t, wantCorrect, correct)
		assert.Greater(t, correct, n*9/10, "a trained digits model is right on most held-out digits")
	}

	// The binary tensor data extension: the input's bytes after the JSON
	// header, the output asked for as bytes.
	x := sample(set.image, 7)
	header, _ := json.Marshal(map[string]any{
		"inputs":  []map[string]any{{"name": "input", "datatype": "FP32", "shape": x.Dims, "parameters": map[string]any{"binary_data_size": len(x.Raw)}}},
		"outputs": []map[string]any{{"name": "output", "parameters": map[string]any{"binary_data": true}}},
	})
	code, body, h := post(t, http.DefaultClient, s.url+"/v2/models/digits_cnn/versions/1/infer", append(header, x.Raw...),
		map[string]string{HeaderLength: strconv.Itoa(len(header)), "Content-Type": "application/octet-stream"})
	require.Equal(t, 200, code, "%s", body)
	hlen, err := strconv.Atoi(h.Get(HeaderLength))
	require.NoError(t, err)
	var r inferReply
	require.NoError(t, json.Unmarshal(body[:hlen], &r))
	assert.JSONEq(t, `{"binary_data_size": 40}`, string(r.Outputs[0].Params))
	got := ir.FromRaw(ir.Float32, []int64{1, 10}, slices.Clone(body[hlen:]))
	assert.Equal(t, direct(t, engs["cnn"], set.image, 8)[7], got.Float32s())
}

// TestHTTPBadRequests: each bad request is answered 400 with a message
// naming the problem, and the server goes on serving.
func TestHTTPBadRequests(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]}), MaxRequestBytes: 64 << 10})
	x := sample(digits(t).flat, 0)
	good := jsonInfer("input", x)
	infer := s.url + "/v2/models/digits_mlp/infer"
	tensor := func(name, dtype string, shape []int64, data any) []byte {
		body, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": name, "datatype": dtype, "shape": shape, "data": data}}})
		return body
	}
	header, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "input", "datatype": "FP32", "shape": []int64{1, 64}, "parameters": map[string]any{"binary_data_size": 256}}}})
	for _, c := range []struct {
		name, url string
		body      []byte
		header    map[string]string
		want      string
	}{
		{"unknown model", s.url + "/v2/models/digits_rnn/infer", good, nil, `unknown model "digits_rnn"; the models loaded are "digits_mlp"`},
		{"unknown version", s.url + "/v2/models/digits_mlp/versions/9/infer", good, nil, `model "digits_mlp": version 9 is not loaded`},
		{"wrong datatype", infer, tensor("input", "FP64", []int64{1, 64}, x.Float32s()), nil, `input "input": datatype FP64, the model takes FP32`},
		{"unknown datatype", infer, tensor("input", "FLOAT", []int64{1, 64}, x.Float32s()), nil, `input "input": unknown datatype "FLOAT"`},
		{"BYTES", infer, tensor("input", "BYTES", []int64{1, 64}, x.Float32s()), nil, `datatype BYTES is not supported`},
		{"wrong shape", infer, tensor("input", "FP32", []int64{1, 63}, x.Float32s()[:63]), nil, `input "input": got shape [1 63], the engine takes float[1,64]`},
		{"huge shape", infer, tensor("input", "FP32", []int64{1 << 40, 64}, []float32{1}), nil, `input "input": got shape [1099511627776 64]`},
		{"too few elements", infer, tensor("input", "FP32", []int64{1, 64}, x.Float32s()[:60]), nil, `input "input": data has 60 elements, shape [1 64] holds 64`},
		{"too many elements", infer, tensor("input", "FP32", []int64{1, 64}, append(x.Float32s(), 1)), nil, `data has more than the 64 elements`},
		{"not a number", infer, tensor("input", "FP32", []int64{1, 64}, append(make([]any, 63), "x")), nil, `input "input": element 0: <nil> is not a number`},
		{"unknown input", infer, tensor("pixels", "FP32", []int64{1, 64}, x.Float32s()), nil, `model "digits_mlp" has no input "pixels"; its inputs are "input"`},
		{"no inputs", infer, []byte(`{"inputs": []}`), nil, `the request has no inputs`},
		{"unknown output", infer, []byte(strings.Replace(string(good), `"id"`, `"outputs":[{"name":"logits"}],"id"`, 1)), nil, `model "digits_mlp" has no output "logits"; its outputs are "output"`},
		{"malformed JSON", infer, good[:len(good)-3], nil, `malformed JSON request: unexpected EOF`},
		{"wrong JSON type", infer, []byte(`{"inputs": {"name": "input"}}`), nil, `malformed JSON request: json: cannot unmarshal object into Go struct field httpRequest.inputs`},
		{"no data", infer, []byte(`{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 64]}]}`), nil, `input "input" has no data`},
		{"no shape", infer, []byte(`{"inputs": [{"name": "input", "datatype": "FP32", "data": [1]}]}`), nil, `input "input" has no shape`},
		{"oversize body", infer, bytes.Repeat([]byte(" "), 65<<10), nil, `the request body is over 65536 bytes (--max-request-bytes)`},
		{"binary size past the body", infer, append(slices.Clone(header), x.Raw[:100]...), map[string]string{HeaderLength: strconv.Itoa(len(header))}, `binary_data_size 256 goes past the 100 bytes`},
		{"binary without the header", infer, append(slices.Clone(header), x.Raw...), nil, `data after the request object`},
		{"bad header length", infer, good, map[string]string{HeaderLength: "-4"}, HeaderLength + `: "-4" is not a length`},
	} {
		code, body, _ := post(t, http.DefaultClient, c.url, c.body, c.header)
		var r inferReply
		require.NoError(t, json.Unmarshal(body, &r), "%s: %s", c.name, body)
		assert.Equal(t, 400, code, c.name)
		assert.Contains(t, r.Error, c.want, c.name)
	}
	code, body, _ := post(t, http.DefaultClient, infer, good, nil)
	assert.Equal(t, 200, code, "%s", body)
	metrics := scrape(t, s.url)
	assert.Equal(t, 1.0, metrics[`kiln_inference_failures_total{model="_unknown",protocol="http",reason="bad_request"}`], "the unknown model's request")
	assert.Equal(t, 20.0, metrics[`kiln_inference_failures_total{model="digits_mlp",protocol="http",reason="bad_request"}`])
	assert.Equal(t, 21.0, metrics[`kiln_inference_requests_total{model="digits_mlp",protocol="http"}`])
	for _, path := range []string{"/v3/models", "/v2/models/digits_mlp/infer"} {
		code, v := get(t, s.url+path)
		assert.Equal(t, 404, code)
		assert.Contains(t, v["error"], "no endpoint GET "+path)
	}
}

// TestReload: loading a model again serves its newest version; the old
// engine is unloaded once its requests are done; a bad engine file is
// refused, naming the problem, and the loaded version keeps serving;
// unload stops serving a model and load brings it back.
func TestReload(t *testing.T) {
	engs := builtEngines(t)
	dir := repository(t, map[string][]byte{"digits_mlp": engs["mlp"]})
	s := start(t, Config{Repository: dir})
	x := sample(digits(t).flat, 3)
	infer := func() inferReply {
		code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", jsonInfer("input", x), nil)
		var r inferReply
		require.NoError(t, json.Unmarshal(body, &r))
		require.Equal(t, 200, code, "%s", body)
		return r
	}
	want := infer().Outputs[0].Data
	load := func(verb string) (int, string) {
		code, body, _ := post(t, http.DefaultClient, s.url+"/v2/repository/models/digits_mlp/"+verb, nil, nil)
		var r inferReply
		require.NoError(t, json.Unmarshal(body, &r))
		return code, r.Error
	}

	s.mu.Lock()
	v1 := s.models["digits_mlp"]
	s.mu.Unlock()
	writeVersion(t, dir, "digits_mlp", 2, engs["mlp"])
	code, msg := load("load")
	require.Equal(t, 200, code, msg)
	r := infer()
	assert.Equal(t, "2", r.ModelVersion)
	assert.Equal(t, want, r.Outputs[0].Data)
	select {
	case <-v1.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("version 1's engine was not unloaded after the reload")
	}

	corrupt := slices.Clone(engs["mlp"])
	corrupt[len(corrupt)-100] ^= 1
	writeVersion(t, dir, "digits_mlp", 3, corrupt)
	code, msg = load("load")
	assert.Equal(t, 400, code)
	assert.Contains(t, msg, `model "digits_mlp" version 3 not loaded:`)
	assert.Contains(t, msg, "checksum mismatch")
	assert.Equal(t, "2", infer().ModelVersion)

	code, msg = load("unload")
	require.Equal(t, 200, code, msg)
	code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", jsonInfer("input", x), nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, string(body), `unknown model \"digits_mlp\": no model is loaded`)
	code, msg = load("unload")
	assert.Equal(t, 400, code)
	assert.Contains(t, msg, `model "digits_mlp" is not loaded`)
	require.NoError(t, os.Remove(filepath.Join(dir, "digits_mlp", "3", EngineFile)))
	code, msg = load("load")
	require.Equal(t, 200, code, msg)
	assert.Equal(t, "2", infer().ModelVersion)

	code, msg = post2(t, s.url+"/v2/repository/models/nothing/load")
	assert.Equal(t, 400, code)
	assert.Contains(t, msg, `model "nothing": no folder`)
}

func post2(t *testing.T, url string) (int, string) {
	code, body, _ := post(t, http.DefaultClient, url, nil, nil)
	var r inferReply
	require.NoError(t, json.Unmarshal(body, &r))
	return code, r.Error
}

// TestLoad is a bounded load test on loopback: 4 clients send 500
// requests each while the model is reloaded in the middle; none fails,
// both versions answer, and every answer is right. It prints the latency
// percentiles (it asserts no timing).
func TestLoad(t *testing.T) {
	engs := builtEngines(t)
	dir := repository(t, map[string][]byte{"digits_cnn": engs["cnn"]})
	s := start(t, Config{Repository: dir, Instances: 2})
	set := digits(t)
	want := direct(t, engs["cnn"], set.image, 50)
	writeVersion(t, dir, "digits_cnn", 2, engs["cnn"])

	const clients, perClient = 4, 500
	var (
		mu        sync.Mutex
		latencies []time.Duration
		versions  = map[string]int{}
		failures  []string
		sent      sync.WaitGroup
		reloaded  = make(chan struct{})
	)
	half := make(chan struct{}, clients*perClient)
	go func() {
		for range clients * perClient / 2 {
			<-half
		}
		code, msg := post2(t, s.url+"/v2/repository/models/digits_cnn/load")
		if code != 200 {
			mu.Lock()
			failures = append(failures, "reload: "+msg)
			mu.Unlock()
		}
		close(reloaded)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for c := range clients {
		sent.Add(1)
		go func() {
			defer sent.Done()
			for i := range perClient {
				k := (c*perClient + i) % len(want)
				body := jsonInfer("input", sample(set.image, k))
				t0 := time.Now()
				resp, err := client.Post(s.url+"/v2/models/digits_cnn/infer", "application/json", bytes.NewReader(body))
				var data []byte
				if err == nil {
					data, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				elapsed := time.Since(t0)
				half <- struct{}{}
				var r inferReply
				if err == nil {
					err = json.Unmarshal(data, &r)
				}
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case resp.StatusCode != 200:
					failures = append(failures, fmt.Sprintf("%d: %s", resp.StatusCode, data))
				case !slices.Equal(r.Outputs[0].Data, want[k]):
					failures = append(failures, fmt.Sprintf("sample %d: wrong answer from version %s", k, r.ModelVersion))
				default:
					versions[r.ModelVersion]++
					latencies = append(latencies, elapsed)
				}
				mu.Unlock()
			}
		}()
	}
	sent.Wait()
	<-reloaded
	assert.Empty(t, failures)
	assert.Equal(t, clients*perClient, versions["1"]+versions["2"])
	assert.Positive(t, versions["1"], "requests before the reload")
	assert.Positive(t, versions["2"], "requests after the reload")
	metrics := scrape(t, s.url)
	assert.Equal(t, float64(clients*perClient), metrics[`kiln_inference_requests_total{model="digits_cnn",protocol="http"}`])
	assert.Equal(t, float64(clients*perClient), metrics[`kiln_inference_request_duration_seconds_count{model="digits_cnn"}`])
	assert.Equal(t, float64(clients*perClient), metrics[`kiln_inference_queue_duration_seconds_count{model="digits_cnn"}`])
	assert.Equal(t, float64(clients*perClient), metrics[`kiln_inference_batch_size_sum{model="digits_cnn"}`], "one row per request")
	for name := range metrics {
		assert.False(t, strings.HasPrefix(name, "kiln_inference_failures_total"), "%s: a request failed", name)
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	t.Logf("%d requests (%d clients x %d, reload in the middle: %d on version 1, %d on version 2), 0 failed; latency p50 %v, p90 %v, p99 %v, max %v",
		len(latencies), clients, perClient, versions["1"], versions["2"], pct(0.5), pct(0.9), pct(0.99), latencies[len(latencies)-1])
}

// TestQueueBounds: with no instance free, a request waits in the queue
// until --timeout (503, naming the timeout), and one beyond --max-queue
// is refused at once (503, naming the full queue).
func TestQueueBounds(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]}), MaxQueue: 1, Timeout: 200 * time.Millisecond})
	s.cfg.Instances = 0 // a model version whose requests nobody takes
	require.NoError(t, s.Load("digits_mlp"))
	body := jsonInfer("input", sample(digits(t).flat, 0))
	first := make(chan []byte)
	go func() {
		code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", body, nil)
		assert.Equal(t, 503, code)
		first <- body
	}()
	for {
		s.mu.Lock()
		queued := len(s.models["digits_mlp"].queue)
		s.mu.Unlock()
		if queued == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	code, data, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", body, nil)
	assert.Equal(t, 503, code)
	assert.Contains(t, string(data), `model \"digits_mlp\": the queue is full (1 requests waiting; --max-queue)`)
	assert.Contains(t, string(<-first), "the request timed out waiting for an instance (--timeout)")

	s.cfg.Instances = 1
	require.NoError(t, s.Load("digits_mlp"))
	code, data, _ = post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", body, nil)
	assert.Equal(t, 200, code, "%s", data)
}

// scrape reads GET /metrics into a map from series (name and labels) to
// value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestGracefulShutdown: a shutdown (SIGTERM in infer serve) waits for the
// requests in flight: three requests queued when it starts are all
// answered 200 once an instance runs them, and only then does Run return,
// with the engine unloaded.
func TestGracefulShutdown(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]})})
	s.cfg.Instances = 0
	require.NoError(t, s.Load("digits_mlp"))
	s.mu.Lock()
	m := s.models["digits_mlp"]
	s.mu.Unlock()
	body := jsonInfer("input", sample(digits(t).flat, 0))
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			code, _, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", body, nil)
			codes <- code
		}()
	}
	for len(m.queue) < 3 {
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() {
		s.stop()
		close(stopped)
	}()
	for s.Ready() {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("Run returned with requests in flight")
	case <-time.After(50 * time.Millisecond):
	}
	c, err := m.eng.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	m.workers.Add(1)
	go s.work(m, c)
	for range 3 {
		assert.Equal(t, 200, <-codes)
	}
	<-stopped
	select {
	case <-m.closed:
	default:
		t.Error("Run returned before the engine was unloaded")
	}
}
