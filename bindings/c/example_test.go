//go:build cgo

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/build"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/ir"
)

// TestExamples builds libkiln.so, the C example against it, and the
// digits MLP engine; on ten held-out digits the C example's scores equal
// `infer run`'s outputs bit for bit and its class is their argmax, and
// the Python (ctypes) example prints what the C one prints. A corrupt
// engine is refused with the loader's message.
func TestExamples(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libkiln.so")
	run(t, exec.Command("go", "build", "-buildmode=c-shared", "-o", lib, "."))
	digit := filepath.Join(dir, "digit")
	run(t, exec.Command("gcc", "-Wall", "-Wextra", "-Werror", "-O2", "-I", ".", "example/digit.c", "-L", dir, "-lkiln", "-Wl,-rpath,"+dir, "-o", digit))
	infer := filepath.Join(dir, "infer")
	cmd := exec.Command("go", "build", "-o", infer, "../../cmd/infer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	run(t, cmd)
	out, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
	require.NoError(t, err)
	eng := filepath.Join(dir, "mlp.kiln")
	require.NoError(t, os.WriteFile(eng, out.Engine, 0o644))
	python, pyErr := exec.LookPath("python3")

	x, err := onnx.ReadTensorFile("../../testdata/data/digits_test/x_flat.pb")
	require.NoError(t, err)
	labels, err := onnx.ReadTensorFile("../../testdata/data/digits_test/y.pb")
	require.NoError(t, err)
	right := 0
	for i := range 10 {
		image := ir.FromRaw(ir.Float32, []int64{1, 64}, slices.Clone(x.Raw[i*256:(i+1)*256]))
		npy, err := dataset.EncodeNPY(image)
		require.NoError(t, err)
		file := filepath.Join(dir, "digit.npy")
		require.NoError(t, os.WriteFile(file, npy, 0o644))

		got := run(t, exec.Command(digit, eng, file))
		outDir := filepath.Join(dir, "out")
		run(t, exec.Command(infer, "run", eng, "--input", "input="+file, "--output-dir", outDir, "--threads", "1"))
		want, err := onnx.ReadTensorFile(filepath.Join(outDir, "output_0.pb"))
		require.NoError(t, err)
		scores, class := parse(t, got)
		assert.Equal(t, want.Float32s(), scores, "digit %d: the C example's scores", i)
		assert.Equal(t, argmax(want.Float32s()), class, "digit %d: the C example's class", i)
		if int64(class) == labels.Int64s()[i] {
			right++
		}
		if pyErr == nil {
			assert.Equal(t, got, run(t, exec.Command(python, "example/digit.py", lib, eng, file)), "digit %d: the Python example", i)
		}
		if i == 0 {
			t.Logf("C example:\n%s", got)
		}
	}
	assert.GreaterOrEqual(t, right, 9, "the MLP is right on most held-out digits")
	if pyErr != nil {
		t.Logf("python3 is absent: the Python example was not run")
	}

	corrupt := slices.Clone(out.Engine)
	corrupt[len(corrupt)-100] ^= 1
	require.NoError(t, os.WriteFile(eng, corrupt, 0o644))
	var stderr bytes.Buffer
	cmd = exec.Command(digit, eng, "example/digit_2.npy")
	cmd.Stderr = &stderr
	assert.Error(t, cmd.Run())
	assert.Contains(t, stderr.String(), "checksum mismatch")
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%v: %s", cmd.Args, stderr.String())
	return stdout.String()
}

// parse reads the example's "scores ..." and "class N" lines.
func parse(t *testing.T, out string) ([]float32, int) {
	var scores []float32
	class := -1
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "scores "); ok {
			for _, f := range strings.Fields(rest) {
				v, err := strconv.ParseFloat(f, 32)
				require.NoError(t, err)
				scores = append(scores, float32(v))
			}
		}
		if rest, ok := strings.CutPrefix(line, "class "); ok {
			var err error
			class, err = strconv.Atoi(rest)
			require.NoError(t, err)
		}
	}
	return scores, class
}

func argmax(v []float32) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}
