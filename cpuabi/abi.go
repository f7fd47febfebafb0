// Package cpuabi is the contract between the code codegen/cpu compiles and
// runtime/cpu, which loads and runs it: the symbols a CPU engine's shared
// object exports, the ABI record (kiln_abi) stating what the code reads
// and writes, the weights the loader derives, and the CPU features engines
// record, with this machine's. It imports neither side, so the compiler
// needs no loader and the runtime no compiler.
//
// Every engine exports one entry point,
//
//	int64_t kiln_run(int64_t tid, int64_t nthreads, uint8_t *weights,
//	                 uint8_t *arena, void **io, int64_t *barrier, int64_t part);
//
// which each worker thread calls per inference with its id, part by part:
// with part 0 first, then with each part number it returns until it
// returns 0 (a part is about a millisecond of work). The generated code
// splits every layer's work by tid and meets at a spin barrier (the two
// int64 words at barrier) between layers: the runtime owns the threads,
// the engine owns the schedule.
//
// Engines also export the constant kiln_abi, the code's record of the
// buffers it reads and writes, which the loader checks before loading the
// code; kiln_run_profile (kiln_run's arguments with uint64_t *times, a
// buffer of cycle-counter readings per step, before the part) and
// kiln_cycles (uint64_t kiln_cycles(void), the counter it records), for
// per-kernel profiles (kiln_run carries no profiling code). Engines with
// derived weights export
//
//	void kiln_derive(int64_t index, int64_t lo, int64_t hi, uint8_t *weights);
//
// which computes output channels [lo, hi) of the ABI record's derived
// range index in the live weights (derived.go).
package cpuabi

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The symbols an engine exports: EntryPoint always; ProfileEntryPoint and
// CyclesSymbol in engines that support per-kernel profiles;
// DeriveEntryPoint in engines with derived weights.
const (
	EntryPoint        = "kiln_run"
	ProfileEntryPoint = "kiln_run_profile"
	CyclesSymbol      = "kiln_cycles"
	DeriveEntryPoint  = "kiln_derive"
)

// ABISymbol is the exported constant in which an engine's code states what
// it reads and writes: a JSON ABI record (codegen/cpu writes it). Metadata
// only describes the code; this record is generated with it, so the loader
// reads it from the ELF file (before loading it) and refuses an engine
// whose metadata or sections disagree with it.
const ABISymbol = "kiln_abi"

// ABIVersion is the record layout this package writes and reads. Version
// 2 added dynamic shapes: the symbols, and the dims table in the io slot
// after the outputs; version 3 derived weights (derived.go); version 4 has
// the code compute them (DeriveEntryPoint); version 5 runs in parts (the
// entry points take the part and return the next).
const ABIVersion = 5

// maxABIBytes bounds the record a loader will read.
const maxABIBytes = 1 << 20

// ABI is an engine code's record of its interface.
type ABI struct {
	Version int `json:"abi"`
	// WeightsBytes is the size of the weights blob the code reads, the
	// live weights; StoredBytes, of the engine's weights section: the live
	// weights less the Derived ranges, which the loader computes.
	WeightsBytes int64     `json:"weights_bytes"`
	StoredBytes  int64     `json:"stored_bytes"`
	Derived      []Derived `json:"derived,omitempty"`
	// ArenaBytes is the arena the code uses, work-stealing counters
	// included.
	ArenaBytes int64 `json:"arena_bytes"`
	// Steps is the number of kernel steps, so the row of cycle-counter
	// readings kiln_run_profile writes per thread is Steps+1 words.
	Steps int `json:"steps"`
	// Features are the CPU features the code was compiled for.
	Features []string `json:"features"`
	// Slots describe kiln_run's io array, in slot order (the dims table,
	// when there are symbols, follows them).
	Slots []Slot `json:"io"`
	// Symbols are the dynamic dims the code reads from the dims table, in
	// its order, with the range the code was compiled for (its memory is
	// planned for Max).
	Symbols []SymbolRange `json:"symbols,omitempty"`
	// Host are the steps the runtime computes between runs of the code
	// (host.go), in order.
	Host []HostStep `json:"host,omitempty"`
}

// SymbolRange is a dynamic dim of the code.
type SymbolRange struct {
	Name string `json:"name"`
	Min  int64  `json:"min"`
	Max  int64  `json:"max"`
	// Data: the code computes the dim from the data and writes it to the
	// dims table.
	Data bool `json:"data,omitempty"`
}

