// Package serve is `infer serve`: a model server speaking KServe's Open
// Inference Protocol (v2), the protocol Triton, KServe, Seldon and
// TorchServe share, over HTTP/REST (http.go) and gRPC (grpc.go), for a
// model repository in Triton's layout (repository.go).
//
// The protocol-independent core is here: Server.Infer takes a request
// whose tensors are not yet decoded, checks it against the model's
// bindings (names, datatypes, shapes) before any data is decoded, queues
// it for one of the model's instances and returns the outputs. A reload
// (Server.Load) swaps a model's version while requests run; see model.go.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Config is a server's settings (`infer serve`'s flags).
type Config struct {
	Repository string
	// Threads per inference (0: all cores) and Instances: contexts per
	// model, each running one inference at a time.
	Threads, Instances int
	// MaxQueue bounds the requests waiting per model (1 to MaxQueueLimit;
	// 0: 64); a request beyond it is refused at once (HTTP 503, gRPC
	// UNAVAILABLE).
	MaxQueue int
	// Timeout bounds a request's wait in the queue (0: none), and so the
	// connections' timeouts (run.go's connTimeoutsFor).
	Timeout time.Duration
	// MaxRequestBytes bounds an HTTP request's body.
	MaxRequestBytes int64
	// MaxBatch above 1 batches requests along a dynamic batch dim, waiting
	// up to MaxQueueDelay for a batch to fill.
	MaxBatch      int
	MaxQueueDelay time.Duration
	// CaptureDir, when set, receives a CaptureRate fraction of the
	// requests' inputs as calibration samples (capture.go).
	CaptureDir  string
	CaptureRate float64
	// Limits bound each context's arena and tensors.
	Limits ir.Limits
	// Load loads an engine file (when nil, runtime.LoadWith with copied
	// weights: a model file updated in place must not change, or fault,
	// the version serving requests; infer passes one that also checks
	// signatures).
	Load func(path string) (*runtime.Engine, error)
	// Log receives one line per load, unload and shutdown step (nil:
	// discarded).
	Log io.Writer
}

// Server serves the models of a repository.
type Server struct {
	cfg Config
	log *log.Logger

	mu     sync.Mutex
	models map[string]*model
	// failed holds why each repository model that is not loaded failed
	// its last load (only names with a folder entry in the repository, so
	// that load requests for made-up names cannot grow it).
	failed map[string]string
	// loadMu serializes loads and unloads (each reads the disk and swaps).
	loadMu sync.Mutex

	draining  atomic.Bool
	metrics   *metrics
	capture   *capturer // nil without --capture
	closeOnce sync.Once
}

// Name and Version are what server metadata reports.
const Name = "kiln"

// Version is kiln's version, as server metadata reports it.
var Version = "0.1.0"

// MaxQueueLimit and MaxInstances bound --max-queue and --instances: each
// model allocates its queue's buffer and its contexts up front, so a huge
// value would be an out-of-memory crash rather than a bound.
const (
	MaxQueueLimit = 1 << 16
	MaxInstances  = 1 << 10
)

