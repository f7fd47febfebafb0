//go:build unix

package fifotest

import (
	"os"
	"syscall"
	"testing"
)

// Make creates a named pipe at path.
func Make(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
}

// release opens fifo's writing end and closes it, which lets a blocked
// reader's open return (and its reads see the end of the file).
func release(fifo string) {
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}
