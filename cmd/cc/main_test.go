package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kiln-ml/kiln/codegen/cpu"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/frontend/text"
	"github.com/kiln-ml/kiln/ir"
)

// ccPath is the cc binary built once for the package's tests.
var ccPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-cc-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ccPath = filepath.Join(dir, "cc")
	build := exec.Command("go", "build", "-o", ccPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cc: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	mlpModel = "../../testdata/models/digits_mlp.onnx"
	models   = "../../testdata/models"
	zoo      = "../../../shared/zoo"
)

type result struct {
	code           int
	stdout, stderr string
}

func cc(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(ccPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running cc %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// requireOneErrorLine checks a failure: exit 1, nothing on stdout, and one
// line on stderr of the form `cc: FILE: problem`.
func requireOneErrorLine(t *testing.T, r result, file string) {
	t.Helper()
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, "cc: "+file+":"), "names the file: %q", r.stderr)
	assert.NotContains(t, r.stderr, "panic")
	assert.NotContains(t, r.stderr, "internal error")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := cc(t, args...)
		require.Equal(t, 0, r.code)
		for _, want := range []string{"inspect", "convert", "test", "build", "passes", "do not put it on PATH"} {
			assert.Contains(t, r.stdout, want)
		}
	}
	for _, sub := range []string{"inspect", "convert", "test"} {
		r := cc(t, sub, "--help")
		require.Equal(t, 0, r.code, r.stderr)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: cc "+sub), r.stdout)
	}
	r := cc(t, "test", "--help")
	for _, flag := range []string{"--backend", "--threads", "--json", "--rtol", "--atol", "--rel-l2 E", "--verbose", "--timeout", "--jobs"} {
		assert.Contains(t, r.stdout, flag)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: cc SUBCOMMAND"},
		{[]string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"build", "--emit", "asm", mlpModel}, "--emit must be ir, kernels, llvm, obj, ptx or engine"},
		{[]string{"build"}, "cc build: wants MODEL, got 0 arguments"},
		{[]string{"passes", "extra"}, "cc passes"},
		{[]string{"inspect"}, "cc inspect: wants MODEL|ENGINE, got 0 arguments"},
		{[]string{"inspect", mlpModel, mlpModel}, "cc inspect: wants MODEL|ENGINE, got 2 arguments"},
		{[]string{"inspect", "--bogus", mlpModel}, "cc inspect: unknown flag --bogus"},
		{[]string{"inspect", "model.pb"}, `unknown model format ".pb"`},
		{[]string{"convert", mlpModel}, "cc convert: wants IN OUT"},
		{[]string{"convert", mlpModel, "out.txt"}, `unknown model format ".txt"`},
		{[]string{"test"}, "cc test: wants at least 1 argument"},
		{[]string{"test", "--backend", "tpu", models}, `unknown backend "tpu" (backends: aarch64, cpu, cuda-sim, reference)`},
		{[]string{"test", "--backend", "cpu", "--threads", "0", models}, `invalid value "0" for flag --threads: want an integer, 1 or more`},
		{[]string{"test", "--rtol", "abc", models}, "--rtol"},
		{[]string{"test", "--frob", models}, "cc test: unknown flag --frob"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cc(t, tc.args...)
			assert.Equal(t, 2, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// params sums the initializers' element counts, independently of inspect.
func params(t *testing.T, path string) (count, nodes int64) {
	m, err := onnx.ReadFile(path)
	require.NoError(t, err)
	for _, v := range m.Graph.Initializers {
		count += ir.Product(v.Const.Dims)
	}
	return count, int64(len(m.Graph.Nodes))
}

func TestInspect(t *testing.T) {
	want, nodes := params(t, mlpModel)
	require.Positive(t, want)

	r := cc(t, "inspect", mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "parameters   "+commas(want)+" ("+short(want)+")")
	assert.Contains(t, r.stdout, "ir version   7")
	assert.Contains(t, r.stdout, "opsets       ai.onnx 13")
	assert.Contains(t, r.stdout, "inputs       input   float[1,64]")
	assert.Contains(t, r.stdout, "outputs      output  float[1,10]")
	assert.Contains(t, r.stdout, "ops          3  Gemm\n             2  Relu\n")

	r = cc(t, "inspect", "--json", mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info), r.stdout)
	assert.EqualValues(t, want, info["parameters"])
	assert.EqualValues(t, 4*want, info["parameter_bytes"]) // all float32
	assert.EqualValues(t, nodes, info["nodes"])
	assert.EqualValues(t, 7, info["ir_version"])
	assert.Equal(t, []any{map[string]any{"domain": "ai.onnx", "version": 13.0}}, info["opsets"])
	assert.Equal(t, []any{map[string]any{"name": "input", "type": "float[1,64]", "dtype": "float", "shape": []any{1.0, 64.0}}}, info["inputs"])
	assert.Equal(t, []any{
		map[string]any{"op": "Gemm", "domain": "ai.onnx", "count": 3.0},
		map[string]any{"op": "Relu", "domain": "ai.onnx", "count": 2.0},
	}, info["ops"])
	for _, key := range []string{"file", "producer_name", "producer_version", "graph_name", "outputs", "initializers", "shape_inference", "unsupported", "all_supported"} {
		assert.Contains(t, info, key)
	}
	// The flag may follow the model too.
	r2 := cc(t, "inspect", mlpModel, "--json")
	assert.Equal(t, r.stdout, r2.stdout)
}

func TestInspectReportsUnsupported(t *testing.T) {
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g.SetOutputs(g.Apply("NoSuchOp", []*ir.Value{x}))
	path := filepath.Join(t.TempDir(), "odd.onnx")
	require.NoError(t, onnx.WriteFile(path, ir.NewModel(g, 17)))

	r := cc(t, "inspect", path)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "support      1 unsupported:\n")
	assert.Contains(t, r.stdout, "NoSuchOp")

	r = cc(t, "inspect", "--json", path)
	var info struct {
		Unsupported []struct {
			Op, Domain string
			Opset      int64
		}
		AllSupported bool `json:"all_supported"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	assert.False(t, info.AllSupported)
	require.Len(t, info.Unsupported, 1)
	assert.Equal(t, "NoSuchOp", info.Unsupported[0].Op)
	assert.Equal(t, "ai.onnx", info.Unsupported[0].Domain)
}

// inspect also says what the CPU backend cannot compile: here a Cast of
// a decoded image, which the reference executor runs and native code
// cannot (ImageDecoder's output has a shape only the data gives).
func TestInspectReportsCPUUnsupported(t *testing.T) {
	g := ir.NewGraph("g")
	img := g.Apply("ImageDecoder", []*ir.Value{g.AddInput("x", ir.TensorType(ir.Uint8, ir.S(64)))})
	g.SetOutputs(g.Apply("ReduceSum", []*ir.Value{g.Apply("Cast", []*ir.Value{img}, ir.AttrI("to", int64(ir.Float32)))}, ir.AttrI("keepdims", 0)))
	path := filepath.Join(t.TempDir(), "decoded.onnx")
	m := ir.NewModel(g, 20)
	m.IRVersion = 9
	require.NoError(t, onnx.WriteFile(path, m))

	r := cc(t, "inspect", path)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "support      all ops supported\ncpu backend  2 unsupported:\n               Cast (opset 20): it reads \"ImageDecoder_out0\", which ImageDecoder computes on the host")

	r = cc(t, "inspect", "--json", path)
	var info struct {
		CPUUnsupported []struct {
			Op, Reason string
			Opset      int64
		} `json:"cpu_unsupported"`
		CPUAllSupported bool `json:"cpu_all_supported"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	assert.False(t, info.CPUAllSupported)
	require.Len(t, info.CPUUnsupported, 2) // the Cast, and the ReduceSum of its unknown shape
	assert.Equal(t, "Cast", info.CPUUnsupported[0].Op)
	assert.EqualValues(t, 20, info.CPUUnsupported[0].Opset)

	r = cc(t, "inspect", mlpModel)
	assert.Contains(t, r.stdout, "cpu backend  compiles every node\n")
}

func TestInspectResNet18(t *testing.T) {
	path := filepath.Join(zoo, "resnet18", "model.onnx")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	r := cc(t, "inspect", path)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "parameters   11,684,712 (11.68M) in ")
	assert.Contains(t, r.stdout, "ops          20  Conv\n             17  Relu\n              8  Add\n")
}

