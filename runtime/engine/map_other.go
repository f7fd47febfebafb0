//go:build !unix

package engine

import (
	"io"
	"os"

	"github.com/kiln-ml/kiln/internal/readfile"
)

// Map reads the file where memory mapping is not available.
func Map(path string) ([]byte, func(), error) {
	f, err := readfile.Open(path) // not a named pipe, which would block
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return MapFile(f)
}

// MapFile reads an open file where memory mapping is not available.
func MapFile(f *os.File) ([]byte, func(), error) {
	b, err := io.ReadAll(f)
	return b, func() {}, err
}
