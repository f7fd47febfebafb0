package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/internal/serve/inferencepb"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
)

// TestLyingBinaryDataSize: binary_data_size values whose sum wraps int64
// (1 and 2^63-1 once passed the bound check and crashed the handler) are
// a 400 naming the input, counted as a failed request, and the server
// goes on serving on the same connection.
func TestLyingBinaryDataSize(t *testing.T) {
	engs := builtEngines(t)
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]})})
	infer := s.url + "/v2/models/digits_mlp/infer"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	payload := make([]byte, 16)
	for i := range payload {
		payload[i] = byte(rand.IntN(256))
	}
	cases := []struct {
		sizes []int64
		want  string
	}{
		{[]int64{1, math.MaxInt64}, `input "in1": binary_data_size 9223372036854775807 goes past the 16 bytes of binary data after the JSON header (15 left`},
		{[]int64{math.MaxInt64, math.MaxInt64}, `input "in0": binary_data_size 9223372036854775807 goes past`},
		{[]int64{16, 1}, `input "in1": binary_data_size 1 goes past the 16 bytes of binary data after the JSON header (0 left`},
		{[]int64{8, -1}, `input "in1": binary_data_size -1 goes past`},
		{[]int64{math.MinInt64, 1}, `input "in0": binary_data_size -9223372036854775808 goes past`},
		{[]int64{4, 4}, `16 bytes of binary data follow the JSON header, the inputs' binary_data_size add up to 8`},
	}
	for _, c := range cases {
		var inputs []map[string]any
		for i, size := range c.sizes {
			inputs = append(inputs, map[string]any{"name": "in" + strconv.Itoa(i), "datatype": "UINT8", "shape": []int64{1},
				"parameters": map[string]any{"binary_data_size": size}})
		}
		header, _ := json.Marshal(map[string]any{"inputs": inputs})
		code, body, _ := post(t, client, infer, append(header, payload...), map[string]string{HeaderLength: strconv.Itoa(len(header))})
		var r inferReply
		require.NoError(t, json.Unmarshal(body, &r), "%v: %s", c.sizes, body)
		assert.Equal(t, 400, code, "%v", c.sizes)
		assert.Contains(t, r.Error, c.want, "%v", c.sizes)
	}
	code, body, _ := post(t, client, infer, jsonInfer("input", sample(digits(t).flat, 0)), nil)
	assert.Equal(t, 200, code, "%s", body)
	metrics := scrape(t, s.url)
	assert.Equal(t, float64(len(cases)), metrics[`kiln_inference_failures_total{model="digits_mlp",protocol="http",reason="bad_request"}`])
	assert.Equal(t, float64(len(cases)+1), metrics[`kiln_inference_requests_total{model="digits_mlp",protocol="http"}`])
}

// TestRawTensorSizeOverflow: a shape whose byte count overflows int64 is
// refused, not wrapped into a small size that matches the data.
func TestRawTensorSizeOverflow(t *testing.T) {
	raw := make([]byte, 4)
	for _, shape := range [][]int64{{1<<61 + 1, 4}, {1 << 62, 1 << 62}, {math.MaxInt64, 2}} {
		_, err := rawTensor(raw, ir.Float32, shape)
		require.Error(t, err, "%v", shape)
		assert.Contains(t, err.Error(), "is too large", "%v", shape)
	}
}

