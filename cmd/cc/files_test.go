package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kiln-ml/kiln/codegen/cpu"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/smallfs"
	"github.com/kiln-ml/kiln/ir"
)

// Tests of what cc writes: never over one of its inputs, never half a
// file, nothing left behind when interrupted.

// fileBytes reads every file in dir, by name, to compare before and after.
func fileBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()+"/"] = nil
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}

// requireRefused checks a refused write: exit 1, one line naming the
// output and the input it is, and the folder's files unchanged.
func requireRefused(t *testing.T, dir string, args []string, names ...string) {
	t.Helper()
	before := fileBytes(t, dir)
	r := cc(t, args...)
	require.Equal(t, 1, r.code, "cc %s: stdout %s stderr %s", strings.Join(args, " "), r.stdout, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	assert.Contains(t, r.stderr, "is the same file as")
	assert.Contains(t, r.stderr, "refusing to write over")
	for _, n := range names {
		assert.Contains(t, r.stderr, n)
	}
	assert.Equal(t, before, fileBytes(t, dir), "cc %s changed the folder", strings.Join(args, " "))
}

// `cc build a.onnx -o a.onnx` (however spelled, or through a hard link)
// and `cc convert a.onnx a.onnx` are refused before any work, the model
// untouched; so is a timing cache that is the model.
func TestBuildRefusesModelAsOutput(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "a.onnx")
	copyFile(t, mlpModel, model)
	require.NoError(t, os.Link(model, filepath.Join(dir, "hard.onnx")))
	dotted := filepath.Join(dir, ".", "a.onnx")
	requireRefused(t, dir, []string{"build", model, "-o", dotted}, model, dotted, "the model")
	requireRefused(t, dir, []string{"build", model, "--emit", "llvm", "-o", filepath.Join(dir, "hard.onnx")}, "hard.onnx")
	requireRefused(t, dir, []string{"build", model, "--timing-cache", model, "-o", filepath.Join(dir, "a.kiln")}, "the timing cache")
	requireRefused(t, dir, []string{"convert", model, dotted}, "the model")
	requireRefused(t, dir, []string{"convert", model, filepath.Join(dir, "hard.onnx")}, "the model")

	// Outputs must differ from each other too.
	requireRefused(t, dir, []string{"build", model, "--timing-cache", filepath.Join(dir, "x.kiln"), "-o", filepath.Join(dir, ".", "x.kiln")}, "another output")
}

// --emit ir of a text model by default writes MODEL.opt.onnxtxt, not the
// model itself.
func TestBuildIRDefaultOutputIsNotTheModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "digits_mlp.onnxtxt") // its text names digits_mlp.onnxtxt.bin
	copyFile(t, filepath.Join(models, "digits_mlp.onnxtxt"), model)
	copyFile(t, filepath.Join(models, "digits_mlp.onnxtxt.bin"), model+".bin")
	before := fileBytes(t, dir)
	r := cc(t, "build", "--emit", "ir", "--timing-cache", "none", model)
	require.Equal(t, 0, r.code, r.stderr)
	after := fileBytes(t, dir)
	assert.Equal(t, before["digits_mlp.onnxtxt"], after["digits_mlp.onnxtxt"])
	assert.Equal(t, before["digits_mlp.onnxtxt.bin"], after["digits_mlp.onnxtxt.bin"])
	assert.Contains(t, after, "digits_mlp.opt.onnxtxt")

	// The text model's weights file is one of its inputs.
	requireRefused(t, dir, []string{"build", model, "--emit", "obj", "-o", model + ".bin"}, "the model's external data")
	requireRefused(t, dir, []string{"build", model, "--emit", "ir", "-o", filepath.Join(dir, "x.onnxtxt"), "--timing-cache", model + ".bin"}, "the timing cache")
	// A --dump-after file may not be an input either.
	require.NoError(t, os.Rename(model, filepath.Join(dir, "01-infer.onnxtxt")))
	requireRefused(t, dir, []string{"build", filepath.Join(dir, "01-infer.onnxtxt"), "--emit", "ir", "-o", filepath.Join(dir, "x.onnxtxt"),
		"--timing-cache", "none", "--dump-after", "infer", "--dump-dir", dir}, "a --dump-after file")
}

