package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
)

type inferResult struct {
	code           int
	stdout, stderr string
}

func runInfer(t *testing.T, bin string, args ...string) inferResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := inferResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// Numeric flags out of range, and an input given twice, are usage errors
// naming the flag; none is silently accepted.
func TestFlagUsageErrors(t *testing.T) {
	bin := buildInfer(t)
	engine := filepath.Join(t.TempDir(), "missing.kiln") // the flags fail first
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--duration", "NaN"}, `invalid value "NaN" for flag --duration`},
		{[]string{"bench", "--duration", "-1"}, `invalid value "-1" for flag --duration`},
		{[]string{"bench", "--duration", "0"}, `flag --duration: want a finite number above 0`},
		{[]string{"bench", "--duration", "Inf"}, `flag --duration`},
		{[]string{"bench", "--iterations", "0"}, `invalid value "0" for flag --iterations`},
		{[]string{"bench", "--iterations", "-2"}, `flag --iterations`},
		{[]string{"bench", "--warmup", "-1"}, `flag --warmup`},
		{[]string{"bench", "--warmup", "NaN"}, `flag --warmup`},
		{[]string{"bench", "--iterations", "5", "--duration", "1"}, "--iterations and --duration both given"},
		{[]string{"bench", "--threads", "-3"}, `invalid value "-3" for flag --threads`},
		{[]string{"run", "--threads", "-3"}, `flag --threads`},
		{[]string{"check", "--test-data", ".", "--threads", "-1"}, `flag --threads`},
		{[]string{"check", "--test-data", ".", "--rel-l2", "-1"}, `invalid value "-1" for flag --rel-l2`},
		{[]string{"check", "--test-data", ".", "--rel-l2", "NaN"}, `flag --rel-l2`},
		{[]string{"run", "--input", "x=a.npy", "--input", "x=b.npy"}, `input "x" given twice (a.npy and b.npy)`},
		{[]string{"bench", "--input", "x=a.pb", "--input", "x=a.pb"}, `input "x" given twice`},
		{[]string{"run", "--input", "x"}, `flag --input: want NAME=FILE`},
	} {
		r := runInfer(t, bin, append(tc.args, engine)...)
		assert.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
		assert.Empty(t, r.stdout)
	}
}

// --threads beyond 4 per core runs, clamped, with one line saying so;
// --output-dir never writes over the engine or an --input file.
func TestThreadsClampAndOutputs(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildInfer(t)
	out, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	dir := t.TempDir()
	engine := filepath.Join(dir, "mlp.kiln")
	require.NoError(t, os.WriteFile(engine, out.Engine, 0o644))

	r := runInfer(t, bin, "run", engine, "--threads", "100000")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "infer: warning: --threads 100000 is more than 4 per core ("+strconv.Itoa(runtime.NumCPU())+" cores here): using "+
		strconv.Itoa(4*runtime.NumCPU())+"\n", r.stderr)
	r = runInfer(t, bin, "bench", engine, "--threads", "100000", "--iterations", "3", "--warmup", "0", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--threads 100000 is more than 4 per core")

	// The outputs land in the folder, written whole.
	outDir := filepath.Join(dir, "out")
	r = runInfer(t, bin, "run", engine, "--output-dir", outDir)
	require.Equal(t, 0, r.code, r.stderr)
	first := filepath.Join(outDir, "output_0.pb")
	require.FileExists(t, first)
	entries, err := os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Len(t, entries, len(out.Code.Outputs), "no temporary files left")

	// An input that is where an output would go is refused, untouched.
	input := out.Code.Inputs[0].Name
	require.NoError(t, os.WriteFile(first, must(os.ReadFile("../../testdata/models/digits_mlp/test_data_set_0/input_0.pb")), 0o644))
	before := must(os.ReadFile(first))
	r = runInfer(t, bin, "run", engine, "--input", input+"="+filepath.Join(outDir, ".", "output_0.pb"), "--output-dir", outDir)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "output 0 is the same file as --input "+input)
	assert.Equal(t, before, must(os.ReadFile(first)))
	// So is the engine itself.
	require.NoError(t, os.Rename(engine, first))
	r = runInfer(t, bin, "run", first, "--output-dir", outDir)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "is the same file as the engine")
	assert.Equal(t, out.Engine, must(os.ReadFile(first)))
	assert.True(t, strings.HasPrefix(r.stderr, "infer: "), r.stderr)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
