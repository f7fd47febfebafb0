package text

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/kiln-ml/kiln/internal/atomicfile"
	"github.com/kiln-ml/kiln/internal/readfile"
	"github.com/kiln-ml/kiln/ir"
)

// ExternalThreshold is the element count above which WriteFile moves an
// initializer's data to the external binary file.
const ExternalThreshold = 64

// externalAlign aligns each tensor in the binary file, so a reader can map
// the file and use the bytes in place.
const externalAlign = 64

// WriteFile writes m as text to path. Initializers with more than
// ExternalThreshold elements go to path+".bin" (one file for the whole
// model, named in the text by its base name, so the pair can be moved
// together), which keeps the text readable and large models fast.
//
// Both files are written atomically and committed together, the binary
// file first: a failed write leaves the old pair as it was, never a text
// file that names a half-written or mismatched binary one.
func WriteFile(path string, m *ir.Model) error {
	binPath := path + ".bin"
	var bin *atomicfile.File
	defer func() {
		if bin != nil {
			bin.Abort()
		}
	}()
	ext := &externalWriter{location: filepath.Base(binPath)}
	ext.open = func() (*bufio.Writer, error) {
		f, err := atomicfile.Create(binPath, 0o644)
		if err != nil {
			return nil, err
		}
		bin = f
		return bufio.NewWriterSize(f, 1<<20), nil
	}
	p := &printer{ext: ext}
	p.model(m)
	if ext.w != nil && p.err == nil {
		p.err = ext.w.Flush()
	}
	if p.err != nil {
		return p.err
	}
	txt, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	if _, err := txt.Write(p.b); err != nil {
		txt.Abort()
		return err
	}
	if bin == nil {
		return txt.Commit()
	}
	return atomicfile.CommitAll(bin, txt)
}

// externalWriter appends tensors' raw bytes to the binary file, creating it
// with the first one.
type externalWriter struct {
	location string
	open     func() (*bufio.Writer, error)
	w        *bufio.Writer
	offset   int64
}

// wants reports whether t's data should go to the external file: numeric
// tensors above the threshold (strings have no raw form).
func (e *externalWriter) wants(t *ir.Tensor) bool {
	return e != nil && t.DType != ir.String && t.Len() > ExternalThreshold
}

// write stores t's bytes and returns their offset.
func (e *externalWriter) write(t *ir.Tensor) (int64, error) {
	if e.w == nil {
		w, err := e.open()
		if err != nil {
			return 0, err
		}
		e.w = w
	}
	if pad := -e.offset & (externalAlign - 1); pad > 0 {
		if _, err := e.w.Write(make([]byte, pad)); err != nil {
			return 0, err
		}
		e.offset += pad
	}
	off := e.offset
	n, err := e.w.Write(t.Raw)
	e.offset += int64(n)
	return off, err
}

// externalTensor reads a tensor's bytes from the file its external-data
// entries name, relative to the text file's directory.
func (r *resolver) externalTensor(dtype ir.DType, dims []int64, d *astData) (*ir.Tensor, error) {
	if dtype == ir.String || !dtype.Valid() {
		return nil, errorf(d.Pos, "%s data cannot be external", dtype)
	}
	want, err := ir.ByteSize(dtype, dims) // dims were checked by constDims
	if err != nil {
		return nil, errorf(d.Pos, "%s%v: %v", dtype, dims, err)
	}
	var location string
	offset, length := int64(0), want
	for _, p := range d.External {
		key, val := unquote(p.Key), unquote(p.Value)
		switch key {
		case "location":
			location = val
		case "offset", "length":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return nil, errorf(p.Value.Pos, "bad external data %s %q", key, val)
			}
			if key == "offset" {
				offset = n
			} else {
				length = n
			}
		case "checksum":
		default:
			return nil, errorf(p.Key.Pos, "unknown external data key %q", key)
		}
	}
	if !filepath.IsLocal(location) {
		return nil, errorf(d.Pos, "external data location %q must be a relative path inside the model's directory", location)
	}
	if length != want {
		return nil, errorf(d.Pos, "external data length %d, want %d for %s%v", length, want, dtype, dims)
	}
	f, ok := r.external[location]
	if !ok {
		var err error
		// A regular file inside the model's folder, links resolved
		// (onnx/onnx#7686).
		f, err = readfile.OpenInside(filepath.Dir(r.filename), location)
		if err != nil {
			return nil, errorf(d.Pos, "external data %q: %v", location, err)
		}
		r.external[location] = f
	}
	// The file's size bounds the read before its buffer is allocated; the
	// tensor's own size was checked against the limits with its type.
	st, err := f.Stat()
	if err != nil {
		return nil, errorf(d.Pos, "external data: %v", err)
	}
	if size := st.Size(); offset > size || length > size-offset {
		return nil, errorf(d.Pos, "external data %q has %d bytes, need %d at offset %d", location, size, length, offset)
	}
	t := &ir.Tensor{DType: dtype, Dims: dims, Raw: ir.AlignedBytes(int(length))}
	if _, err := f.ReadAt(t.Raw, offset); err != nil {
		return nil, errorf(d.Pos, "external data %q: %v", location, err)
	}
	return t, nil
}

// externalPairs is the text of a tensor's external-data reference.
func externalPairs(location string, offset int64, length int) string {
	return fmt.Sprintf(`["location": %s, "offset": "%d", "length": "%d"]`, quote(location), offset, length)
}