// TestConnectionTimeouts: a client that sends half a header, half a body,
// or nothing after its request (keep-alive), or opens a gRPC connection
// and never speaks, is disconnected once the timeout derived from
// --timeout passes; none holds its connection (and file descriptor) on.
func TestConnectionTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := start(t, Config{Repository: t.TempDir(), Timeout: timeout})
	httpAddr := strings.TrimPrefix(s.url, "http://")
	for _, c := range []struct {
		name, addr, send string
		answer           string // what the server writes before it hangs up
	}{
		{"half a header", httpAddr, "GET /v2/health/live HTTP/1.1\r\nHost: kiln\r\n", ""},
		{"half a body", httpAddr, "POST /v2/models/m/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 1000\r\n\r\n{\"inputs\"", "HTTP/1.1 400"},
		{"idle keep-alive", httpAddr, "GET /v2/health/live HTTP/1.1\r\nHost: kiln\r\n\r\n", "HTTP/1.1 200"},
		{"gRPC, no handshake", s.grpcAddr, "", ""},
	} {
		conn, err := net.Dial("tcp", c.addr)
		require.NoError(t, err)
		t0 := time.Now()
		_, err = io.WriteString(conn, c.send)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		got, err := io.ReadAll(conn)
		conn.Close()
		require.NoError(t, err, "%s: the server still held the connection after %v", c.name, time.Since(t0))
		assert.GreaterOrEqual(t, time.Since(t0), timeout*3/4, "%s: closed before the timeout", c.name)
		assert.True(t, strings.HasPrefix(string(got), c.answer), "%s: %q", c.name, got)
		if c.name == "half a body" {
			assert.Contains(t, string(got), "reading the request body")
		}
	}

	// A gRPC client that handshakes, answers pings and makes no call.
	conn, err := net.Dial("tcp", s.grpcAddr)
	require.NoError(t, err)
	defer conn.Close()
	t0 := time.Now()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	require.NoError(t, idleHTTP2Client(conn), "gRPC, idle after the handshake: the server still held the connection after %v", time.Since(t0))
	assert.GreaterOrEqual(t, time.Since(t0), timeout*3/4, "gRPC: closed before the idle timeout")
}

// idleHTTP2Client speaks just enough HTTP/2 to be a live client with no
// call (the preface, SETTINGS, ping acks) until the server hangs up.
func idleHTTP2Client(conn net.Conn) error {
	const settings, ping, ack = 4, 6, 1
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		return err
	}
	for {
		var header [9]byte
		if _, err := io.ReadFull(conn, header[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return nil
			}
			return err
		}
		payload := make([]byte, int(header[0])<<16|int(header[1])<<8|int(header[2]))
		if _, err := io.ReadFull(conn, payload); err != nil {
			return nil
		}
		var reply []byte
		switch kind, flags := header[3], header[4]; {
		case kind == settings && flags&ack == 0:
			reply = []byte{0, 0, 0, settings, ack, 0, 0, 0, 0}
		case kind == ping && flags&ack == 0:
			reply = append([]byte{0, 0, 8, ping, ack, 0, 0, 0, 0}, payload...)
		}
		if reply != nil {
			if _, err := conn.Write(reply); err != nil {
				return nil // closed while answering
			}
		}
	}
}

// TestConnTimeoutsFollowTimeout: the connection timeouts are --timeout's,
// and --timeout 0 still bounds reading a request and idling.
func TestConnTimeoutsFollowTimeout(t *testing.T) {
	assert.Equal(t, connTimeouts{Read: 2 * time.Second, Write: 6 * time.Second, Idle: 2 * time.Second, Age: 20 * time.Second},
		connTimeoutsFor(2*time.Second))
	assert.Equal(t, connTimeouts{Read: DefaultTimeout, Idle: DefaultTimeout}, connTimeoutsFor(0))
	hs := (&Server{cfg: Config{Timeout: time.Second}, metrics: newMetrics()}).httpServer()
	assert.Equal(t, []time.Duration{time.Second, time.Second, 3 * time.Second, time.Second},
		[]time.Duration{hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout, hs.IdleTimeout})
}

// TestQueueAndInstanceBounds: a --max-queue or --instances that would be
// allocated up front at an absurd size is refused, naming the flag and
// the range, instead of crashing out of memory.
func TestQueueAndInstanceBounds(t *testing.T) {
	_, err := New(Config{Repository: t.TempDir(), MaxQueue: 10000000000})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--max-queue 10000000000: want 1 to 65536")
	_, err = New(Config{Repository: t.TempDir(), Instances: 1 << 40})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--instances 1099511627776: want 1 to 1024")
	s, err := New(Config{Repository: t.TempDir(), MaxQueue: MaxQueueLimit, Instances: MaxInstances})
	require.NoError(t, err)
	s.Close()
}

