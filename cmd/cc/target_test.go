package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/codegen/cuda"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// TestBuildTarget: --target builds for another architecture (the CPU
// defaulting to that architecture's baseline, recorded with the target),
// an unknown target is a usage error, and an unknown AArch64 CPU an error
// listing the known ones.
func TestBuildTarget(t *testing.T) {
	if err := cpu.AvailableFor(cpu.TripleARM64); err != nil {
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "mlp.kiln")
	r := cc(t, "build", "--target", "aarch64-linux-gnu", mlpModel, "-o", out)
	require.Equal(t, 0, r.code, r.stderr)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	e, err := engine.Decode(data)
	require.NoError(t, err)
	assert.Equal(t, engine.Target{Triple: "aarch64-unknown-linux-gnu", CPU: "generic", Features: []string{"asimd"}}, e.Meta.Target)
	assert.Contains(t, e.Meta.BuildFlags, "--target=aarch64-linux-gnu")
	assert.Contains(t, e.Code, "aarch64-unknown-linux-gnu")

	r = cc(t, "build", "--target", "mips-linux-gnu", mlpModel, "-o", out)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--target: unknown target "mips-linux-gnu"`)

	r = cc(t, "build", "--target", "aarch64-linux-gnu", "--cpu", "znver3", mlpModel, "-o", out)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `unknown AArch64 CPU "znver3" (use apple-a14, apple-m1,`)
}

// TestAArch64BackendNeedsInfer: cc test --backend aarch64 without qemu or
// an arm64 infer says how to get them.
func TestAArch64BackendNeedsInfer(t *testing.T) {
	r := cc(t, "test", "--backend", "aarch64", "--infer", filepath.Join(t.TempDir(), "none"), models)
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, "make (deps|build-arm64)", r.stderr) // qemu first, then the infer
}

// TestBuildCUDA: --target cuda builds PTX and a cubin per --gpu (where
// ptxas is present) that cc inspect lists; --cpu with a GPU target, --gpu
// without one and malformed architectures are usage errors.
func TestBuildCUDA(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "mlp.kiln")
	r := cc(t, "build", "--target", "cuda", "--gpu", "sm_90,sm_80", mlpModel, "-o", out)
	require.Equal(t, 0, r.code, r.stderr)
	r = cc(t, "inspect", out)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "target       nvptx64-nvidia-cuda, --gpu sm_80,sm_90")
	assert.Contains(t, r.stdout, "bytes for sm_80 (newer GPUs JIT-compile it)")
	if _, err := cuda.PTXAS(); err == nil {
		assert.Contains(t, r.stdout, "cubin        sm_80,")
		assert.Contains(t, r.stdout, "cubin        sm_90,")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "cuda", "--cpu", "cortex-a76"}, "--cpu applies to the CPU targets"},
		{[]string{"--target", "cuda", "--gpu", "sm_8"}, `--gpu "sm_8"`},
		{[]string{"--gpu", "sm_80"}, "--gpu applies to --target cuda"},
		{[]string{"--target", "cuda-sim", "--emit", "ptx"}, "--emit ptx"},
	} {
		r := cc(t, append(append([]string{"build"}, c.args...), mlpModel, "-o", out)...)
		assert.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want)
	}
}
