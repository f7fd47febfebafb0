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

// readModel reads a model by its extension and verifies it.
func readModel(path string) (*ir.Model, error) {
	if err := checkExt(path); err != nil {
		return nil, err
	}
	var m *ir.Model
	var err error
	if filepath.Ext(path) == extText {
		m, err = text.ParseFile(path)
	} else {
		m, err = onnx.ReadFile(path)
	}
	if err == nil {
		err = m.Verify()
	}
	if err != nil {
		return nil, cli.FileError(path, err)
	}
	return m, nil
}

// writeModel writes a model in the format its extension names.
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
