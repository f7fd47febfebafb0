package runtime_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	"github.com/kiln-ml/kiln/runtime/engine"
	"github.com/kiln-ml/kiln/runtime/reference"
)

var update = flag.Bool("update", false, "rebuild testdata/tiny.kiln from testdata/tiny.onnxtxt")

const (
	tinyModel  = "testdata/tiny.onnxtxt"
	tinyEngine = "testdata/tiny.kiln"
)

// tiny returns the bundled tiny engine (two inputs, two outputs, weights
// and an arena), built for x86-64-v3 so that it runs on any AVX2 machine
// and so that the metadata fuzz target runs where llc is absent.
// `go test ./runtime -run TestTinyEngine -update` rebuilds it (needed when
// the engine format or the ABI record changes).
func tiny(t testing.TB) []byte {
	t.Helper()
	if *update {
		needLLC(t)
		out, err := build.Build(tinyModel, build.Options{OptLevel: 2, CPU: "x86-64-v3", Winograd: cpu.WinogradOff})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(tinyEngine, out.Engine, 0o644))
	}
	buf, err := os.ReadFile(tinyEngine)
	require.NoError(t, err)
	if runtime.HostTriple() != "x86_64-unknown-linux-gnu" {
		t.Skipf("%s holds x86-64 code; this machine is %s", tinyEngine, runtime.HostTriple())
	}
	if missing := runtime.MissingFeatures([]string{"avx", "avx2", "fma"}); len(missing) > 0 {
		t.Skipf("%s needs AVX2 and FMA; this CPU lacks %v", tinyEngine, missing)
	}
	return buf
}

// inputsBySlot makes seeded random inputs, keyed by io slot.
func inputsBySlot(eng *runtime.Engine, seed int64) map[int]*ir.Tensor {
	rng := rand.New(rand.NewSource(seed))
	in := map[int]*ir.Tensor{}
	for _, b := range eng.Inputs() {
		t := ir.NewTensor(ir.Float32, b.Shape...)
		for i := range t.Float32s() {
			t.Float32s()[i] = float32(rng.NormFloat64())
		}
		in[b.Index] = t
	}
	return in
}

// runBySlot runs eng on inputs keyed by io slot, on one thread, and returns
// its outputs keyed by io slot: what the code computes, whatever the
// metadata calls the bindings.
func runBySlot(t testing.TB, eng *runtime.Engine, inputs map[int]*ir.Tensor) map[int]*ir.Tensor {
	t.Helper()
	feeds := map[string]*ir.Tensor{}
	for _, b := range eng.Inputs() {
		feeds[b.Name] = inputs[b.Index]
	}
	ctx, err := eng.NewContext(runtime.Options{Threads: 1})
	require.NoError(t, err)
	outs, err := ctx.Run(feeds)
	require.NoError(t, err)
	got := map[int]*ir.Tensor{}
	for _, b := range eng.Outputs() {
		got[b.Index] = outs[b.Name]
	}
	return got
}

// The bundled engine is current (it loads) and computes what the
// reference executor computes for its model.
func TestTinyEngine(t *testing.T) {
	buf := tiny(t)
	eng, err := runtime.LoadBytes(buf)
	require.NoError(t, err, "rebuild it: go test ./runtime -run TestTinyEngine -update")
	defer eng.Close()
	m, err := build.ReadModel(tinyModel)
	require.NoError(t, err)
	in := inputsBySlot(eng, 1)
	feeds := map[string]*ir.Tensor{}
	for _, b := range eng.Inputs() {
		feeds[b.Name] = in[b.Index]
	}
	ex, err := reference.New(m)
	require.NoError(t, err)
	want, err := ex.Run(feeds)
	require.NoError(t, err)
	got := runBySlot(t, eng, in)
	for _, b := range eng.Outputs() {
		w, g := want[b.Name].Float32s(), got[b.Index].Float32s()
		require.Len(t, g, len(w))
		for i := range w {
			assert.InDelta(t, w[i], g[i], 1e-5, "%s[%d]", b.Name, i)
		}
	}
}

// sameValues compares dtype, shape and bits, not names.
func sameValues(a, b *ir.Tensor) bool {
	return a != nil && b != nil && a.DType == b.DType && slices.Equal(a.Dims, b.Dims) && bytes.Equal(a.Raw, b.Raw)
}

