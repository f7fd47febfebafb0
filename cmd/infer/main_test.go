package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stdout.String(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stdout.String(), stderr.String()
	}

	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := run(args...)
		assert.Equal(t, 0, code)
		assert.Empty(t, stderr)
		for _, want := range []string{"coming (not built yet)", "run ", "check ", "bench ", "cc build"} {
			assert.Contains(t, stdout, want)
		}
	}
	for _, sub := range []string{"run", "check", "bench"} {
		code, stdout, stderr := run(sub, "model.kiln")
		assert.Equal(t, 2, code)
		assert.Empty(t, stdout)
		assert.True(t, strings.HasPrefix(stderr, "infer "+sub+" is not built yet (coming: "), stderr)
	}
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
// model frontends, and it cross-compiles.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/kiln-ml/kiln/frontend/", "github.com/llir/", "github.com/kiln-ml/kiln/codegen", "github.com/alecthomas/participle", "google.golang.org/protobuf"} {
			assert.False(t, strings.HasPrefix(pkg, banned), "infer imports %s", pkg)
		}
		assert.NotEqual(t, "runtime/cgo", pkg, "infer needs cgo")
	}
	if testing.Short() {
		t.Skip("cross-compiling takes a while")
	}
	buildInfer(t, "GOOS=linux", "GOARCH=arm64")
}
