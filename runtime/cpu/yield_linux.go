package cpu

import "syscall"

// osYield gives the thread's core to another runnable thread, if any.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