// New loads the newest version of every model in the repository. A model
// that fails to load is refused, its reason logged and listed in the
// repository index, and the others serve; the start fails only when the
// repository has models and none of them loads.
func New(cfg Config) (*Server, error) {
	if cfg.Instances <= 0 {
		cfg.Instances = 1
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.MaxQueue > MaxQueueLimit {
		return nil, fmt.Errorf("--max-queue %d: want 1 to %d", cfg.MaxQueue, MaxQueueLimit)
	}
	if cfg.Instances > MaxInstances {
		return nil, fmt.Errorf("--instances %d: want 1 to %d", cfg.Instances, MaxInstances)
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 64 << 20
	}
	if cfg.Load == nil {
		cfg.Load = func(path string) (*runtime.Engine, error) {
			return runtime.LoadWith(path, runtime.LoadOptions{CopyWeights: true})
		}
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &Server{cfg: cfg, log: log.New(cfg.Log, "infer serve: ", log.LstdFlags), models: map[string]*model{},
		failed: map[string]string{}, metrics: newMetrics()}
	names, err := modelNames(cfg.Repository)
	if err != nil {
		return nil, fmt.Errorf("--model-repository: %w", err)
	}
	if cfg.CaptureDir != "" {
		if s.capture, err = newCapturer(cfg.CaptureDir, cfg.CaptureRate, s.metrics, s.log.Printf); err != nil {
			return nil, err
		}
	}
	var failures []string
	for _, name := range names {
		if err := s.Load(name); err != nil {
			failures = append(failures, err.Error())
		}
	}
	if len(failures) > 0 && len(failures) == len(names) {
		s.Close()
		return nil, fmt.Errorf("--model-repository %s: no model loads:\n  %s", cfg.Repository, strings.Join(failures, "\n  "))
	}
	return s, nil
}

// Load loads (or reloads) model name's newest version from the
// repository. Requests admitted before the swap finish on the old version;
// later ones go to the new. An engine that fails to load (or whose loading
// panics) is refused with its reason and the version already loaded keeps
// serving; no failure of one model stops the others.
func (s *Server) Load(name string) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	version, path, err := newestVersion(s.cfg.Repository, name)
	if err != nil {
		return s.refuse(name, err.Error())
	}
	m, err := s.openModel(name, version, path)
	if err != nil {
		return s.refuse(name, fmt.Sprintf("model %q version %d not loaded: %v", name, version, err))
	}
	s.mu.Lock()
	delete(s.failed, name)
	old := s.models[name]
	s.models[name] = m
	if old != nil {
		s.retireLocked(old)
	}
	s.mu.Unlock()
	if old != nil {
		s.log.Printf("model %q: version %d loaded from %s (version %d retired; it finishes its requests)", name, version, path, old.version)
	} else {
		s.log.Printf("model %q: version %d loaded from %s", name, version, path)
	}
	return nil
}

// refuse logs a failed load and records its reason for the index and for
// requests to the model, when name is one of the repository's entries.
func (s *Server) refuse(name, reason string) error {
	s.log.Printf("%s", reason)
	if validName(name) && inRepository(s.cfg.Repository, name) {
		s.mu.Lock()
		s.failed[name] = reason
		s.mu.Unlock()
	}
	return &Error{Kind: BadRequest, Msg: reason}
}

// Unload stops serving model name; requests already admitted finish.
func (s *Server) Unload(name string) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	m := s.models[name]
	if m == nil {
		s.mu.Unlock()
		return &Error{Kind: BadRequest, Msg: fmt.Sprintf("model %q is not loaded", name)}
	}
	delete(s.models, name)
	delete(s.failed, name) // unloaded on purpose now, whatever a reload said
	s.retireLocked(m)
	s.mu.Unlock()
	s.log.Printf("model %q: version %d unloaded", name, m.version)
	return nil
}

func (s *Server) retireLocked(m *model) {
	m.retired = true
	if m.refs == 0 {
		m.stop()
	}
}

// acquire finds the model serving name (at version, when given) and takes
// a reference that keeps it running until release.
func (s *Server) acquire(name, version string) (*model, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[name]
	if m == nil {
		return nil, s.unknownModelLocked(name)
	}
	if version != "" && version != m.versionString() {
		if _, err := strconv.ParseInt(version, 10, 64); err != nil {
			return nil, &Error{Kind: BadRequest, Msg: fmt.Sprintf("model %q: %q is not a version (a positive integer)", name, version)}
		}
		return nil, &Error{Kind: BadRequest, Msg: fmt.Sprintf("model %q: version %s is not loaded (version %d is served)", name, version, m.version)}
	}
	m.refs++
	return m, nil
}

