package engine

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
)

// Section names.
const (
	SectionMeta    = "meta"
	SectionPlan    = "plan"
	SectionWeights = "weights"
	SectionCalib   = "calib"
	codePrefix     = "code/"
)

// Binding describes one engine input or output: its place in the io
// pointer array the code receives, and what the caller must pass.
type Binding struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"` // ONNX text name: "float", "int64", ...
	Shape []int64 `json:"shape"` // at the symbols' maxima (dims.go)
	// Dims, for a dynamic shape, name each dim's symbol or expression ("":
	// static).
	Dims []string `json:"dims,omitempty"`
	// Kinds are the sequence and optional layers around DType tensors,
	// outermost first (2 a sequence, 4 an optional: ONNX's TypeProto
	// cases); none for a tensor.
	Kinds []int `json:"kinds,omitempty"`
	Index int   `json:"index"`
	// Debug marks an output that cc build --mark-outputs added: an
	// intermediate value, not one of the model's outputs (nil for those).
	Debug *Debug `json:"debug,omitempty"`
	// Default is an input's value when a run does not give it: the raw
	// bytes, at Shape (static), of the initializer the model declares
	// for it (cc build --overridable-initializers; nil: the input is
	// required).
	Default []byte `json:"default,omitempty"`
}

// Target says what machine code the engine holds.
type Target struct {
	Triple   string   `json:"triple"`
	CPU      string   `json:"cpu"`
	Features []string `json:"features"` // CPU features the code needs, e.g. "avx512f"
}

// Metadata is the engine's self-description.
type Metadata struct {
	KilnVersion  string    `json:"kiln_version"`
	ModelName    string    `json:"model_name"`
	SourceSHA256 string    `json:"source_sha256"`
	Precision    string    `json:"precision"` // "fp32" or "int8"
	Target       Target    `json:"target"`
	Inputs       []Binding `json:"inputs"`
	Outputs      []Binding `json:"outputs"`
	ArenaBytes   int64     `json:"arena_bytes"`
	// TensorBytes is the sum of all intermediate tensors' sizes, to show
	// what memory planning saved.
	TensorBytes int64    `json:"tensor_bytes"`
	BuildFlags  []string `json:"build_flags"`
	Kernels     []string `json:"kernels"`
	// MaxThreads caps the threads a context uses (0: no cap): the code
	// generator's judgement that more threads would only add overhead.
	MaxThreads int `json:"max_threads,omitempty"`
	// Symbols are the dynamic dims, in the order of the dims table the
	// code reads (the io slot after the outputs).
	Symbols []Symbol `json:"symbols,omitempty"`
	// Pinned are model inputs compiled as constants (cc build --value):
	// a run may give them, with exactly these values, or leave them out.
	Pinned []Pinned `json:"pinned,omitempty"`
	// Folded are model inputs with initializer defaults that cc build
	// compiled as constants (its default; --overridable-initializers keeps
	// them inputs): a run that gives one is refused, naming the flag.
	Folded []string `json:"folded,omitempty"`
	// Training describes a training-step engine (cc build --train); nil
	// for an inference engine.
	Training *Training `json:"training,omitempty"`
}

// Training is a training-step engine's record: which inputs take the data,
// the labels, the learning rate and the step count, which output is the
// loss, and the state (parameters and optimizer state) that each run
// reads from inputs and writes, updated, to outputs, which the next run
// reads back.
type Training struct {
	Loss      string       `json:"loss"`      // the scalar loss output
	LossKind  string       `json:"loss_kind"` // "softmax-cross-entropy" or "mse"
	Output    string       `json:"output"`    // the model's first output (class scores)
	Data      []string     `json:"data"`      // the model's inputs
	Label     string       `json:"label"`
	LR        string       `json:"lr"`   // the learning rate input (scalar)
	Step      string       `json:"step"` // the step count input (int64 scalar, from 1)
	DefaultLR float64      `json:"default_lr"`
	Optimizer string       `json:"optimizer"`
	Batch     int64        `json:"batch"`
	State     []TrainState `json:"state"`
	// Model is the inference model (ONNX) the engine trains, holding the
	// initial parameters: the state's starting point, and what an export
	// writes with the trained ones.
	Model []byte `json:"model"`
	// Inference is an engine of Model at the step's batch with the
	// parameters as inputs (named as Model's initializers): it evaluates
	// and serves the parameters as they train.
	Inference []byte `json:"inference,omitempty"`
}

