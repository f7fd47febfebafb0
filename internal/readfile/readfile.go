// Package readfile reads input files within ir.Limits: the size is checked
// (by stat) before anything is read, and the first bytes can be validated
// before the rest is read, so a huge file that is not what it claims to be
// fails at once instead of after gigabytes of reading.
package readfile

import (
	"fmt"
	"io"
	"os"

	"github.com/kiln-ml/kiln/ir"
)

// PrefixBytes is how much of a file Within hands to its check.
const PrefixBytes = 4096

// Within reads the whole file at path after checking its size against
// lim.MaxFileBytes and, when check is not nil, its first PrefixBytes bytes
// (fewer for a smaller file; size is the whole file's). Errors name path.
func Within(path string, lim ir.Limits, check func(prefix []byte, size int64) error) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
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
