// Command libkiln is kiln's runtime as a C shared library: `make lib`
// builds it with -buildmode=c-shared into bin/libkiln.so, beside kiln.h,
// the header C, C++ and Python (ctypes) callers include or mirror. It is
// the only cgo in kiln: infer and the runtime stay cgo-free, and this
// package only wraps runtime.Load, Engine.NewContext and Context.Run.
//
// Engines and contexts cross the ABI as small C structs holding a
// runtime/cgo.Handle (C code may not hold Go pointers); the Go values stay
// reachable through the handle until the matching free.
package main

/*
#define KILN_CGO
#include <stdlib.h>
#include "kiln.h"
struct kiln_engine { uintptr_t handle; };
struct kiln_context { uintptr_t handle; };
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
)

func main() {}

// engineHandle is what a kiln_engine stands for. Its engine is unloaded
// when it has been freed and its last context is freed too.
type engineHandle struct {
	eng           *runtime.Engine
	inputs        []binding
	outputs       []binding
	mu            sync.Mutex
	contexts      int
	freed, closed bool
}

type binding struct {
	engine.Binding
	dtype       ir.DType
	bytes       int
	name, dtStr *C.char // C copies, freed with the engine
}

type contextHandle struct {
	ctx    *runtime.Context
	engine *engineHandle
}

// setErr writes msg into the caller's err buffer, cut to errlen bytes with
// its NUL.
func setErr(err *C.char, errlen C.size_t, msg string) {
	if err == nil || errlen == 0 {
		return
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(err)), int(errlen))
	n := copy(buf[:len(buf)-1], msg)
	buf[n] = 0
}

// guard turns a panic into an error message; the functions that return
// no error just return their zero value.
func guard(err *C.char, errlen C.size_t) {
	if r := recover(); r != nil {
		setErr(err, errlen, fmt.Sprintf("kiln: internal error: %v", r))
	}
}

//export kiln_engine_load
func kiln_engine_load(path *C.char, err *C.char, errlen C.size_t) (out *C.kiln_engine) {
	defer guard(err, errlen)
	if path == nil {
		setErr(err, errlen, "kiln_engine_load: path is NULL")
		return nil
	}
	eng, e := runtime.Load(C.GoString(path))
	if e != nil {
		setErr(err, errlen, e.Error())
		return nil
	}
	h := &engineHandle{eng: eng}
	for _, list := range []struct {
		from []engine.Binding
		to   *[]binding
	}{{eng.Inputs(), &h.inputs}, {eng.Outputs(), &h.outputs}} {
		for _, b := range list.from {
			d, e := ir.ParseDType(b.DType)
			if e != nil {
				eng.Close()
				h.freeStrings()
				setErr(err, errlen, fmt.Sprintf("binding %q: %v", b.Name, e))
				return nil
			}
			size := d.Size()
			for _, n := range b.Shape {
				size *= int(n)
			}
			*list.to = append(*list.to, binding{Binding: b, dtype: d, bytes: size, name: C.CString(b.Name), dtStr: C.CString(b.DType)})
		}
	}
	out = (*C.kiln_engine)(C.malloc(C.size_t(unsafe.Sizeof(C.kiln_engine{}))))
	out.handle = C.uintptr_t(cgo.NewHandle(h))
	return out
}

func (h *engineHandle) freeStrings() {
	for _, bs := range [][]binding{h.inputs, h.outputs} {
		for _, b := range bs {
			C.free(unsafe.Pointer(b.name))
			C.free(unsafe.Pointer(b.dtStr))
		}
	}
}

// release unloads the engine once it is freed and has no context left.
func (h *engineHandle) releaseLocked() {
	if h.freed && h.contexts == 0 && !h.closed {
		h.closed = true
		h.eng.Close()
		h.freeStrings()
	}
}

func engineOf(e *C.kiln_engine) *engineHandle {
	if e == nil {
		return nil
	}
	return cgo.Handle(e.handle).Value().(*engineHandle)
}

//export kiln_engine_free
func kiln_engine_free(e *C.kiln_engine) {
	h := engineOf(e)
	if h == nil {
		return
	}
	cgo.Handle(e.handle).Delete()
	C.free(unsafe.Pointer(e))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.freed = true
	h.releaseLocked()
}

func bindingAt(e *C.kiln_engine, output bool, i C.int) *binding {
	h := engineOf(e)
	if h == nil {
		return nil
	}
	bs := h.inputs
	if output {
		bs = h.outputs
	}
	if i < 0 || int(i) >= len(bs) {
		return nil
	}
	return &bs[i]
}

//export kiln_engine_input_count
func kiln_engine_input_count(e *C.kiln_engine) C.int {
	if h := engineOf(e); h != nil {
		return C.int(len(h.inputs))
	}
	return -1
}

//export kiln_engine_output_count
func kiln_engine_output_count(e *C.kiln_engine) C.int {
	if h := engineOf(e); h != nil {
		return C.int(len(h.outputs))
	}
	return -1
}

//export kiln_engine_input_name
func kiln_engine_input_name(e *C.kiln_engine, i C.int) *C.char { return nameOf(bindingAt(e, false, i)) }

//export kiln_engine_output_name
func kiln_engine_output_name(e *C.kiln_engine, i C.int) *C.char { return nameOf(bindingAt(e, true, i)) }

//export kiln_engine_input_dtype
func kiln_engine_input_dtype(e *C.kiln_engine, i C.int) *C.char {
	return dtypeOf(bindingAt(e, false, i))
}

//export kiln_engine_output_dtype
func kiln_engine_output_dtype(e *C.kiln_engine, i C.int) *C.char {
	return dtypeOf(bindingAt(e, true, i))
}

//export kiln_engine_input_rank
func kiln_engine_input_rank(e *C.kiln_engine, i C.int) C.int { return rankOf(bindingAt(e, false, i)) }

//export kiln_engine_output_rank
func kiln_engine_output_rank(e *C.kiln_engine, i C.int) C.int { return rankOf(bindingAt(e, true, i)) }

//export kiln_engine_input_shape
func kiln_engine_input_shape(e *C.kiln_engine, i C.int, dims *C.int64_t, maxdims C.int) C.int {
	return shapeOf(bindingAt(e, false, i), dims, maxdims)
}

//export kiln_engine_output_shape
func kiln_engine_output_shape(e *C.kiln_engine, i C.int, dims *C.int64_t, maxdims C.int) C.int {
	return shapeOf(bindingAt(e, true, i), dims, maxdims)
}

//export kiln_engine_input_bytes
func kiln_engine_input_bytes(e *C.kiln_engine, i C.int) C.size_t {
	return bytesOf(bindingAt(e, false, i))
}

//export kiln_engine_output_bytes
func kiln_engine_output_bytes(e *C.kiln_engine, i C.int) C.size_t {
	return bytesOf(bindingAt(e, true, i))
}

func nameOf(b *binding) *C.char {
	if b == nil {
		return nil
	}
	return b.name
}

func dtypeOf(b *binding) *C.char {
	if b == nil {
		return nil
	}
	return b.dtStr
}

func rankOf(b *binding) C.int {
	if b == nil {
		return -1
	}
	return C.int(len(b.Shape))
}

func shapeOf(b *binding, dims *C.int64_t, maxdims C.int) C.int {
	if b == nil {
		return -1
	}
	if dims != nil && maxdims > 0 {
		out := unsafe.Slice((*int64)(unsafe.Pointer(dims)), int(maxdims))
		copy(out, b.Shape)
	}
	return C.int(len(b.Shape))
}

func bytesOf(b *binding) C.size_t {
	if b == nil {
		return 0
	}
	return C.size_t(b.bytes)
}

//export kiln_context_new
func kiln_context_new(e *C.kiln_engine, threads C.int, err *C.char, errlen C.size_t) (out *C.kiln_context) {
	defer guard(err, errlen)
	h := engineOf(e)
	if h == nil {
		setErr(err, errlen, "kiln_context_new: engine is NULL")
		return nil
	}
	if threads < 0 {
		setErr(err, errlen, fmt.Sprintf("kiln_context_new: threads is %d; want 0 (all cores) or more", threads))
		return nil
	}
	ctx, e2 := h.eng.NewContext(runtime.Options{Threads: int(threads)})
	if e2 != nil {
		setErr(err, errlen, e2.Error())
		return nil
	}
	h.mu.Lock()
	h.contexts++
	h.mu.Unlock()
	out = (*C.kiln_context)(C.malloc(C.size_t(unsafe.Sizeof(C.kiln_context{}))))
	out.handle = C.uintptr_t(cgo.NewHandle(&contextHandle{ctx: ctx, engine: h}))
	return out
}

//export kiln_context_run
func kiln_context_run(c *C.kiln_context, inputs *unsafe.Pointer, outputs *unsafe.Pointer, err *C.char, errlen C.size_t) (status C.int) {
	defer func() {
		if r := recover(); r != nil {
			setErr(err, errlen, fmt.Sprintf("kiln: internal error: %v", r))
			status = 1
		}
	}()
	if c == nil {
		setErr(err, errlen, "kiln_context_run: context is NULL")
		return 1
	}
	h := cgo.Handle(c.handle).Value().(*contextHandle)
	ins, outs := h.engine.inputs, h.engine.outputs
	if len(ins) > 0 && inputs == nil || len(outs) > 0 && outputs == nil {
		setErr(err, errlen, "kiln_context_run: inputs or outputs is NULL")
		return 1
	}
	inPtrs := unsafe.Slice(inputs, len(ins))
	outPtrs := unsafe.Slice(outputs, len(outs))
	feeds := make(map[string]*ir.Tensor, len(ins))
	for i, b := range ins {
		if inPtrs[i] == nil && b.bytes > 0 {
			setErr(err, errlen, fmt.Sprintf("kiln_context_run: input %d (%q) is NULL", i, b.Name))
			return 1
		}
		// The caller's memory, read in place: the engine only reads inputs.
		raw := unsafe.Slice((*byte)(inPtrs[i]), b.bytes)
		feeds[b.Name] = ir.FromRaw(b.dtype, append([]int64(nil), b.Shape...), raw)
	}
	for i, b := range outs {
		if outPtrs[i] == nil && b.bytes > 0 {
			setErr(err, errlen, fmt.Sprintf("kiln_context_run: output %d (%q) is NULL", i, b.Name))
			return 1
		}
	}
	res, e := h.ctx.Run(feeds)
	if e != nil {
		setErr(err, errlen, e.Error())
		return 1
	}
	for i, b := range outs {
		copy(unsafe.Slice((*byte)(outPtrs[i]), b.bytes), res[b.Name].Raw)
	}
	return 0
}

//export kiln_context_free
func kiln_context_free(c *C.kiln_context) {
	if c == nil {
		return
	}
	h := cgo.Handle(c.handle).Value().(*contextHandle)
	cgo.Handle(c.handle).Delete()
	C.free(unsafe.Pointer(c))
	h.engine.mu.Lock()
	defer h.engine.mu.Unlock()
	h.engine.contexts--
	h.engine.releaseLocked()
}
