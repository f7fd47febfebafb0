package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// tinyEngine is runtime's bundled engine (x86-64 code; inspect reads it
// on any machine, without llc).
const tinyEngine = "../../runtime/testdata/tiny.kiln"

// editedEngine re-encodes the bundled engine after change, so every
// checksum holds and only the consistency checks can refuse it.
func editedEngine(t *testing.T, change func(e *engine.Engine)) []byte {
	t.Helper()
	buf, err := os.ReadFile(tinyEngine)
	require.NoError(t, err)
	e, err := engine.Decode(buf)
	require.NoError(t, err)
	change(e)
	out, err := e.Encode()
	require.NoError(t, err)
	return out
}

// cc inspect verifies an engine as infer's loader does (integrity, then
// metadata against the code's ABI record) and refuses a damaged or
// inconsistent one with exit status 1 and one line naming the region or
// field.
func TestInspectEngineRefusals(t *testing.T) {
	good, err := os.ReadFile(tinyEngine)
	require.NoError(t, err)
	flip := func(at int) []byte {
		b := append([]byte(nil), good...)
		b[at] ^= 1
		return b
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"appended bytes":       {append(append([]byte(nil), good...), "junk"...), "4 bytes follow the trailer"},
		"kiln version flipped": {flip(19), "checksum mismatch in the header"},
		"section table":        {flip(70), "checksum mismatch in the section table"},
		"last byte":            {flip(len(good) - 1), "checksum mismatch in the trailer"},
		"truncated":            {good[:len(good)-20], "truncated"},
		"shortened weights": {editedEngine(t, func(e *engine.Engine) { e.Weights = e.Weights[:len(e.Weights)-64] }),
			`section "weights" holds 384 bytes, the code's record says 448`},
		"arena 0":                   {editedEngine(t, func(e *engine.Engine) { e.Meta.ArenaBytes = 0 }), "metadata arena_bytes is 0, the code needs 64"},
		"no outputs":                {editedEngine(t, func(e *engine.Engine) { e.Meta.Outputs = nil }), "the engine has no outputs"},
		"output index out of range": {editedEngine(t, func(e *engine.Engine) { e.Meta.Outputs[0].Index = 7 }), `output "y" has io index 7, out of range`},
		"output shape [1,1]": {editedEngine(t, func(e *engine.Engine) { e.Meta.Outputs[0].Shape = []int64{1, 1} }),
			`output "y" (io slot 2): metadata says float[1 1] (4 bytes), the code writes float[2 4] (32 bytes)`},
	}
	dir := t.TempDir()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.kiln")
			require.NoError(t, os.WriteFile(path, c.data, 0o644))
			r := cc(t, "inspect", path)
			requireOneErrorLine(t, r, path)
			assert.Contains(t, r.stderr, c.want)
		})
	}

	r := cc(t, "inspect", tinyEngine)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "sha256       ")
	assert.Contains(t, r.stdout, "(the digest: every byte but the trailer, verified)")
	assert.Contains(t, r.stdout, "signature    none")
	r = cc(t, "inspect", "--json", tinyEngine)
	require.Equal(t, 0, r.code, r.stderr)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	assert.Len(t, info["sha256"], 64)
	assert.Equal(t, false, info["signed"])
	assert.NotContains(t, info, "signer")
}

// keygen writes a key pair once (the private key readable by its owner
// only) and never overwrites one.
func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "release")
	r := cc(t, "keygen", "--out", name)
	require.Equal(t, 0, r.code, r.stderr)
	st, err := os.Stat(name + ".key")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	priv, err := engine.ReadPrivateKeyFile(name + ".key")
	require.NoError(t, err)
	pub, err := engine.ReadPublicKeyFile(name + ".pub")
	require.NoError(t, err)
	assert.Equal(t, priv.Public(), pub)
	assert.Contains(t, r.stdout, engine.Fingerprint(pub))

	before, err := os.ReadFile(name + ".key")
	require.NoError(t, err)
	r = cc(t, "keygen", "--out", name)
	requireOneErrorLine(t, r, name+".key")
	assert.Contains(t, r.stderr, "already exists")
	after, err := os.ReadFile(name + ".key")
	require.NoError(t, err)
	assert.Equal(t, before, after)

	r = cc(t, "keygen")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--out NAME is required")
}

// build --sign stores the key's signature in the engine; inspect shows the
// key's fingerprint. A key that is not a private key, --sign without an
// engine to sign, and an output over the key file are refused before the
// build.
func TestBuildSign(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	require.Equal(t, 0, cc(t, "keygen", "--out", key).code)
	pub, err := engine.ReadPublicKeyFile(key + ".pub")
	require.NoError(t, err)

	r := cc(t, "build", "--sign", key+".pub", "-o", filepath.Join(dir, "x.kiln"), mlpModel)
	requireOneErrorLine(t, r, key+".pub")
	assert.Contains(t, r.stderr, `want "PRIVATE KEY"`)
	r = cc(t, "build", "--sign", key+".key", "--emit", "llvm", "-o", filepath.Join(dir, "x.ll"), mlpModel)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--sign signs engines")
	keyBytes, err := os.ReadFile(key + ".key")
	require.NoError(t, err)
	r = cc(t, "build", "--sign", key+".key", "-o", key+".key", mlpModel)
	requireOneErrorLine(t, r, key+".key")
	assert.Contains(t, r.stderr, "same file as the --sign key")
	after, err := os.ReadFile(key + ".key")
	require.NoError(t, err)
	assert.Equal(t, keyBytes, after, "the key must survive")

	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	out := filepath.Join(dir, "mlp.kiln")
	r = cc(t, "build", "--sign", key+".key", "-o", out, mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	e, err := engine.Decode(data)
	require.NoError(t, err)
	require.NoError(t, e.VerifySigner(pub))
	r = cc(t, "inspect", out)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "signature    ed25519, key "+engine.Fingerprint(pub)+" (verified)")
}

// cc inspect shows the inputs that have initializer defaults: optional
// ones (--overridable-initializers) marked so, and those compiled as
// constants listed by name.
func TestInspectEngineDefaults(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	m, err := onnx.ReadFile(mlpModel)
	require.NoError(t, err)
	m.IRVersion = max(m.IRVersion, 4)
	bias := m.Graph.Initializers[len(m.Graph.Initializers)-1]
	m.Graph.Inputs = append(m.Graph.Inputs, bias)
	model := filepath.Join(dir, "defaults.onnx")
	require.NoError(t, onnx.WriteFile(model, m))
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "(and 1 inputs with initializer defaults compiled as constants: [" + ir.QuoteName(bias.Name) + "])"},
		{[]string{"--overridable-initializers"}, ir.QuoteName(bias.Name)[1:len(ir.QuoteName(bias.Name))-1] + " "},
	} {
		out := filepath.Join(dir, "e.kiln")
		r := cc(t, append(append([]string{"build", "-o", out}, c.flags...), model)...)
		require.Equal(t, 0, r.code, r.stderr)
		r = cc(t, "inspect", out)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, c.want)
		if c.flags != nil {
			assert.Contains(t, r.stdout, "(optional: its initializer is the default)")
		}
	}
}
