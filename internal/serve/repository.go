package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// EngineFile is the engine's name inside a version folder, as Triton's
// model.onnx or model.plan.
const EngineFile = "model.kiln"

// A repository is a folder in Triton's layout: NAME/VERSION/model.kiln,
// VERSION a positive integer. The newest version of each model (the
// largest number whose folder holds an engine) is the one served, as
// Triton's default version policy (latest 1).

// modelNames lists the repository's model folders.
func modelNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name()[0] != '.' {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// newestVersion finds model name's newest version holding an engine.
func newestVersion(dir, name string) (version int64, path string, err error) {
	versions, err := versionsOf(dir, name)
	if err != nil {
		return 0, "", err
	}
	if len(versions) == 0 {
		return 0, "", fmt.Errorf("model %q: no version folder (%s/NAME/VERSION/%s, VERSION a positive integer) holds an engine", name, dir, EngineFile)
	}
	v := versions[len(versions)-1]
	return v, enginePath(dir, name, v), nil
}

// versionsOf lists, in increasing order, the versions of model name whose
// folder holds an engine file.
func versionsOf(dir, name string) ([]int64, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%q is not a model name (a folder name, without / or leading dot)", name)
	}
	entries, err := os.ReadDir(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model %q: no folder %s in the repository", name, filepath.Join(dir, name))
	}
	if err != nil {
		return nil, err
	}
	var versions []int64
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || !e.IsDir() {
			continue
		}
		if st, err := os.Stat(enginePath(dir, name, v)); err == nil && st.Mode().IsRegular() {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	return versions, nil
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