// edit decodes buf, applies change to the engine and encodes it again: the
// checksums are all recomputed, so only the loader's consistency checks can
// refuse the result.
func edit(t testing.TB, buf []byte, change func(e *engine.Engine)) []byte {
	t.Helper()
	e, err := engine.Decode(buf)
	require.NoError(t, err)
	change(e)
	f, err := e.Encode()
	require.NoError(t, err)
	return f
}

// Metadata or sections edited to disagree with the code, with every
// checksum recomputed, are refused before any code runs, naming the field,
// what the engine says and what the code needs. (Before the code carried
// its ABI record, arena 0, no outputs and an out-of-range output index
// crashed the process, and an output shape of [1,1] let the code write 8
// floats into a 1-float buffer.)
func TestInconsistentEnginesAreRefused(t *testing.T) {
	buf := tiny(t)
	base, err := engine.Decode(buf)
	require.NoError(t, err)
	require.Positive(t, base.Meta.ArenaBytes, "the tiny engine needs an arena for these tests")
	other := edit(t, buf, func(e *engine.Engine) {})
	require.Equal(t, buf, other, "re-encoding an engine gives the same bytes")

	cases := []struct {
		name   string
		change func(e *engine.Engine)
		is     error
		want   string
	}{
		{"arena 0", func(e *engine.Engine) { e.Meta.ArenaBytes = 0 }, runtime.ErrInconsistent, "metadata arena_bytes is 0, the code needs 64"},
		{"arena larger", func(e *engine.Engine) { e.Meta.ArenaBytes = 1 << 20 }, runtime.ErrInconsistent, "arena_bytes is 1048576"},
		{"no outputs", func(e *engine.Engine) { e.Meta.Outputs = nil }, engine.ErrBadMetadata, "no outputs"},
		{"output index out of range", func(e *engine.Engine) { e.Meta.Outputs[0].Index = 7 }, engine.ErrBadMetadata, `output "y" has io index 7, out of range`},
		{"output shape [1,1]", func(e *engine.Engine) { e.Meta.Outputs[0].Shape = []int64{1, 1} },
			runtime.ErrInconsistent, `output "y" (io slot 2): metadata says float[1 1] (4 bytes), the code writes float[2 4] (32 bytes)`},
		{"output transposed", func(e *engine.Engine) { e.Meta.Outputs[1].Shape = []int64{8, 2} }, runtime.ErrInconsistent, `output "z"`},
		{"input shape", func(e *engine.Engine) { e.Meta.Inputs[0].Shape = []int64{2, 9} }, runtime.ErrInconsistent, `input "x" (io slot 0): metadata says float[2 9] (72 bytes), the code reads float[2 8] (64 bytes)`},
		{"dtype of the same size", func(e *engine.Engine) { e.Meta.Outputs[0].DType = "int32" }, runtime.ErrInconsistent, "metadata says int32[2 4]"},
		{"unknown dtype", func(e *engine.Engine) { e.Meta.Inputs[1].DType = "float128" }, runtime.ErrInconsistent, `unsupported dtype "float128"`},
		{"input and output swapped", func(e *engine.Engine) {
			e.Meta.Inputs[0].Index, e.Meta.Outputs[1].Index = e.Meta.Outputs[1].Index, e.Meta.Inputs[0].Index
		}, runtime.ErrInconsistent, "the code uses slot"},
		{"the last output dropped", func(e *engine.Engine) { e.Meta.Outputs = e.Meta.Outputs[:1] }, runtime.ErrInconsistent, "metadata binds 3 io slots (2 inputs, 1 outputs), the code has 4"},
		{"the first output dropped", func(e *engine.Engine) { e.Meta.Outputs = e.Meta.Outputs[1:] }, engine.ErrBadMetadata, "io index 3, out of range"},
		{"an io slot too many", func(e *engine.Engine) {
			e.Meta.Outputs = append(e.Meta.Outputs, engine.Binding{Name: "extra", DType: "float", Shape: []int64{1}, Index: 4})
		}, runtime.ErrInconsistent, "metadata binds 5 io slots (2 inputs, 3 outputs), the code has 4"},
		{"shortened weights", func(e *engine.Engine) { e.Weights = e.Weights[:len(e.Weights)-64] },
			runtime.ErrInconsistent, `section "weights" holds 384 bytes, the code's record says 448`},
		{"longer weights", func(e *engine.Engine) { e.Weights = append(slices.Clone(e.Weights), 0) }, runtime.ErrInconsistent, `section "weights" holds 449 bytes`},
		{"kernel list", func(e *engine.Engine) { e.Meta.Kernels = e.Meta.Kernels[:1] }, runtime.ErrInconsistent, "metadata lists 1 kernels, the code has 3 steps"},
		{"features", func(e *engine.Engine) { e.Meta.Target.Features = []string{"avx"} }, runtime.ErrInconsistent, "the code was compiled for [avx avx2 fma]"},
		{"code without an ABI record", func(e *engine.Engine) {
			so := slices.Clone(e.Code["x86_64-unknown-linux-gnu"])
			i := bytes.Index(so, []byte(cpuABISymbol+"\x00"))
			require.Positive(t, i)
			so[i+len(cpuABISymbol)-1] = 'X'
			e.Code["x86_64-unknown-linux-gnu"] = so
		}, runtime.ErrInconsistent, "exports no kiln_abi record"},
		{"code that is not ELF", func(e *engine.Engine) { e.Code["x86_64-unknown-linux-gnu"] = []byte("#!/bin/sh\n") }, runtime.ErrInconsistent, "not an ELF file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := edit(t, buf, c.change)
			_, err := runtime.LoadBytes(bad)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.is)
			assert.ErrorContains(t, err, c.want)
			if e, derr := engine.Decode(bad); derr == nil {
				assert.Error(t, runtime.Validate(e), "Validate refuses what Load refuses")
			}
		})
	}

	// Validate (cc inspect's check) reads every code section, not only the
	// one this machine would load.
	e, err := engine.Decode(buf)
	require.NoError(t, err)
	e.Code["aarch64-unknown-linux-gnu"] = e.Code["x86_64-unknown-linux-gnu"]
	err = runtime.Validate(e)
	assert.ErrorIs(t, err, runtime.ErrInconsistent)
	assert.ErrorContains(t, err, `section "code/aarch64-unknown-linux-gnu": the code is EM_X86_64 machine code, but it is stored as code for EM_AARCH64`)

	// Edits the code does not depend on load, and compute what the
	// original computes.
	renamed := edit(t, buf, func(e *engine.Engine) {
		e.Meta.Inputs[0].Name, e.Meta.Outputs[0].Name = "renamed input", "renamed output"
		e.Meta.MaxThreads, e.Meta.ModelName, e.Plan = 3, "other", []byte("another plan")
	})
	a, err := runtime.LoadBytes(buf)
	require.NoError(t, err)
	defer a.Close()
	b, err := runtime.LoadBytes(renamed)
	require.NoError(t, err)
	defer b.Close()
	in := inputsBySlot(a, 2)
	want, got := runBySlot(t, a, in), runBySlot(t, b, in)
	for slot, w := range want {
		assert.True(t, sameValues(w, got[slot]), "slot %d", slot)
	}
}

