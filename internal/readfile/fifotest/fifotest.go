// Package fifotest helps test that a reader refuses a named pipe (FIFO)
// instead of blocking on it forever.
package fifotest

import (
	"strings"
	"testing"
	"time"
)

// Returns calls read and returns its error, failing t when read has not
// returned within a second or its error does not name fifo as not a
// regular file. A read blocked on the pipe is released by opening the
// pipe's other end, so a failing test does not hang.
func Returns(t *testing.T, fifo string, read func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("reading the named pipe %s: %v; want an error naming it as not a regular file", fifo, err)
		}
		return err
	case <-time.After(time.Second):
		release(fifo)
		t.Fatalf("reading the named pipe %s blocked for a second", fifo)
		return nil
	}
}
