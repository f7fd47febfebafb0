package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/ir/ops"
)

// cc convert --opset raises a Caffe2-era model (IR version 3, opset 9,
// every initializer also a graph input) to opset 21, which computes what
// the original does; an opset kiln does not implement is refused.
func TestConvertOpset(t *testing.T) {
	m, err := onnx.ReadFile(cnnModel)
	require.NoError(t, err)
	m.OpsetImports = []ir.OpsetImport{{Domain: "", Version: 9}}
	m.IRVersion = 3
	for _, n := range m.Graph.Nodes {
		n.Attrs = slices.DeleteFunc(n.Attrs, func(a *ir.Attribute) bool { return a.Name == "ceil_mode" && a.I == 0 }) // MaxPool-8 has none
	}
	m.Graph.Inputs = append(m.Graph.Inputs, m.Graph.Initializers...)
	dir := t.TempDir()
	old, out := filepath.Join(dir, "old.onnx"), filepath.Join(dir, "new.onnx")
	require.NoError(t, onnx.WriteFile(old, m))

	r := cc(t, "convert", "--opset", "21", old, out)
	require.Equal(t, 0, r.code, r.stderr)
	conv, err := onnx.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, int64(21), conv.Opset(""))
	assert.GreaterOrEqual(t, conv.IRVersion, int64(10), "opset 21 needs IR version 10")
	assert.Less(t, relL2OnDigits(t, out), 1e-6)

	r = cc(t, "convert", "--opset", "99", old, out)
	assert.Equal(t, 1, r.code)
	newest, _ := ops.NewestOpset("")
	assert.Contains(t, r.stderr, fmt.Sprintf("opset 99: kiln converts to opsets 1 to %d", newest))
}
