// Package atomicfile writes files so that a full disk, a crash or an
// interrupt never leaves a half-written one: the data goes to a temporary
// file in the target's folder, is synced, and is renamed over the target,
// and the folder is synced so the rename survives a crash too. A write
// that fails leaves the old file as it was and no temporary file behind;
// an interrupted one leaves no temporary file behind either, through the
// cleanup registry that the CLIs' signal handler empties.
//
// A target that is a symbolic link is written through the link (the link
// stays); one that exists but is not a regular file (/dev/null, a pipe) is
// written in place, since it cannot be replaced.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/kiln-ml/kiln/internal/cleanup"
)

// File is an output being written. Nothing is visible at its path until
// Commit; Abort (or a failed Commit) discards it.
type File struct {
	f          *os.File
	name       string // the target as the caller named it, for errors
	path       string // the target, symbolic links resolved
	tmp        string // "" when writing in place
	unregister func()
	closed     bool
	done       bool
}

// Create starts writing path. perm is the mode of a new file (less the
// umask); a file that exists keeps its mode.
func Create(path string, perm fs.FileMode) (*File, error) {
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(target)
	switch {
	case err == nil && st.IsDir():
		return nil, &fs.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
	case err == nil && !st.Mode().IsRegular():
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, pathError("open", path, err)
		}
		return &File{f: f, name: path, path: target}, nil
	case err == nil:
		// A file the user may not write stays protected, as with
		// os.WriteFile, although renaming over it would succeed.
		if err := syscall.Access(target, 2 /* W_OK */); err != nil {
			return nil, pathError("open", path, err)
		}
		perm = st.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	f, tmp, unregister, err := createTemp(target, perm)
	if err != nil {
		return nil, pathError("open", path, err)
	}
	if st != nil {
		// The umask applied when the file was created; an existing file's
		// mode is kept exactly.
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(tmp)
			unregister()
			return nil, pathError("chmod", path, err)
		}
	}
	return &File{f: f, name: path, path: target, tmp: tmp, unregister: unregister}, nil
}

// createTemp makes a new file beside target, registered for removal on an
// interrupt as it is made, so that no interrupt can miss it.
func createTemp(target string, perm fs.FileMode) (*os.File, string, func(), error) {
	dir, base := filepath.Split(target)
	if len(base) > 100 {
		base = base[:100]
	}
	for try := 0; ; try++ {
		var f *os.File
		tmp, unregister, err := cleanup.Create(func() (string, error) {
			tmp := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
			var err error
			f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			return tmp, err
		})
		if err == nil {
			return f, tmp, unregister, nil
		}
		if !errors.Is(err, fs.ErrExist) || try == 100 {
			return nil, "", nil, err
		}
	}
}

// resolve follows path's symbolic links (a dangling one is replaced).
func resolve(path string) (string, error) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	return target, err
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	return n, pathError("write", f.name, err)
}

// Name is the file's target path, as given to Create.
func (f *File) Name() string { return f.name }

// Commit makes the written data the target's content.
func (f *File) Commit() error { return CommitAll(f) }

// Abort discards the written data; the target is left as it was. It does
// nothing after Commit, so `defer f.Abort()` is the way to use it.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	if !f.closed {
		f.f.Close()
	}
	if f.tmp != "" {
		os.Remove(f.tmp)
		f.unregister()
	}
}

// finish syncs and closes the temporary file.
func (f *File) finish() error {
	err := f.f.Sync()
	if f.tmp == "" && errors.Is(err, syscall.EINVAL) {
		err = nil // a device or pipe written in place need not sync
	}
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.closed = true
	return pathError("write", f.name, err)
}

// CommitAll commits files as a set (a model and its external data, say),
// in order: when one cannot be renamed into place, those renamed before it
// are rolled back — a target that existed gets its old content back, a new
// one is removed — and the rest are discarded. Each file is committed or
// aborted when CommitAll returns.
func CommitAll(files ...*File) error {
	for _, f := range files {
		if f.done {
			abortAll(files)
			return fmt.Errorf("atomicfile: %s was already committed or aborted", f.name)
		}
		if err := f.finish(); err != nil {
			abortAll(files)
			return err
		}
	}
	var renamed []*renaming
	for _, f := range files {
		if f.tmp == "" {
			f.done = true
			continue
		}
		r := &renaming{f: f}
		if len(files) > 1 {
			r.keepOld()
		}
		if err := os.Rename(f.tmp, f.path); err != nil {
			r.dropOld()
			for i := len(renamed) - 1; i >= 0; i-- {
				renamed[i].rollBack()
			}
			abortAll(files)
			return pathError("rename", f.name, err)
		}
		f.done = true
		f.unregister()
		renamed = append(renamed, r)
	}
	dirs := map[string]bool{}
	for _, r := range renamed {
		r.dropOld()
		dirs[filepath.Dir(r.f.path)] = true
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func abortAll(files []*File) {
	for _, f := range files {
		f.Abort()
	}
}

// renaming is one file of a CommitAll and how to undo it: the target's old
// content, hard-linked aside until the set is in place.
type renaming struct {
	f          *File
	existed    bool
	backup     string
	unregister func()
}

// keepOld links the existing target to a temporary name. Where hard links
// are not possible the set is committed without a way back.
func (r *renaming) keepOld() {
	if _, err := os.Lstat(r.f.path); err != nil {
		return
	}
	r.existed = true
	for try := 0; try < 100; try++ {
		name, unregister, err := cleanup.Create(func() (string, error) {
			name := filepath.Join(filepath.Dir(r.f.path), "."+filepath.Base(r.f.path)+".old-"+strconv.FormatUint(rand.Uint64(), 36))
			return name, os.Link(r.f.path, name)
		})
		if err == nil {
			r.backup, r.unregister = name, unregister
			return
		}
		if !errors.Is(err, fs.ErrExist) {
			return
		}
	}
}

func (r *renaming) dropOld() {
	if r.backup != "" {
		os.Remove(r.backup)
		r.unregister()
		r.backup = ""
	}
}

// rollBack puts the target's old content back, or removes a new target.
func (r *renaming) rollBack() {
	switch {
	case r.backup != "":
		os.Rename(r.backup, r.f.path)
		r.unregister()
		r.backup = ""
	case !r.existed:
		os.Remove(r.f.path)
	}
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// folder say EINVAL; there is nothing more to do on them.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return pathError("sync", dir, err)
	}
	return nil
}

// WriteFile is os.WriteFile done atomically: data replaces path's content
// only once all of it is on disk.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// pathError reports err as being about the target path (not the
// temporary file, whose name means nothing to the user): the CLIs then
// print "path: no space left on device".
func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}