func TestBadModels(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.onnx")
	require.NoError(t, os.WriteFile(garbage, []byte("this is not a protobuf \xff\xff\xff\xff"), 0o644))
	data, err := os.ReadFile(mlpModel)
	require.NoError(t, err)
	truncated := filepath.Join(dir, "truncated.onnx")
	require.NoError(t, os.WriteFile(truncated, data[:len(data)/2], 0o644))
	empty := filepath.Join(dir, "empty.onnx")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	syntax := filepath.Join(dir, "syntax.onnxtxt")
	require.NoError(t, os.WriteFile(syntax, []byte("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2] X) => (float[2] Y) {\n  Y = Relu(X\n}\n"), 0o644))
	undefined := filepath.Join(dir, "undefined.onnxtxt")
	require.NoError(t, os.WriteFile(undefined, []byte("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2] X) => (float[2] Y) {\n  Y = Add(X, Z)\n}\n"), 0o644))
	missing := filepath.Join(dir, "missing.onnx")
	// A text model whose weights file beside it is gone.
	src, err := os.ReadFile(filepath.Join(models, "digits_mlp.onnxtxt"))
	require.NoError(t, err)
	noWeights := filepath.Join(dir, "digits_mlp.onnxtxt")
	require.NoError(t, os.WriteFile(noWeights, src, 0o644))

	for _, path := range []string{garbage, truncated, empty, syntax, undefined, missing, noWeights} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			requireOneErrorLine(t, cc(t, "inspect", path), path)
			requireOneErrorLine(t, cc(t, "convert", path, filepath.Join(dir, "out.onnxtxt")), path)
		})
	}
	r := cc(t, "inspect", syntax)
	assert.Regexp(t, `^cc: `+syntax+`:\d+:\d+: `, r.stderr, "a syntax error gives line and column")
	r = cc(t, "inspect", missing)
	assert.Equal(t, "cc: "+missing+": no such file or directory\n", r.stderr)
}

