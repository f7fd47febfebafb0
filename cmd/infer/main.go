// Command infer is kiln's runtime CLI: it loads engine files that `cc build`
// writes and runs, checks and benchmarks them. It never needs LLVM and
// builds with CGO_ENABLED=0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/conformance"
	"github.com/kiln-ml/kiln/internal/dataset"
	"github.com/kiln-ml/kiln/internal/limitflags"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime"
	cpurt "github.com/kiln-ml/kiln/runtime/cpu"
	"github.com/kiln-ml/kiln/runtime/engine"
)

var tool = &cli.Tool{
	Name:     "infer",
	Summary:  "kiln's runtime: run, check, benchmark, compare and serve compiled engine files",
	Commands: []*cli.Command{runCmd, checkCmd, benchCmd, compareCmd, serveCmd, trainCmd},
	Footer:   "Engines (.kiln files) are built by 'bin/cc build MODEL'.",
}

func main() { cli.Run(tool) }

// inputList collects repeated --input NAME=FILE flags; a name given twice
// is a usage error, not a silent choice of one.
type inputList []inputFile

type inputFile struct{ name, file string }

func (l *inputList) String() string {
	var parts []string
	for _, in := range *l {
		parts = append(parts, in.name+"="+in.file)
	}
	return strings.Join(parts, ",")
}

func (l *inputList) Set(s string) error {
	name, file, ok := strings.Cut(s, "=")
	if !ok || name == "" || file == "" {
		return fmt.Errorf("want NAME=FILE")
	}
	for _, in := range *l {
		if in.name == name {
			return fmt.Errorf("input %q given twice (%s and %s)", name, in.file, file)
		}
	}
	*l = append(*l, inputFile{name, file})
	return nil
}

// files names the input files for cli.CheckOutputs.
func (l inputList) files() []cli.File {
	var files []cli.File
	for _, in := range l {
		files = append(files, cli.File{Path: in.file, Role: "--input " + in.name})
	}
	return files
}

// threadsUsage is every --threads flag's help.
const threadsUsage = "`N` threads per inference (0: all cores; the engine's thread cap still applies, and more than 4 per core are capped)"

var runCmd = &cli.Command{
	Name:    "run",
	Args:    "ENGINE",
	Summary: "run an engine on input tensors (ONNX TensorProto .pb or NumPy .npy files) and write or print its outputs",
	Help: `--input NAME=FILE reads an ONNX TensorProto (.pb) or a NumPy array (.npy, format 1 to 3,
little-endian float32, float64, int64, int32, uint8 or bool, C order); data of another
element type than the input's is converted (float64 to float32, say; never floats to
integers). Inputs not given with --input get random N(0,1) values (seeded), except
those with an initializer default (cc build --overridable-initializers), which take
the default; --shape is checked against the engine's ranges before any is made. With
--output-dir the outputs are written as output_N.pb in the engine's output order (each
atomically; an output file that is the engine or an --input file is refused before the
run); otherwise a summary is printed. An input name given twice is a usage error.
Debug outputs (cc build --mark-outputs) are left out unless --debug-outputs asks for
them (written as debug_N.pb, in the engine's order).`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		var inputs inputList
		fs.Var(&inputs, "input", "NAME=FILE: an input tensor (.pb or .npy); repeat for several inputs")
		outDir := fs.String("output-dir", "", "write outputs here as output_N.pb")
		withDebug := fs.Bool("debug-outputs", false, "also print or write the engine's debug outputs (cc build --mark-outputs)")
		shapes := cli.Shapes(fs, "shape", "`NAME=DIMS`: the shape of random data for a dynamic input not given by --input (default: the shape the engine was tuned at)")
		threads := cli.NonNegativeInt(fs, "threads", 0, threadsUsage)
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena)
		return func(env *cli.Env, args []string) error {
			eng, err := loadEngine(args[0], *requireSigned)
			if err != nil {
				return err
			}
			shown := modelOutputs(eng)
			if *withDebug {
				shown = append(shown, debugOutputs(eng)...)
			}
			paths := outputPaths(*outDir, shown)
			if *outDir != "" {
				var outputs []cli.File
				for i, b := range shown {
					role := fmt.Sprintf("output %d", i)
					if b.IsDebug() {
						role = fmt.Sprintf("debug output %q", b.Name)
					}
					outputs = append(outputs, cli.File{Path: paths[i], Role: role})
				}
				if err := cli.CheckOutputs(append([]cli.File{{Path: args[0], Role: "the engine"}}, inputs.files()...), outputs); err != nil {
					return err
				}
			}
			// The context first: it checks the engine's arena and bindings
			// against the limits and the memory before inputs are made.
			ctx, err := eng.NewContext(runtime.Options{Threads: env.ClampThreads("--threads", *threads), Limits: limits.Limits()})
			if err != nil {
				return err
			}
			feeds, err := loadInputs(eng, inputs, shapes, 1)
			if err != nil {
				return err
			}
			outs, err := ctx.Run(feeds)
			if err != nil {
				return err
			}
			for i, b := range shown {
				t := outs[b.Name]
				if *outDir == "" && !t.IsTensor() {
					fmt.Fprintf(env.Stdout, "%s %s\n", b.Name, preview(t))
					continue
				}
				if *outDir == "" {
					fmt.Fprintf(env.Stdout, "%s %s%v %s\n", b.Name, t.DType, t.Dims, preview(t))
					continue
				}
				data, err := onnx.WriteValue(t)
				if err != nil {
					return err
				}
				if err := os.MkdirAll(*outDir, 0o755); err != nil {
					return err
				}
				path := paths[i]
				if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
					return cli.FileError(path, err)
				}
				fmt.Fprintf(env.Stdout, "wrote %s (%s %s)\n", path, b.Name, t.Type())
			}
			return nil
		}
	},
}

