// Package cli is the subcommand plumbing kiln's two tools (cc and infer)
// share, so both follow one convention:
//
//   - `tool SUBCOMMAND [flags] ARGS...`, one flag.FlagSet per subcommand;
//     flags may be written -flag or --flag and may follow the arguments;
//     `--` ends the flags.
//   - `--help`/`-h` (and `tool help [SUBCOMMAND]`) print help to stdout and
//     exit 0.
//   - A usage error (unknown subcommand or flag, wrong argument count) prints
//     the problem and a usage line to stderr and exits 2.
//   - A failure prints one line, `tool: problem`, to stderr and exits 1.
//     Errors about a file name the file first: `cc: model.onnx: problem`.
//   - A panic is reported as one internal-error line with exit status 1.
//   - SIGINT or SIGTERM removes the command's temporary files and exits
//     with 130 or 143 (128 + the signal).
//
// The package knows nothing of models: cmd/infer uses it and must not link
// the frontends.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/kiln-ml/kiln/internal/cleanup"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Tool is a command-line program made of subcommands.
type Tool struct {
	Name     string // "cc"
	Summary  string // one line: what the tool is
	Commands []*Command
	// Coming lists subcommands that later work adds; running one is a usage
	// error that says so.
	Coming []Coming
	// Footer is printed at the end of the tool's help.
	Footer string
}

// Command is one subcommand.
type Command struct {
	Name    string // "inspect"
	Args    string // the positional arguments in the usage line: "MODEL"
	Summary string // one line for the tool's help
	Help    string // paragraphs for the subcommand's help
	// MinArgs and MaxArgs bound the positional argument count; MaxArgs < 0
	// means no upper bound.
	MinArgs, MaxArgs int
	// Setup declares the subcommand's flags on fs and returns the function
	// that runs it once the flags are parsed.
	Setup func(fs *flag.FlagSet) RunFunc
}

// RunFunc runs a subcommand with its positional arguments.
type RunFunc func(env *Env, args []string) error

// Coming is a subcommand that does not exist yet.
type Coming struct {
	Name, Summary string
}

// Env is what a running subcommand writes to.
type Env struct {
	Stdout, Stderr io.Writer
	tool           string // the tool's name, for warnings
}

// Main runs the tool on the command-line arguments (without the program
// name) and returns the exit status.
func (t *Tool) Main(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v (at %s); please report this as a bug\n", t.Name, r, panicSite(debug.Stack()))
			code = ExitFailure
		}
	}()
	env := &Env{Stdout: stdout, Stderr: stderr, tool: t.Name}
	if len(args) == 0 {
		t.usage(stderr)
		return ExitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		t.help(stdout)
		return ExitOK
	case "help":
		if len(rest) == 0 {
			t.help(stdout)
			return ExitOK
		}
		if c := t.command(rest[0]); c != nil {
			fs, _ := t.flagSet(c)
			c.help(t, fs, stdout)
			return ExitOK
		}
		return t.unknown(rest[0], stderr)
	}
	c := t.command(name)
	if c == nil {
		return t.unknown(name, stderr)
	}
	return t.run(c, rest, env)
}

func (t *Tool) command(name string) *Command {
	for _, c := range t.Commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (t *Tool) unknown(name string, stderr io.Writer) int {
	for _, c := range t.Coming {
		if c.Name == name {
			fmt.Fprintf(stderr, "%s %s is not built yet (coming: %s)\n", t.Name, name, c.Summary)
			return ExitUsage
		}
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "%s: unknown flag %s (flags go after the subcommand)\n", t.Name, name)
	} else {
		fmt.Fprintf(stderr, "%s: unknown subcommand %q\n", t.Name, name)
	}
	fmt.Fprintf(stderr, "run '%s --help' for the list of subcommands\n", t.Name)
	return ExitUsage
}

func (t *Tool) run(c *Command, args []string, env *Env) int {
	fs, run := t.flagSet(c)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.help(t, fs, env.Stdout)
		return ExitOK
	}
	if err != nil {
		return t.report(Usagef("%s", gnuFlags(err.Error())), c, fs, env)
	}
	if err := c.checkArgs(pos); err != nil {
		return t.report(Usagef("%v", err), c, fs, env)
	}
	if run == nil {
		return ExitOK
	}
	return t.report(run(env, pos), c, fs, env)
}

// report turns a subcommand's error into its message and exit status.
func (t *Tool) report(err error, c *Command, fs *flag.FlagSet, env *Env) int {
	if err == nil {
		return ExitOK
	}
	if cleanup.Interrupted() {
		return ExitFailure // the signal handler reports and exits
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(env.Stderr, "%s %s: %s\n", t.Name, c.Name, oneLine(usage.msg))
		fmt.Fprintf(env.Stderr, "usage: %s; see '%s %s --help'\n", c.usageLine(t, fs), t.Name, c.Name)
		return ExitUsage
	}
	fmt.Fprintf(env.Stderr, "%s: %s\n", t.Name, oneLine(err.Error()))
	return ExitFailure
}

