// Package cleanup removes a process's temporary files and folders when
// SIGINT or SIGTERM stops it. Deferred removals do not run when a signal
// ends a Go program, so code that makes a temporary path registers it
// here, and the CLI's signal handler (HandleSignals) removes whatever is
// registered before it exits.
package cleanup

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

var (
	mu    sync.Mutex
	paths = map[uint64]string{}
	next  uint64
)

// Register adds path (a file or a folder) to what an interrupt removes and
// returns the function that takes it off again, to call once the path is
// removed or has become a real output.
func Register(path string) (unregister func()) {
	mu.Lock()
	defer mu.Unlock()
	next++
	id := next
	paths[id] = path
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(paths, id)
	}
}

// MkdirTemp is os.MkdirTemp for a folder that an interrupt removes. remove
// deletes the folder, then takes it off the registry.
func MkdirTemp(dir, pattern string) (name string, remove func(), err error) {
	name, err = os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", nil, err
	}
	unregister := Register(name)
	return name, func() {
		os.RemoveAll(name)
		unregister()
	}, nil
}

// Registered returns the paths registered now.
func Registered() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, p := range paths {
		out = append(out, p)
	}
	return out
}

// RemoveAll removes every registered path and empties the registry.
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	removeLocked()
}

func removeLocked() {
	for id, p := range paths {
		os.RemoveAll(p)
		delete(paths, id)
	}
}

// HandleSignals makes SIGINT and SIGTERM remove every registered path and
// then call exit, which must end the process (with ExitCode(sig), say).
// The registry stays locked from the removal on, so nothing registered
// after it outlives the process.
func HandleSignals(exit func(sig os.Signal)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		mu.Lock()
		removeLocked()
		exit(sig)
	}()
}

// ExitCode is the shell's status for a process ended by sig: 128 plus the
// signal's number (130 for SIGINT, 143 for SIGTERM).
func ExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
