package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// external reads want bytes of a tensor's external data straight into
// aligned memory, the one copy its weights go through. entries are the
// tensor's external_data: location (relative to the model's folder), offset
// and length; other keys such as checksum are advisory and ignored.
func (d *decoder) external(entries []ir.StringPair, want int) ([]byte, error) {
	var loc string
	offset, length := int64(0), int64(-1)
	for _, e := range entries {
		var err error
		switch e.Key {
		case "location":
			loc = e.Value
		case "offset":
			offset, err = strconv.ParseInt(e.Value, 10, 64)
		case "length":
			length, err = strconv.ParseInt(e.Value, 10, 64)
		}
		if err != nil || offset < 0 || length < -1 {
			return nil, fmt.Errorf("external data has a bad %s %q", e.Key, e.Value)
		}
	}
	switch {
	case loc == "":
		return nil, errors.New("external data has no location")
	case d.dir == "":
		return nil, fmt.Errorf("external data in %q, but no model folder was given to find it in", loc)
	case !filepath.IsLocal(filepath.FromSlash(loc)):
		return nil, fmt.Errorf("external data location %q is outside the model's folder", loc)
	}
	path := filepath.Join(d.dir, filepath.FromSlash(loc))
	f, err := d.open(loc)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %w", loc, err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	if length < 0 {
		length = st.Size() - offset
	}
	if length != int64(want) {
		return nil, fmt.Errorf("external data in %s is %d bytes, want %d", path, length, want)
	}
	if offset > st.Size() || st.Size()-offset < length {
		return nil, fmt.Errorf("external data file %s is too short: has %d bytes, needs %d at offset %d", path, st.Size(), length, offset)
	}
	buf := ir.AlignedBytes(want)
	if want > 0 {
		if _, err := f.ReadAt(buf, offset); err != nil {
			return nil, fmt.Errorf("external data file %s: %w", path, err)
		}
	}
	return buf, nil
}

// open opens an external data file once per Read; many tensors usually
// share one file. It must be a regular file inside the model's folder,
// symbolic links resolved (onnx/onnx#7686).
func (d *decoder) open(loc string) (*os.File, error) {
	path := filepath.Join(d.dir, filepath.FromSlash(loc))
	if f, ok := d.files[path]; ok {
		return f, nil
	}
	f, err := readfile.OpenInside(d.dir, filepath.FromSlash(loc))
	if err != nil {
		return nil, err
	}
	d.files[path] = f
	return f, nil
}

// opened lists the external data files read so far, sorted.
func (d *decoder) opened() []string {
	var paths []string
	for p := range d.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}