// Slot is one entry of the io array.
type Slot struct {
	Output bool   `json:"output"`
	DType  string `json:"dtype"` // ONNX text name, as in engine metadata
	// Dims and Bytes are the largest shape and byte size the code reads
	// (input) or writes (output) through the slot. With static shapes they
	// are the shape; a buffer the caller binds holds at least Bytes.
	Dims  []int64 `json:"dims"`
	Bytes int64   `json:"bytes"`
	// DimNames, for a dynamic shape, name each dim's symbol or expression
	// ("": static); Dims are then at the symbols' maxima.
	DimNames []string `json:"dim_names,omitempty"`
	// Host: the code never reads or writes the slot, whose value only
	// host steps read or write (a string; what a host step computes at a
	// shape only the data gives). The runtime binds no buffer to it.
	Host bool `json:"host,omitempty"`
	// Kinds are the sequence and optional layers around the slot's
	// tensors, outermost first (ir.TypeKind; none for a tensor): a host
	// slot's value may be a sequence or an optional of DType tensors.
	Kinds []int `json:"kinds,omitempty"`
}

// Marshal encodes the record as the bytes of the kiln_abi constant.
func (a *ABI) Marshal() ([]byte, error) { return json.Marshal(a) }

// ReadABI checks that so is a 64-bit little-endian ELF shared object for
// machine and reads its ABI record, without loading it.
func ReadABI(so []byte, machine elf.Machine) (abi *ABI, err error) {
	// debug/elf is hardened against malformed files, but the code section
	// is input: a parser panic must still end as an error.
	defer func() {
		if r := recover(); r != nil {
			abi, err = nil, fmt.Errorf("the code is not a well-formed ELF file (%v)", r)
		}
	}()
	f, err := elf.NewFile(bytes.NewReader(so))
	if err != nil {
		return nil, fmt.Errorf("the code is not an ELF file: %v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("the code is a %v %v %v ELF file, want a 64-bit little-endian shared object", f.Class, f.Data, f.Type)
	}
	if f.Machine != machine {
		return nil, fmt.Errorf("the code is %v machine code, but it is stored as code for %v", f.Machine, machine)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("the code's symbol table: %v", err)
	}
	var sym *elf.Symbol
	for i := range syms {
		if syms[i].Name == ABISymbol && syms[i].Section != elf.SHN_UNDEF {
			sym = &syms[i]
			break
		}
	}
	if sym == nil {
		return nil, fmt.Errorf("the code exports no %s record (rebuild the engine with this kiln)", ABISymbol)
	}
	if sym.Size == 0 || sym.Size > maxABIBytes {
		return nil, fmt.Errorf("the code's %s record is %d bytes", ABISymbol, sym.Size)
	}
	data, err := readVirtual(f, sym.Value, sym.Size)
	if err != nil {
		return nil, fmt.Errorf("the code's %s record: %v", ABISymbol, err)
	}
	a, err := ParseABI(bytes.TrimRight(data, "\x00"))
	if err != nil {
		return nil, err
	}
	if len(a.Derived) > 0 && !slices.ContainsFunc(syms, func(s elf.Symbol) bool {
		return s.Name == DeriveEntryPoint && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC
	}) {
		return nil, fmt.Errorf("the code has derived weights but exports no %s to compute them", DeriveEntryPoint)
	}
	return a, nil
}

// readVirtual reads n bytes at virtual address addr from the file image
// of a loadable segment.
func readVirtual(f *elf.File, addr, n uint64) ([]byte, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr-p.Vaddr > p.Filesz || n > p.Filesz-(addr-p.Vaddr) {
			continue
		}
		buf := make([]byte, n)
		if _, err := p.ReadAt(buf, int64(addr-p.Vaddr)); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return nil, fmt.Errorf("address %#x (+%d bytes) is in no loaded segment", addr, n)
}

// ParseABI decodes and checks a record: its version, and sizes that are
// not negative.
func ParseABI(data []byte) (*ABI, error) {
	var v struct {
		Version int `json:"abi"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("the code's %s record is not JSON: %v", ABISymbol, err)
	}
	if v.Version != ABIVersion {
		return nil, fmt.Errorf("the code's %s record is version %d, this runtime reads %d (rebuild the engine with this kiln)", ABISymbol, v.Version, ABIVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var a ABI
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("the code's %s record: %v", ABISymbol, err)
	}
	if a.WeightsBytes < 0 || a.ArenaBytes < 0 || a.Steps < 0 {
		return nil, errors.New("the code's " + ABISymbol + " record has a negative size")
	}
	for i, s := range a.Slots {
		if s.Bytes < 0 {
			return nil, fmt.Errorf("the code's %s record: io slot %d has %d bytes", ABISymbol, i, s.Bytes)
		}
	}
	if err := a.CheckDerived(); err != nil {
		return nil, fmt.Errorf("the code's %s record: %v", ABISymbol, err)
	}
	return &a, nil
}
