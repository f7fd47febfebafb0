//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Engine is a CUDA engine loaded on device 0. Runs are serialized: one
// arena, one stream.
type Engine struct {
	Meta   engine.Metadata
	Module *cudacode.Module
	// Device is the GPU's name, Arch its architecture (sm_86), and Code
	// what was loaded for it ("cubin sm_86" or "PTX sm_80, JIT-compiled").
	Device, Arch, Code string

	mu             sync.Mutex
	ctx            cu.CUContext
	mod            cu.Module
	fns            []cu.Function
	weights, arena cu.DevicePtr
	stream         cu.Stream
	events         [4]cu.Event
	pinned         []unsafe.Pointer // one per io slot
}

// Timing is one run's phases, measured with events on the stream.
type Timing struct{ H2D, Compute, D2H time.Duration }

// Available reports whether a CUDA device is present.
func Available() error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("the CUDA driver: %v", err)
	}
	if n == 0 {
		return fmt.Errorf("no CUDA device")
	}
	return nil
}

func archNum(s string) int {
	n, _ := strconv.Atoi(strings.TrimRight(strings.TrimPrefix(s, "sm_"), "abcdefghijklmnopqrstuvwxyz"))
	return n
}

// onContext runs f on an OS thread with the engine's context current.
func (e *Engine) onContext(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cu.SetCurrentContext(e.ctx); err != nil {
		return fmt.Errorf("cuda: making the context current: %v", err)
	}
	return f()
}