// flagSet makes a subcommand's flag set and declares its flags.
func (t *Tool) flagSet(c *Command) (*flag.FlagSet, RunFunc) {
	fs := flag.NewFlagSet(t.Name+" "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var run RunFunc
	if c.Setup != nil {
		run = c.Setup(fs)
	}
	return fs, run
}

// parseInterspersed parses flags that may appear before, between or after
// the positional arguments, as GNU tools allow. `--` ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *Command) checkArgs(pos []string) error {
	n := len(pos)
	switch {
	case n < c.MinArgs && c.MinArgs == c.MaxArgs:
		return fmt.Errorf("wants %s, got %d argument%s", c.Args, n, plural(n))
	case n < c.MinArgs:
		return fmt.Errorf("wants at least %d argument%s (%s), got %d", c.MinArgs, plural(c.MinArgs), c.Args, n)
	case c.MaxArgs >= 0 && n > c.MaxArgs:
		if c.MaxArgs == 0 {
			return fmt.Errorf("takes no arguments, got %q", pos[0])
		}
		return fmt.Errorf("wants %s, got %d arguments (extra: %q)", c.Args, n, pos[c.MaxArgs])
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (c *Command) usageLine(t *Tool, fs *flag.FlagSet) string {
	s := t.Name + " " + c.Name
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		s += " [flags]"
	}
	if c.Args != "" {
		s += " " + c.Args
	}
	return s
}

func (c *Command) help(t *Tool, fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usageLine(t, fs), c.Summary)
	if c.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.Help, "\n"))
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintf(w, "\nflags:\n")
			first = false
		}
		name, usage := flag.UnquoteUsage(f)
		arg := "--" + f.Name
		if name != "" {
			arg += " " + name
		}
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", arg, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\tprint this help\n")
	tw.Flush()
}

func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s":
		return true
	}
	return false
}

func (t *Tool) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s SUBCOMMAND [flags] ARGS...\n", t.Name)
	if len(t.Commands) > 0 {
		fmt.Fprintf(w, "subcommands: %s\n", strings.Join(t.names(), ", "))
	}
	if len(t.Coming) > 0 {
		var coming []string
		for _, c := range t.Coming {
			coming = append(coming, c.Name)
		}
		fmt.Fprintf(w, "coming (not built yet): %s\n", strings.Join(coming, ", "))
	}
	fmt.Fprintf(w, "run '%s --help' for more\n", t.Name)
}

func (t *Tool) names() []string {
	var names []string
	for _, c := range t.Commands {
		names = append(names, c.Name)
	}
	return names
}

func (t *Tool) help(w io.Writer) {
	fmt.Fprintf(w, "%s — %s\n\nusage: %s SUBCOMMAND [flags] ARGS...\n", t.Name, t.Summary, t.Name)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if len(t.Commands) > 0 {
		fmt.Fprintf(tw, "\nsubcommands:\n")
		for _, c := range t.Commands {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
		}
	}
	if len(t.Coming) > 0 {
		fmt.Fprintf(tw, "\ncoming (not built yet):\n")
		for _, c := range t.Coming {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
		}
	}
	tw.Flush()
	if len(t.Commands) > 0 {
		fmt.Fprintf(w, "\nRun '%s SUBCOMMAND --help' for a subcommand's flags.\n", t.Name)
	}
	fmt.Fprintf(w, "Exit status: 0 success, 1 failure, 2 usage error, 130 or 143 interrupted (SIGINT, SIGTERM).\n")
	if t.Footer != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(t.Footer, "\n"))
	}
}

// Usagef returns an error that the tool reports as a usage error (exit 2).
func Usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Exit returns an error that ends the tool with the given status and no
// message, for a subcommand that has already reported (e.g. tests failed).
func Exit(code int) error { return &exitError{code} }

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// FileError names the file an error is about, once: `path: problem`. It
// unwraps the *fs.PathError of a failed open (whose own message would name
// the operation too) and leaves an error that already starts with the path
// as it is.
func FileError(path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	if strings.HasPrefix(err.Error(), path+":") {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// oneLine keeps an error message to a single line: its first.
func oneLine(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return msg
}

// gnuFlags rewrites the flag package's "-name" in its messages as "--name",
// the spelling the help uses.
func gnuFlags(msg string) string {
	return strings.NewReplacer(
		"flag provided but not defined: -", "unknown flag --",
		"flag needs an argument: -", "flag needs a value: --",
		" for flag -", " for flag --",
		" for -", " for --",
	).Replace(msg)
}

// panicSite is the first frame of a panic's stack after the panic call
// that is not in the Go runtime, as "file.go:123".
func panicSite(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	panicked := false
	for i := 0; i+1 < len(lines); i++ {
		fn := strings.TrimSpace(lines[i])
		if strings.HasPrefix(fn, "panic(") {
			panicked = true
			continue
		}
		if !panicked || strings.HasPrefix(fn, "runtime.") || !strings.HasPrefix(lines[i+1], "\t") {
			continue
		}
		loc := strings.TrimSpace(lines[i+1])
		if j := strings.LastIndexByte(loc, ' '); j > 0 {
			loc = loc[:j]
		}
		return filepath.Base(loc)
	}
	return "unknown location"
}

// Run is the whole main function of a tool. SIGINT and SIGTERM remove the
// temporary files and folders registered with package cleanup (a build's
// kiln-cc-* folder, an output not yet committed) and exit with 130 or 143.
func Run(t *Tool) {
	cleanup.HandleSignals(func(sig os.Signal) {
		fmt.Fprintf(os.Stderr, "%s: interrupted (%v): temporary files removed\n", t.Name, sig)
		os.Exit(cleanup.ExitCode(sig))
	})
	cleanup.Exit(t.Main(os.Args[1:], os.Stdout, os.Stderr))
}
