package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTool has a command of each shape the tools use.
func testTool() *Tool {
	return &Tool{
		Name:    "tt",
		Summary: "a test tool",
		Commands: []*Command{
			{
				Name: "echo", Args: "WORD...", Summary: "print the words", MinArgs: 1, MaxArgs: -1,
				Setup: func(fs *flag.FlagSet) RunFunc {
					upper := fs.Bool("upper", false, "upper-case the words")
					sep := fs.String("sep", " ", "the `SEP`arator")
					return func(env *Env, args []string) error {
						s := strings.Join(args, *sep)
						if *upper {
							s = strings.ToUpper(s)
						}
						fmt.Fprintln(env.Stdout, s)
						return nil
					}
				},
			},
			{
				Name: "fail", Args: "FILE", Summary: "fail on a file", MinArgs: 1, MaxArgs: 1,
				Setup: func(fs *flag.FlagSet) RunFunc {
					return func(env *Env, args []string) error {
						_, err := os.ReadFile(args[0])
						return FileError(args[0], err)
					}
				},
			},
			{
				Name: "usage", Summary: "report a usage error", MaxArgs: 0,
				Setup: func(fs *flag.FlagSet) RunFunc {
					return func(env *Env, args []string) error { return Usagef("bad %s", "thing") }
				},
			},
			{
				Name: "exit", Summary: "exit 1 quietly", MaxArgs: 0,
				Setup: func(fs *flag.FlagSet) RunFunc {
					return func(env *Env, args []string) error { return Exit(ExitFailure) }
				},
			},
			{
				Name: "panic", Summary: "a bug", MaxArgs: 0,
				Setup: func(fs *flag.FlagSet) RunFunc {
					return func(env *Env, args []string) error {
						var m map[string]int
						m["x"] = 1
						return nil
					}
				},
			},
		},
		Coming: []Coming{{Name: "later", Summary: "do something later"}},
	}
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = testTool().Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string // a substring
	}{
		{[]string{"echo", "a", "b"}, ExitOK, "a b\n", ""},
		{[]string{"echo", "--upper", "a", "b"}, ExitOK, "A B\n", ""},
		{[]string{"echo", "a", "--upper", "b", "-sep=,"}, ExitOK, "A,B\n", ""},
		{[]string{"echo", "--sep", "+", "a", "--", "--upper"}, ExitOK, "a+--upper\n", ""},
		{[]string{"echo", "--help"}, ExitOK, "usage: tt echo [flags] WORD...", ""},
		{[]string{"echo", "-h"}, ExitOK, "--sep SEP", ""},
		{[]string{"help", "echo"}, ExitOK, "--upper", ""},
		{[]string{"--help"}, ExitOK, "later", ""},
		{[]string{"help"}, ExitOK, "subcommands:", ""},
		{[]string{}, ExitUsage, "", "usage: tt SUBCOMMAND"},
		{[]string{"nope"}, ExitUsage, "", `unknown subcommand "nope"`},
		{[]string{"--nope"}, ExitUsage, "", "unknown flag --nope"},
		{[]string{"help", "nope"}, ExitUsage, "", `unknown subcommand "nope"`},
		{[]string{"later"}, ExitUsage, "", "tt later is not built yet (coming: do something later)"},
		{[]string{"echo"}, ExitUsage, "", "tt echo: wants at least 1 argument"},
		{[]string{"echo", "--bogus", "a"}, ExitUsage, "", "tt echo: unknown flag --bogus"},
		{[]string{"echo", "a", "--sep"}, ExitUsage, "", "tt echo: flag needs a value: --sep"},
		{[]string{"echo", "--upper=maybe", "a"}, ExitUsage, "", "--upper"},
		{[]string{"fail"}, ExitUsage, "", "tt fail: wants FILE, got 0 arguments"},
		{[]string{"fail", "a", "b"}, ExitUsage, "", `extra: "b"`},
		{[]string{"usage"}, ExitUsage, "", "tt usage: bad thing\nusage: tt usage; see 'tt usage --help'\n"},
		{[]string{"usage", "x"}, ExitUsage, "", `takes no arguments, got "x"`},
		{[]string{"fail", missing}, ExitFailure, "", "tt: " + missing + ": no such file or directory\n"},
		{[]string{"exit"}, ExitFailure, "", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(tc.args...)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr)
			if tc.code == ExitOK {
				assert.Contains(t, stdout, tc.stdout)
				assert.Empty(t, stderr)
			} else {
				assert.Empty(t, stdout)
				assert.Contains(t, stderr, tc.stderr)
			}
			if tc.code == ExitFailure {
				assert.LessOrEqual(t, strings.Count(stderr, "\n"), 1, "a failure is one line: %q", stderr)
			}
		})
	}
}

func TestPanicIsOneLine(t *testing.T) {
	code, stdout, stderr := run("panic")
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, stdout)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
	assert.Contains(t, stderr, "tt: internal error: assignment to entry in nil map (at cli_test.go:")
}

func TestToolHelpListsComing(t *testing.T) {
	_, stdout, _ := run("--help")
	assert.Contains(t, stdout, "tt — a test tool")
	assert.Contains(t, stdout, "coming (not built yet):")
	assert.Contains(t, stdout, "Exit status: 0 success, 1 failure, 2 usage error, 130 or 143 interrupted")
	for _, c := range testTool().Commands {
		assert.Contains(t, stdout, "  "+c.Name+" ")
	}
}

func TestFileError(t *testing.T) {
	_, err := os.ReadFile("/no/such/file")
	assert.Equal(t, "/no/such/file: no such file or directory", FileError("/no/such/file", err).Error())
	assert.True(t, errors.Is(FileError("/no/such/file", err), os.ErrNotExist))

	already := errors.New("m.onnxtxt:3:4: unexpected token")
	assert.Equal(t, already, FileError("m.onnxtxt", already))
	assert.Equal(t, "m.onnx: truncated", FileError("m.onnx", errors.New("truncated")).Error())
	assert.NoError(t, FileError("m.onnx", nil))
}

func TestOneLine(t *testing.T) {
	assert.Equal(t, "first", oneLine("  first\nsecond\n"))
	require.Equal(t, "x", oneLine("x"))
}
