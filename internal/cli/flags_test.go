package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flagTool has one command with a checked flag of each kind; it prints
// nothing, so only the flags' checks can fail it.
func flagTool() *Tool {
	return &Tool{Name: "tt", Summary: "flags", Commands: []*Command{{
		Name: "f", Summary: "checked flags",
		Setup: func(fs *flag.FlagSet) RunFunc {
			PositiveFloat(fs, "duration", 3, "`seconds` of runs")
			NonNegativeFloat(fs, "warmup", 0.5, "`seconds` untimed")
			PositiveInt(fs, "iterations", 0, "`N` runs")
			NonNegativeInt(fs, "threads", 0, "`N` threads")
			OneOfInt(fs, "O", 2, "level", 0, 2)
			return func(env *Env, args []string) error { return nil }
		},
	}}}
}

func TestCheckedFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" when accepted
	}{
		{[]string{"--duration", "NaN"}, `invalid value "NaN" for flag --duration: want a finite number above 0`},
		{[]string{"--duration", "-1"}, `invalid value "-1" for flag --duration`},
		{[]string{"--duration", "0"}, `flag --duration: want a finite number above 0`},
		{[]string{"--duration", "+Inf"}, `flag --duration`},
		{[]string{"--duration", "1e999"}, `flag --duration`},
		{[]string{"--duration", "fast"}, `invalid value "fast" for flag --duration: not a number`},
		{[]string{"--duration", "0.25"}, ""},
		{[]string{"--warmup", "0"}, ""},
		{[]string{"--warmup", "-0.1"}, `flag --warmup: want a finite number, 0 or more`},
		{[]string{"--warmup", "-Inf"}, `flag --warmup`},
		{[]string{"--iterations", "0"}, `invalid value "0" for flag --iterations: want an integer, 1 or more`},
		{[]string{"--iterations", "-5"}, `flag --iterations`},
		{[]string{"--iterations", "99999999999999999999"}, `flag --iterations: out of range`},
		{[]string{"--iterations", "1.5"}, `flag --iterations: not an integer`},
		{[]string{"--iterations", "10"}, ""},
		{[]string{"--threads", "-3"}, `flag --threads: want an integer, 0 or more`},
		{[]string{"--threads", "0"}, ""},
		{[]string{"-O", "7"}, `invalid value "7" for flag --O: want 0 or 2`},
		{[]string{"-O", "0"}, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := flagTool().Main(append([]string{"f"}, tc.args...), &stdout, &stderr)
		if tc.want == "" {
			assert.Equal(t, ExitOK, code, "%v: %s", tc.args, stderr.String())
			continue
		}
		assert.Equal(t, ExitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}

// The help shows defaults and argument names as for the flag package's
// own kinds.
func TestCheckedFlagsHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitOK, flagTool().Main([]string{"f", "--help"}, &stdout, &stderr))
	help := stdout.String()
	assert.Contains(t, help, "--duration seconds")
	assert.Contains(t, help, "(default 3)")
	assert.Contains(t, help, "(default 0.5)")
	assert.Contains(t, help, "level (default 2)")
	assert.NotContains(t, help, "iterations N  N runs (default")
}

func TestClampThreads(t *testing.T) {
	var stderr bytes.Buffer
	env := &Env{Stderr: &stderr, tool: "infer"}
	assert.Equal(t, 3, env.ClampThreads("--threads", 3))
	assert.Empty(t, stderr.String())
	assert.Equal(t, 4*runtime.NumCPU(), env.ClampThreads("--threads", 100000))
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"))
	assert.True(t, strings.HasPrefix(stderr.String(), "infer: warning: --threads 100000 is more than 4 per core"), stderr.String())
}

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "a.onnx")
	weights := filepath.Join(dir, "w.bin")
	require.NoError(t, os.WriteFile(model, []byte("model"), 0o644))
	require.NoError(t, os.WriteFile(weights, []byte("weights"), 0o644))
	link := filepath.Join(dir, "hard.onnx")
	require.NoError(t, os.Link(model, link))
	inputs := []File{{model, "the model"}, {weights, "external data of the model"}}
	t.Chdir(dir)

	for _, tc := range []struct {
		outputs []File
		want    string
	}{
		{[]File{{"./a.onnx", "the output"}}, "./a.onnx: the output is the same file as the model " + model + ": refusing to write over an input"},
		{[]File{{"../" + filepath.Base(dir) + "/w.bin", "the output"}}, "is the same file as external data of the model " + weights},
		{[]File{{"hard.onnx", "the output"}}, "hard.onnx: the output is the same file as the model"},
		{[]File{{"new.kiln", "the output"}, {"./new.kiln", "the timing cache"}}, "./new.kiln: the timing cache is the same file as the output new.kiln: refusing to write over another output"},
		{[]File{{"new.kiln", "the output"}, {"cache.json", "the timing cache"}}, ""},
	} {
		err := CheckOutputs(inputs, tc.outputs)
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		require.Error(t, err, "%v", tc.outputs)
		assert.Contains(t, err.Error(), tc.want)
	}
	got, _ := os.ReadFile(model)
	assert.Equal(t, "model", string(got))
}