func (s *Server) unknownModelLocked(name string) error {
	if reason, ok := s.failed[name]; ok {
		return &Error{Kind: Unavailable, Msg: fmt.Sprintf("model %q is not ready: its load failed: %s", name, reason)}
	}
	var names []string
	for n := range s.models {
		names = append(names, strconv.Quote(n))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return &Error{Kind: BadRequest, Msg: fmt.Sprintf("unknown model %q: no model is loaded", name)}
	}
	return &Error{Kind: BadRequest, Msg: fmt.Sprintf("unknown model %q; the models loaded are %s", name, joinNames(names))}
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

func (s *Server) release(m *model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.refs--
	if m.retired && m.refs == 0 {
		m.stop()
	}
}

// Close retires every model and waits until their queues are drained and
// their engines unloaded.
func (s *Server) Close() {
	s.draining.Store(true)
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.mu.Lock()
	var all []*model
	for name, m := range s.models {
		delete(s.models, name)
		s.retireLocked(m)
		all = append(all, m)
	}
	s.mu.Unlock()
	for _, m := range all {
		<-m.closed
	}
	// No request holds a model now, so none can offer a sample.
	s.closeOnce.Do(s.capture.close)
}

// Ready reports whether the server takes requests: false once it is
// shutting down.
func (s *Server) Ready() bool { return !s.draining.Load() }

// ModelInfo describes a loaded model for the metadata endpoints.
type ModelInfo struct {
	Name     string
	Versions []string
	Inputs   []engine.Binding
	Outputs  []engine.Binding
}

// Model describes model name (at version, when given).
func (s *Server) Model(name, version string) (*ModelInfo, error) {
	m, err := s.acquire(name, version)
	if err != nil {
		return nil, err
	}
	defer s.release(m)
	return &ModelInfo{Name: m.name, Versions: []string{m.versionString()}, Inputs: m.inputs, Outputs: m.outputs}, nil
}

// ModelReady reports whether model name (at version, when given) serves.
func (s *Server) ModelReady(name, version string) error {
	m, err := s.acquire(name, version)
	if err != nil {
		return err
	}
	s.release(m)
	if !s.Ready() {
		return &Error{Kind: Unavailable, Msg: "the server is shutting down"}
	}
	return nil
}

// RepositoryEntry is one model of the repository index.
type RepositoryEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// Index lists the repository's models and whether each is loaded.
func (s *Server) Index() ([]RepositoryEntry, error) {
	names, err := modelNames(s.cfg.Repository)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.models {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []RepositoryEntry
	for _, name := range names {
		if m := s.models[name]; m != nil {
			out = append(out, RepositoryEntry{Name: name, Version: m.versionString(), State: "READY"})
		} else if reason, ok := s.failed[name]; ok {
			out = append(out, RepositoryEntry{Name: name, State: "UNAVAILABLE", Reason: reason})
		} else {
			out = append(out, RepositoryEntry{Name: name, State: "UNAVAILABLE", Reason: "unloaded"})
		}
	}
	return out, nil
}

// ErrorKind classifies a request's failure for the HTTP status and gRPC
// code it is answered with.
type ErrorKind int

const (
	// BadRequest: the request is wrong (HTTP 400, INVALID_ARGUMENT).
	BadRequest ErrorKind = iota
	// Unavailable: the queue is full or the server is shutting down (HTTP
	// 503, UNAVAILABLE).
	Unavailable
	// Timeout: the request waited in the queue past --timeout (HTTP 503,
	// DEADLINE_EXCEEDED).
	Timeout
	// Internal: the engine failed (HTTP 500, INTERNAL).
	Internal
)

// Error is a request's failure: a message naming the problem, and its kind.
type Error struct {
	Kind ErrorKind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &Error{Kind: BadRequest, Msg: fmt.Sprintf(format, args...)}
}

// kindOf is err's kind (Internal for an error of no kind).
func kindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Request is an inference request with its tensors not yet decoded.
type Request struct {
	Model, Version, ID string
	Inputs             []Input
	// Outputs names the outputs wanted, in order (nil: all the model's).
	Outputs []string
}

// Input is one input tensor of a request. Decode reads its data once the
// datatype and shape have been checked against the engine (so a huge
// shape is refused before anything is allocated for it).
type Input struct {
	Name     string
	Datatype string
	Shape    []int64
	Decode   func(d ir.DType, shape []int64) (*ir.Tensor, error)
}

// Response holds the outputs asked for, in order.
type Response struct {
	Model, Version, ID string
	Outputs            []*ir.Tensor
}

// job is a request admitted to a model's queue.
type job struct {
	ctx      context.Context
	inputs   map[string]*ir.Tensor
	rows     int64 // dim 0 of the inputs, for batching
	enqueued time.Time
	done     chan result // buffered: the worker never blocks on it
}

type result struct {
	outputs map[string]*ir.Tensor
	err     error
}

// Infer runs a request on the model it names.
func (s *Server) Infer(ctx context.Context, req *Request) (*Response, error) {
	if !s.Ready() {
		return nil, &Error{Kind: Unavailable, Msg: "the server is shutting down"}
	}
	m, err := s.acquire(req.Model, req.Version)
	if err != nil {
		return nil, err
	}
	defer s.release(m)
	inputs, err := m.check(req)
	if err != nil {
		return nil, err
	}
	s.capture.offer(m.name, inputs)
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	j := &job{ctx: ctx, inputs: inputs, enqueued: time.Now(), done: make(chan result, 1)}
	if len(m.inputs) > 0 {
		if t := inputs[m.inputs[0].Name]; len(t.Dims) > 0 {
			j.rows = t.Dims[0]
		}
	}
	select {
	case m.queue <- j:
	default:
		return nil, &Error{Kind: Unavailable, Msg: fmt.Sprintf("model %q: the queue is full (%d requests waiting; --max-queue)", m.name, cap(m.queue))}
	}
	var r result
	select {
	case r = <-j.done:
	case <-ctx.Done():
		return nil, ctxError(ctx, m)
	}
	if r.err != nil {
		return nil, r.err
	}
	resp := &Response{Model: m.name, Version: m.versionString(), ID: req.ID}
	names := req.Outputs
	if names == nil {
		for _, b := range m.outputs {
			names = append(names, b.Name)
		}
	}
	for _, name := range names {
		resp.Outputs = append(resp.Outputs, r.outputs[name])
	}
	return resp, nil
}

func ctxError(ctx context.Context, m *model) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: Timeout, Msg: fmt.Sprintf("model %q: the request timed out waiting for an instance (--timeout)", m.name)}
	}
	return &Error{Kind: Unavailable, Msg: "the request was cancelled"}
}