// externalModel is an ONNX model, y = x + w with w: float[3], whose w
// lives in the file loc beside it (ONNX external data).
func externalModel(loc string) []byte {
	msg := func(b []byte, num protowire.Number, body []byte) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	str := func(b []byte, num protowire.Number, s string) []byte { return msg(b, num, []byte(s)) }
	varint := func(b []byte, num protowire.Number, v uint64) []byte {
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	}
	valueInfo := func(name string) []byte {
		dim := varint(nil, 1, 3)
		shape := msg(nil, 1, dim)
		tensorType := msg(varint(nil, 1, uint64(ir.Float32)), 2, shape)
		typ := msg(nil, 1, tensorType)
		return msg(str(nil, 1, name), 2, typ)
	}
	node := str(str(str(str(nil, 1, "x"), 1, "w"), 2, "y"), 4, "Add")
	entry := func(k, v string) []byte { return str(str(nil, 1, k), 2, v) }
	init := varint(nil, 1, 3) // dims
	init = varint(init, 2, uint64(ir.Float32))
	init = str(init, 8, "w")
	init = msg(init, 13, entry("location", loc))
	init = msg(init, 13, entry("offset", "0"))
	init = msg(init, 13, entry("length", "12"))
	init = varint(init, 14, 1) // data_location: EXTERNAL
	graph := msg(nil, 1, node)
	graph = str(graph, 2, "g")
	graph = msg(graph, 5, init)
	graph = msg(graph, 11, valueInfo("x"))
	graph = msg(graph, 12, valueInfo("y"))
	model := varint(nil, 1, 8)
	model = msg(model, 7, graph)
	return msg(model, 8, varint(nil, 2, 17))
}

// `cc build model.onnx -o w.bin`, where w.bin holds the model's weights,
// is refused with the weights untouched; so is a conversion whose text
// output's .bin would be that file.
func TestBuildRefusesExternalDataAsOutput(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.onnx")
	weights := filepath.Join(dir, "w.onnxtxt.bin")
	require.NoError(t, os.WriteFile(model, externalModel("w.onnxtxt.bin"), 0o644))
	var w []byte
	for _, v := range []float32{0.5, -1.25, 3} {
		w = binary.LittleEndian.AppendUint32(w, math.Float32bits(v))
	}
	require.NoError(t, os.WriteFile(weights, w, 0o644))
	m, err := onnx.ReadFile(model)
	require.NoError(t, err, "the hand-made model reads")
	require.Equal(t, []float32{0.5, -1.25, 3}, m.Graph.Initializers[0].Const.Float32s())

	requireRefused(t, dir, []string{"build", model, "-o", weights}, weights, "the model's external data")
	requireRefused(t, dir, []string{"build", model, "--emit", "ir", "-o", filepath.Join(dir, "w.onnxtxt")}, "the output's external data", "the model's external data")
	requireRefused(t, dir, []string{"convert", model, filepath.Join(dir, "w.onnxtxt")}, "the output's external data")
}

// fullDiskCopies mounts a tmpfs with room for one copy of an output of
// size bytes but not two, the old file and its replacement.
func fullDiskCopies(t *testing.T, size int) string {
	return smallfs.Mount(t, int64(size)*3/2+8192)
}

// On a full disk, `cc convert` over an existing model fails and leaves the
// old model byte-identical, with nothing beside it: for .onnx, and for
// .onnxtxt with its .bin, whose pair stays the old pair.
func TestConvertFullDisk(t *testing.T) {
	src := filepath.Join(models, "digits_cnn.onnx")
	st, err := os.Stat(src)
	require.NoError(t, err)
	dir := fullDiskCopies(t, int(st.Size()))
	out := filepath.Join(dir, "out.onnx")
	r := cc(t, "convert", src, out)
	require.Equal(t, 0, r.code, r.stderr)
	before := fileBytes(t, dir)
	r = cc(t, "convert", src, out)
	require.Equal(t, 1, r.code, "the second copy does not fit: %s", r.stderr)
	assert.Contains(t, r.stderr, "no space left on device")
	assert.Equal(t, before, fileBytes(t, dir), "the old model is intact and nothing is left beside it")

	dir = fullDiskCopies(t, int(st.Size()))
	txt := filepath.Join(dir, "out.onnxtxt")
	r = cc(t, "convert", src, txt)
	require.Equal(t, 0, r.code, r.stderr)
	before = fileBytes(t, dir)
	require.Len(t, before, 2, "the text and its .bin")
	r = cc(t, "convert", src, txt)
	require.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no space left on device")
	assert.Equal(t, before, fileBytes(t, dir), "the old pair is intact and nothing is left beside it")
}

