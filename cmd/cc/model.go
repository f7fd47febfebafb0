package main

import (
	"path/filepath"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/ir"
)

// Model file formats, by extension.
const (
	extONNX = ".onnx"
	extText = ".onnxtxt"
)

// checkExt is a usage error unless path names a model format cc knows.
func checkExt(path string) error {
	switch filepath.Ext(path) {
	case extONNX, extText:
		return nil
	}
	return cli.Usagef("%s: unknown model format %q: a model file ends in %s or %s", path, filepath.Ext(path), extONNX, extText)
}

// readModel reads a model by its extension, within lim, and verifies it.
func readModel(path string, lim ir.Limits) (*ir.Model, error) {
	m, _, err := readModelSources(path, lim)
	return m, err
}

// readModelSources is readModel that also returns the files the model was
// read from: the model, then its external data.
func readModelSources(path string, lim ir.Limits) (*ir.Model, []cli.File, error) {
	if err := checkExt(path); err != nil {
		return nil, nil, err
	}
	var m *ir.Model
	var external []string
	var err error
	if filepath.Ext(path) == extText {
		m, external, err = text.ParseFileWithin(path, lim)
	} else {
		m, external, err = onnx.ReadFileWithin(path, lim)
	}
	if err == nil {
		err = m.Verify()
	}
	if err != nil {
		return nil, nil, cli.FileError(path, err)
	}
	return m, modelFiles(path, external), nil
}

// modelFiles names a model's files for cli.CheckOutputs.
func modelFiles(model string, external []string) []cli.File {
	files := []cli.File{{Path: model, Role: "the model"}}
	for _, e := range external {
		files = append(files, cli.File{Path: e, Role: "the model's external data"})
	}
	return files
}

// modelOutputs names the files writeModel writes to path: a text model's
// initializers go to path+".bin".
func modelOutputs(path string) []cli.File {
	files := []cli.File{{Path: path, Role: "the output"}}
	if filepath.Ext(path) == extText {
		files = append(files, cli.File{Path: path + ".bin", Role: "the output's external data"})
	}
	return files
}

// writeModel writes a model in the format its extension names, atomically
// (a text model and its .bin as a pair).
func writeModel(path string, m *ir.Model) error {
	if err := checkExt(path); err != nil {
		return err
	}
	var err error
	if filepath.Ext(path) == extText {
		err = text.WriteFile(path, m)
	} else {
		err = onnx.WriteFile(path, m)
	}
	return cli.FileError(path, err)
}
