package runtime

import (
	"debug/elf"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/cudacode"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// ErrInconsistent is an engine whose checksums hold but whose metadata or
// sections disagree with what its code states it reads and writes: such an
// engine is refused, never run.
var ErrInconsistent = errors.New("inconsistent engine")

// Validate checks a decoded engine against each of its code sections' ABI
// records (cpuabi.ABISymbol), without loading any code: the weights section's
// size, the arena size, the kernel step count, the CPU features, and every
// io slot (input or output, dtype, shape, bytes). It is what Load checks
// after the file's checksums and before its code is loaded.
func Validate(e *engine.Engine) error {
	ins, err := bindings(e.Meta.Inputs, false)
	if err != nil {
		return err
	}
	outs, err := bindings(e.Meta.Outputs, true)
	if err != nil {
		return err
	}
	triples := make([]string, 0, len(e.Code))
	for t := range e.Code {
		triples = append(triples, t)
	}
	slices.Sort(triples)
	for _, t := range triples {
		if t == cudacode.Triple {
			if _, err := checkCUDA(e, ins, outs); err != nil {
				return err
			}
			continue
		}
		if _, err := checkCode(e, t, ins, outs); err != nil {
			return err
		}
	}
	return nil
}

// ValidateCUDA checks a CUDA engine against its code section and returns
// the code (runtime/cuda runs it).
func ValidateCUDA(e *engine.Engine) (*cudacode.Module, error) {
	ins, err := bindings(e.Meta.Inputs, false)
	if err != nil {
		return nil, err
	}
	outs, err := bindings(e.Meta.Outputs, true)
	if err != nil {
		return nil, err
	}
	if e.Code[cudacode.Triple] == nil {
		return nil, fmt.Errorf("the engine holds no CUDA code (it is for %s)", e.Meta.Target.Triple)
	}
	return checkCUDA(e, ins, outs)
}

// checkCUDA reads a CUDA engine's code section (cudacode) and
// compares the engine with it: the weights and arena sizes, the kernels,
// and each binding's arena slot.
func checkCUDA(e *engine.Engine, ins, outs []binding) (*cudacode.Module, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: section \"code/%s\": %s", ErrInconsistent, cudacode.Triple, fmt.Sprintf(format, args...))
	}
	m, err := cudacode.Parse(e.Code[cudacode.Triple])
	if err != nil {
		return nil, bad("%v", err)
	}
	switch {
	case int64(len(e.Weights)) != m.WeightsBytes:
		return nil, bad("section \"weights\" holds %d bytes, the code reads %d", len(e.Weights), m.WeightsBytes)
	case e.Meta.ArenaBytes != m.ArenaBytes:
		return nil, bad("metadata arena_bytes is %d, the code needs %d", e.Meta.ArenaBytes, m.ArenaBytes)
	case len(e.Meta.Kernels) != len(m.Kernels):
		return nil, bad("metadata lists %d kernels, the code launches %d", len(e.Meta.Kernels), len(m.Kernels))
	case len(e.Meta.Symbols) > 0:
		return nil, bad("CUDA engines have static shapes")
	case len(ins)+len(outs) != len(m.Slots):
		return nil, bad("metadata binds %d io slots, the code has %d", len(ins)+len(outs), len(m.Slots))
	}
	for _, b := range append(append([]binding{}, ins...), outs...) {
		sl := m.Slots[b.Index]
		if sl.Name != b.Name || sl.Output != b.output || sl.DType != b.DType || !slices.Equal(sl.Dims, b.Shape) || sl.Bytes != b.bytes {
			return nil, bad("binding %q (io slot %d) is %s%v (%d bytes), the code's slot is %q %s%v (%d bytes)",
				b.Name, b.Index, b.DType, b.Shape, b.bytes, sl.Name, sl.DType, sl.Dims, sl.Bytes)
		}
	}
	return m, nil
}

// machines maps a target triple's architecture to its ELF machine.
var machines = map[string]elf.Machine{"x86_64": elf.EM_X86_64, "aarch64": elf.EM_AARCH64}

// checkCode reads the ABI record of the code for triple and compares the
// engine with it.
func checkCode(e *engine.Engine, triple string, ins, outs []binding) (*cpuabi.ABI, error) {
	arch, _, _ := strings.Cut(triple, "-")
	machine, ok := machines[arch]
	if !ok {
		return nil, fmt.Errorf("%w: section \"code/%s\": unknown architecture %q", ErrInconsistent, triple, arch)
	}
	abi, err := cpuabi.ReadABI(e.Code[triple], machine)
	if err != nil {
		return nil, fmt.Errorf("%w: section \"code/%s\": %v", ErrInconsistent, triple, err)
	}
	if err := compareABI(e, abi, ins, outs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInconsistent, err)
	}
	return abi, nil
}