var checkCmd = &cli.Command{
	Name:    "check",
	Args:    "ENGINE",
	Summary: "run an engine on an ONNX test_data_set folder and compare with its expected outputs",
	Help: `--test-data DIR holds input_N.pb and output_N.pb (the ONNX backend-test layout), in the
engine's input and output order. Prints each output's max abs and relative L2 error and PASS
or FAIL; exit status 1 on FAIL.`,
	MinArgs: 1,
	MaxArgs: 1,
	Setup: func(fs *flag.FlagSet) cli.RunFunc {
		dir := fs.String("test-data", "", "folder with input_N.pb and output_N.pb (required)")
		relL2 := cli.NonNegativeFloat(fs, "rel-l2", 1e-4, "largest relative L2 error `E` that passes")
		threads := cli.NonNegativeInt(fs, "threads", 0, threadsUsage)
		requireSigned := requireSignedFlag(fs)
		limits := limitflags.Add(fs, limitflags.Tensor, limitflags.Arena)
		return func(env *cli.Env, args []string) error {
			if *dir == "" {
				return cli.Usagef("--test-data is required")
			}
			if g, err := gpuEngine(args[0], *requireSigned); err != nil || g != nil {
				if err != nil {
					return err
				}
				defer g.Close()
				return checkGPU(env, g, *dir, *relL2)
			}
			eng, err := loadEngine(args[0], *requireSigned)
			if err != nil {
				return err
			}
			feeds := map[string]*ir.Tensor{}
			for i, b := range eng.Inputs() {
				path := filepath.Join(*dir, fmt.Sprintf("input_%d.pb", i))
				if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && b.Default != nil {
					continue // the engine takes the input's default
				}
				t, err := readBound(path, b)
				if err != nil {
					return err
				}
				feeds[b.Name] = t
			}
			ctx, err := eng.NewContext(runtime.Options{Threads: env.ClampThreads("--threads", *threads), Limits: limits.Limits()})
			if err != nil {
				return err
			}
			outs, err := ctx.Run(feeds)
			if err != nil {
				return err
			}
			failed := false
			for i, b := range modelOutputs(eng) {
				want, err := readBound(filepath.Join(*dir, fmt.Sprintf("output_%d.pb", i)), b)
				if err != nil {
					return err
				}
				detail, ok := conformance.Compare(want, outs[b.Name], conformance.Tolerance{RelL2: *relL2})
				status := "PASS"
				if !ok {
					status, failed = "FAIL", true
				}
				fmt.Fprintf(env.Stdout, "%s %s: %s\n", status, b.Name, detail)
			}
			if failed {
				return cli.Exit(1)
			}
			return nil
		}
	},
}

// outputPaths are where --output-dir puts the outputs shown: the model's
// as output_N.pb, then debug outputs as debug_N.pb.
func outputPaths(dir string, shown []engine.Binding) []string {
	paths := make([]string, len(shown))
	outs, debug := 0, 0
	for i, b := range shown {
		if b.IsDebug() {
			paths[i] = filepath.Join(dir, fmt.Sprintf("debug_%d.pb", debug))
			debug++
			continue
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("output_%d.pb", outs))
		outs++
	}
	return paths
}

// modelOutputs are the engine's outputs that the model has; debugOutputs
// the ones cc build --mark-outputs added (which infer leaves out unless
// asked).
func modelOutputs(eng *runtime.Engine) []engine.Binding {
	return slices.DeleteFunc(eng.Outputs(), engine.Binding.IsDebug)
}

func debugOutputs(eng *runtime.Engine) []engine.Binding {
	return slices.DeleteFunc(eng.Outputs(), func(b engine.Binding) bool { return !b.IsDebug() })
}