// check matches a request's inputs and outputs against the model's
// bindings and decodes the inputs' data.
func (m *model) check(req *Request) (map[string]*ir.Tensor, error) {
	seen := map[string]bool{}
	for _, in := range req.Inputs {
		if seen[in.Name] {
			return nil, badRequest("input %q is given twice", in.Name)
		}
		seen[in.Name] = true
		if m.input(in.Name) == nil {
			return nil, badRequest("model %q has no input %q; its inputs are %s", m.name, in.Name, bindingNames(m.inputs))
		}
	}
	shapes := make([][]int64, len(m.inputs))
	out := make(map[string]*ir.Tensor, len(m.inputs))
	for i, b := range m.inputs {
		switch {
		case seen[b.Name]:
		case m.defaults[b.Name] != nil:
			// An input with a default (cc build --overridable-initializers)
			// takes it, as infer run does; fed here (runs only read their
			// feeds), so that a batch of requests concatenates it like any
			// other input.
			out[b.Name] = m.defaults[b.Name]
			shapes[i] = b.Shape
		default:
			return nil, badRequest("missing input %q (%s %v)", b.Name, Datatype(m.dtypes[b.Name]), metadataShape(b))
		}
	}
	for _, in := range req.Inputs {
		b := m.input(in.Name)
		want := m.dtypes[b.Name]
		d, err := parseDatatype(in.Datatype)
		if err != nil {
			return nil, badRequest("input %q: %v", in.Name, err)
		}
		if d != want {
			return nil, badRequest("input %q: datatype %s, the model takes %s", in.Name, in.Datatype, Datatype(want))
		}
		shapes[slices.IndexFunc(m.inputs, func(x engine.Binding) bool { return x.Name == in.Name })] = in.Shape
	}
	if _, err := engine.Resolve(m.eng.Meta.Symbols, m.inputs, shapes); err != nil {
		return nil, badRequest("%v", err)
	}
	for _, in := range req.Inputs {
		t, err := in.Decode(m.dtypes[in.Name], in.Shape)
		if err != nil {
			return nil, badRequest("input %q: %v", in.Name, err)
		}
		t.Name = in.Name
		out[in.Name] = t
	}
	seenOut := map[string]bool{}
	for _, name := range req.Outputs {
		if m.output(name) == nil {
			return nil, badRequest("model %q has no output %q; its outputs are %s", m.name, name, bindingNames(m.outputs))
		}
		if seenOut[name] {
			return nil, badRequest("output %q is asked for twice", name)
		}
		seenOut[name] = true
	}
	return out, nil
}

