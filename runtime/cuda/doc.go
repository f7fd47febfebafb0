// Package cuda runs CUDA engines (cc build --target cuda: PTX, cubins and
// a launch plan, package cudacode) on an NVIDIA GPU through the CUDA
// driver API (gorgonia.org/cu). It is compiled only with the cuda build
// tag, which needs the driver's header (cuda.h) and libcuda to link:
//
//	go build -tags cuda ./cmd/infer
//
// Loading picks the cubin for the device's architecture, else the PTX
// (which the driver compiles for newer GPUs), copies the weights to the
// device once and allocates the arena the code's memory plan asks for.
// Each run copies the inputs into pinned host buffers, then, on one
// stream, copies them to the device, launches the kernels in order and
// copies the outputs back, timing the three phases with events (infer
// bench reports them as trtexec does). Without the tag, Load says how to
// build a runtime that has it.
package cuda
