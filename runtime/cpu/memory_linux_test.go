package cpu

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A buffer larger than any memory the process can get is an error naming
// both sizes, not the Go heap's fatal out-of-memory.
func TestNewBufferTooLarge(t *testing.T) {
	const n = 1 << 46 // 64 TiB
	b, err := NewBuffer(n)
	if err == nil {
		b.Free()
		t.Fatal("NewBuffer(64 TiB) succeeded")
	}
	var me *MemoryError
	if !errors.As(err, &me) || !errors.Is(err, ErrNoMemory) {
		t.Fatalf("NewBuffer(64 TiB): %v, want a *MemoryError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "70368744177664 bytes (64 TiB)") || !strings.Contains(msg, "this process can get") {
		t.Fatalf("the error does not name the sizes: %s", msg)
	}
}

// Under an address-space limit (ulimit -v), NewBuffer refuses what does
// not fit below it, naming the limit, and a mapping the kernel refuses
// (mapZeroed, past NewBuffer's check) is an error too. The limit is set in
// a child process: it binds the whole process.
func TestNewBufferUnderAddressLimit(t *testing.T) {
	if os.Getenv("KILN_TEST_RLIMIT_CHILD") == "1" {
		addressLimitChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNewBufferUnderAddressLimit$", "-test.v")
	cmd.Env = append(os.Environ(), "KILN_TEST_RLIMIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") || strings.Contains(string(out), "SKIP") {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
}

func addressLimitChild(t *testing.T) {
	vm := readKeyed("/proc/self/status")["VmSize"]
	if vm == 0 {
		t.Skip("no VmSize in /proc/self/status")
	}
	const headroom = 512 << 20
	limit := uint64(vm + headroom)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Skip(err)
	}
	small, err := NewBuffer(64 << 20)
	if err != nil {
		t.Fatalf("64 MiB under %d MiB of headroom: %v", headroom>>20, err)
	}
	small.Free()
	_, err = NewBuffer(2 << 30)
	var me *MemoryError
	if !errors.As(err, &me) || me.Err != nil || !strings.Contains(err.Error(), "RLIMIT_AS") {
		t.Fatalf("NewBuffer(2 GiB) under RLIMIT_AS: %v, want a *MemoryError naming RLIMIT_AS", err)
	}
	_, err = mapZeroed(2 << 30)
	if !errors.As(err, &me) || !errors.Is(me.Err, syscall.ENOMEM) {
		t.Fatalf("mapping 2 GiB under RLIMIT_AS: %v, want ENOMEM as a *MemoryError", err)
	}
}

// Available reads a bound on this machine, and never a negative one.
func TestAvailable(t *testing.T) {
	n, from := Available()
	if n <= 0 || from == "" {
		t.Fatalf("Available() = %d, %q", n, from)
	}
}
