package serve

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/ir"
)

// Capture (--capture DIR --capture-rate R) keeps a sample of real request
// inputs for calibration: each admitted request is picked with
// probability R and its inputs handed to a background writer through a
// bounded buffer. A request never waits for it: when the buffer is full
// the sample is dropped and counted (kiln_capture_samples_total{outcome=
// "dropped"}).
//
// The files are ONNX TensorProto .pb files, DIR/MODEL/INPUT/STAMP-N.pb,
// one request's tensor each, the same N for every input of a request
// (MODEL and INPUT are the names as CaptureFolder writes them):
// `cc quantize --calib DIR/MODEL/INPUT` (or --calib INPUT=DIR/MODEL/INPUT
// per input) reads a folder of them as calibration samples, in order.

// captureBuffer is how many sampled requests wait for the writer.
const captureBuffer = 256

type capturer struct {
	dir     string
	rate    float64
	samples chan captured
	done    chan struct{}
	stamp   string // the server's start, so that restarts add files

	mu  sync.Mutex
	seq int64
	m   *metrics
	log func(format string, args ...any)
}

type captured struct {
	model  string
	seq    int64
	inputs map[string]*ir.Tensor
}

func newCapturer(dir string, rate float64, m *metrics, log func(string, ...any)) (*capturer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--capture: %w", err)
	}
	c := &capturer{dir: dir, rate: rate, samples: make(chan captured, captureBuffer), done: make(chan struct{}),
		stamp: time.Now().UTC().Format("20060102T150405"), m: m, log: log}
	go c.write()
	return c, nil
}

// offer samples a request's inputs (which nobody changes once decoded).
func (c *capturer) offer(model string, inputs map[string]*ir.Tensor) {
	if c == nil || rand.Float64() >= c.rate {
		return
	}
	c.mu.Lock()
	c.seq++
	seq := c.seq
	c.mu.Unlock()
	select {
	case c.samples <- captured{model, seq, inputs}:
	default:
		c.m.captured.WithLabelValues("dropped").Inc()
	}
}

func (c *capturer) write() {
	defer close(c.done)
	failed := false
	for s := range c.samples {
		if err := c.writeSample(s); err != nil {
			c.m.captured.WithLabelValues("failed").Inc()
			if !failed {
				c.log("--capture: %v (further write errors are only counted in /metrics)", err)
				failed = true
			}
			continue
		}
		c.m.captured.WithLabelValues("written").Inc()
	}
}

func (c *capturer) writeSample(s captured) error {
	for name, t := range s.inputs {
		dir := filepath.Join(c.dir, CaptureFolder(s.model), CaptureFolder(name))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		data, err := onnx.WriteTensor(t)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%08d.pb", c.stamp, s.seq)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// close stops sampling and waits for the writer to empty the buffer.
func (c *capturer) close() {
	if c == nil {
		return
	}
	close(c.samples)
	<-c.done
}

// CaptureFolder is the folder name --capture keeps a model's or an
// input's samples under. It is one to one, so that two inputs never mix
// their samples (a/b and a_b once shared a folder), and readable: bytes
// outside [A-Za-z0-9._-] are written %XX, '%' itself included, as is a
// leading '.' (no name becomes "." or ".."). The empty name is "%", which
// no other name gives.
func CaptureFolder(name string) string {
	if name == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if c := name[i]; keptInFolderName(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func keptInFolderName(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}
