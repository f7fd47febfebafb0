package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// --mark-outputs stores tensors of compiled code: with --emit ir it is a
// usage error (internal/build tests what it marks and refuses).
func TestMarkOutputsFlag(t *testing.T) {
	r := cc(t, "build", "--emit", "ir", "--mark-outputs", "all", "-o", t.TempDir()+"/m.onnxtxt", mlpModel)
	assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "--mark-outputs applies to compiled code")
}
