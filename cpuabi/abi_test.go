package cpuabi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestABIRoundTrip: a record reads back as written, and one of another
// version, with a field this kiln does not know, or a negative size is
// refused, naming the problem.
func TestABIRoundTrip(t *testing.T) {
	rec := &ABI{Version: ABIVersion, WeightsBytes: 4096, StoredBytes: 4096, ArenaBytes: 192, Steps: 3,
		Features: []string{"avx2", "fma"}, Symbols: []SymbolRange{{Name: "N", Min: 1, Max: 8}},
		Slots: []Slot{{DType: "float", Dims: []int64{8, 3}, Bytes: 96, DimNames: []string{"N", ""}}, {Output: true, DType: "float", Dims: []int64{8}, Bytes: 32}}}
	data, err := rec.Marshal()
	require.NoError(t, err)
	got, err := ParseABI(data)
	require.NoError(t, err)
	assert.Equal(t, rec, got)

	for name, c := range map[string]struct{ from, to, want string }{
		"version":       {`"abi":5`, `"abi":4`, "version 4, this runtime reads 5"},
		"unknown field": {`"steps":3`, `"steps":3,"stepz":1`, `unknown field "stepz"`},
		"negative":      {`"arena_bytes":192`, `"arena_bytes":-1`, "negative size"},
		"slot bytes":    {`"bytes":32`, `"bytes":-32`, "io slot 1 has -32 bytes"},
		"not JSON":      {`{`, `[`, "not JSON"},
	} {
		edited := strings.Replace(string(data), c.from, c.to, 1)
		require.NotEqual(t, string(data), edited, name)
		_, err := ParseABI([]byte(edited))
		assert.ErrorContains(t, err, c.want, name)
	}
}

// TestReadABIRefusesNonELF: bytes that are not a shared object are an
// error, not a panic.
func TestReadABIRefusesNonELF(t *testing.T) {
	_, err := ReadABI([]byte("\x7fELF not really"), 62)
	assert.ErrorContains(t, err, "not an ELF file")
}
