// Package smallfs gives tests a file system small enough to fill: a tmpfs
// of a chosen size, mounted for one test. Mounting needs root (or the
// right capabilities); where it is not allowed the test is skipped with a
// message saying so.
package smallfs

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new temporary folder, returns
// the folder and unmounts it when the test ends.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("the full-disk case needs a Linux tmpfs; this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		t.Skip("the full-disk case mounts a small tmpfs, which needs root: not tested as this user")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("the full-disk case mounts a small tmpfs, which failed here (%v: %s): not tested", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting the test's tmpfs %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
