package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
)

// TestServe runs the real `infer serve` on loopback: it serves the digits
// MLP, answers as `infer run` does, and on SIGTERM finishes and exits 0.
func TestServe(t *testing.T) {
	bin := buildInfer(t)
	out, err := exec.Command(bin, "serve").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "--model-repository is required")
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	eng, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	repo := t.TempDir()
	path := filepath.Join(repo, "digits", "1", "model.kiln")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, eng.Engine, 0o644))

	cmd := exec.Command(bin, "serve", "--model-repository", repo, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--threads", "1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	addr, said := "", ""
	for addr == "" && lines.Scan() {
		said += lines.Text() + "\n"
		if a, ok := strings.CutPrefix(lines.Text(), "infer serve: HTTP on "); ok {
			addr = a
		}
	}
	require.NotEmpty(t, addr, "infer serve did not say where it listens; it said:\n%s", said)
	rest := make(chan string)
	go func() {
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
		}
		rest <- b.String()
	}()

	resp, err := http.Get("http://" + addr + "/v2/health/ready")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)

	x, err := onnx.ReadTensorFile("../../testdata/models/digits_mlp/test_data_set_0/input_0.pb")
	require.NoError(t, err)
	body, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "input", "datatype": "FP32", "shape": x.Dims, "data": x.Float32s()}}})
	resp, err = http.Post("http://"+addr+"/v2/models/digits/infer", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "%s", data)
	var r struct {
		Outputs []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	require.NoError(t, json.Unmarshal(data, &r))
	want, err := onnx.ReadTensorFile("../../testdata/models/digits_mlp/test_data_set_0/output_0.pb")
	require.NoError(t, err)
	require.Len(t, r.Outputs, 1)
	assert.InDeltaSlice(t, want.Float32s(), r.Outputs[0].Data, 1e-4)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.NoError(t, err, "infer serve exits 0 after draining")
	case <-time.After(30 * time.Second):
		t.Fatal("infer serve did not exit after SIGTERM")
	}
	assert.Contains(t, <-rest, "shut down")
}