// On a full disk, `cc build` over an existing good engine fails and the
// engine stays byte-identical; infer can still load it.
func TestBuildFullDisk(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "first.kiln")
	r := cc(t, "build", "--timing-cache", "none", "-o", first, mlpModel)
	require.Equal(t, 0, r.code, r.stderr)
	st, err := os.Stat(first)
	require.NoError(t, err)
	full := fullDiskCopies(t, int(st.Size()))
	engine := filepath.Join(full, "mlp.kiln")
	copyFile(t, first, engine)
	before := fileBytes(t, full)
	r = cc(t, "build", "--timing-cache", "none", "-o", engine, mlpModel)
	require.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no space left on device")
	assert.Equal(t, before, fileBytes(t, full))
	r = cc(t, "inspect", engine)
	assert.Equal(t, 0, r.code, r.stderr)
}

// deepModel writes a model whose build spends many seconds in llc: 40
// convolutions, each a kernel of its own.
func deepModel(t *testing.T, path string) {
	rng := rand.New(rand.NewSource(1))
	g := ir.NewGraph("deep")
	x := g.AddInput("x", ir.TensorType(ir.Float32, ir.S(1, 3, 32, 32)))
	for i := range 40 {
		w := ir.NewTensor(ir.Float32, 3, 3, 3, 3)
		for j := range w.Float32s() {
			w.Float32s()[j] = float32(rng.NormFloat64()) * 0.2
		}
		x = g.Apply("Conv", []*ir.Value{x, g.AddInitializer(fmt.Sprintf("w%d", i), w)}, ir.AttrIs("pads", 1, 1, 1, 1))
		x = g.Apply("Tanh", []*ir.Value{x})
	}
	x.Name = "y"
	g.SetOutputs(x)
	require.NoError(t, onnx.WriteFile(path, ir.NewModel(g, 17)))
}

// SIGINT or SIGTERM during a build (while the toolchain's kiln-cc-* folder
// exists) ends cc with 130 or 143, the folder removed, the old output
// intact and no temporary file beside it.
func TestBuildInterrupted(t *testing.T) {
	if err := cpu.Available(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "deep.onnx")
	deepModel(t, model)
	out := filepath.Join(dir, "deep.kiln")
	require.NoError(t, os.WriteFile(out, []byte("an older engine"), 0o644))
	for _, tc := range []struct {
		sig      syscall.Signal
		code     int
		winograd string
	}{{syscall.SIGINT, 130, "auto"}, {syscall.SIGTERM, 143, "off"}} {
		tmp := t.TempDir()
		cmd := exec.Command(ccPath, "build", "--winograd", tc.winograd, "--timing-cache", "none", "-o", out, model)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// A group of its own, so the toolchain it leaves running can be
		// stopped after the test; the signal goes to cc alone.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var waitErr error
		seen := false
	poll:
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			select {
			case waitErr = <-exited:
				t.Fatalf("cc ended before its toolchain folder was seen: %v\n%s", waitErr, stderr.String())
			default:
			}
			if m, _ := filepath.Glob(filepath.Join(tmp, "kiln-cc-*")); len(m) > 0 {
				seen = true
				require.NoError(t, cmd.Process.Signal(tc.sig))
				waitErr = <-exited
				break poll
			}
		}
		require.True(t, seen, "no kiln-cc-* folder appeared")
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // llc, opt, the linker
		var exit *exec.ExitError
		require.True(t, errors.As(waitErr, &exit), "%v", waitErr)
		assert.Equal(t, tc.code, exit.ExitCode(), "%v: %s", tc.sig, stderr.String())
		assert.Contains(t, stderr.String(), "interrupted")
		left, err := filepath.Glob(filepath.Join(tmp, "kiln-cc-*"))
		require.NoError(t, err)
		assert.Empty(t, left, "%v left the toolchain's folder", tc.sig)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Equal(t, "an older engine", string(got))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 2, "the model and the old output, no temporary file")
	}
}
