package serve

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// model is one loaded version of a model: its engine, one context per
// instance (contexts run one inference at a time), a worker goroutine per
// context and the bounded queue the workers take requests from.
//
// A reload retires the model: the requests that hold a reference (they
// have been admitted, possibly queued or running) finish on it; once the
// last one lets go, the queue is closed, the workers drain it and exit,
// and only then is the engine's code unloaded.
type model struct {
	name    string
	version int64
	path    string
	eng     *runtime.Engine
	inputs  []engine.Binding
	outputs []engine.Binding // the model's outputs, debug outputs left out
	dtypes  map[string]ir.DType
	// defaults are the inputs' default values (Binding.Default), decoded
	// once: a request that leaves such an input out is fed its default.
	defaults map[string]*ir.Tensor

	queue    chan *job
	maxBatch int64 // above 1: requests are batched along dim 0 (batching.go)
	delay    time.Duration
	workers  sync.WaitGroup
	closed   chan struct{} // closed once the engine is unloaded
	loadedAt time.Time

	// Guarded by Server.mu.
	refs    int
	retired bool
}

// openModel loads an engine and makes the model's contexts; an error
// leaves nothing loaded. A panic while loading (a bug, or a hostile
// engine file reaching one) is this model's error: the server and its
// other models go on.
func (s *Server) openModel(name string, version int64, path string) (m *model, err error) {
	var eng *runtime.Engine
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: loading the engine failed unexpectedly: %v (a bug in kiln; please report it with the engine file)", path, r)
		}
		if err != nil && eng != nil {
			eng.Close()
		}
	}()
	if eng, err = s.cfg.Load(path); err != nil {
		return nil, err
	}
	m = &model{name: name, version: version, path: path, eng: eng, inputs: eng.Inputs(),
		dtypes: map[string]ir.DType{}, closed: make(chan struct{}), loadedAt: time.Now(),
		queue: make(chan *job, s.cfg.MaxQueue)}
	m.outputs = slices.DeleteFunc(eng.Outputs(), engine.Binding.IsDebug)
	for _, b := range append(slices.Clone(m.inputs), eng.Outputs()...) {
		d, err := ir.ParseDType(b.DType)
		if err != nil {
			return nil, fmt.Errorf("%s: binding %q: %v", path, b.Name, err)
		}
		m.dtypes[b.Name] = d
		if b.Default != nil {
			if m.defaults == nil {
				m.defaults = map[string]*ir.Tensor{}
			}
			m.defaults[b.Name] = ir.FromRaw(d, b.Shape, b.Default)
			m.defaults[b.Name].Name = b.Name
		}
	}
	m.maxBatch, m.delay = batchLimit(eng, s.cfg.MaxBatch), s.cfg.MaxQueueDelay
	ctxs := make([]*runtime.Context, s.cfg.Instances)
	for i := range ctxs {
		if ctxs[i], err = eng.NewContext(runtime.Options{Threads: s.cfg.Threads, Limits: s.cfg.Limits}); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	for _, c := range ctxs {
		m.workers.Add(1)
		go s.work(m, c)
	}
	return m, nil
}

// stop closes the queue; the workers finish what it holds, then the
// engine is unloaded. Called once, when the last reference of a retired
// model is released.
func (m *model) stop() {
	close(m.queue)
	go func() {
		m.workers.Wait()
		m.eng.Close()
		close(m.closed)
	}()
}

func (m *model) versionString() string { return strconv.FormatInt(m.version, 10) }

// binding finds an input by name.
func (m *model) input(name string) *engine.Binding {
	for i := range m.inputs {
		if m.inputs[i].Name == name {
			return &m.inputs[i]
		}
	}
	return nil
}

func (m *model) output(name string) *engine.Binding {
	for i := range m.outputs {
		if m.outputs[i].Name == name {
			return &m.outputs[i]
		}
	}
	return nil
}

// metadataShape is a binding's shape as the protocol writes it: -1 for a
// dynamic dim.
func metadataShape(b engine.Binding) []int64 {
	shape := slices.Clone(b.Shape)
	for i := range shape {
		if i < len(b.Dims) && b.Dims[i] != "" {
			shape[i] = -1
		}
	}
	return shape
}