// TestCaptureFolders: input names that once shared a folder (a/b, a_b)
// each get their own, the mapping is one to one on names that look like
// its escapes, and the folders stay readable.
func TestCaptureFolders(t *testing.T) {
	names := []string{"a/b", "a_b", "a%2Fb", "a%b", "a\\b", "a:b", "a b", ".", "..", ".x", "%2Ex", "_x", "", "%", "é", "input.1", "x\x00"}
	seen := map[string]string{}
	for _, name := range names {
		f := CaptureFolder(name)
		if prev, ok := seen[f]; ok {
			t.Errorf("%q and %q both map to %q", prev, name, f)
		}
		seen[f] = name
		assert.NotContains(t, f, "/", name)
		assert.NotContains(t, f, "\\", name)
		assert.NotContains(t, []string{".", ".."}, f, name)
		assert.NotEqual(t, byte('.'), f[0], name)
	}
	assert.Equal(t, "a%2Fb", CaptureFolder("a/b"))
	assert.Equal(t, "a_b", CaptureFolder("a_b"))
	assert.Equal(t, "a%252Fb", CaptureFolder("a%2Fb"))
	assert.Equal(t, "input.1", CaptureFolder("input.1"))
	assert.Equal(t, "%2E.", CaptureFolder(".."))
	// Random names: distinct names, distinct folders.
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab/_%2F.\\-")
	for range 2000 {
		name := make([]byte, 1+r.IntN(6))
		for i := range name {
			name[i] = alphabet[r.IntN(len(alphabet))]
		}
		f := CaptureFolder(string(name))
		if prev, ok := seen[f]; ok && prev != string(name) {
			t.Fatalf("%q and %q both map to %q", prev, name, f)
		}
		seen[f] = string(name)
	}
}

// TestCaptureReadBack: samples of inputs a/b, a_b and a%2Fb are written to
// three folders, and the calibration reader (cc quantize --calib
// NAME=DIR/MODEL/INPUT) gets each input's own samples back, unmixed.
func TestCaptureReadBack(t *testing.T) {
	dir := t.TempDir()
	c, err := newCapturer(dir, 1, newMetrics(), t.Logf)
	require.NoError(t, err)
	names := []string{"a/b", "a_b", "a%2Fb"}
	r := rand.New(rand.NewPCG(5, 6))
	var sent []map[string]*ir.Tensor
	for range 3 {
		inputs := map[string]*ir.Tensor{}
		for _, name := range names {
			x := ir.NewTensor(ir.Float32, 1, 4)
			for i := range 4 {
				putFloat(x, i, r.NormFloat64())
			}
			inputs[name] = x
		}
		sent = append(sent, inputs)
		c.offer("m/odel", inputs)
	}
	c.close()
	var specs []string
	var inputs []dataset.Input
	for _, name := range names {
		folder := filepath.Join(dir, CaptureFolder("m/odel"), CaptureFolder(name))
		files, err := os.ReadDir(folder)
		require.NoError(t, err)
		assert.Len(t, files, 3, "%s holds the samples of %q only", folder, name)
		specs = append(specs, name+"="+folder)
		inputs = append(inputs, dataset.Input{Name: name, DType: ir.Float32, Dims: []int64{1, 4}})
	}
	set, err := dataset.Read(specs, inputs, ir.Limits{})
	require.NoError(t, err)
	require.Equal(t, 3, set.Runs())
	for i := range 3 {
		for _, name := range names {
			assert.Equal(t, sent[i][name].Raw, set.Run(i)[name].Raw, "sample %d of %q", i, name)
		}
	}
}

