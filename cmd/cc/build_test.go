package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/codegen/lower"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/passes"
)

func TestPasses(t *testing.T) {
	r := cc(t, "passes")
	require.Equal(t, 0, r.code, r.stderr)
	for _, p := range passes.O2 {
		assert.Contains(t, r.stdout, p.Name)
	}
}

// --emit ir with --dump-after all writes the graph after every pass, each
// file parsing back; --time-passes prints one row per pass and the
// memplan arena.
func TestBuildDumpAfter(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "opt.onnxtxt")
	r := cc(t, "build", "--emit", "ir", "--dump-after", "all", "--dump-dir", dir, "--time-passes", "-o", out, mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	for i, p := range passes.O2 {
		path := filepath.Join(dir, fmt.Sprintf("%02d-%s.onnxtxt", i, p.Name))
		_, err := text.ParseFile(path)
		assert.NoError(t, err, "dump after %s", p.Name)
		assert.Contains(t, r.stdout, p.Name, "timing row")
	}
	assert.Contains(t, r.stdout, "memplan: arena ")
	_, err := text.ParseFile(out)
	assert.NoError(t, err)

	r = cc(t, "build", "--dump-after", "nosuchpass", mlpModel)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no pass named "nosuchpass"`)
}

// --dump-after names the lowering stages as it names passes: a CUDA
// build's program after each (its slots; once inlined, its steps), a CPU
// build's nodes with their lowering and places.
func TestBuildDumpAfterStages(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "mlp.kiln")
	r := cc(t, "build", "--target", "cuda-sim", "--dump-after", "support,memory", "--dump-dir", dir, "-o", out, mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	for i, stage := range lower.Stages {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("kernels-%02d-%s.txt", i+1, stage.Name)))
		if stage.Name != "support" && stage.Name != "memory" {
			assert.Error(t, err, "no dump after %s", stage.Name)
			continue
		}
		require.NoError(t, err, stage.Name)
		assert.Contains(t, string(data), `input  0 "input" float[1,64]`, stage.Name)
		if stage.Name == "memory" {
			assert.Contains(t, string(data), "step 0: ")
		}
	}
	cpuDir := t.TempDir()
	r = cc(t, "build", "--dump-after", "memory", "--dump-dir", cpuDir, "-o", filepath.Join(dir, "cpu.kiln"), mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	data, err := os.ReadFile(filepath.Join(cpuDir, fmt.Sprintf("kernels-%02d-memory.txt", slices.Index(cpu.StageNames(), "memory")+1)))
	require.NoError(t, err)
	assert.Contains(t, string(data), `reads "input" io[0]`)
	r = cc(t, "build", "--target", "cuda-sim", "--dump-after", "groups", "-o", filepath.Join(dir, "sim.kiln"), mlpModel)
	assert.Equal(t, 1, r.code, "groups is the CPU target's stage")
	assert.Contains(t, r.stderr, `no pass named "groups"`)
}

// An engine build writes a file infer can load; a model with an op the
// CPU backend lacks is refused at build time with the op named.
func TestBuildEngine(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "mlp.kiln")
	r := cc(t, "build", "-o", out, mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	st, err := os.Stat(out)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(1000))

	r = cc(t, "inspect", out)
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{"precision    fp32", "x86_64-unknown-linux-gnu", "arena", "weights"} {
		assert.Contains(t, r.stdout, want)
	}
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	data[len(data)-10] ^= 1 // inside the last section
	require.NoError(t, os.WriteFile(out, data, 0o644))
	r = cc(t, "inspect", out)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "checksum mismatch")

	unsupported := filepath.Join(t.TempDir(), "u.onnxtxt")
	require.NoError(t, os.WriteFile(unsupported, []byte(`<ir_version: 9, opset_import: ["" : 20]>
g (uint8[64] B) => (float Y) {
  I = ImageDecoder(B)
  F = Cast<to = 1>(I)
  Y = ReduceSum<keepdims = 0>(F)
}
`), 0o644))
	r = cc(t, "build", "-o", filepath.Join(t.TempDir(), "u.kiln"), unsupported)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "Cast (opset 20)")
	assert.Contains(t, r.stderr, "which ImageDecoder computes on the host at a shape only the data gives")
}

// --emit kernels writes the lowered program on every target: the CPU's
// steps name each node's lowering, and a Loop's body is listed under it.
func TestBuildEmitKernels(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, target := range []string{"", "cuda-sim"} {
		out := filepath.Join(dir, "mlp"+target+".kernels.txt")
		args := []string{"build", "--emit", "kernels", "-o", out, mlpModel}
		if target != "" {
			args = append(args[:1], append([]string{"--target", target}, args[1:]...)...)
		}
		r := cc(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(data), "program: ", target)
		assert.Contains(t, string(data), `input  0 "input" float[1,64]`, target)
		assert.Contains(t, string(data), "step 0: ", target)
	}
	data, err := os.ReadFile(filepath.Join(dir, "mlp.kernels.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(data), "hand-written", "the CPU's steps say how each node is lowered")
}
