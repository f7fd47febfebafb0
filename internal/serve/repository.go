package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/kiln-ml/kiln/internal/readfile"
)

// EngineFile is the engine's name inside a version folder, as Triton's
// model.onnx or model.plan.
const EngineFile = "model.kiln"

// A repository is a folder in Triton's layout: NAME/VERSION/model.kiln,
// VERSION a positive integer. The newest version of each model (the
// largest number whose folder holds an engine) is the one served, as
// Triton's default version policy (latest 1).

// modelNames lists the repository's entries that can be models: folders
// and symbolic links, which loading checks (modelDir) so that one leading
// out of the repository is refused with its reason, at start as when
// loaded by name.
func modelNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Name()[0] != '.' && (e.IsDir() || e.Type()&fs.ModeSymlink != 0) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// inRepository reports whether the repository has an entry named name.
func inRepository(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}

// newestVersion finds model name's newest version holding an engine, and
// the engine file's resolved path.
func newestVersion(dir, name string) (version int64, path string, err error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0, "", fmt.Errorf("--model-repository: %w", err)
	}
	modelDir, err := modelDir(root, dir, name)
	if err != nil {
		return 0, "", err
	}
	versions, err := versionsOf(modelDir)
	if err != nil {
		return 0, "", fmt.Errorf("model %q: %w", name, err)
	}
	if len(versions) == 0 {
		return 0, "", fmt.Errorf("model %q: no version folder (%s/NAME/VERSION/%s, VERSION a positive integer) holds an engine", name, dir, EngineFile)
	}
	v := versions[len(versions)-1]
	path, err = engineFile(root, enginePath(dir, name, v))
	if err != nil {
		return 0, "", fmt.Errorf("model %q version %d: %w", name, v, err)
	}
	return v, path, nil
}

// modelDir resolves model name's folder (root is the repository's own
// resolved path), refusing a name that is not a folder name and a folder
// that is a symbolic link leading out of the repository.
func modelDir(root, dir, name string) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("%q is not a model name (a folder name, without / or leading dot)", name)
	}
	given := filepath.Join(dir, name)
	resolved, err := filepath.EvalSymlinks(given)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("model %q: no folder %s in the repository", name, given)
	}
	if err != nil {
		return "", fmt.Errorf("model %q: %w", name, err)
	}
	if !readfile.Inside(root, resolved) {
		return "", fmt.Errorf("model %q: %s leads to %s, outside the repository %s; a model's folder must be inside the repository (copy or move it there)", name, given, resolved, root)
	}
	if st, err := os.Stat(resolved); err != nil || !st.IsDir() {
		return "", fmt.Errorf("model %q: %s is not a folder", name, given)
	}
	return resolved, nil
}

// versionsOf lists, in increasing order, the versions in a model's folder
// that hold an engine entry (checked by engineFile when it is the one
// served).
func versionsOf(modelDir string) ([]int64, error) {
	entries, err := os.ReadDir(modelDir)
	if err != nil {
		return nil, err
	}
	var versions []int64
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || strconv.FormatInt(v, 10) != e.Name() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(modelDir, e.Name(), EngineFile)); err == nil {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return versions, nil
}

// engineFile resolves an engine's path, refusing one whose folder or file
// leads out of the repository (root, resolved) or that is not a regular
// file (a FIFO would hang the loader, a device feed it without end).
func engineFile(root, path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if !readfile.Inside(root, resolved) {
		return "", fmt.Errorf("%s leads to %s, outside the repository %s; an engine must be inside the repository (copy it there)", path, resolved, root)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	return resolved, nil
}

func enginePath(dir, name string, version int64) string {
	return filepath.Join(dir, name, strconv.FormatInt(version, 10), EngineFile)
}

// validName refuses names that would leave the repository folder.
func validName(name string) bool {
	if name == "" || name[0] == '.' {
		return false
	}
	for _, r := range name {
		if r == '/' || r == '\\' || r == 0 {
			return false
		}
	}
	return true
}