// TestSymlinkOutOfRepository: a model folder, version folder or engine
// that is a symbolic link out of the repository is refused, at start and
// when loaded by name, with a message naming where it leads; so is an
// engine that is not a regular file (a FIFO would hang the loader). Links
// that stay inside the repository are served.
func TestSymlinkOutOfRepository(t *testing.T) {
	engs := builtEngines(t)
	dir := repository(t, map[string][]byte{"digits_mlp": engs["mlp"]})
	outside := t.TempDir()
	writeVersion(t, outside, "elsewhere", 1, engs["mlp"])
	require.NoError(t, os.Symlink(filepath.Join(outside, "elsewhere"), filepath.Join(dir, "out_model")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "out_version"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "elsewhere", "1"), filepath.Join(dir, "out_version", "1")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "out_engine", "1"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "elsewhere", "1", EngineFile), filepath.Join(dir, "out_engine", "1", EngineFile)))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "fifo", "1"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo", "1", EngineFile), 0o644))
	require.NoError(t, os.Symlink("digits_mlp", filepath.Join(dir, "alias")))

	s := start(t, Config{Repository: dir})
	refused := map[string]string{
		"out_model":   `model "out_model": ` + filepath.Join(dir, "out_model") + ` leads to ` + filepath.Join(outside, "elsewhere") + `, outside the repository`,
		"out_version": `model "out_version" version 1: ` + filepath.Join(dir, "out_version", "1", EngineFile) + ` leads to`,
		"out_engine":  `model "out_engine" version 1: ` + filepath.Join(dir, "out_engine", "1", EngineFile) + ` leads to`,
		"fifo":        `is not a regular file`,
	}
	index, err := s.Index()
	require.NoError(t, err)
	states := map[string]RepositoryEntry{}
	for _, e := range index {
		states[e.Name] = e
	}
	assert.Equal(t, "READY", states["digits_mlp"].State)
	assert.Equal(t, "READY", states["alias"].State, "a link inside the repository is served")
	for name, want := range refused {
		assert.Equal(t, "UNAVAILABLE", states[name].State, name)
		assert.Contains(t, states[name].Reason, want, name)
		code, msg := post2(t, s.url+"/v2/repository/models/"+name+"/load")
		assert.Equal(t, 400, code, name)
		assert.Contains(t, msg, want, name)
		code, v := get(t, s.url+"/v2/models/"+name+"/ready")
		assert.Equal(t, 503, code, name)
		assert.Contains(t, v["error"], want, name)
	}
	code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/alias/infer", jsonInfer("input", sample(digits(t).flat, 1)), nil)
	assert.Equal(t, 200, code, "%s", body)
}

// TestBadModelBesideGood: a corrupt engine, a file that is no engine and
// an engine whose loading panics are each refused with their reason,
// while the good model beside them serves; the load API answers the
// reason; a repository where nothing loads does not start, naming each.
func TestBadModelBesideGood(t *testing.T) {
	engs := builtEngines(t)
	corrupt := slices.Clone(engs["mlp"])
	corrupt[len(corrupt)-100] ^= 1
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rand.IntN(256))
	}
	dir := repository(t, map[string][]byte{"good": engs["cnn"], "corrupt": corrupt, "garbage": garbage, "panics": engs["mlp"]})
	panicking := func(path string) (*runtime.Engine, error) {
		if strings.Contains(path, "panics") {
			panic("a loader bug")
		}
		return runtime.LoadWith(path, runtime.LoadOptions{CopyWeights: true})
	}
	var log strings.Builder
	s := start(t, Config{Repository: dir, Load: panicking, Log: &log})
	x := sample(digits(t).image, 2)
	code, body, _ := post(t, http.DefaultClient, s.url+"/v2/models/good/infer", jsonInfer("input", x), nil)
	require.Equal(t, 200, code, "%s", body)

	reasons := map[string]string{
		"corrupt": "checksum mismatch",
		"garbage": `model "garbage" version 1 not loaded: `,
		"panics":  "loading the engine failed unexpectedly: a loader bug",
	}
	index, err := s.Index()
	require.NoError(t, err)
	for _, e := range index {
		if e.Name == "good" {
			assert.Equal(t, "READY", e.State)
			continue
		}
		assert.Equal(t, "UNAVAILABLE", e.State, e.Name)
		assert.Contains(t, e.Reason, reasons[e.Name], e.Name)
	}
	for name, want := range reasons {
		assert.Contains(t, log.String(), want, "the start logs why %s was refused", name)
		code, v := get(t, s.url+"/v2/models/"+name+"/ready")
		assert.Equal(t, 503, code, name)
		assert.Contains(t, v["error"], `model "`+name+`" is not ready: its load failed: `, name)
		assert.Contains(t, v["error"], want, name)
		code, msg := post2(t, s.url+"/v2/repository/models/"+name+"/load")
		assert.Equal(t, 400, code, name)
		assert.Contains(t, msg, want, name)
	}
	ready, err := s.grpcModelReady("corrupt")
	require.NoError(t, err)
	assert.False(t, ready)

	// Fixed on disk, the model loads and serves.
	writeVersion(t, dir, "corrupt", 2, engs["cnn"])
	code, msg := post2(t, s.url+"/v2/repository/models/corrupt/load")
	require.Equal(t, 200, code, msg)
	code, body, _ = post(t, http.DefaultClient, s.url+"/v2/models/corrupt/infer", jsonInfer("input", x), nil)
	assert.Equal(t, 200, code, "%s", body)

	// Made-up names are refused without being remembered.
	code, _ = post2(t, s.url+"/v2/repository/models/no_such_model/load")
	assert.Equal(t, 400, code)
	index, err = s.Index()
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(index, func(e RepositoryEntry) bool { return e.Name == "no_such_model" }))

	_, err = New(Config{Repository: repository(t, map[string][]byte{"corrupt": corrupt, "garbage": garbage})})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no model loads")
	assert.Contains(t, err.Error(), "checksum mismatch")
	assert.Contains(t, err.Error(), `model "garbage"`)
}