// TrainState is one tensor of a training engine's state: read from input
// Input, written updated to output Output. Param names the inference
// model's initializer it is ("" for optimizer state, which starts at
// zero).
type TrainState struct {
	Input  string `json:"input"`
	Output string `json:"output"`
	Param  string `json:"param,omitempty"`
}

// Pinned is an input whose value the engine was compiled for.
type Pinned struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Data  []byte  `json:"data"` // raw little-endian elements
}

// Engine is a decoded engine file.
type Engine struct {
	Meta    Metadata
	Plan    []byte // the final graph in kiln's text IR
	Weights []byte
	Calib   []byte
	// Code maps a target triple to its shared object.
	Code map[string][]byte

	// Checksum and Signer are what Decode found in the trailer (the
	// file's digest, and the key that signed it or nil); Encode ignores
	// them.
	Checksum [sha256.Size]byte
	Signer   ed25519.PublicKey
}

// Encode serializes the engine deterministically, unsigned.
func (e *Engine) Encode() ([]byte, error) {
	f, err := e.file()
	if err != nil {
		return nil, err
	}
	return f.Marshal(), nil
}

// EncodeSigned serializes the engine with an ed25519 signature of its
// digest in the trailer.
func (e *Engine) EncodeSigned(key ed25519.PrivateKey) ([]byte, error) {
	f, err := e.file()
	if err != nil {
		return nil, err
	}
	return f.MarshalSigned(key)
}

func (e *Engine) file() (*File, error) {
	meta, err := json.MarshalIndent(e.Meta, "", "  ")
	if err != nil {
		return nil, err
	}
	f := &File{KilnVersion: e.Meta.KilnVersion, Sections: []Section{
		{SectionMeta, meta}, {SectionPlan, e.Plan}, {SectionWeights, e.Weights},
	}}
	if e.Calib != nil {
		f.Sections = append(f.Sections, Section{SectionCalib, e.Calib})
	}
	for triple, so := range e.Code {
		f.Sections = append(f.Sections, Section{codePrefix + triple, so})
	}
	return f, nil
}

// Decode parses and verifies an engine file (see Unmarshal), checks that
// its required sections are present and that its metadata is well formed
// and consistent in itself (Metadata.Validate). Whether the metadata agrees
// with the code is the loader's check (package runtime).
func Decode(buf []byte) (*Engine, error) {
	f, err := Unmarshal(buf)
	if err != nil {
		return nil, err
	}
	return DecodeFile(f)
}

// DecodeFile interprets a File whose sections are verified (Verify, or
// Detach of all but the weights, whose data DecodeFile only refers to).
func DecodeFile(f *File) (*Engine, error) {
	e := &Engine{Code: map[string][]byte{}, Checksum: f.Checksum, Signer: f.Signer}
	for _, s := range f.Sections {
		switch {
		case s.Name == SectionMeta:
			dec := json.NewDecoder(bytes.NewReader(s.Data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e.Meta); err != nil {
				return nil, fmt.Errorf("%w: section %q: %v", ErrBadMetadata, s.Name, err)
			}
			if dec.More() {
				return nil, fmt.Errorf("%w: section %q: data after the JSON object", ErrBadMetadata, s.Name)
			}
		case s.Name == SectionPlan:
			e.Plan = s.Data
		case s.Name == SectionWeights:
			e.Weights = s.Data
		case s.Name == SectionCalib:
			e.Calib = s.Data
		default:
			if triple, ok := cutPrefix(s.Name, codePrefix); ok {
				e.Code[triple] = s.Data
			}
		}
	}
	for _, name := range []string{SectionMeta, SectionPlan, SectionWeights} {
		if !hasSection(f, name) {
			return nil, fmt.Errorf("%w: section %q is missing", ErrBadSection, name)
		}
	}
	if len(e.Code) == 0 {
		return nil, fmt.Errorf("%w: the engine holds no code section", ErrBadSection)
	}
	if err := e.Meta.Validate(); err != nil {
		return nil, err
	}
	if e.Meta.KilnVersion != f.KilnVersion {
		return nil, fmt.Errorf("%w: kiln version %q, the header says %q", ErrBadMetadata, e.Meta.KilnVersion, f.KilnVersion)
	}
	if _, ok := e.Code[e.Meta.Target.Triple]; !ok {
		return nil, fmt.Errorf("%w: the target triple %q has no code section", ErrBadMetadata, e.Meta.Target.Triple)
	}
	return e, nil
}

func hasSection(f *File, name string) bool {
	for _, s := range f.Sections {
		if s.Name == name {
			return true
		}
	}
	return false
}
