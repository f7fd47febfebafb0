// Package readfile reads input files safely and within ir.Limits.
//
// Only regular files are opened, and the check is made before the open:
// opening a named pipe (FIFO) blocks until a writer comes, so a model,
// weights, engine or input file that is one would hang its reader. A path
// below a folder (a model's external data) must stay inside that folder
// once every symbolic link on the way is resolved. The size is checked (by
// stat) before anything is read, and the first bytes can be validated
// before the rest is read, so a huge file that is not what it claims to be
// fails at once instead of after gigabytes of reading.
package readfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kiln-ml/kiln/ir"
)

// PrefixBytes is how much of a file Within hands to its check.
const PrefixBytes = 4096

// ErrNotRegular is wrapped by the error for a path that is a folder, a
// named pipe, a device or a socket.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading when it is a regular file (a symbolic link
// to one is followed); anything else is refused, naming path, without
// blocking.
func Open(path string) (*os.File, error) {
	return openRegular(path,
		func() (fs.FileInfo, error) { return os.Stat(path) },
		func(flag int) (*os.File, error) { return os.OpenFile(path, flag, 0) })
}

// OpenInside opens rel, a relative path below dir, as Open does, when it
// stays inside dir: rel may not be absolute or climb out with "..", and
// no symbolic link on the way (rel itself included) may lead out of the
// folder (the path traversal of ONNX external data, onnx/onnx#7686). Links
// that stay inside are followed. The file is opened through an os.Root of
// the resolved folder, so a link swapped in after the check cannot lead
// out either.
func OpenInside(dir, rel string) (*os.File, error) {
	path := filepath.Join(dir, rel)
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%q is not a relative path inside the folder %s", rel, dir)
	}
	realDir, err := resolve(dir)
	if err != nil {
		return nil, openError(dir, err)
	}
	real, err := resolve(path)
	if err != nil {
		return nil, openError(path, err)
	}
	if !Inside(realDir, real) {
		return nil, fmt.Errorf("%s resolves to %s, outside the folder %s (a symbolic link leads out of it)", path, real, realDir)
	}
	below, _ := filepath.Rel(realDir, real)
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return nil, err
	}
	defer root.Close() // the file outlives its root
	return openRegular(path,
		func() (fs.FileInfo, error) { return root.Stat(below) },
		func(flag int) (*os.File, error) { return root.OpenFile(below, flag, 0) })
}

// Inside reports whether path is dir or below it, both resolved (no
// symbolic links on them, so ".." in the relative path means outside).
func Inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// resolve is path made absolute, every symbolic link on it resolved (an
// absolute link inside a relative folder is then still inside it).
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// openError is a failure to resolve path as one to open it, naming the
// whole path rather than the component that failed.
func openError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "open", Path: path, Err: pe.Err}
	}
	return err
}

// openRegular checks by stat that name is a regular file before opening
// it, and again after: open does not block (openFlags) even if a named
// pipe took the file's place in between, and the file opened must be the
// one checked.
func openRegular(name string, stat func() (fs.FileInfo, error), open func(flag int) (*os.File, error)) (*os.File, error) {
	before, err := stat()
	if err != nil {
		return nil, err
	}
	if err := regular(name, before); err != nil {
		return nil, err
	}
	f, err := open(openFlags)
	if err != nil {
		return nil, err
	}
	after, err := f.Stat()
	if err == nil {
		err = regular(name, after)
	}
	if err == nil && !os.SameFile(before, after) {
		err = fmt.Errorf("%s: the file was replaced while it was opened", name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular is nil for a regular file; otherwise an error naming what it is.
func regular(name string, st fs.FileInfo) error {
	mode := st.Mode()
	if mode.IsRegular() {
		return nil
	}
	what := "not a file"
	switch {
	case mode.IsDir():
		what = "a folder"
	case mode&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO), which would block until something writes to it"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%s: %w but %s; give a regular file", name, ErrNotRegular, what)
}

// Within reads the whole file at path after checking its size against
// lim.MaxFileBytes and, when check is not nil, its first PrefixBytes bytes
// (fewer for a smaller file; size is the whole file's). The file is opened
// as by Open. Errors name path.
func Within(path string, lim ir.Limits, check func(prefix []byte, size int64) error) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if err := lim.CheckFile(path, size); err != nil {
		return nil, err
	}
	prefix := make([]byte, min(size, PrefixBytes))
	if _, err := io.ReadFull(f, prefix); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if check != nil {
		if err := check(prefix, size); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	// Only now the whole file's memory.
	buf := make([]byte, size)
	n := copy(buf, prefix)
	if _, err := io.ReadFull(f, buf[n:]); err != nil {
		return nil, fmt.Errorf("%s: %w (did the file change while it was read?)", path, err)
	}
	return buf, nil
}