// TestSlowClientsDoNotStarveNewOnes: with connections capped (as a small
// file descriptor limit caps them), slow and idle clients filling every
// slot are disconnected after the timeout and a new client is served.
func TestSlowClientsDoNotStarveNewOnes(t *testing.T) {
	const slots, slow = 16, 24
	s, err := New(Config{Repository: t.TempDir(), Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := s.httpServer()
	go hs.Serve(&cappedListener{Listener: ln, slots: make(chan struct{}, slots)})
	t.Cleanup(func() { hs.Close(); s.Close() })

	for i := range slow {
		conn, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		request := "GET /v2/health/live HTTP/1.1\r\nHost: kiln\r\n\r\n" // then idle
		if i%2 == 1 {
			request = "POST /v2/models/m/infer HTTP/1.1\r\nHost: kiln\r\nContent-Length: 100\r\n\r\n{" // then stall
		}
		_, err = io.WriteString(conn, request)
		require.NoError(t, err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	t0 := time.Now()
	resp, err := client.Get("http://" + ln.Addr().String() + "/v2/health/live")
	require.NoError(t, err, "a new client after %d slow ones", slow)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	t.Logf("served after %v behind %d slow clients in %d connection slots", time.Since(t0).Round(time.Millisecond), slow, slots)
}

// cappedListener accepts at most cap(slots) connections at a time, as a
// process out of file descriptors does.
type cappedListener struct {
	net.Listener
	slots chan struct{}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

type slotConn struct {
	net.Conn
	free func()
	once sync.Once
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}

// grpcModelReady asks ModelReady over gRPC.
func (s *server) grpcModelReady(name string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.grpc.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: name})
	if err != nil {
		return false, err
	}
	return resp.GetReady(), nil
}

// TestSlowLoadIsAnswered: a load that takes longer than the write timeout
// (sized for inference) is still answered.
func TestSlowLoadIsAnswered(t *testing.T) {
	engs := builtEngines(t)
	const timeout = 100 * time.Millisecond
	slow := func(path string) (*runtime.Engine, error) {
		time.Sleep(5 * timeout) // past the write timeout, 3 × timeout
		return runtime.LoadWith(path, runtime.LoadOptions{CopyWeights: true})
	}
	s := start(t, Config{Repository: repository(t, map[string][]byte{"digits_mlp": engs["mlp"]}), Timeout: timeout, Load: slow})
	code, msg := post2(t, s.url+"/v2/repository/models/digits_mlp/load")
	assert.Equal(t, 200, code, msg)
}