func TestConvertRoundTrip(t *testing.T) {
	orig, err := onnx.ReadFile(mlpModel)
	require.NoError(t, err)
	dir := t.TempDir()
	txt := filepath.Join(dir, "m.onnxtxt")
	back := filepath.Join(dir, "m.onnx")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "again"), 0o755))
	txt2 := filepath.Join(dir, "again", "m.onnxtxt")
	same := filepath.Join(dir, "same.onnx")

	for _, step := range [][2]string{{mlpModel, txt}, {txt, back}, {txt, txt2}, {mlpModel, same}} {
		r := cc(t, "convert", step[0], step[1])
		require.Equal(t, 0, r.code, "convert %s %s: %s", step[0], step[1], r.stderr)
		assert.Empty(t, r.stdout)
		assert.Empty(t, r.stderr)
	}
	fromText, err := text.ParseFile(txt)
	require.NoError(t, err)
	assert.Empty(t, ir.Diff(orig, fromText), "onnx → text")
	fromText2, err := text.ParseFile(txt2)
	require.NoError(t, err)
	assert.Empty(t, ir.Diff(orig, fromText2), "onnx → text → text")
	for _, path := range []string{back, same} {
		m, err := onnx.ReadFile(path)
		require.NoError(t, err)
		assert.Empty(t, ir.Diff(orig, m), path)
	}
	for _, suffix := range []string{"", ".bin"} {
		a, err := os.ReadFile(txt + suffix)
		require.NoError(t, err)
		b, err := os.ReadFile(txt2 + suffix)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "text → text reprints %s%s the same", filepath.Base(txt), suffix)
	}
}

