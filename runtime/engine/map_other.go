//go:build !unix

package engine

import (
	"io"
	"os"
)

// Map reads the file where memory mapping is not available.
func Map(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	return b, func() {}, err
}

// MapFile reads an open file where memory mapping is not available.
func MapFile(f *os.File) ([]byte, func(), error) {
	b, err := io.ReadAll(f)
	return b, func() {}, err
}
