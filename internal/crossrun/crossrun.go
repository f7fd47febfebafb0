// Package crossrun runs engines built for AArch64 on an x86-64 machine:
// qemu-user (qemu-aarch64-static, with the arm64 C library's dynamic
// loader from /usr/aarch64-linux-gnu, which purego's dlopen needs) runs an
// arm64 `infer` built with GOARCH=arm64 CGO_ENABLED=0, which loads the
// engine as it would on the device. `cc test --backend aarch64` and the
// cross-compilation tests check such engines against the reference this
// way; `make deps` installs qemu-user-static and libc6-arm64-cross.
package crossrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/kiln-ml/kiln/cpuabi"
	"github.com/kiln-ml/kiln/frontend/onnx"
	"github.com/kiln-ml/kiln/internal/cleanup"
	"github.com/kiln-ml/kiln/ir"
	"github.com/kiln-ml/kiln/runtime/engine"
)

// Sysroot is where Debian's libc6-arm64-cross puts the arm64 C library and
// its dynamic loader (ld-linux-aarch64.so.1).
const Sysroot = "/usr/aarch64-linux-gnu"

// Runner runs arm64 programs: natively on an arm64 machine, else under
// qemu-user.
type Runner struct {
	// Qemu is the emulator's path ("" on an arm64 machine).
	Qemu string
	// Infer is the arm64 infer binary.
	Infer string
}

// Emulator finds qemu-aarch64 and the arm64 sysroot, or says what to
// install; on an arm64 machine it needs neither.
func Emulator() (string, error) {
	if goruntime.GOARCH == "arm64" {
		return "", nil
	}
	var qemu string
	for _, name := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(name); err == nil {
			qemu = p
			break
		}
	}
	var missing []string
	if qemu == "" {
		missing = append(missing, "qemu-aarch64-static (Debian: qemu-user-static)")
	}
	if _, err := os.Stat(filepath.Join(Sysroot, "lib", "ld-linux-aarch64.so.1")); err != nil {
		missing = append(missing, "the arm64 C library in "+Sysroot+" (Debian: libc6-arm64-cross)")
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("running AArch64 engines here needs %s: run `make deps`", strings.Join(missing, " and "))
	}
	return qemu, nil
}

// Command is an exec.Cmd running the arm64 program argv[0].
func (r *Runner) Command(ctx context.Context, argv ...string) *exec.Cmd {
	if r.Qemu == "" {
		return exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	return exec.CommandContext(ctx, r.Qemu, append([]string{"-L", Sysroot}, argv...)...)
}

// BuildInfer builds cmd/infer for linux/arm64 (CGO_ENABLED=0) into dir
// with the go command, from the module at root, and returns its path.
func BuildInfer(root, dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("building the arm64 infer needs the go command")
	}
	out := filepath.Join(dir, "infer")
	cmd := exec.Command(gobin, "build", "-o", out, "./cmd/infer")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/infer for linux/arm64: %v\n%s", err, msg)
	}
	return out, nil
}

// Run runs engine (a file's bytes) once on feeds with `infer run` and
// returns its outputs by name.
func (r *Runner) Run(ctx context.Context, eng []byte, feeds map[string]*ir.Tensor, threads int) (map[string]*ir.Tensor, error) {
	e, err := engine.Decode(eng)
	if err != nil {
		return nil, err
	}
	dir, remove, err := cleanup.MkdirTemp("", "kiln-crossrun-*")
	if err != nil {
		return nil, err
	}
	defer remove()
	path := filepath.Join(dir, "engine.kiln")
	if err := os.WriteFile(path, eng, 0o644); err != nil {
		return nil, err
	}
	args := []string{r.Infer, "run", "--threads", strconv.Itoa(max(threads, 1)), "--output-dir", filepath.Join(dir, "out")}
	for i, b := range e.Meta.Inputs {
		t := feeds[b.Name]
		if t == nil {
			return nil, fmt.Errorf("no data for input %q", b.Name)
		}
		data, err := onnx.WriteValue(t)
		if err != nil {
			return nil, err
		}
		in := filepath.Join(dir, fmt.Sprintf("input_%d.pb", i))
		if err := os.WriteFile(in, data, 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--input", b.Name+"="+in)
	}
	args = append(args, path)
	var stderr bytes.Buffer
	cmd := r.Command(ctx, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	got := map[string]*ir.Tensor{}
	n := 0
	for _, b := range e.Meta.Outputs {
		if b.Debug != nil {
			continue
		}
		d, err := ir.ParseDType(b.DType)
		if err != nil {
			return nil, err
		}
		t, err := onnx.ReadValueFileWithin(filepath.Join(dir, "out", fmt.Sprintf("output_%d.pb", n)), cpuabi.TypeOf(b.Kinds, d, ir.Shape{}), ir.Limits{})
		if err != nil {
			return nil, err
		}
		got[b.Name] = t
		n++
	}
	return got, nil
}