// writeTest makes a conformance test folder from a model and tensor files.
func writeTest(t *testing.T, dir string, m *ir.Model, files map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "test_data_set_0"), 0o755))
	require.NoError(t, onnx.WriteFile(filepath.Join(dir, "model.onnx"), m))
	for name, src := range files {
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "test_data_set_0", name), data, 0o644))
	}
}

func TestConformanceCommand(t *testing.T) {
	r := cc(t, "test", models)
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Equal(t, "PASS digits_cnn\nPASS digits_cnn_dynamic\nPASS digits_mlp\n3 passed, 0 failed, 0 skipped\n", r.stdout)
	assert.Empty(t, r.stderr)

	// One test of each outcome: a model whose expected output is another
	// model's (FAIL), an op kiln lacks (UNSUPPORTED), and a passing one.
	dir := t.TempDir()
	mlp, err := onnx.ReadFile(mlpModel)
	require.NoError(t, err)
	writeTest(t, filepath.Join(dir, "a_pass"), mlp, map[string]string{
		"input_0.pb":  filepath.Join(models, "digits_mlp/test_data_set_0/input_0.pb"),
		"output_0.pb": filepath.Join(models, "digits_mlp/test_data_set_0/output_0.pb"),
	})
	writeTest(t, filepath.Join(dir, "b_fail"), mlp, map[string]string{
		"input_0.pb":  filepath.Join(models, "digits_mlp/test_data_set_0/input_0.pb"),
		"output_0.pb": filepath.Join(models, "digits_cnn/test_data_set_0/output_0.pb"),
	})
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(2)))
	g.SetOutputs(g.Apply("NoSuchOp", []*ir.Value{x}))
	writeTest(t, filepath.Join(dir, "c_unsupported"), ir.NewModel(g, 17), nil)

	r = cc(t, "test", dir)
	assert.Equal(t, 1, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Equal(t, "PASS a_pass", lines[0])
	assert.Regexp(t, `^FAIL b_fail: test_data_set_0: output "output": .*worst element \d+ is `, lines[1])
	assert.Regexp(t, `^UNSUPPORTED c_unsupported: .*NoSuchOp`, lines[2])
	assert.Equal(t, "1 passed, 1 failed, 1 skipped", lines[3])

	r = cc(t, "test", "--json", dir)
	assert.Equal(t, 1, r.code, r.stderr)
	var report struct {
		Summary map[string]int
		Tests   []map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout)
	assert.Equal(t, map[string]int{"passed": 1, "failed": 1, "skipped": 1}, report.Summary)
	require.Len(t, report.Tests, 3)
	for i, want := range [][2]string{{"a_pass", "PASS"}, {"b_fail", "FAIL"}, {"c_unsupported", "UNSUPPORTED"}} {
		assert.Equal(t, want[0], report.Tests[i]["name"])
		assert.Equal(t, want[1], report.Tests[i]["status"])
		assert.Contains(t, report.Tests[i], "detail")
	}

	// With a relative L2 budget this loose, the wrong output passes, and
	// a single test folder is a PATH too.
	r = cc(t, "test", "--rel-l2", "1e9", "--verbose", filepath.Join(dir, "b_fail"))
	assert.Equal(t, 0, r.code, r.stdout)
	assert.Regexp(t, `^PASS b_fail: output: max abs err .*, rel L2 .* \(\d+\.\d+s\)\n1 passed, 0 failed, 0 skipped\n$`, r.stdout)

	r = cc(t, "test", "--timeout", "1ns", filepath.Join(dir, "a_pass"))
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "FAIL a_pass: timed out after 1ns\n0 passed, 1 failed, 0 skipped\n", r.stdout)

	missing := filepath.Join(dir, "nope")
	requireOneErrorLine(t, cc(t, "test", missing), missing)
	requireOneErrorLine(t, cc(t, "test", filepath.Join(dir, "a_pass", "test_data_set_0")), filepath.Join(dir, "a_pass", "test_data_set_0"))
}

