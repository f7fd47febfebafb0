// Package cudacode is the code section of a CUDA engine: the PTX (for the
// lowest GPU architecture the engine was built for; newer GPUs run it
// through the driver's JIT), a cubin per architecture where ptxas made
// one, and the launch plan (each kernel's name and grid, in order; where
// the inputs and outputs lie in the device arena). It is plain data, read
// without the CUDA driver: cc inspect and the runtime's checks use it, and
// runtime/cuda (behind the cuda build tag) runs it.
package cudacode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Triple is the target triple CUDA engines hold code for (the section
// "code/nvptx64-nvidia-cuda").
const Triple = "nvptx64-nvidia-cuda"

// Version is the layout of Module this package writes and reads.
const Version = 1

// MaxBytes bounds the section a reader decodes.
const MaxBytes = 1 << 30

// Module is a CUDA engine's code.
type Module struct {
	Version int `json:"version"`
	// PTXArch is the architecture the PTX targets (sm_80: the lowest of
	// the build's --gpu).
	PTXArch string  `json:"ptx_arch"`
	PTX     string  `json:"ptx"`
	Cubins  []Cubin `json:"cubins,omitempty"`
	// WeightsBytes is the weights the kernels read (copied to the device
	// once at load); ArenaBytes the device arena, the inputs and outputs
	// included at their slots' offsets.
	WeightsBytes int64 `json:"weights_bytes"`
	ArenaBytes   int64 `json:"arena_bytes"`
	// Kernels are launched in order on one stream, each with the weights'
	// and the arena's device addresses as its two parameters.
	Kernels []Launch `json:"kernels"`
	// Slots are the engine's inputs then outputs, in binding order.
	Slots []Slot `json:"io"`
}

// Cubin is the SASS ptxas made for one architecture.
type Cubin struct {
	Arch string `json:"arch"`
	Data []byte `json:"data"`
}

// Launch is one kernel launch: a grid of Grid blocks of Block threads.
type Launch struct {
	Name  string `json:"name"`
	Grid  int    `json:"grid"`
	Block int    `json:"block"`
	// Shared is the dynamic shared memory per block, in bytes.
	Shared int `json:"shared,omitempty"`
}

// Slot places an input or output in the arena.
type Slot struct {
	Name   string  `json:"name"`
	Output bool    `json:"output"`
	DType  string  `json:"dtype"`
	Dims   []int64 `json:"dims"`
	Bytes  int64   `json:"bytes"`
	Offset int64   `json:"offset"`
}

// Marshal encodes m as the section's bytes.
func (m *Module) Marshal() ([]byte, error) { return json.Marshal(m) }

var (
	archRE   = regexp.MustCompile(`^sm_[0-9]{2,3}[a-z]?$`)
	kernelRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidArch reports whether s names a GPU architecture (sm_80, sm_90a).
func ValidArch(s string) bool { return archRE.MatchString(s) }

// Parse decodes and checks a section: the version, architectures, kernel
// names and launch sizes, and slots inside the arena.
func Parse(data []byte) (*Module, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("the CUDA code is %d bytes, more than %d", len(data), MaxBytes)
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("the CUDA code is not JSON: %v", err)
	}
	if v.Version != Version {
		return nil, fmt.Errorf("the CUDA code is version %d, this kiln reads %d (rebuild the engine with this kiln)", v.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Module
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the CUDA code: %v", err)
	}
	if !ValidArch(m.PTXArch) || !strings.Contains(m.PTX, ".target "+m.PTXArch) {
		return nil, fmt.Errorf("the CUDA code's PTX is not for %q", m.PTXArch)
	}
	seen := map[string]bool{}
	for _, c := range m.Cubins {
		if !ValidArch(c.Arch) || seen[c.Arch] || len(c.Data) < 4 || string(c.Data[:4]) != "\x7fELF" {
			return nil, fmt.Errorf("the CUDA code's cubin %q is not a cubin, or repeated", c.Arch)
		}
		seen[c.Arch] = true
	}
	if m.WeightsBytes < 0 || m.ArenaBytes < 0 {
		return nil, fmt.Errorf("the CUDA code has a negative size")
	}
	if len(m.Kernels) == 0 {
		return nil, fmt.Errorf("the CUDA code has no kernels")
	}
	for i, k := range m.Kernels {
		if !kernelRE.MatchString(k.Name) || k.Grid < 1 || k.Grid > 1<<31-1 || k.Block < 1 || k.Block > 1024 || k.Shared < 0 || k.Shared > 228<<10 {
			return nil, fmt.Errorf("the CUDA code's kernel %d (%q) has a bad launch: grid %d, block %d, shared %d", i, k.Name, k.Grid, k.Block, k.Shared)
		}
		if !strings.Contains(m.PTX, ".entry "+k.Name+"(") {
			return nil, fmt.Errorf("the CUDA code's PTX has no kernel %q", k.Name)
		}
	}
	for i, s := range m.Slots {
		if s.Bytes < 0 || s.Offset < 0 || s.Offset > m.ArenaBytes || s.Bytes > m.ArenaBytes-s.Offset {
			return nil, fmt.Errorf("the CUDA code's io slot %d (%q) lies outside the %d-byte arena", i, s.Name, m.ArenaBytes)
		}
	}
	return &m, nil
}

// Archs lists the cubins' architectures.
func (m *Module) Archs() []string {
	out := make([]string, len(m.Cubins))
	for i, c := range m.Cubins {
		out[i] = c.Arch
	}
	return out
}
