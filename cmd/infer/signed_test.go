package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	kruntime "github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

// runtime's bundled engine and its model.
const (
	tinyEngine = "../../runtime/testdata/tiny.kiln"
	tinyModel  = "../../runtime/testdata/tiny.onnxtxt"
)

// tinyTestData writes an ONNX test_data_set for the tiny engine: random
// inputs and the reference executor's outputs.
func tinyTestData(t *testing.T, eng *engine.Engine) string {
	t.Helper()
	m, err := build.ReadModel(tinyModel)
	require.NoError(t, err)
	ex, err := reference.New(m)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(4))
	dir := t.TempDir()
	feeds := map[string]*ir.Tensor{}
	for i, b := range eng.Meta.Inputs {
		x := ir.NewTensor(ir.Float32, b.Shape...)
		for j := range x.Float32s() {
			x.Float32s()[j] = float32(rng.NormFloat64())
		}
		x.Name = b.Name
		feeds[b.Name] = x
		data, err := onnx.WriteTensor(x)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("input_%d.pb", i)), data, 0o644))
	}
	outs, err := ex.Run(feeds)
	require.NoError(t, err)
	for i, b := range eng.Meta.Outputs {
		data, err := onnx.WriteTensor(outs[b.Name])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("output_%d.pb", i)), data, 0o644))
	}
	return dir
}

// A damaged or inconsistent engine is refused by run, check and bench with
// exit status 1 and one line naming the region or field; none of them
// runs its code. (Appended bytes used to pass infer check; the metadata
// edits crashed it or let the code write out of bounds.)
func TestDamagedEnginesAreRefused(t *testing.T) {
	bin := buildInfer(t)
	good, err := os.ReadFile(tinyEngine)
	require.NoError(t, err)
	base, err := engine.Decode(good)
	require.NoError(t, err)
	testData := tinyTestData(t, base)
	edited := func(change func(e *engine.Engine)) []byte {
		e, err := engine.Decode(good)
		require.NoError(t, err)
		change(e)
		b, err := e.Encode()
		require.NoError(t, err)
		return b
	}
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 1
		return b
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"appended bytes":       {append(bytes.Clone(good), 0), "1 bytes follow the trailer"},
		"kiln version flipped": {flip(19), "checksum mismatch in the header"},
		"header count":         {flip(12), "checksum mismatch in the header"},
		"section table":        {flip(60), "checksum mismatch in the section table"},
		"shortened weights":    {edited(func(e *engine.Engine) { e.Weights = e.Weights[:len(e.Weights)-64] }), `section "weights" holds 384 bytes, the code's record says 448`},
		"arena 0":              {edited(func(e *engine.Engine) { e.Meta.ArenaBytes = 0 }), "metadata arena_bytes is 0, the code needs 64"},
		"no outputs":           {edited(func(e *engine.Engine) { e.Meta.Outputs = nil }), "the engine has no outputs"},
		"output index":         {edited(func(e *engine.Engine) { e.Meta.Outputs[1].Index = 9 }), `output "z" has io index 9, out of range`},
		"output shape [1,1]":   {edited(func(e *engine.Engine) { e.Meta.Outputs[0].Shape = []int64{1, 1} }), "metadata says float[1 1] (4 bytes), the code writes float[2 4] (32 bytes)"},
	}
	path := filepath.Join(t.TempDir(), "e.kiln")
	for name, c := range cases {
		require.NoError(t, os.WriteFile(path, c.data, 0o644))
		for _, args := range [][]string{{"check", path, "--test-data", testData}, {"run", path}, {"bench", path, "--iterations", "1"}} {
			r := runInfer(t, bin, args...)
			assert.Equal(t, 1, r.code, "%s: infer %s: %s", name, args[0], r.stderr)
			assert.Empty(t, r.stdout, "%s: infer %s", name, args[0])
			assert.Equal(t, "infer: "+path+": ", r.stderr[:min(len(r.stderr), len("infer: "+path+": "))], "%s: %s", name, r.stderr)
			assert.Contains(t, r.stderr, c.want, "%s: infer %s", name, args[0])
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "%s: one line: %q", name, r.stderr)
		}
	}

	if kruntime.HostTriple() != "x86_64-unknown-linux-gnu" || len(kruntime.MissingFeatures([]string{"avx2", "fma"})) > 0 {
		t.Skip("the bundled engine's code needs x86-64 with AVX2 and FMA")
	}
	require.NoError(t, os.WriteFile(path, good, 0o644))
	r := runInfer(t, bin, "check", path, "--test-data", testData)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 2, strings.Count(r.stdout, "PASS"), r.stdout)
}

// --require-signed runs only engines signed by the key, and names what is
// wrong with the others: unsigned, or signed by which other key.
func TestRequireSigned(t *testing.T) {
	bin := buildInfer(t)
	dir := t.TempDir()
	good, err := os.ReadFile(tinyEngine)
	require.NoError(t, err)
	writeKey := func(name string, seed byte) (string, ed25519.PrivateKey) {
		priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
		data, err := engine.MarshalPublicKey(priv.Public().(ed25519.PublicKey))
		require.NoError(t, err)
		path := filepath.Join(dir, name+".pub")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		return path, priv
	}
	pub, key := writeKey("release", 1)
	_, other := writeKey("other", 2)
	signed, err := engine.Sign(good, key)
	require.NoError(t, err)
	byOther, err := engine.Sign(good, other)
	require.NoError(t, err)
	paths := map[string]string{}
	for name, data := range map[string][]byte{"unsigned": good, "signed": signed, "other": byOther} {
		paths[name] = filepath.Join(dir, name+".kiln")
		require.NoError(t, os.WriteFile(paths[name], data, 0o644))
	}
	testData := tinyTestData(t, func() *engine.Engine { e, err := engine.Decode(good); require.NoError(t, err); return e }())

	for _, cmd := range [][]string{{"run"}, {"check", "--test-data", testData}, {"bench", "--iterations", "1", "--warmup", "0"}} {
		r := runInfer(t, bin, append(cmd, "--require-signed", pub, paths["unsigned"])...)
		assert.Equal(t, 1, r.code, r.stderr)
		assert.Contains(t, r.stderr, paths["unsigned"]+": the engine is not signed")

		r = runInfer(t, bin, append(cmd, "--require-signed", pub, paths["other"])...)
		assert.Equal(t, 1, r.code, r.stderr)
		assert.Contains(t, r.stderr, "signed by another key ("+engine.Fingerprint(other.Public().(ed25519.PublicKey))+")")

		r = runInfer(t, bin, append(cmd, "--require-signed", filepath.Join(dir, "missing.pub"), paths["signed"])...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "missing.pub")

		r = runInfer(t, bin, append(cmd, "--require-signed", paths["signed"], paths["signed"])...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "no PEM block")
	}

	if kruntime.HostTriple() != "x86_64-unknown-linux-gnu" || len(kruntime.MissingFeatures([]string{"avx2", "fma"})) > 0 {
		t.Skip("the bundled engine's code needs x86-64 with AVX2 and FMA")
	}
	for _, cmd := range [][]string{{"run"}, {"check", "--test-data", testData}, {"bench", "--iterations", "1", "--warmup", "0"}} {
		r := runInfer(t, bin, append(cmd, "--require-signed", pub, paths["signed"])...)
		assert.Equal(t, 0, r.code, "%v: %s", cmd, r.stderr)
	}
}
