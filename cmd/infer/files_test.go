package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/internal/build"
)

// runInferBounded is runInfer failing the test when infer has not exited
// within 30 seconds (a reader blocked on a named pipe), and killing it.
func runInferBounded(t *testing.T, bin string, args ...string) inferResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("infer %s did not exit within 30 s", strings.Join(args, " "))
	}
	r := inferResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// Issue 32: a named pipe as the engine or an input file hung infer
// forever. Each is refused at once, naming the pipe as not a regular file.
func TestNamedPipesRefused(t *testing.T) {
	bin := buildInfer(t)
	dir := t.TempDir()
	fifo := func(name string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		return path
	}
	pipeEngine := fifo("pipe.kiln")
	type refusal struct {
		args []string
		pipe string // the pipe the error must name
	}
	cases := []refusal{
		{[]string{"run", pipeEngine}, pipeEngine},
		{[]string{"bench", pipeEngine, "--iterations", "1"}, pipeEngine},
		{[]string{"check", pipeEngine, "--test-data", "../../testdata/models/digits_mlp/test_data_set_0"}, pipeEngine},
	}
	if cpu.Available() == nil {
		out, err := build.Build("../../testdata/models/digits_mlp.onnx", build.Options{OptLevel: 2})
		require.NoError(t, err)
		engine := filepath.Join(dir, "mlp.kiln")
		require.NoError(t, os.WriteFile(engine, out.Engine, 0o644))
		input := out.Code.Inputs[0].Name
		npy, pb := fifo("x.npy"), fifo("x.pb")
		cases = append(cases,
			refusal{[]string{"run", engine, "--input", input + "=" + npy}, npy},
			refusal{[]string{"bench", engine, "--iterations", "1", "--input", input + "=" + pb}, pb},
			refusal{[]string{"compare", engine, engine, "--data", npy}, npy})
	}
	for _, tc := range cases {
		r := runInferBounded(t, bin, tc.args...)
		assert.Equal(t, 1, r.code, "infer %s: %s", strings.Join(tc.args, " "), r.stderr)
		assert.Contains(t, r.stderr, tc.pipe+": not a regular file but a named pipe", "infer %s", strings.Join(tc.args, " "))
	}
}
