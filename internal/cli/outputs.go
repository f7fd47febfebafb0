package cli

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a path a command reads or writes and what it is to the command:
// "the model", "external data of the model", "the timing cache".
type File struct {
	Path, Role string
}

// CheckOutputs refuses, before any work, an output that is one of the
// inputs or another output. Files are compared by device and inode
// (os.SameFile), so `-o ./a.onnx` is a.onnx and a hard link is its target;
// an output that does not exist yet is compared by its absolute path with
// the other outputs. The error names both files.
func CheckOutputs(inputs, outputs []File) error {
	stats := func(fs []File) []os.FileInfo {
		out := make([]os.FileInfo, len(fs))
		for i, f := range fs {
			out[i], _ = os.Stat(f.Path)
		}
		return out
	}
	in, out := stats(inputs), stats(outputs)
	for i, o := range outputs {
		if out[i] == nil {
			continue
		}
		for j, f := range inputs {
			if in[j] != nil && os.SameFile(out[i], in[j]) {
				return clash(o, f, "an input")
			}
		}
	}
	for i, o := range outputs {
		for j := range i {
			same := out[i] != nil && out[j] != nil && os.SameFile(out[i], out[j])
			if out[i] == nil && out[j] == nil {
				a, errA := filepath.Abs(o.Path)
				b, errB := filepath.Abs(outputs[j].Path)
				same = errA == nil && errB == nil && a == b
			}
			if same {
				return clash(o, outputs[j], "another output")
			}
		}
	}
	return nil
}

func clash(out, other File, what string) error {
	return fmt.Errorf("%s: %s is the same file as %s %s: refusing to write over %s", out.Path, out.Role, other.Role, other.Path, what)
}
