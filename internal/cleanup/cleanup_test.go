package cleanup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegisterAndRemoveAll(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	tmp, remove, err := MkdirTemp(dir, "kiln-cc-*")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "engine.ll"), []byte("x"), 0o644))
	kept := filepath.Join(dir, "kept")
	require.NoError(t, os.WriteFile(kept, []byte("x"), 0o644))
	unregister := Register(kept)
	unregister() // a committed output is no longer the registry's

	Register(file)
	assert.Contains(t, Registered(), tmp)
	RemoveAll()
	assert.NoFileExists(t, file)
	assert.NoDirExists(t, tmp)
	assert.FileExists(t, kept)
	assert.Empty(t, Registered())
	remove() // after an interrupt's removal, removing again is harmless
}

// A folder that another goroutine keeps writing into (as the build does
// while the signal handler runs) is still removed, and nothing of it
// remains.
func TestRemoveAllWhileWriting(t *testing.T) {
	parent := t.TempDir()
	dir, _, err := MkdirTemp(parent, "kiln-cc-*")
	require.NoError(t, err)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i%50)), []byte("data"), 0o644)
		}
	}()
	for range 20 {
		os.WriteFile(filepath.Join(dir, "first"), nil, 0o644)
	}
	RemoveAll()
	close(stop)
	<-stopped
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestCreateRegisters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	got, unregister, err := Create(func() (string, error) { return path, os.WriteFile(path, nil, 0o644) })
	require.NoError(t, err)
	assert.Equal(t, path, got)
	assert.Contains(t, Registered(), path)
	unregister()
	assert.NotContains(t, Registered(), path)
	_, _, err = Create(func() (string, error) { return path + "/nope", errors.New("cannot") })
	assert.Error(t, err)
	assert.NotContains(t, Registered(), path+"/nope")
}

func TestMkdirTempRemove(t *testing.T) {
	tmp, remove, err := MkdirTemp(t.TempDir(), "kiln-cc-*")
	require.NoError(t, err)
	remove()
	assert.NoDirExists(t, tmp)
	assert.False(t, slices.Contains(Registered(), tmp))
}

// TestMain, in a child process (KILN_CLEANUP_CHILD=1), registers a
// temporary folder, prints its name and waits to be stopped by a signal.
func TestMain(m *testing.M) {
	if os.Getenv("KILN_CLEANUP_CHILD") == "1" {
		HandleSignals(func(sig os.Signal) { os.Exit(ExitCode(sig)) })
		dir, _, err := MkdirTemp("", "kiln-cc-*")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(dir)
		select {}
	}
	os.Exit(m.Run())
}

// SIGINT and SIGTERM remove the registered folder and end the process
// with 128 + the signal's number.
func TestSignalRemovesAndExits(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		tmpdir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "KILN_CLEANUP_CHILD=1", "TMPDIR="+tmpdir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		dir := strings.TrimSpace(line)
		require.DirExists(t, dir)
		require.Equal(t, tmpdir, filepath.Dir(dir))
		require.NoError(t, cmd.Process.Signal(tc.sig))
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		assert.Equal(t, tc.code, exit.ExitCode(), "%v", tc.sig)
		assert.NoDirExists(t, dir)
	}
}
