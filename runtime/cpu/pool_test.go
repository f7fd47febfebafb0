package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

// A token left by a waker of an earlier wait (it found this waiter parked
// after that wait had ended by polling) must not end the next wait early:
// wait returns only once its condition holds.
func TestWaitIgnoresStaleToken(t *testing.T) {
	w := newWaiter()
	w.wake <- struct{}{} // the stale token
	var ready atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		ready.Store(true)
		w.signal()
	}()
	w.wait(0, ready.Load)
	if !ready.Load() {
		t.Fatal("wait returned on a stale token before its condition held")
	}
}