// compareABI names the first disagreement between the engine and its
// code's record: the field, what the engine says and what the code needs.
func compareABI(e *engine.Engine, abi *cpuabi.ABI, ins, outs []binding) error {
	m := &e.Meta
	if int64(len(e.Weights)) != abi.StoredBytes {
		return fmt.Errorf("section \"weights\" holds %d bytes, the code's record says %d", len(e.Weights), abi.StoredBytes)
	}
	if m.ArenaBytes != abi.ArenaBytes {
		return fmt.Errorf("metadata arena_bytes is %d, the code needs %d", m.ArenaBytes, abi.ArenaBytes)
	}
	if len(m.Kernels) != abi.Steps {
		return fmt.Errorf("metadata lists %d kernels, the code has %d steps", len(m.Kernels), abi.Steps)
	}
	if !slices.Equal(m.Target.Features, abi.Features) {
		return fmt.Errorf("metadata target features are [%s], the code was compiled for [%s]",
			strings.Join(m.Target.Features, " "), strings.Join(abi.Features, " "))
	}
	if len(m.Symbols) != len(abi.Symbols) {
		return fmt.Errorf("metadata has %d dynamic dims, the code reads %d", len(m.Symbols), len(abi.Symbols))
	}
	for i, s := range m.Symbols {
		c := abi.Symbols[i]
		if s.Name != c.Name || s.Min < c.Min || s.Max > c.Max || s.Data != c.Data {
			return fmt.Errorf("metadata's dynamic dim %d is %s in %d..%d, the code takes %s in %d..%d", i, s.Name, s.Min, s.Max, c.Name, c.Min, c.Max)
		}
	}
	if n := len(ins) + len(outs); n != len(abi.Slots) {
		return fmt.Errorf("metadata binds %d io slots (%d inputs, %d outputs), the code has %d", n, len(ins), len(outs), len(abi.Slots))
	}
	for _, b := range append(append([]binding{}, ins...), outs...) {
		if err := fits(b, abi.Slots[b.Index]); err != nil {
			return err
		}
	}
	return nil
}

// fits checks a binding against the io slot it names: the same dtype,
// dims names and shape (at the symbols' maxima for a dynamic one); each
// run's buffers are then checked against the shapes it binds (bind).
func fits(b binding, s cpuabi.Slot) error {
	kind, codeKind := "input", "an input"
	if b.output {
		kind = "output"
	}
	if s.Output {
		codeKind = "an output"
	}
	what := fmt.Sprintf("%s %q (io slot %d)", kind, b.Name, b.Index)
	if b.output != s.Output {
		return fmt.Errorf("%s: the code uses slot %d as %s", what, b.Index, codeKind)
	}
	if !slices.Equal(b.Kinds, s.Kinds) {
		return fmt.Errorf("%s: metadata says %s, the code's slot has layers %v", what, b.ShapeString(), s.Kinds)
	}
	if s.Host {
		// The code never touches the slot; the host steps check values.
		if b.DType != s.DType {
			return fmt.Errorf("%s: metadata says %s, the code's host slot %s", what, b.ShapeString(), s.DType)
		}
		return nil
	}
	if !slices.Equal(b.Dims, s.DimNames) {
		return fmt.Errorf("%s: metadata names its dims %q, the code %q", what, b.Dims, s.DimNames)
	}
	if b.DType != s.DType || !slices.Equal(b.Shape, s.Dims) || b.bytes != s.Bytes {
		return fmt.Errorf("%s: metadata says %s%v (%d bytes), the code %s %s%v (%d bytes)",
			what, b.DType, b.Shape, b.bytes, map[bool]string{false: "reads", true: "writes"}[s.Output], s.DType, s.Dims, s.Bytes)
	}
	return nil
}

// byteSize is a tensor's size in bytes, refusing overflow.
func byteSize(d ir.DType, dims []int64) (int64, error) {
	n, err := engine.Elements(dims)
	if err != nil {
		return 0, err
	}
	switch s := d.Size(); {
	case s > 0:
		hi, lo := bits.Mul64(uint64(n), uint64(s))
		if hi != 0 || lo > 1<<63-1 {
			return 0, fmt.Errorf("shape %v of %s is more than 2^63 bytes", dims, d)
		}
		return int64(lo), nil
	case s < 0: // PerByte elements per byte, the last byte padded (ir.RawLen)
		k := d.PerByte()
		return n/k + min(n%k, 1), nil
	}
	return 0, fmt.Errorf("dtype %s has no fixed size", d)
}