// The cpu backend compiles each test into an engine and runs it: the
// bundled models pass at 1 and 2 threads, a wrong expected output fails,
// and an op the reference runs but the CPU backend lacks is UNSUPPORTED.
func TestConformanceCPUBackend(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	for _, threads := range []string{"1", "2"} {
		r := cc(t, "test", "--backend", "cpu", "--threads", threads, models)
		require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
		assert.Equal(t, "PASS digits_cnn\nPASS digits_cnn_dynamic\nPASS digits_mlp\n3 passed, 0 failed, 0 skipped\n", r.stdout)
	}

	dir := t.TempDir()
	mlp, err := onnx.ReadFile(mlpModel)
	require.NoError(t, err)
	writeTest(t, filepath.Join(dir, "a_fail"), mlp, map[string]string{
		"input_0.pb":  filepath.Join(models, "digits_mlp/test_data_set_0/input_0.pb"),
		"output_0.pb": filepath.Join(models, "digits_cnn/test_data_set_0/output_0.pb"),
	})
	g := ir.NewGraph("g")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 3)))
	g.SetOutputs(g.Apply("Cast", []*ir.Value{x}, ir.AttrI("to", int64(ir.String))))
	hardmax := filepath.Join(dir, "b_tostring")
	writeTest(t, hardmax, ir.NewModel(g, 13), nil)
	strs := ir.NewTensor(ir.String, 1, 3)
	strs.Strings = []string{"1", "3", "2"}
	for name, tn := range map[string]*ir.Tensor{
		"input_0.pb":  ir.FromSlice(ir.Float32, []int64{1, 3}, []float32{1, 3, 2}),
		"output_0.pb": strs,
	} {
		data, err := onnx.WriteTensor(tn)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(hardmax, "test_data_set_0", name), data, 0o644))
	}
	r := cc(t, "test", hardmax)
	require.Equal(t, 0, r.code, r.stdout)

	r = cc(t, "test", "--backend", "cpu", dir)
	assert.Equal(t, 1, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, r.stdout)
	assert.Regexp(t, `^FAIL a_fail: test_data_set_0: output "output": `, lines[0])
	assert.Equal(t, "PASS b_tostring", lines[1]) // a host step: strings are the runtime's
	assert.Equal(t, "1 passed, 1 failed, 0 skipped", lines[2])
}

// The bundled demo models come in three forms that must stay one model:
// NAME.onnx, NAME.onnxtxt (+ .bin) for readers, and NAME/model.onnx with
// its test data for `cc test`.
func TestBundledModels(t *testing.T) {
	for _, name := range []string{"digits_mlp", "digits_cnn"} {
		t.Run(name, func(t *testing.T) {
			flat, err := os.ReadFile(filepath.Join(models, name+".onnx"))
			require.NoError(t, err)
			inFolder, err := os.ReadFile(filepath.Join(models, name, "model.onnx"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(flat, inFolder), "%s.onnx and %s/model.onnx differ", name, name)

			m, err := onnx.ReadFile(filepath.Join(models, name+".onnx"))
			require.NoError(t, err)
			fromText, err := text.ParseFile(filepath.Join(models, name+".onnxtxt"))
			require.NoError(t, err)
			assert.Empty(t, ir.Diff(m, fromText), "regenerate with: bin/cc convert testdata/models/%s.onnx testdata/models/%s.onnxtxt", name, name)
		})
	}
}