const cpuABISymbol = "kiln_abi"

// An engine that a compile of a bigger model gives, edited the ways the
// issue reproduced, is refused too (the tiny engine's code is simple; this
// one's arena is planned over many layers).
func TestInconsistentBuiltEngine(t *testing.T) {
	needLLC(t)
	built, err := build.Build(filepath.Join(models, "digits_cnn.onnx"), build.Options{OptLevel: 2})
	require.NoError(t, err)
	for name, change := range map[string]func(e *engine.Engine){
		"arena 0":      func(e *engine.Engine) { e.Meta.ArenaBytes = 0 },
		"shape [1,1]":  func(e *engine.Engine) { e.Meta.Outputs[0].Shape = []int64{1, 1} },
		"no outputs":   func(e *engine.Engine) { e.Meta.Outputs = nil },
		"index 9":      func(e *engine.Engine) { e.Meta.Outputs[0].Index = 9 },
		"weights -64B": func(e *engine.Engine) { e.Weights = e.Weights[:len(e.Weights)-64] },
	} {
		_, err := runtime.LoadBytes(edit(t, built.Engine, change))
		assert.Error(t, err, name)
		assert.True(t, errors.Is(err, runtime.ErrInconsistent) || errors.Is(err, engine.ErrBadMetadata), "%s: %v", name, err)
	}
}