func bindingNames(bs []engine.Binding) string {
	var names []string
	for _, b := range bs {
		names = append(names, strconv.Quote(b.Name))
	}
	return joinNames(names)
}

// work runs one instance: it takes jobs from the model's queue (batching
// them when the model batches) until the queue is closed and drained.
func (s *Server) work(m *model, c *runtime.Context) {
	defer m.workers.Done()
	var carry *job
	for {
		j := carry
		carry = nil
		if j == nil {
			var ok bool
			if j, ok = <-m.queue; !ok {
				return
			}
		}
		if j.ctx.Err() != nil {
			j.done <- result{err: ctxError(j.ctx, m)}
			continue
		}
		batch := []*job{j}
		if m.maxBatch > 1 {
			batch, carry = m.gather(batch)
		}
		s.run(m, c, batch)
	}
}

// run runs a batch of jobs (usually one) on a context.
func (s *Server) run(m *model, c *runtime.Context, batch []*job) {
	now := time.Now()
	rows := int64(0)
	for _, j := range batch {
		s.metrics.queue.WithLabelValues(m.name).Observe(now.Sub(j.enqueued).Seconds())
		rows += j.rows
	}
	s.metrics.batch.WithLabelValues(m.name).Observe(float64(len(batch)))
	s.metrics.rows.WithLabelValues(m.name).Observe(float64(rows))
	if len(batch) == 1 {
		out, err := safeRun(c, batch[0].inputs)
		if err != nil {
			err = &Error{Kind: Internal, Msg: fmt.Sprintf("model %q: %v", m.name, err)}
		}
		batch[0].done <- result{outputs: out, err: err}
		return
	}
	out, err := safeRun(c, concat(m.inputs, batch))
	if err != nil {
		for _, j := range batch {
			j.done <- result{err: &Error{Kind: Internal, Msg: fmt.Sprintf("model %q: %v", m.name, err)}}
		}
		return
	}
	for i, outs := range split(out, batch) {
		batch[i].done <- result{outputs: outs}
	}
}

// recovered turns a panic while answering a request into the request's
// error, deferred with the handler's error: the client gets an answer, the
// request is counted, and the server goes on.
func recovered(err *error) {
	if r := recover(); r != nil {
		*err = &Error{Kind: Internal, Msg: fmt.Sprintf("the server failed on this request: %v (a bug in kiln; please report it)", r)}
	}
}

// safeRun is c.Run with a panic turned into the request's error: the
// server answers 500 and goes on serving.
func safeRun(c *runtime.Context, inputs map[string]*ir.Tensor) (out map[string]*ir.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return c.Run(inputs)
}
