package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample(t testing.TB) *Engine {
	rng := rand.New(rand.NewSource(1))
	weights := make([]byte, 1000)
	rng.Read(weights)
	so := make([]byte, 333)
	rng.Read(so)
	return &Engine{
		Meta: Metadata{
			KilnVersion: "0.1.0", ModelName: "m", Precision: "fp32",
			Target:     Target{Triple: "x86_64-unknown-linux-gnu", CPU: "native", Features: []string{"avx512f"}},
			Inputs:     []Binding{{Name: "x", DType: "float", Shape: []int64{1, 64}, Index: 0}},
			Outputs:    []Binding{{Name: "y", DType: "float", Shape: []int64{1, 10}, Index: 1}},
			ArenaBytes: 4096,
		},
		Plan:    []byte("graph text"),
		Weights: weights,
		Code:    map[string][]byte{"x86_64-unknown-linux-gnu": so},
	}
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	e := sample(t)
	a, err := e.Encode()
	require.NoError(t, err)
	b, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, a, b, "encoding twice must give identical bytes")

	d, err := Decode(a)
	require.NoError(t, err)
	assert.Equal(t, e.Meta, d.Meta)
	assert.Equal(t, e.Plan, d.Plan)
	assert.Equal(t, e.Weights, d.Weights)
	assert.Equal(t, e.Code, d.Code)
	again, err := d.Encode()
	require.NoError(t, err)
	assert.Equal(t, a, again)
}

func TestSectionsAreAligned(t *testing.T) {
	buf, err := sample(t).Encode()
	require.NoError(t, err)
	f, err := Unmarshal(buf)
	require.NoError(t, err)
	for _, s := range f.Sections {
		off := int(uintptrOffset(buf, s.Data))
		assert.Zero(t, off%Align, "section %q at offset %d", s.Name, off)
	}
}

func uintptrOffset(buf, sub []byte) int {
	if len(sub) == 0 {
		return 0
	}
	for i := range buf {
		if &buf[i] == &sub[0] {
			return i
		}
	}
	return -1
}

func TestCorruptSectionIsNamed(t *testing.T) {
	buf, err := sample(t).Encode()
	require.NoError(t, err)
	f, err := Unmarshal(buf)
	require.NoError(t, err)
	for _, s := range f.Sections {
		if len(s.Data) == 0 {
			continue
		}
		bad := append([]byte(nil), buf...)
		off := uintptrOffset(buf, s.Data)
		bad[off+len(s.Data)/2] ^= 0x40
		_, err := Decode(bad)
		require.Error(t, err, s.Name)
		assert.True(t, errors.Is(err, ErrChecksum), "%v", err)
		assert.Contains(t, err.Error(), `"`+s.Name+`"`)
	}
}

func TestRefusals(t *testing.T) {
	buf, err := sample(t).Encode()
	require.NoError(t, err)

	_, err = Decode([]byte("\x7fELF not an engine at all"))
	assert.ErrorIs(t, err, ErrNotEngine)

	for _, n := range []int{3, len(Magic) + 2, 40, len(buf) / 2, len(buf) - 1} {
		_, err = Decode(buf[:n])
		assert.ErrorIs(t, err, ErrTruncated, "cut at %d", n)
	}

	newer := append([]byte(nil), buf...)
	binary.LittleEndian.PutUint32(newer[len(Magic):], FormatVersion+1)
	_, err = Decode(newer)
	assert.ErrorIs(t, err, ErrTooNew)

	noCode := sample(t)
	noCode.Code = nil
	b, err := noCode.Encode()
	require.NoError(t, err)
	_, err = Decode(b)
	assert.ErrorContains(t, err, "no code section")
}

func FuzzLoadEngine(f *testing.F) {
	buf, err := sample(f).Encode()
	require.NoError(f, err)
	f.Add(buf)
	f.Add(buf[:100])
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err == nil && e == nil {
			t.Fatal("nil engine without error")
		}
		if err == nil && !bytes.HasPrefix(data, []byte(Magic)) {
			t.Fatal("accepted a file without the magic")
		}
	})
}
