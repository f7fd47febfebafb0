package onnx

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// ModelProto field numbers.
const (
	modelIRVersion       = 1
	modelProducerName    = 2
	modelProducerVersion = 3
	modelDomain          = 4
	modelModelVersion    = 5
	modelDocString       = 6
	modelGraph           = 7
	modelOpsetImport     = 8
	modelMetadataProps   = 14
	modelTrainingInfo    = 20
	modelFunctions       = 25
)

// ReadFile reads an ONNX model file. External data is resolved relative to
// the file's folder.
func ReadFile(path string) (*ir.Model, error) {
	m, _, err := ReadFileSources(path)
	return m, err
}

// ReadFileSources is ReadFile that also returns the external-data files
// the model's tensors were read from (joined to the model's folder,
// sorted), so that a caller can refuse to write over any of its inputs.
func ReadFileSources(path string) (*ir.Model, []string, error) {
	return ReadFileWithin(path, ir.Limits{})
}

// ReadFileWithin is ReadFileSources under the given limits (zero fields
// take their defaults): the file's size is checked against MaxFileBytes
// before it is read, and its first bytes must start a ModelProto before
// the rest is read, so a large file that is not a model fails at once.
// Nesting and tensor sizes are checked as in ReadWithin.
func ReadFileWithin(path string, lim ir.Limits) (*ir.Model, []string, error) {
	data, err := readfile.Within(path, lim, checkModelPrefix)
	if err != nil {
		return nil, nil, err
	}
	m, files, err := read(data, filepath.Dir(path), lim)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, files, nil
}

// Read decodes a serialized ModelProto. dir is the folder that external data
// locations are relative to; with dir "" a model with external data is an
// error. The model's weights are copied out of data, so data may be reused.
func Read(data []byte, dir string) (*ir.Model, error) {
	return ReadWithin(data, dir, ir.Limits{})
}

// ReadWithin is Read under the given limits: subgraphs and types nested
// deeper than MaxNesting, and tensors (initializers, attributes, external
// data) over MaxTensorBytes, are errors before anything is allocated.
func ReadWithin(data []byte, dir string, lim ir.Limits) (*ir.Model, error) {
	m, _, err := read(data, dir, lim)
	return m, err
}

// read is Read that also returns the external-data files it opened.
func read(data []byte, dir string, lim ir.Limits) (*ir.Model, []string, error) {
	if err := checkModelPrefix(data[:min(len(data), readfile.PrefixBytes)], int64(len(data))); err != nil {
		return nil, nil, err
	}
	d := newDecoder(dir, lim)
	defer d.close()
	m := &ir.Model{}
	var graph []byte
	err := eachField(data, func(f field) (err error) {
		switch f.num {
		case modelIRVersion:
			m.IRVersion, err = f.int64()
		case modelProducerName:
			m.ProducerName, err = f.str()
		case modelProducerVersion:
			m.ProducerVersion, err = f.str()
		case modelDomain:
			m.Domain, err = f.str()
		case modelModelVersion:
			m.ModelVersion, err = f.int64()
		case modelDocString:
			m.DocString, err = f.str()
		case modelGraph:
			graph, err = f.bytes()
		case modelOpsetImport:
			var b []byte
			if b, err = f.bytes(); err == nil {
				var o ir.OpsetImport
				o, err = readOpset(b)
				m.OpsetImports = append(m.OpsetImports, o)
			}
		case modelMetadataProps:
			err = collectPair(&m.Metadata, f)
		case modelTrainingInfo:
			err = errors.New("training_info is not supported")
		case modelFunctions:
			err = errors.New("model-local functions are not supported")
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading ONNX model: %w", err)
	}
	if graph == nil {
		return nil, nil, errors.New("reading ONNX model: the model has no graph (empty or not an ONNX file?)")
	}
	if m.Graph, err = d.graph(graph, nil); err != nil {
		return nil, nil, fmt.Errorf("reading ONNX model: %w", err)
	}
	return m, d.opened(), nil
}

func readOpset(b []byte) (ir.OpsetImport, error) {
	var o ir.OpsetImport
	err := eachField(b, func(f field) (err error) {
		switch f.num {
		case 1:
			o.Domain, err = f.str()
		case 2:
			o.Version, err = f.int64()
		}
		return err
	})
	if err != nil {
		return o, fmt.Errorf("opset_import: %w", err)
	}
	return o, nil
}

// Write serializes a model as a ModelProto with all weights inline.
func Write(m *ir.Model) ([]byte, error) {
	if m.Graph == nil {
		return nil, errors.New("writing ONNX model: the model has no graph")
	}
	b := appendIntAlways(nil, modelIRVersion, m.IRVersion)
	b = appendString(b, modelProducerName, m.ProducerName)
	b = appendString(b, modelProducerVersion, m.ProducerVersion)
	b = appendString(b, modelDomain, m.Domain)
	b = appendInt(b, modelModelVersion, m.ModelVersion)
	b = appendString(b, modelDocString, m.DocString)
	var err error
	b = appendMessage(b, modelGraph, func(b []byte) []byte {
		b, err = appendGraph(b, m.Graph)
		return b
	})
	if err != nil {
		return nil, fmt.Errorf("writing ONNX model: %w", err)
	}
	for _, o := range m.OpsetImports {
		b = appendMessage(b, modelOpsetImport, func(b []byte) []byte {
			b = appendString(b, 1, o.Domain)
			return appendIntAlways(b, 2, o.Version)
		})
	}
	return appendPairs(b, modelMetadataProps, m.Metadata), nil
}

// WriteFile writes a model to path with Write, atomically: a failed write
// leaves an existing file as it was.
func WriteFile(path string, m *ir.Model) error {
	b, err := Write(m)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}
