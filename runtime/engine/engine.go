package engine

import (
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
	Shape []int64 `json:"shape"`
	Index int     `json:"index"`
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
}

// Engine is a decoded engine file.
type Engine struct {
	Meta    Metadata
	Plan    []byte // the final graph in kiln's text IR
	Weights []byte
	Calib   []byte
	// Code maps a target triple to its shared object.
	Code map[string][]byte
}

// Encode serializes the engine deterministically.
func (e *Engine) Encode() ([]byte, error) {
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
	return f.Marshal(), nil
}

// Decode parses and verifies an engine file (see Unmarshal) and checks that
// its required sections are present and its metadata is well formed.
func Decode(buf []byte) (*Engine, error) {
	f, err := Unmarshal(buf)
	if err != nil {
		return nil, err
	}
	e := &Engine{Code: map[string][]byte{}}
	for _, s := range f.Sections {
		switch {
		case s.Name == SectionMeta:
			if err := json.Unmarshal(s.Data, &e.Meta); err != nil {
				return nil, fmt.Errorf("%w: section %q: %v", ErrBadSection, s.Name, err)
			}
		case s.Name == SectionPlan:
			e.Plan = s.Data
		case s.Name == SectionWeights:
			e.Weights = s.Data
		case s.Name == SectionCalib:
			e.Calib = s.Data
		case len(s.Name) > len(codePrefix) && s.Name[:len(codePrefix)] == codePrefix:
			e.Code[s.Name[len(codePrefix):]] = s.Data
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
	for _, b := range append(append([]Binding{}, e.Meta.Inputs...), e.Meta.Outputs...) {
		for _, d := range b.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%w: binding %q has negative dim %d", ErrBadSection, b.Name, d)
			}
		}
	}
	if e.Meta.ArenaBytes < 0 {
		return nil, fmt.Errorf("%w: negative arena size", ErrBadSection)
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