// loadInputs reads the --input files and fills the rest with seeded random
// normal values, but for inputs with a default value (cc build
// --overridable-initializers), which the engine fills itself.
// A dynamic input without --input gets the shape --shape gives it, or the
// shape the engine was tuned at (its profile's opt). Every shape is checked
// against the engine's before any random data is made: a --shape past the
// engine's range is an error naming the input and the dim, not an
// allocation of whatever size it asked for.
func loadInputs(eng *runtime.Engine, specs inputList, shapes map[string][]int64, seed int64) (map[string]*ir.Tensor, error) {
	feeds := map[string]*ir.Tensor{}
	for _, in := range specs {
		name, file := in.name, in.file
		s := name + "=" + file
		var bound *engine.Binding
		for _, b := range eng.Inputs() {
			if b.Name == name {
				bound = &b
			}
		}
		var t *ir.Tensor
		var err error
		if bound != nil {
			t, err = readBound(file, *bound)
		} else {
			t, err = dataset.ReadTensor(file, ir.Limits{})
		}
		if err != nil {
			return nil, err
		}
		for _, b := range eng.Inputs() {
			if b.Name == name && len(b.Kinds) == 0 {
				d, err := ir.ParseDType(b.DType)
				if err != nil {
					return nil, err
				}
				if t, err = dataset.Convert(t, d); err != nil {
					return nil, fmt.Errorf("--input %s: %w", s, err)
				}
			}
		}
		feeds[name] = t
	}
	dims, err := inputShapes(eng, feeds, shapes)
	if err != nil {
		return nil, err
	}
	for i, b := range eng.Inputs() {
		if feeds[b.Name] == nil && b.Default == nil { // the engine uses its default
			t, err := randomTensor(b.DType, dims[i], seed)
			if err != nil {
				return nil, err
			}
			feeds[b.Name] = t
		}
	}
	return feeds, nil
}

// inputShapes returns the shape of each of the engine's inputs: a fed
// one's, else --shape's, else the engine's tuned shape; and checks them
// all against the engine's dims and ranges (engine.Resolve).
func inputShapes(eng *runtime.Engine, feeds map[string]*ir.Tensor, shapes map[string][]int64) ([][]int64, error) {
	for name := range shapes {
		if !slices.ContainsFunc(eng.Inputs(), func(b engine.Binding) bool { return b.Name == name }) {
			return nil, cli.Usagef("--shape %s: the engine has no input %q", name, name)
		}
		if feeds[name] != nil {
			return nil, cli.Usagef("--shape %s: the input is given by --input", name)
		}
	}
	dims := make([][]int64, len(eng.Inputs()))
	for i, b := range eng.Inputs() {
		if t := feeds[b.Name]; t != nil {
			dims[i] = t.Dims
			continue
		}
		var ok bool
		if dims[i], ok = shapes[b.Name]; !ok {
			var err error
			if dims[i], err = b.DimsAt(eng.Meta.Symbols, engine.OptValues(eng.Meta.Symbols)); err != nil {
				return nil, err
			}
		}
	}
	if _, err := engine.Resolve(eng.Meta.Symbols, eng.Inputs(), dims); err != nil {
		switch { // the flags the shapes came from
		case len(shapes) > 0 && len(feeds) > 0:
			return nil, fmt.Errorf("--input/--shape: %w", err)
		case len(shapes) > 0:
			return nil, fmt.Errorf("--shape: %w", err)
		}
		return nil, err
	}
	return dims, randomFits(eng, feeds, dims)
}

// randomFits checks that the random inputs fit the memory the process can
// get: a shape inside a large engine's range can still ask for more than
// the machine has, and the Go heap's out-of-memory is fatal.
func randomFits(eng *runtime.Engine, feeds map[string]*ir.Tensor, dims [][]int64) error {
	total := int64(0)
	for i, b := range eng.Inputs() {
		if feeds[b.Name] != nil || b.Default != nil {
			continue
		}
		d, err := ir.ParseDType(b.DType)
		if err != nil {
			return err
		}
		n, err := ir.ByteSize(d, dims[i])
		if err != nil {
			return fmt.Errorf("input %q: %v", b.Name, err)
		}
		total += n // each at most the engine's binding, so the sum fits an int64
	}
	if avail, from := cpurt.Available(); total > avail {
		return fmt.Errorf("the random inputs need %s, more than the %s this process can get (%s): give smaller dims with --shape, or the data with --input", ir.FormatBytes(total), ir.FormatBytes(avail), from)
	}
	return nil
}

// readBound reads a file of binding b's value: a SequenceProto or an
// OptionalProto for a sequence or optional binding, else a tensor (.pb or
// .npy).
func readBound(path string, b engine.Binding) (*ir.Tensor, error) {
	if len(b.Kinds) == 0 {
		return dataset.ReadTensor(path, ir.Limits{})
	}
	d, err := ir.ParseDType(b.DType)
	if err != nil {
		return nil, err
	}
	return onnx.ReadValueFileWithin(path, cpuabi.TypeOf(b.Kinds, d, ir.Shape{}), ir.Limits{})
}

func preview(t *ir.Tensor) string {
	if !t.IsTensor() {
		return fmt.Sprintf("%s, %d elements", t.Type(), len(t.Elems))
	}
	n := min(int(t.Len()), 8)
	parts := make([]string, n)
	for i := 0; i < n; i++ {
		if t.DType == ir.String {
			parts[i] = strconv.Quote(t.Strings[i])
			continue
		}
		parts[i] = fmt.Sprintf("%.5g", t.Float64At(i))
	}
	more := ""
	if int(t.Len()) > n {
		more = " ..."
	}
	return "[" + strings.Join(parts, " ") + more + "]"
}