// RequireSigned loads an engine signed by the key and refuses one that is
// unsigned or signed by another key, naming which.
func TestRequireSigned(t *testing.T) {
	buf := tiny(t)
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	pub := key.Public().(ed25519.PublicKey)
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	signed, err := engine.Sign(buf, key)
	require.NoError(t, err)
	byOther, err := engine.Sign(buf, other)
	require.NoError(t, err)

	opts := runtime.LoadOptions{RequireSigned: pub}
	_, err = runtime.LoadBytesWith(buf, opts)
	assert.ErrorIs(t, err, engine.ErrUnsigned)
	_, err = runtime.LoadBytesWith(byOther, opts)
	assert.ErrorIs(t, err, engine.ErrWrongSigner)
	assert.ErrorContains(t, err, engine.Fingerprint(other.Public().(ed25519.PublicKey)))

	eng, err := runtime.LoadBytesWith(signed, opts)
	require.NoError(t, err)
	defer eng.Close()
	assert.Equal(t, pub, eng.Signer)
	// Without the option, signed and unsigned engines both load.
	for _, b := range [][]byte{buf, byOther} {
		e, err := runtime.LoadBytes(b)
		require.NoError(t, err)
		e.Close()
	}

	path := filepath.Join(t.TempDir(), "e.kiln")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	_, err = runtime.LoadWith(path, opts)
	assert.ErrorContains(t, err, path+": the engine is not signed")
}

