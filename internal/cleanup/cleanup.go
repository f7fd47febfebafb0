// Package cleanup removes a process's temporary files and folders when
// SIGINT or SIGTERM stops it. Deferred removals do not run when a signal
// ends a Go program, so code that makes a temporary path registers it
// here, and the CLI's signal handler (HandleSignals) removes whatever is
// registered before it exits.
package cleanup

import (
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

var (
	mu          sync.Mutex // held from an interrupt's removal until the process exits
	paths       = map[uint64]string{}
	next        uint64
	interrupted atomic.Bool
)

// Register adds path (a file or a folder) to what an interrupt removes and
// returns the function that takes it off again, to call once the path is
// removed or has become a real output. A path created before Register is
// left behind by an interrupt in between: use Create to make and register
// it in one step.
func Register(path string) (unregister func()) {
	mu.Lock()
	defer mu.Unlock()
	return registerLocked(path)
}

func registerLocked(path string) func() {
	next++
	id := next
	paths[id] = path
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(paths, id)
	}
}

// Create runs create, which makes a temporary file or folder and returns
// its path, and registers the path, with no moment in between at which an
// interrupt could miss it. create must be quick (a mkdir, an open).
func Create(create func() (string, error)) (path string, unregister func(), err error) {
	mu.Lock()
	defer mu.Unlock()
	if path, err = create(); err != nil {
		return "", nil, err
	}
	return path, registerLocked(path), nil
}

// MkdirTemp is os.MkdirTemp for a folder that an interrupt removes. remove
// deletes the folder, then takes it off the registry.
func MkdirTemp(dir, pattern string) (name string, remove func(), err error) {
	name, unregister, err := Create(func() (string, error) { return os.MkdirTemp(dir, pattern) })
	if err != nil {
		return "", nil, err
	}
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

// removeLocked removes the registered paths. The process's other
// goroutines (and the tools it started) may still be writing into a
// registered folder, so a folder is first renamed to a name nobody knows:
// nothing new can then appear in it while it is removed.
func removeLocked() {
	for id, p := range paths {
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			aside := filepath.Join(filepath.Dir(p), ".kiln-removing-"+strconv.FormatUint(rand.Uint64(), 36))
			if os.Rename(p, aside) == nil {
				p = aside
			}
		}
		os.RemoveAll(p)
		delete(paths, id)
	}
}

// HandleSignals makes SIGINT and SIGTERM remove every registered path and
// then call exit, which must end the process (with ExitCode(sig), say).
// The registry stays locked from the removal on, so nothing is registered
// after it, and Exit waits for it.
func HandleSignals(exit func(sig os.Signal)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		interrupted.Store(true)
		mu.Lock()
		removeLocked()
		exit(sig)
	}()
}

// Interrupted reports whether a signal handled by HandleSignals has
// arrived: the process is about to exit, and errors that the removal
// causes (a file vanishing under a build) are not worth reporting.
func Interrupted() bool { return interrupted.Load() }

// Exit ends the process with code, unless an interrupt is being handled:
// then it waits for the handler, whose exit status (130, 143) wins.
func Exit(code int) {
	mu.Lock()
	os.Exit(code)
}

// ExitCode is the shell's status for a process ended by sig: 128 plus the
// signal's number (130 for SIGINT, 143 for SIGTERM).
func ExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
