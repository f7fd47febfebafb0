//go:build !unix

package engine

import "os"

// Map reads the file where memory mapping is not available.
func Map(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	return b, func() {}, err
}
