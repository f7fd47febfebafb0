package main

import (
	"encoding/json"
	"github.com/kiln-ml/kiln/codegen/cpu"
	"path/filepath"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"

	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func buildInfer(t *testing.T, env ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "infer")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func TestCLI(t *testing.T) {
	bin := buildInfer(t)
	run := func(args ...string) (int, string, string) {
		r := runInfer(t, bin, args...)
		return r.code, r.stdout, r.stderr
	}

	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := run(args...)
		assert.Equal(t, 0, code)
		assert.Empty(t, stderr)
		for _, want := range []string{"run ", "check ", "bench ", "compare ", "cc build"} {
			assert.Contains(t, stdout, want)
		}
	}
	for _, args := range [][]string{{"run"}, {"check", "--test-data", "."}, {"bench"}} {
		code, stdout, stderr := run(append(args, "missing.kiln")...)
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)
		assert.Contains(t, stderr, "missing.kiln")
	}
	engineTests(t, run)
	code, _, stderr := run()
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "usage: infer SUBCOMMAND")
	code, _, stderr = run("--verbose")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown flag --verbose")
	code, _, stderr = run("serve-forever")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown subcommand "serve-forever"`)
}

// infer runs where the compiler's tools are absent: no cgo, no LLVM, no
// compiler passes or text frontend (it reads tensors with frontend/onnx),
// and it cross-compiles.
func TestDependencies(t *testing.T) {
	list := exec.Command("go", "list", "-deps", ".")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/kiln-ml/kiln/frontend/text", "github.com/kiln-ml/kiln/passes", "github.com/llir/", "github.com/kiln-ml/kiln/codegen", "github.com/alecthomas/participle"} {
			assert.False(t, strings.HasPrefix(pkg, banned), "infer imports %s", pkg)
		}
		assert.NotEqual(t, "runtime/cgo", pkg, "infer needs cgo")
	}
	if testing.Short() {
		t.Skip("cross-compiling takes a while")
	}
	buildInfer(t, "GOOS=linux", "GOARCH=arm64")
}

// engineTests builds the bundled digits MLP into an engine (when llc is
// present) and drives check, bench and run on it, plus a corrupted copy.
func engineTests(t *testing.T, run func(args ...string) (int, string, string)) {
	if err := cpu.Available(); err != nil {
		t.Logf("%v: skipping the engine tests", err)
		return
	}
	out, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mlp.kiln")
	require.NoError(t, os.WriteFile(path, out.Engine, 0o644))

	code, stdout, stderr := run("check", path, "--test-data", "../../testdata/models/digits_mlp/test_data_set_0")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "PASS")

	code, stdout, stderr = run("bench", path, "--json", "--iterations", "50", "--warmup", "0", "--threads", "1")
	require.Equal(t, 0, code, stderr)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	for _, key := range []string{"engine", "threads", "iterations", "throughput_qps", "load_ms", "first_run_ms", "peak_rss_bytes", "latency_ms"} {
		assert.Contains(t, r, key)
	}
	assert.EqualValues(t, 50, r["iterations"])
	lat := r["latency_ms"].(map[string]any)
	for _, key := range []string{"min", "mean", "median", "p90", "p95", "p99", "max"} {
		assert.Contains(t, lat, key)
	}
	assert.LessOrEqual(t, lat["min"].(float64), lat["median"].(float64))

	// --per-layer adds a row per kernel step; their percentages sum to 100.
	code, stdout, stderr = run("bench", path, "--json", "--per-layer", "--iterations", "20", "--warmup", "0", "--threads", "2")
	require.Equal(t, 0, code, stderr)
	var prof struct {
		Layers []layer `json:"layers"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &prof))
	require.Len(t, prof.Layers, len(out.Code.Kernels))
	sum := 0.0
	for i, l := range prof.Layers {
		assert.Equal(t, out.Code.Kernels[i], l.Name)
		assert.GreaterOrEqual(t, l.MS, 0.0)
		sum += l.Percent
	}
	assert.InDelta(t, 100, sum, 0.01)
	code, stdout, stderr = run("bench", path, "--per-layer", "--iterations", "5", "--warmup", "0")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "Per-kernel times")
	assert.Contains(t, stdout, out.Code.Kernels[0])

	// A .npy input (float64, as NumPy saves by default) runs as the .pb
	// holding the same values, converted to float32.
	x, err := onnx.ReadTensorFile("../../testdata/models/digits_mlp/test_data_set_0/input_0.pb")
	require.NoError(t, err)
	x64, err := dataset.Convert(x, ir.Float64)
	require.NoError(t, err)
	body, err := dataset.EncodeNPY(x64)
	require.NoError(t, err)
	npy := filepath.Join(t.TempDir(), "x.npy")
	require.NoError(t, os.WriteFile(npy, body, 0o644))
	name := out.Code.Inputs[0].Name
	code, fromNPY, stderr := run("run", path, "--threads", "1", "--input", name+"="+npy)
	require.Equal(t, 0, code, stderr)
	code, fromPB, stderr := run("run", path, "--threads", "1", "--input", name+"=../../testdata/models/digits_mlp/test_data_set_0/input_0.pb")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, fromPB, fromNPY)

	// A wrong-shaped input names the input, the shape given and expected.
	bad := filepath.Join(t.TempDir(), "x.pb")
	data, err := onnx.WriteTensor(ir.NewTensor(ir.Float32, 1, 63))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, data, 0o644))
	code, _, stderr = run("run", path, "--input", out.Code.Inputs[0].Name+"="+bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "[1 63]")
	assert.Contains(t, stderr, "the engine takes float[1,64]")

	// A flipped byte in the code section is refused, naming the section.
	corrupt := append([]byte(nil), out.Engine...)
	corrupt[len(corrupt)-100] ^= 1
	require.NoError(t, os.WriteFile(path, corrupt, 0o644))
	code, _, stderr = run("run", path)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "checksum mismatch")
}