// FuzzEngineMetadata mutates the tiny engine's metadata and the size of its
// weights, then recomputes every checksum so the mutation reaches the
// loader's validation. The property: Load fails with an error, or the
// engine runs and computes exactly what the original computes (io slot by
// io slot) — never a crash or an out-of-bounds write.
//
// edits is either raw metadata JSON (when it starts with '{') or a list of
// 3-byte field edits applied to the original metadata (see editMeta), so
// that most inputs are well-formed JSON and reach the consistency checks.
func FuzzEngineMetadata(f *testing.F) {
	buf := tiny(f)
	base, err := engine.Decode(buf)
	require.NoError(f, err)
	orig, err := runtime.LoadBytes(buf)
	require.NoError(f, err)
	defer orig.Close()
	in := inputsBySlot(orig, 3)
	want := runBySlot(f, orig, in)

	raw, err := json.Marshal(base.Meta)
	require.NoError(f, err)
	f.Add(raw, int16(0))
	f.Add(raw, int16(-64))
	f.Add(raw, int16(1))
	f.Add([]byte(`{"kiln_version": "0.1.0", "outputs": []}`), int16(0))
	for _, edits := range [][]byte{
		{}, {editArena, 0, 0}, {editDrop, 2, 0}, {editIndex, 2, 9}, {editDim, 2, 1}, {editSwap, 0, 1}, {editSwap, 0, 2},
		{editKernels, 0, 1}, {editDType, 3, 6}, {editName, 0, 1}, {editRank, 1, 0}, {editMove, 2, 0}, {editFeatures, 0, 0},
		{editIndex, 0, 1, editIndex, 1, 0}, {editMaxThreads, 0, 64},
	} {
		f.Add(edits, int16(0))
	}
	f.Fuzz(func(t *testing.T, edits []byte, weightsDelta int16) {
		meta := edits
		if len(edits) == 0 || edits[0] != '{' {
			m := base.Meta
			m.Inputs, m.Outputs = slices.Clone(m.Inputs), slices.Clone(m.Outputs)
			m.Kernels, m.Target.Features = slices.Clone(m.Kernels), slices.Clone(m.Target.Features)
			editMeta(&m, edits)
			var err error
			if meta, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		weights := base.Weights
		if n := len(weights) + int(weightsDelta); n < len(weights) {
			weights = weights[:max(n, 0)]
		} else if n > len(weights) {
			weights = append(slices.Clone(weights), make([]byte, n-len(weights))...)
		}
		file := &engine.File{KilnVersion: base.Meta.KilnVersion, Sections: []engine.Section{
			{Name: engine.SectionMeta, Data: meta}, {Name: engine.SectionPlan, Data: base.Plan},
			{Name: engine.SectionWeights, Data: weights},
			{Name: "code/x86_64-unknown-linux-gnu", Data: base.Code["x86_64-unknown-linux-gnu"]},
		}}
		eng, err := runtime.LoadBytes(file.Marshal())
		if err != nil {
			if strings.Contains(err.Error(), "\x00") {
				t.Fatalf("an error message carries a NUL: %q", err)
			}
			return
		}
		defer eng.Close()
		got := runBySlot(t, eng, in)
		if len(got) != len(want) {
			t.Fatalf("%d outputs, the original has %d", len(got), len(want))
		}
		for slot, w := range want {
			if !sameValues(w, got[slot]) {
				t.Fatalf("io slot %d: the output differs from the original engine's", slot)
			}
		}
	})
}

// Metadata field edits for FuzzEngineMetadata: each is 3 bytes, the edit,
// which binding (counting inputs then outputs) or item, and a value.
const (
	editArena = iota
	editIndex
	editDim
	editRank
	editDrop
	editDup
	editSwap
	editDType
	editName
	editMove
	editKernels
	editFeatures
	editMaxThreads
	editPrecision
	editTriple
	editCount
)

func editMeta(m *engine.Metadata, edits []byte) {
	binding := func(a byte) *engine.Binding {
		n := len(m.Inputs) + len(m.Outputs)
		if n == 0 {
			return nil
		}
		i := int(a) % n
		if i < len(m.Inputs) {
			return &m.Inputs[i]
		}
		return &m.Outputs[i-len(m.Inputs)]
	}
	values := []int64{0, 1, 2, 4, 8, 16, 63, 64, 65, -1, 1 << 31, 1 << 32, 1<<62 + 1, 1<<63 - 1}
	value := func(v byte) int64 {
		if int(v) < len(values) {
			return values[v]
		}
		return int64(v)
	}
	for i := 0; i+2 < len(edits); i += 3 {
		op, a, v := edits[i]%editCount, edits[i+1], edits[i+2]
		b := binding(a)
		switch op {
		case editArena:
			m.ArenaBytes = value(v) * 16
		case editIndex:
			if b != nil {
				b.Index = int(int8(v))
			}
		case editDim:
			if b != nil && len(b.Shape) > 0 {
				b.Shape = slices.Clone(b.Shape)
				b.Shape[int(v)%len(b.Shape)] = value(v / 16)
			}
		case editRank:
			if b != nil {
				if v%2 == 0 && len(b.Shape) > 0 {
					b.Shape = slices.Clone(b.Shape[1:])
				} else {
					b.Shape = append([]int64{value(v / 2)}, b.Shape...)
				}
			}
		case editDrop:
			if n := len(m.Inputs); int(a)%max(n+len(m.Outputs), 1) < n {
				m.Inputs = slices.Delete(slices.Clone(m.Inputs), int(a)%n, int(a)%n+1)
			} else if len(m.Outputs) > 0 {
				j := (int(a)%(n+len(m.Outputs)) - n)
				m.Outputs = slices.Delete(slices.Clone(m.Outputs), j, j+1)
			}
		case editDup:
			if b != nil {
				c := *b
				if v%2 == 0 {
					m.Inputs = append(m.Inputs, c)
				} else {
					m.Outputs = append(m.Outputs, c)
				}
			}
		case editSwap:
			if c := binding(v); b != nil && c != nil {
				b.Index, c.Index = c.Index, b.Index
			}
		case editDType:
			if b != nil {
				b.DType = []string{"float", "int32", "int64", "uint8", "bool", "float16", "double", "int4", "string", "", "float128"}[int(v)%11]
			}
		case editName:
			if b != nil {
				b.Name = []string{"x", "r", "y", "z", "", "a\x00b", "ü", "\xff"}[int(v)%8]
			}
		case editMove:
			if len(m.Outputs) > 0 && v%2 == 0 {
				m.Inputs = append(m.Inputs, m.Outputs[0])
				m.Outputs = slices.Clone(m.Outputs[1:])
			} else if len(m.Inputs) > 0 {
				m.Outputs = append(m.Outputs, m.Inputs[0])
				m.Inputs = slices.Clone(m.Inputs[1:])
			}
		case editKernels:
			m.Kernels = slices.Clone(m.Kernels[:min(int(v), len(m.Kernels))])
		case editFeatures:
			m.Target.Features = [][]string{nil, {"avx"}, {"avx", "avx2", "fma", "avx512f"}, {"avx2", "avx", "fma"}}[int(v)%4]
		case editMaxThreads:
			m.MaxThreads = int(int8(v))
		case editPrecision:
			m.Precision = []string{"fp32", "int8", "fp16"}[int(v)%3]
		case editTriple:
			m.Target.Triple = []string{"x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64"}[int(v)%3]
		}
	}
}
