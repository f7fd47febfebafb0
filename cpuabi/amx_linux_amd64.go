package cpuabi

import (
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/cpu"
)

// Linux hands a process AMX's tile state (8 KiB a thread) only when asked:
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), once per process.
const (
	archReqXcompPerm  = 0x1023
	xfeatureXtiledata = 18
)

var amx struct {
	once sync.Once
	err  error
}

// EnableAMX asks Linux for the tile state, once; the answer is kept.
func EnableAMX() error {
	amx.once.Do(func() {
		if !cpu.X86.HasAMXTile {
			amx.err = errors.New("this CPU has no AMX")
			return
		}
		if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); errno != 0 {
			amx.err = errno
		}
	})
	return amx.err
}