// LoadBytes checks an engine file's bytes and loads its code on device 0.
func LoadBytes(buf []byte) (*Engine, error) {
	f, err := engine.Decode(buf)
	if err != nil {
		return nil, err
	}
	mod, err := runtime.ValidateCUDA(f)
	if err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	dev, err := cu.GetDevice(0)
	if err != nil {
		return nil, fmt.Errorf("cuda: device 0: %v", err)
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, fmt.Errorf("cuda: device 0's architecture: %v", err)
	}
	e := &Engine{Meta: f.Meta, Module: mod, Arch: fmt.Sprintf("sm_%d%d", major, minor)}
	e.Device, _ = dev.Name()
	image := ""
	for _, c := range mod.Cubins {
		if c.Arch == e.Arch {
			image, e.Code = string(c.Data), "cubin "+c.Arch
		}
	}
	if image == "" {
		if archNum(mod.PTXArch) > archNum(e.Arch) {
			return nil, fmt.Errorf("cuda: the engine's code is for %s and newer (cubins: %s), this GPU (%s) is %s: rebuild it with `cc build --target cuda --gpu %s`",
				mod.PTXArch, strings.Join(mod.Archs(), ", "), e.Device, e.Arch, e.Arch)
		}
		image, e.Code = mod.PTX, "PTX "+mod.PTXArch+", JIT-compiled"
	}
	if e.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return nil, fmt.Errorf("cuda: creating a context: %v", err)
	}
	err = e.onContext(func() error {
		var err error
		if e.mod, err = cu.LoadData(image); err != nil {
			return fmt.Errorf("cuda: loading the module (%s): %v", e.Code, err)
		}
		for _, k := range mod.Kernels {
			fn, err := e.mod.Function(k.Name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %v", k.Name, err)
			}
			e.fns = append(e.fns, fn)
		}
		if e.weights, err = cu.MemAlloc(max(mod.WeightsBytes, 1)); err != nil {
			return fmt.Errorf("cuda: allocating %d bytes of weights: %v", mod.WeightsBytes, err)
		}
		if len(f.Weights) > 0 {
			if err := cu.MemcpyHtoD(e.weights, unsafe.Pointer(&f.Weights[0]), int64(len(f.Weights))); err != nil {
				return fmt.Errorf("cuda: copying the weights: %v", err)
			}
		}
		if e.arena, err = cu.MemAlloc(max(mod.ArenaBytes, 1)); err != nil {
			return fmt.Errorf("cuda: allocating the %d-byte arena: %v", mod.ArenaBytes, err)
		}
		if e.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return fmt.Errorf("cuda: creating a stream: %v", err)
		}
		for i := range e.events {
			if e.events[i], err = cu.MakeEvent(cu.DefaultEvent); err != nil {
				return fmt.Errorf("cuda: creating an event: %v", err)
			}
		}
		for _, s := range mod.Slots {
			var p unsafe.Pointer
			if r := C.cuMemAllocHost(&p, C.size_t(max(s.Bytes, 1))); r != C.CUDA_SUCCESS {
				return fmt.Errorf("cuda: allocating %d pinned bytes for %q: CUresult %d", s.Bytes, s.Name, int(r))
			}
			e.pinned = append(e.pinned, p)
		}
		return nil
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Run runs one inference: pinned copies of the inputs, host-to-device
// copies, the kernels and the device-to-host copies on the stream.
func (e *Engine) Run(feeds map[string]*ir.Tensor) (map[string]*ir.Tensor, Timing, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	mod := e.Module
	for _, b := range e.Meta.Inputs {
		t := feeds[b.Name]
		s := mod.Slots[b.Index]
		if t == nil {
			return nil, Timing{}, fmt.Errorf("missing input %q", b.Name)
		}
		if t.DType.String() != s.DType || int64(len(t.Raw)) != s.Bytes {
			return nil, Timing{}, fmt.Errorf("input %q: got %s%v, the engine takes %s%v", b.Name, t.DType, t.Dims, s.DType, s.Dims)
		}
		copy(unsafe.Slice((*byte)(e.pinned[b.Index]), s.Bytes), t.Raw)
	}
	var tm Timing
	outs := map[string]*ir.Tensor{}
	err := e.onContext(func() error {
		ev := e.events
		if err := ev[0].Record(e.stream); err != nil {
			return err
		}
		for _, b := range e.Meta.Inputs {
			s := mod.Slots[b.Index]
			if err := cu.MemcpyHtoDAsync(e.arena+cu.DevicePtr(s.Offset), e.pinned[b.Index], s.Bytes, e.stream); err != nil {
				return fmt.Errorf("cuda: copying input %q: %v", s.Name, err)
			}
		}
		if err := ev[1].Record(e.stream); err != nil {
			return err
		}
		params := []unsafe.Pointer{unsafe.Pointer(&e.weights), unsafe.Pointer(&e.arena)}
		for i, k := range mod.Kernels {
			if err := e.fns[i].Launch(k.Grid, 1, 1, k.Block, 1, 1, k.Shared, e.stream, params); err != nil {
				return fmt.Errorf("cuda: launching %s: %v", k.Name, err)
			}
		}
		if err := ev[2].Record(e.stream); err != nil {
			return err
		}
		for _, b := range e.Meta.Outputs {
			s := mod.Slots[b.Index]
			if err := cu.MemcpyDtoHAsync(e.pinned[b.Index], e.arena+cu.DevicePtr(s.Offset), s.Bytes, e.stream); err != nil {
				return fmt.Errorf("cuda: copying output %q: %v", s.Name, err)
			}
		}
		if err := ev[3].Record(e.stream); err != nil {
			return err
		}
		if err := e.stream.Synchronize(); err != nil {
			return fmt.Errorf("cuda: running the kernels: %v", err)
		}
		ms := func(a, b cu.Event) time.Duration {
			v, _ := a.Elapsed(b)
			return time.Duration(v * float64(time.Millisecond))
		}
		tm = Timing{H2D: ms(ev[0], ev[1]), Compute: ms(ev[1], ev[2]), D2H: ms(ev[2], ev[3])}
		return nil
	})
	if err != nil {
		return nil, Timing{}, err
	}
	for _, b := range e.Meta.Outputs {
		s := mod.Slots[b.Index]
		d, err := ir.ParseDType(s.DType)
		if err != nil {
			return nil, Timing{}, err
		}
		t := ir.NewTensor(d, s.Dims...)
		copy(t.Raw, unsafe.Slice((*byte)(e.pinned[b.Index]), s.Bytes))
		outs[b.Name] = t
	}
	return outs, tm, nil
}

// Close frees the device memory, the pinned buffers and the context.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.onContext(func() error {
		for _, p := range e.pinned {
			cu.MemFreeHost(p)
		}
		e.pinned = nil
		if e.arena != 0 {
			cu.MemFree(e.arena)
		}
		if e.weights != 0 {
			cu.MemFree(e.weights)
		}
		e.arena, e.weights = 0, 0
		return e.ctx.Destroy()
	})
}
