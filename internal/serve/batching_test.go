package serve

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// TestBatchLimit: only engines whose inputs and outputs lead with one
// dynamic dim batch, up to --max-batch and the dim's range.
func TestBatchLimit(t *testing.T) {
	engs := builtEngines(t)
	for _, c := range []struct {
		eng      string
		maxBatch int
		want     int64
	}{{"dyn", 8, 8}, {"dyn", 100, 32}, {"dyn", 1, 0}, {"cnn", 8, 0}, {"mlp", 8, 0}} {
		e, err := runtime.LoadBytes(engs[c.eng])
		require.NoError(t, err)
		assert.Equal(t, c.want, batchLimit(e, c.maxBatch), "%s --max-batch %d", c.eng, c.maxBatch)
		e.Close()
	}
}

// TestDynamicBatching queues requests of 1 and 2 rows while no instance
// runs, then starts one: it runs them as one inference of 7 rows (the
// metrics say so), and each request gets its own rows of the outputs,
// which equal the engine's run on the request alone.
func TestDynamicBatching(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits": engs["dyn"]}), MaxBatch: 8})
	code, meta := get(t, s.url+"/v2/models/digits")
	require.Equal(t, 200, code)
	assert.Equal(t, []any{map[string]any{"name": "input", "datatype": "FP32", "shape": []any{-1.0, 1.0, 8.0, 8.0}}}, meta["inputs"])

	s.cfg.Instances = 0 // requests wait until the test starts a worker
	require.NoError(t, s.Load("digits"))
	set := digits(t)
	rows := func(first, n int) *ir.Tensor {
		size := len(set.image.Raw) / int(set.image.Dims[0])
		return ir.FromRaw(ir.Float32, []int64{int64(n), 1, 8, 8}, slices.Clone(set.image.Raw[first*size:(first+n)*size]))
	}
	requests := []*ir.Tensor{rows(0, 1), rows(1, 2), rows(3, 1), rows(4, 2), rows(6, 1)}
	replies := make([]chan inferReply, len(requests))
	for i, x := range requests {
		replies[i] = make(chan inferReply, 1)
		go func() {
			code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits/infer", jsonInfer("input", x), nil)
			var r inferReply
			assert.NoError(t, json.Unmarshal(body, &r))
			assert.Equal(t, 200, code, "%s", body)
			replies[i] <- r
		}()
		for { // queued in this order
			s.mu.Lock()
			queued := len(s.models["digits"].queue)
			s.mu.Unlock()
			if queued == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	s.mu.Lock()
	m := s.models["digits"]
	s.mu.Unlock()
	c, err := m.eng.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	m.workers.Add(1)
	go s.work(m, c)

	e, err := runtime.LoadBytes(engs["dyn"])
	require.NoError(t, err)
	defer e.Close()
	alone, err := e.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	for i, x := range requests {
		r := <-replies[i]
		want, err := alone.Run(map[string]*ir.Tensor{"input": x})
		require.NoError(t, err)
		require.Len(t, r.Outputs, 1)
		assert.Equal(t, []int64{x.Dims[0], 10}, r.Outputs[0].Shape)
		assert.InDeltaSlice(t, want["output"].Float32s(), r.Outputs[0].Data, 1e-5, "request %d", i)
	}
	metrics := scrape(t, s.url)
	assert.Equal(t, 1.0, metrics[`kiln_inference_batch_requests_count{model="digits"}`], "one run")
	assert.Equal(t, 5.0, metrics[`kiln_inference_batch_requests_sum{model="digits"}`], "of all five requests")
	assert.Equal(t, 7.0, metrics[`kiln_inference_batch_size_sum{model="digits"}`], "and their 7 rows")
}

// TestCapture: with --capture-rate 1 every request's inputs land in
// DIR/MODEL/INPUT as .pb files, in order, and the calibration data reader
// (cc quantize --calib) reads them back as the samples sent.
func TestCapture(t *testing.T) {
	engs := builtEngines(t)
	dir := t.TempDir()
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]}), CaptureDir: dir, CaptureRate: 1})
	set := digits(t)
	const n = 20
	for i := range n {
		code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/digits_mlp/infer", jsonInfer("input", sample(set.flat, i)), nil)
		require.Equal(t, 200, code, "%s", body)
	}
	s.stop() // drains the writer
	files, err := filepath.Glob(filepath.Join(dir, "digits_mlp", "input", "*.pb"))
	require.NoError(t, err)
	assert.Len(t, files, n)
	first, err := onnx.ReadTensorFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, sample(set.flat, 0).Float32s(), first.Float32s())
	calib, err := dataset.Read([]string{filepath.Join(dir, "digits_mlp", "input")}, []dataset.Input{{Name: "input", DType: ir.Float32, Dims: []int64{1, 64}}}, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, n, calib.Samples)
	for i := range n {
		assert.Equal(t, sample(set.flat, i).Float32s(), calib.Run(i)["input"].Float32s(), "sample %d", i)
	}
}
