package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
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
	// Read stderr to its end before Wait, which closes the pipe (os/exec:
	// Wait before the reads finish may cut the last lines off).
	var log string
	select {
	case log = <-rest:
	case <-time.After(30 * time.Second):
		t.Fatal("infer serve did not exit after SIGTERM")
	}
	assert.NoError(t, cmd.Wait(), "infer serve exits 0 after draining")
	assert.Contains(t, log, "shut down")
}

// TestServeFlagBounds: a --max-queue or --instances the server would
// allocate up front at an absurd size is a usage error naming the flag and
// its range, not an out-of-memory crash.
func TestServeFlagBounds(t *testing.T) {
	bin := buildInfer(t)
	repo := t.TempDir()
	for _, c := range []struct{ flag, value, want string }{
		{"--max-queue", "10000000000", "--max-queue 10000000000: want 1 to 65536"},
		{"--max-queue", "65537", "--max-queue 65537: want 1 to 65536"},
		{"--instances", "10000000000", "--instances 10000000000: want 1 to 1024"},
	} {
		r := runInfer(t, bin, "serve", "--model-repository", repo, "--http", "127.0.0.1:0", "--grpc", "", c.flag, c.value)
		assert.Equal(t, 2, r.code, "%s %s: %s", c.flag, c.value, r.stderr)
		assert.Contains(t, r.stderr, c.want)
	}
}

// TestServeSlowClientsUnderFdLimit: the real infer serve with 128 file
// descriptors, 150 clients that send a request and idle (keep-alive) or
// send half a body and stall: once --timeout passes they are cut off and
// a new client is served (without connection timeouts it waits forever).
func TestServeSlowClientsUnderFdLimit(t *testing.T) {
	bin := buildInfer(t)
	// The shell lowers the soft and hard limits, so that Go's start-up
	// raise of the soft limit cannot undo it.
	cmd := exec.Command("sh", "-c", `ulimit -n 128 && exec "$0" "$@"`, bin, "serve", "--model-repository", t.TempDir(),
		"--http", "127.0.0.1:0", "--grpc", "", "--timeout", "1s")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	addr := ""
	for addr == "" && lines.Scan() {
		addr, _ = strings.CutPrefix(lines.Text(), "infer serve: HTTP on ")
	}
	require.NotEmpty(t, addr, "infer serve did not say where it listens")
	go io.Copy(io.Discard, stderr)

	const slow = 150
	for i := range slow {
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.NoError(t, err, "slow client %d", i)
		defer conn.Close()
		request := "GET /v2/health/live HTTP/1.1\r\nHost: kiln\r\n\r\n" // then idle
		if i%2 == 1 {
			request = "POST /v2/models/m/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 1000\r\n\r\n{" // then stall
		}
		_, err = io.WriteString(conn, request)
		require.NoError(t, err)
	}
	client := &http.Client{Timeout: 8 * time.Second}
	t0 := time.Now()
	resp, err := client.Get("http://" + addr + "/v2/health/ready")
	require.NoError(t, err, "a new client behind %d slow ones, under a 128-descriptor limit", slow)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	t.Logf("a new client was served after %v behind %d slow ones", time.Since(t0).Round(time.Millisecond), slow)
}
